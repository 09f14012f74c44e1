// SPDX-License-Identifier: MIT
// Settings from the environment, the log level, and the load-time check for
// HMEMREG_* variables that are not settings.
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <unistd.h>

#include "hmemreg/hmemreg.h"
#include "settings/settings.hpp"


namespace hmemreg::settings {

const char *raw(const char *name)
{
	const char *v = std::getenv(name);
	return v && *v ? v : nullptr;
}

bool size(const char *name, uint64_t &out)
{
	const char *v = raw(name);
	uint64_t x;
	if (!v)
		return true;
	if (hmemreg_parse_size(v, &x) == 0) {
		out = x;
		return true;
	}
	log::write(HMEMREG_LOG_WARN, "settings", "%s='%s' is not a size (bytes, or with k/m/g/t: 64k, 16MiB, 2G)",
		   name, v);
	return false;
}

bool boolean(const char *name, bool &out)
{
	const char *v = raw(name);
	int x;
	if (!v)
		return true;
	if (hmemreg_parse_bool(v, &x) == 0) {
		out = x != 0;
		return true;
	}
	log::write(HMEMREG_LOG_WARN, "settings", "%s='%s' is not a boolean (1/0, yes/no, true/false, on/off)", name,
		   v);
	return false;
}

} // namespace hmemreg::settings

namespace {

const char *const kLevelNames[] = {"none", "error", "warn", "info", "debug"};

hmemreg_log_level read_level()
{
	const char *v = hmemreg::settings::raw("HMEMREG_LOG_LEVEL");
	if (!v)
		return HMEMREG_LOG_WARN;
	for (int l = HMEMREG_LOG_NONE; l <= HMEMREG_LOG_DEBUG; l++)
		if (!strcasecmp(v, kLevelNames[l]))
			return static_cast<hmemreg_log_level>(l);
	if (!strcasecmp(v, "warning"))
		return HMEMREG_LOG_WARN;
	std::fprintf(stderr, "hmemreg:%d:warn:settings: HMEMREG_LOG_LEVEL='%s' is not one of none, error, warn, "
		     "info, debug; using warn\n", static_cast<int>(::getpid()), v);
	return HMEMREG_LOG_WARN;
}

} // namespace

extern "C" enum hmemreg_log_level hmemreg_current_log_level(void)
{
	static const hmemreg_log_level level = read_level();
	return level;
}

namespace hmemreg::log {

void write(hmemreg_log_level level, const char *component, const char *fmt, ...)
{
	if (!enabled(level) || level == HMEMREG_LOG_NONE)
		return;
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	std::vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	// One write(2) per line, so lines of several threads do not interleave.
	char line[1200];
	int n = std::snprintf(line, sizeof(line), "hmemreg:%d:%s:%s: %s\n", static_cast<int>(::getpid()),
			      kLevelNames[level], component, text);
	if (n > 0)
		(void)!::write(STDERR_FILENO, line, std::min<size_t>(static_cast<size_t>(n), sizeof(line) - 1));
}

} // namespace hmemreg::log
