// SPDX-License-Identifier: MIT
// Picks a cache's monitors: the host-memory monitor by configuration, and
// for every other memory kind the one its MemoryKind gives.
#pragma once

#include <memory>

#include "hmemreg/cache.h"
#include "mrcache/memory_kind.hpp"
#include "mrcache/monitor.hpp"

namespace hmemreg::mr {

// AUTO: kmod if /dev/hmemreg is usable and has watches, else uffd, else
// "unavailable" (said once on stderr). An explicit kind that cannot be
// opened fails: -HMEMREG_ENOTSUP (or the open's error).
int make_monitor(hmemreg_monitor kind, std::shared_ptr<Monitor> &out);

// The kind serving iface, or null (host memory, or a kind this build does
// not know: such entries are registered uncached).
const MemoryKind *memory_kind(Iface iface);

} // namespace hmemreg::mr
