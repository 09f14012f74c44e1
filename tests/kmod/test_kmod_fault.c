// SPDX-License-Identifier: MIT
// Error paths through hmemreg.ko's own fault injection (fail_every /
// fail_sites): every injected failure is a clean ENOMEM and leaves nothing
// exported, pinned, mapped or armed.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "importer_client.h"

static void set_param(const char *name, unsigned int v)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/module/hmemreg/parameters/%s", name);
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fprintf(f, "%u\n", v);
	cr_assert_eq(fclose(f), 0);
}

static void inject(unsigned int every, unsigned int sites)
{
	set_param("fail_every", 0);
	set_param("fail_sites", sites);
	set_param("fail_every", every);
}

static void faults_off(void)
{
	set_param("fail_every", 0);
	set_param("fail_sites", ~0U);
}

TestSuite(fault, .fini = faults_off);

Test(fault, each_site_fails_cleanly)
{
	uint64_t injected = hm_stat(HMEMREG_NLA_STAT_FAULTS_INJECTED);
	char *buf = hm_map_anon(4 * PG);
	int fd, ifd = imp_open();

	inject(1, HMEMREG_FAIL_ALLOC);
	cr_assert_eq(open(HMEMREG_DEVICE_PATH, O_RDWR), -1);
	cr_assert_eq(errno, ENOMEM, "open");
	faults_off();
	fd = hm_open();
	int64_t h = hm_dev_alloc(fd, 4 * PG);
	cr_assert_gt(h, 0);
	int host_dfd = hm_export_host(fd, buf, 4 * PG, HMEMREG_EXPORT_WRITE, 0, NULL);
	cr_assert_geq(host_dfd, 0);

	inject(1, HMEMREG_FAIL_ALLOC);
	struct hmemreg_watch_info wi = { .size = sizeof(wi) };
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_WATCH_INFO, &wi), -ENOMEM, "gen page setup");
	cr_assert_eq(hm_export_host(fd, buf, PG, 0, 0, NULL), -ENOMEM, "host export");
	cr_assert_eq(hm_export_dev(fd, h, 0, PG, 0, NULL), -ENOMEM, "devmem slice");
	cr_assert_eq(imp_attach(ifd, host_dfd, 0), -ENOMEM, "attach record");
	faults_off();
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_WATCH_INFO, &wi), 0);
	inject(1, HMEMREG_FAIL_ALLOC);
	cr_assert_eq(hm_arm(fd, buf, PG, 0, 0, NULL, NULL), -ENOMEM, "watch alloc");

	inject(1, HMEMREG_FAIL_NOTIFIER);
	cr_assert_eq(hm_arm(fd, buf, PG, 0, 0, NULL, NULL), -ENOMEM, "notifier insert");
	cr_assert_eq(hm_export_host(fd, buf, PG, HMEMREG_EXPORT_WATCH, 0, NULL), -ENOMEM,
		     "export+watch unwinds the export");

	uint64_t pinned = hm_stat(HMEMREG_NLA_STAT_HOST_PAGES_PINNED);
	inject(1, HMEMREG_FAIL_PIN);
	cr_assert_eq(hm_export_host(fd, buf, 2 * PG, 0, 0, NULL), -ENOMEM, "pin");
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_HOST_PAGES_PINNED), pinned);

	inject(3, HMEMREG_FAIL_DEVMEM);
	cr_assert_eq(hm_dev_alloc(fd, 8 * PG), -ENOMEM, "a page of the pool allocation");
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_DEVMEM_USED_BYTES), 4 * PG);

	// A static attach maps at attach (6.1, 6.12) or at its first map (6.18).
	inject(1, HMEMREG_FAIL_MAP);
	int sid = imp_attach(ifd, host_dfd, 0);
	if (sid >= 0) {
		cr_assert_eq(imp_op(ifd, HMIMP_IOC_MAP, sid, HMIMP_BIDIRECTIONAL, 0, NULL), -ENOMEM,
			     "static map");
		cr_assert_eq(imp_op(ifd, HMIMP_IOC_DETACH, sid, 0, 0, NULL), 0);
	} else {
		cr_assert_eq(sid, -ENOMEM, "static attach maps at attach");
	}
	faults_off();
	int id = imp_attach(ifd, host_dfd, HMIMP_DYNAMIC);
	cr_assert_geq(id, 0);
	inject(1, HMEMREG_FAIL_MAP);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_MAP, id, 0, 0, NULL), -ENOMEM, "dynamic map");
	faults_off();
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_PINS_LIVE), 0, "a failed map drops its pin");
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_MAPS_LIVE), 0);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_MAP, id, 0, 0, NULL), 0);

	cr_assert_geq(hm_stat(HMEMREG_NLA_STAT_FAULTS_INJECTED), injected + 12);
	close(ifd);
	close(host_dfd);
	close(fd);
	hm_assert_ledger_idle();
}

