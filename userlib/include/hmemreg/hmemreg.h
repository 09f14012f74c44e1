/* SPDX-License-Identifier: MIT */
/*
 * libhmemreg: the C API (umbrella header).
 *
 * Stable ABI for collective libraries: opaque handles, fixed-width fields,
 * int return codes (0 or a negative HMEMREG_E* value), no C++ types and no
 * exceptions across this boundary. hmemreg_strerror() turns a code into text.
 */
#ifndef HMEMREG_HMEMREG_H
#define HMEMREG_HMEMREG_H

#include <hmemreg/common.h>
#include <hmemreg/settings.h>
#include <hmemreg/stats.h>
#include <hmemreg/cache.h>
#include <hmemreg/engine.h>
#include <hmemreg/export.h>

#endif /* HMEMREG_HMEMREG_H */
