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

void log_warn(const char *file, int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	std::vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ncclDebugLogger_t fn = g_logger.load())
		fn(NCCL_LOG_WARN, NCCL_ALL, file, line, "NET/hmemreg: %s", msg);
	else
		std::fprintf(stderr, "NET/hmemreg WARN %s:%d %s\n", file, line, msg);
}

void log_info(unsigned long flags, const char *fn_name, int line, const char *fmt, ...)
{
	ncclDebugLogger_t fn = g_logger.load();
	if (!fn)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	std::vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fn(NCCL_LOG_INFO, flags, fn_name, line, "NET/hmemreg: %s", msg);
}

} // namespace hmemreg::nccl
