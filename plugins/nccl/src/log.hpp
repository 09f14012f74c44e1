// SPDX-License-Identifier: MIT
// Logging through the logger NCCL hands to init(); before init (or when NCCL
// passes none) warnings go to stderr so nothing is silently lost.
#pragma once

#include "nccl_abi.h"

namespace hmemreg::nccl {

void set_logger(ncclDebugLogger_t fn);
void log_warn(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void log_info(unsigned long flags, const char *fn, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

} // namespace hmemreg::nccl

#define NWARN(...) ::hmemreg::nccl::log_warn(__FILE__, __LINE__, __VA_ARGS__)
#define NINFO(flags, ...) ::hmemreg::nccl::log_info((flags), __func__, __LINE__, __VA_ARGS__)
