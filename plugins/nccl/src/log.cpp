// SPDX-License-Identifier: MIT
#include "log.hpp"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace hmemreg::nccl {
namespace {

std::atomic<ncclDebugLogger_t> g_logger{nullptr};

} // namespace

void set_logger(ncclDebugLogger_t fn) { g_logger.store(fn); }

void log_message(ncclDebugLogLevel level, unsigned long flags, const char *where, int line, const char *fmt, ...)
{
	ncclDebugLogger_t fn = g_logger.load();
	if (!fn && level != NCCL_LOG_WARN)
		return; // only warnings fall back to stderr
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	std::vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (fn)
		fn(level, flags, where, line, "NET/hmemreg: %s", msg);
	else
		std::fprintf(stderr, "NET/hmemreg WARN %s:%d %s\n", where, line, msg);
}

} // namespace hmemreg::nccl
