// SPDX-License-Identifier: MIT
// hmemreg_cache_config_init(): defaults and the HMEMREG_MR_CACHE_* environment
// (documented once, in hmemreg/cache.h).
#include <cstring>
#include <strings.h>
#include <unistd.h>

#include "hmemreg/hmemreg.h"
#include "settings/settings.hpp"

namespace {

bool env_size(const char *name, uint64_t &field)
{
	return hmemreg::settings::size(name, field);
}

bool env_bool(const char *name, uint32_t &field)
{
	bool b = field != 0;
	if (!hmemreg::settings::boolean(name, b))
		return false;
	field = b;
	return true;
}

bool env_monitor(const char *name, uint32_t &field)
{
	const char *v = hmemreg::settings::raw(name);
	if (!v)
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
	hmemreg::log::write(HMEMREG_LOG_WARN, "cache", "%s='%s' is not one of auto, kmod, uffd, none", name, v);
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