// Every step may fail with ENOMEM (only); anything else is a bug.
#define STEP(expr) ({ int _r = (expr); cr_assert(_r >= 0 || _r == -ENOMEM, \
	"%s: %s", #expr, strerror(-_r)); _r; })

static void scenario(void)
{
	char *buf = hm_map_anon(8 * PG);
	int fd = open(HMEMREG_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	int ifd = imp_open();
	int hdfd = -1, ddfd = -1, id1 = -1, id2 = -1;
	struct hmemreg_event ev[8];
	struct hmemreg_watch_info wi = { .size = sizeof(wi) };
	int64_t h = -1;
	void *gen = MAP_FAILED;
	char c = 0;

	if (fd < 0) {
		cr_assert_eq(errno, ENOMEM);
		goto out;
	}
	if (!STEP(hm_ioctl(fd, HMEMREG_IOC_WATCH_INFO, &wi)))
		gen = mmap(NULL, wi.map_size, PROT_READ, MAP_SHARED, fd, 0);
	STEP(hm_arm(fd, buf, 8 * PG, 1, 0, NULL, NULL));
	hdfd = STEP(hm_export_host(fd, buf, 4 * PG, HMEMREG_EXPORT_WRITE | HMEMREG_EXPORT_WATCH,
				   2, NULL));
	h = STEP((int)hm_dev_alloc(fd, 4 * PG));
	if (h > 0)
		ddfd = STEP(hm_export_dev(fd, h, 0, 4 * PG, HMEMREG_EXPORT_WRITE, NULL));
	if (hdfd >= 0)
		id1 = STEP(imp_attach(ifd, hdfd, 0));
	if (ddfd >= 0)
		id2 = STEP(imp_attach(ifd, ddfd, HMIMP_DYNAMIC));
	if (id2 >= 0 && !STEP(imp_op(ifd, HMIMP_IOC_PIN, id2, 0, 0, NULL)) &&
	    !STEP(imp_op(ifd, HMIMP_IOC_MAP, id2, 0, 0, NULL)))
		cr_assert_eq(imp_access(ifd, id2, 1, PG, &c, 1), 0);
	if (id1 >= 0 && !STEP(imp_op(ifd, HMIMP_IOC_MAP, id1, 0, 0, NULL)))
		cr_assert_eq(imp_access(ifd, id1, 0, PG, &c, 1), 0);
	munmap(buf, 8 * PG);
	(void)hm_read_events(fd, ev, 8);
out:
	if (gen != MAP_FAILED)
		munmap(gen, wi.map_size);
	close(ifd);
	if (hdfd >= 0)
		close(hdfd);
	if (ddfd >= 0)
		close(ddfd);
	if (fd >= 0)
		close(fd);
}

Test(fault, every_nth_through_a_full_scenario)
{
	uint64_t injected = hm_stat(HMEMREG_NLA_STAT_FAULTS_INJECTED);

	for (unsigned int every = 1; every <= 16; every++) {
		inject(every, ~0U);
		scenario();
		faults_off();
		hm_assert_ledger_idle();
	}
	cr_assert_gt(hm_stat(HMEMREG_NLA_STAT_FAULTS_INJECTED), injected + 16);
	// And with no faults the same scenario leaves nothing behind either.
	scenario();
	hm_assert_ledger_idle();
}
