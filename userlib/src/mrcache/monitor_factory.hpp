// SPDX-License-Identifier: MIT
// Picks and opens a cache's host-memory monitor.
#pragma once

#include <memory>

#include "hmemreg/cache.h"
#include "mrcache/monitor.hpp"

namespace hmemreg::mr {

// AUTO: kmod if /dev/hmemreg is usable and has watches, else uffd, else
// "unavailable" (said once on stderr). An explicit kind that cannot be
// opened fails: -HMEMREG_ENOTSUP (or the open's error).
int make_monitor(hmemreg_monitor kind, std::shared_ptr<Monitor> &out);

} // namespace hmemreg::mr
