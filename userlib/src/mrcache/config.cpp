// SPDX-License-Identifier: MIT
// hmemreg_cache_config_init(): defaults and the HMEMREG_MR_CACHE_* environment
// (documented once, in hmemreg/cache.h).
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <unistd.h>

#include "hmemreg/hmemreg.h"

namespace {

// "123", "64K", "16M", "2G", "1T" (binary units). false if unparsable.
bool parse_size(const char *s, uint64_t &out)
{
	errno = 0;
	char *end = nullptr;
	unsigned long long v = std::strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return false;
	unsigned shift = 0;
	switch (std::toupper(static_cast<unsigned char>(*end))) {
	case 0:
		break;
	case 'K':
		shift = 10;
		break;
	case 'M':
		shift = 20;
		break;
	case 'G':
		shift = 30;
		break;
	case 'T':
		shift = 40;
		break;
	default:
		return false;
	}
	if (*end && end[1] && !((end[1] == 'B' || end[1] == 'b') && !end[2]))
		return false;
	if (shift && v > (~0ULL >> shift))
		return false;
	out = v << shift;
	return true;
}

bool env_size(const char *name, uint64_t &field)
{
	const char *v = std::getenv(name);
	if (!v || !*v)
		return true;
	if (parse_size(v, field))
		return true;
	std::fprintf(stderr, "hmemreg: %s='%s' is not a size (e.g. 1024, 64M, 2G)\n", name, v);
	return false;
}

bool env_bool(const char *name, uint32_t &field)
{
	const char *v = std::getenv(name);
	if (!v || !*v)
		return true;
	if (!strcasecmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcasecmp(v, "on")) {
		field = 1;
		return true;
	}
	if (!strcasecmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcasecmp(v, "off")) {
		field = 0;
		return true;
	}
	std::fprintf(stderr, "hmemreg: %s='%s' is not a boolean (0/1)\n", name, v);
	return false;
}

bool env_monitor(const char *name, uint32_t &field)
{
	const char *v = std::getenv(name);
	if (!v || !*v)
		return true;
	static const struct {
		const char *n;
		hmemreg_monitor m;
	} names[] = {{"auto", HMEMREG_MONITOR_AUTO}, {"kmod", HMEMREG_MONITOR_KMOD},
		     {"uffd", HMEMREG_MONITOR_UFFD}, {"userfaultfd", HMEMREG_MONITOR_UFFD},
		     {"none", HMEMREG_MONITOR_NONE}, {"disabled", HMEMREG_MONITOR_NONE}};
	for (const auto &n : names) {
		if (!strcasecmp(v, n.n)) {
			field = n.m;
			return true;
		}
	}
	std::fprintf(stderr, "hmemreg: %s='%s' is not one of auto, kmod, uffd, none\n", name, v);
	return false;
}

} // namespace

extern "C" int hmemreg_cache_config_init(struct hmemreg_cache_config *cfg)
{
	if (!cfg)
		return -HMEMREG_EINVAL;
	std::memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->monitor = HMEMREG_MONITOR_AUTO;
	cfg->max_count = 1024;
	long pages = ::sysconf(_SC_PHYS_PAGES), psz = ::sysconf(_SC_PAGESIZE);
	cfg->max_size = pages > 0 && psz > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(psz) / 2
					      : (1ULL << 34);
	cfg->max_entry_size = 0;
	cfg->purge_on_fork = 1;
	cfg->publish_stats = 1;
	std::strncpy(cfg->name, "default", sizeof(cfg->name) - 1);
	bool ok = env_size("HMEMREG_MR_CACHE_MAX_COUNT", cfg->max_count);
	ok = env_size("HMEMREG_MR_CACHE_MAX_SIZE", cfg->max_size) && ok;
	ok = env_size("HMEMREG_MR_CACHE_MAX_ENTRY_SIZE", cfg->max_entry_size) && ok;
	ok = env_monitor("HMEMREG_MR_CACHE_MONITOR", cfg->monitor) && ok;
	ok = env_bool("HMEMREG_MR_CACHE_PURGE_ON_FORK", cfg->purge_on_fork) && ok;
	ok = env_bool("HMEMREG_MR_CACHE_STATS", cfg->publish_stats) && ok;
	return ok ? 0 : -HMEMREG_EINVAL;
}
