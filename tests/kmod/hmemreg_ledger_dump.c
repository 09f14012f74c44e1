// SPDX-License-Identifier: MIT
// Prints hmemreg.ko's ledger (netlink stats and exports). With --idle it
// fails unless every live counter is zero: tests/vm.d/10-kmod.sh ends with it.
#include <stdio.h>
#include <string.h>

#include "ledger.h"

static const char *const names[HMEMREG_NLA_MAX + 1] = {
	[HMEMREG_NLA_STAT_EXPORTS_LIVE] = "exports_live",
	[HMEMREG_NLA_STAT_EXPORTS_TOTAL] = "exports_total",
	[HMEMREG_NLA_STAT_EXPORTED_BYTES] = "exported_bytes",
	[HMEMREG_NLA_STAT_ORPHANS_LIVE] = "orphans_live",
	[HMEMREG_NLA_STAT_ATTACH_LIVE] = "attach_live",
	[HMEMREG_NLA_STAT_ATTACH_TOTAL] = "attach_total",
	[HMEMREG_NLA_STAT_PINS_LIVE] = "pins_live",
	[HMEMREG_NLA_STAT_PINS_TOTAL] = "pins_total",
	[HMEMREG_NLA_STAT_MAPS_LIVE] = "maps_live",
	[HMEMREG_NLA_STAT_MAPS_TOTAL] = "maps_total",
	[HMEMREG_NLA_STAT_HOST_PAGES_PINNED] = "host_pages_pinned",
	[HMEMREG_NLA_STAT_DEVMEM_POOL_BYTES] = "devmem_pool_bytes",
	[HMEMREG_NLA_STAT_DEVMEM_USED_BYTES] = "devmem_used_bytes",
	[HMEMREG_NLA_STAT_DEVMEM_HANDLES_LIVE] = "devmem_handles_live",
	[HMEMREG_NLA_STAT_WATCHES_LIVE] = "watches_live",
	[HMEMREG_NLA_STAT_WATCHES_TOTAL] = "watches_total",
	[HMEMREG_NLA_STAT_EVENTS_TOTAL] = "events_total",
	[HMEMREG_NLA_STAT_EVENTS_DROPPED] = "events_dropped",
	[HMEMREG_NLA_STAT_CONTEXTS_LIVE] = "contexts_live",
	[HMEMREG_NLA_STAT_FAULTS_INJECTED] = "faults_injected",
	[HMEMREG_NLA_STAT_UNBALANCED] = "unbalanced",
	[HMEMREG_NLA_STAT_USER_MMAPS_LIVE] = "user_mmaps_live",
};

int main(int argc, char **argv)
{
	int idle = argc > 1 && !strcmp(argv[1], "--idle");
	struct ledger_export e[32];
	struct ledger_stats st;
	int bad = 0, n, i;

	if (ledger_stats(&st)) {
		fprintf(stderr, "hmemreg ledger: cannot read genl family \"%s\"\n", HMEMREG_GENL_NAME);
		return 2;
	}
	for (i = 0; i <= HMEMREG_NLA_MAX; i++) {
		if (!names[i])
			continue;
		printf("%-20s %llu\n", names[i], (unsigned long long)st.v[i]);
		if (idle && strstr(names[i], "_live") && st.v[i]) {
			fprintf(stderr, "not idle: %s = %llu\n", names[i], (unsigned long long)st.v[i]);
			bad = 1;
		}
	}
	n = ledger_exports(0, e, 32);
	for (i = 0; i < n && i < 32; i++)
		printf("export %llu provider %u pid %u %s addr 0x%llx len %llu state 0x%x attach %u pins %u maps %u\n",
		       (unsigned long long)e[i].id, e[i].provider, e[i].owner_pid, e[i].comm,
		       (unsigned long long)e[i].addr, (unsigned long long)e[i].len, e[i].state,
		       e[i].attach_live, e[i].pins_live, e[i].maps_live);
	if (idle && (n || st.v[HMEMREG_NLA_STAT_EXPORTED_BYTES] ||
		     st.v[HMEMREG_NLA_STAT_HOST_PAGES_PINNED] || st.v[HMEMREG_NLA_STAT_DEVMEM_USED_BYTES]))
		bad = 1;
	return bad;
}
