// SPDX-License-Identifier: MIT
// Logging through the logger NCCL hands to init(); before init (or when NCCL
// passes none) warnings go to stderr so nothing is silently lost.
#pragma once

#include "nccl_abi.h"

namespace hmemreg::nccl {

void set_logger(ncclDebugLogger_t fn);
// `where` is a file (warnings) or a function (info), as NCCL's own macros pass.
void log_message(ncclDebugLogLevel level, unsigned long flags, const char *where, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

} // namespace hmemreg::nccl

#define NWARN(...) ::hmemreg::nccl::log_message(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define NINFO(flags, ...) ::hmemreg::nccl::log_message(NCCL_LOG_INFO, (flags), __func__, __LINE__, __VA_ARGS__)
