// SPDX-License-Identifier: MIT
// Linked against the shared libhmemreg: prints what its load-time code did
// with the environment (FI_MR_CACHE_MONITOR, the log level), for
// tests/host.d/12-settings.sh. Creating a cache reads HMEMREG_MR_CACHE_*.
#include <stdio.h>
#include <stdlib.h>

#include "hmemreg/hmemreg.h"

int main(void)
{
	const char *c = getenv("FI_MR_CACHE_MONITOR");
	struct hmemreg_cache_config cfg;
	int rc = hmemreg_cache_config_init(&cfg);
	printf("FI_MR_CACHE_MONITOR=%s\nlog_level=%d\nconfig_init=%d\nmax_count=%llu\n", c ? c : "(unset)",
	       (int)hmemreg_current_log_level(), rc, (unsigned long long)cfg.max_count);
	return 0;
}
