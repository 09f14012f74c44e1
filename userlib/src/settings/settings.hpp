// SPDX-License-Identifier: MIT
// Reading HMEMREG_* settings and logging, inside the library. The table of
// settings is registry.cpp; the public face is hmemreg/settings.h.
#pragma once

#include <cstdint>

#include "hmemreg/settings.h"

namespace hmemreg::settings {

// The table entry of a setting; nullptr for a name that is not one.
const hmemreg_setting *find(const char *name);

// The value of a setting from the environment; nullptr when unset or empty.
const char *raw(const char *name);

// Each leaves `out` alone when the variable is unset; returns false (after a
// warning naming the variable, the value and what was expected) when it does
// not parse, leaving `out` alone too.
bool size(const char *name, uint64_t &out);
bool boolean(const char *name, bool &out);

} // namespace hmemreg::settings

namespace hmemreg::log {

// One line on stderr, "hmemreg:PID:LEVEL:COMPONENT: text", when the level is
// at or below HMEMREG_LOG_LEVEL.
void write(hmemreg_log_level level, const char *component, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

inline bool enabled(hmemreg_log_level level)
{
	return level <= hmemreg_current_log_level();
}

} // namespace hmemreg::log
