// SPDX-License-Identifier: MIT
// The pin ledger over generic netlink and debugfs (in the VM).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "importer_client.h"

Test(ledger, stats_carry_every_attribute)
{
	struct ledger_stats st;

	cr_assert_eq(ledger_stats(&st), 0);
	cr_assert_eq(st.present, HMEMREG_NLA_STAT_USER_MMAPS_LIVE - HMEMREG_NLA_STAT_EXPORTS_LIVE + 1);
	cr_assert_gt(st.v[HMEMREG_NLA_STAT_DEVMEM_POOL_BYTES], 0);
	hm_assert_ledger_idle();
}

Test(ledger, counts_follow_an_export_through_its_life)
{
	int fd = hm_open(), ifd = imp_open();
	char *buf = hm_map_anon(16 * PG);
	struct ledger_stats a, b;
	struct ledger_export e[2];

	cr_assert_eq(ledger_stats(&a), 0);
	int dfd = hm_export_host(fd, buf, 16 * PG, HMEMREG_EXPORT_WRITE, 0x1234, NULL);
	int id = imp_attach(ifd, dfd, HMIMP_DYNAMIC);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_PIN, id, 0, 0, NULL), 0);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_MAP, id, 0, 0, NULL), 0);
	cr_assert_eq(ledger_stats(&b), 0);
	cr_assert_eq(b.v[HMEMREG_NLA_STAT_EXPORTS_LIVE], 1);
	cr_assert_eq(b.v[HMEMREG_NLA_STAT_EXPORTS_TOTAL], a.v[HMEMREG_NLA_STAT_EXPORTS_TOTAL] + 1);
	cr_assert_eq(b.v[HMEMREG_NLA_STAT_EXPORTED_BYTES], 16 * PG);
	cr_assert_eq(b.v[HMEMREG_NLA_STAT_HOST_PAGES_PINNED], 16);
	cr_assert_eq(b.v[HMEMREG_NLA_STAT_ATTACH_LIVE], 1);
	// Debian's kernel has DMABUF_MOVE_NOTIFY off: the core pins again on map.
	// With it on (the debug kernel) only the importer's own pin counts.
	unsigned int pins = imp_kernel_move_notify(ifd, id) ? 1 : 2;
	cr_assert_eq(b.v[HMEMREG_NLA_STAT_PINS_LIVE], pins);
	cr_assert_eq(b.v[HMEMREG_NLA_STAT_MAPS_LIVE], 1);
	cr_assert_eq(ledger_exports(getpid(), e, 2), 1);
	cr_assert_eq(e[0].cookie, 0x1234);
	cr_assert_eq(e[0].att_pinned, pins);
	cr_assert_eq(e[0].att_mapped, 1);
	cr_assert_str_eq(e[0].comm, "test_kmod_ledge");
	cr_assert(e[0].state & HMEMREG_EXP_STATE_PINNED);
	cr_assert(e[0].state & HMEMREG_EXP_STATE_WRITABLE);
	cr_assert_eq(e[0].state & HMEMREG_EXP_STATE_ORPHANED, 0);
	cr_assert_eq(ledger_exports(getpid() + 100000, e, 2), 0, "pid filter");
	close(ifd);
	cr_assert_eq(ledger_stats(&b), 0);
	cr_assert_eq(b.v[HMEMREG_NLA_STAT_PINS_TOTAL], a.v[HMEMREG_NLA_STAT_PINS_TOTAL] + pins);
	cr_assert_eq(b.v[HMEMREG_NLA_STAT_MAPS_TOTAL], a.v[HMEMREG_NLA_STAT_MAPS_TOTAL] + 1);
	cr_assert_eq(b.v[HMEMREG_NLA_STAT_ATTACH_TOTAL], a.v[HMEMREG_NLA_STAT_ATTACH_TOTAL] + 1);
	close(dfd);
	close(fd);
	hm_assert_ledger_idle();
}

Test(ledger, dump_spans_many_messages)
{
	enum { N = 300 };
	int fd = hm_open();
	char *buf = hm_map_anon(PG);
	static int fds[N];
	static struct ledger_export e[N + 1];

	for (int i = 0; i < N; i++) {
		fds[i] = hm_export_host(fd, buf, PG, 0, i, NULL);
		cr_assert_geq(fds[i], 0, "export %d: %s", i, strerror(-fds[i]));
	}
	int n = ledger_exports(getpid(), e, N + 1);
	cr_assert_eq(n, N, "dump returned %d of %d", n, N);
	uint64_t sum = 0;
	for (int i = 0; i < N; i++) {
		sum += e[i].cookie;
		if (i)
			cr_assert_gt(e[i].id, e[i - 1].id, "ids ascend, none repeated");
	}
	cr_assert_eq(sum, (uint64_t)N * (N - 1) / 2);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	close(fd);
	hm_assert_ledger_idle();
}

Test(ledger, debugfs_summary_lists_exports)
{
	int fd = hm_open();
	char *buf = hm_map_anon(PG);
	int dfd = hm_export_host(fd, buf, PG, 0, 0xfeed, NULL);
	char line[512];
	int found = 0;

	FILE *f = fopen("/sys/kernel/debug/hmemreg/summary", "r");
	cr_assert_not_null(f, "debugfs: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "cookie 0xfeed") && strstr(line, "test_kmod_ledge"))
			found = 1;
	fclose(f);
	cr_assert(found, "export not in debugfs summary");
	close(dfd);
	close(fd);
	hm_assert_ledger_idle();
}

Test(ledger, unknown_or_undumpable_commands_fail)
{
	cr_assert_lt(ledger_raw_request(9, 0), 0, "unknown command");
	cr_assert_lt(ledger_raw_request(HMEMREG_CMD_GET_EXPORTS, 0), 0, "exports has no doit");
	cr_assert_eq(ledger_raw_request(HMEMREG_CMD_GET_STATS, 0), 0);
}
