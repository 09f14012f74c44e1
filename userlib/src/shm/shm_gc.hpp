// SPDX-License-Identifier: MIT
// The /dev/shm files a process of libhmemreg owns (its stats block, its
// libfabric shm regions): held with a shared flock while in use, and those
// of dead processes removed (hmemreg_shm_gc in hmemreg/stats.h).
#pragma once

#include <string>

#include "unique_fd.hpp"

namespace hmemreg::shm {

// Removes the stale files of dead processes, once per process (first call).
void gc_once();

// A shared lock on /dev/shm/<name> for as long as the returned fd lives: the
// sign hmemreg_shm_gc() reads as "in use". Empty when it cannot be taken.
UniqueFd hold(const std::string &name);

} // namespace hmemreg::shm
