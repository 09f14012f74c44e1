/* SPDX-License-Identifier: MIT */
/*
 * libhmemreg settings: every HMEMREG_* environment variable of the project
 * (library, NCCL plugin), the one parser for each kind of value, and the log
 * level. `mr_cache_stat --env` prints this table with the current values.
 *
 * At load, the library warns once about an HMEMREG_* variable that is not a
 * setting (a typo such as HMEMREG_MR_CACHE_MAXCOUNT), naming the closest one.
 */
#ifndef HMEMREG_SETTINGS_H
#define HMEMREG_SETTINGS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* HMEMREG_LOG_LEVEL: none, error, warn (default), info, debug. */
enum hmemreg_log_level {
	HMEMREG_LOG_NONE = 0,
	HMEMREG_LOG_ERROR = 1,
	HMEMREG_LOG_WARN = 2,
	HMEMREG_LOG_INFO = 3,
	HMEMREG_LOG_DEBUG = 4,
};

/* The level in force (HMEMREG_LOG_LEVEL, read once). */
enum hmemreg_log_level hmemreg_current_log_level(void);

struct hmemreg_setting {
	const char *name;          /* HMEMREG_... */
	const char *default_value; /* as text, e.g. "1024", "half of RAM" */
	const char *component;     /* "log", "cache", "fabric", "nccl" */
	const char *kind;          /* "size", "bool", "number", "text" or "a|b|c" */
	const char *meaning;       /* one line */
};

/* The settings, in a fixed order; NULL past the end. */
size_t hmemreg_settings_count(void);
const struct hmemreg_setting *hmemreg_setting_at(size_t index);

/*
 * Sizes everywhere (environment and tools): a decimal (or 0x hex) count of
 * bytes with an optional binary unit k, m, g or t, in any case, optionally
 * followed by "b" or "ib": 4096, 64k, 64KB, 64KiB, 1m, 2G. Returns 0, or
 * -HMEMREG_EINVAL for anything else (negative, empty, overflow, trailing text).
 */
int hmemreg_parse_size(const char *text, uint64_t *bytes);

/*
 * Booleans everywhere: 1/0, yes/no, y/n, true/false, on/off,
 * enable(d)/disable(d), in any case. Returns 0, or -HMEMREG_EINVAL.
 */
int hmemreg_parse_bool(const char *text, int *value);

#ifdef __cplusplus
}
#endif

#endif /* HMEMREG_SETTINGS_H */
