// SPDX-License-Identifier: MIT
// Provider DMABUF: hmemreg.ko wraps another exporter's DMA-BUF so its
// importers are in the ledger. The "foreign" exporter here is hmemreg's own
// devmem and host exports (Debian's 6.1 has no udmabuf); the importer is
// the in-kernel test importer, static and dynamic.
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "importer_client.h"

#define WAIT_FOR(cond) ({						\
	for (int _i = 0; !(cond) && _i < 1000; _i++)			\
		usleep(10000);						\
	(cond); })

static struct ledger_export export_by_id(uint64_t id)
{
	struct ledger_export e[32];
	int n = ledger_exports(0, e, 32);

	cr_assert(n > 0 && n <= 32, "%d exports", n);
	for (int i = 0; i < n; i++)
		if (e[i].id == id)
			return e[i];
	cr_assert_fail("no export %llu in the ledger", (unsigned long long)id);
	return e[0];
}

static bool export_exists(uint64_t id)
{
	struct ledger_export e[64];
	int n = ledger_exports(0, e, 64);

	for (int i = 0; i < n && i < 64; i++)
		if (e[i].id == id)
			return true;
	return false;
}

// A devmem allocation of n pages exported whole (writable), page i filled
// with byte base + i through the export's own mmap.
static int dev_inner(int fd, unsigned n, unsigned char base, int64_t *h, uint64_t *id)
{
	struct hmemreg_export e;

	*h = hm_dev_alloc(fd, n * PG);
	cr_assert_gt(*h, 0, "devmem alloc: %s", strerror((int)-*h));
	int dfd = hm_export_dev(fd, *h, 0, n * PG, HMEMREG_EXPORT_WRITE, &e);
	cr_assert_geq(dfd, 0, "devmem export: %s", strerror(-dfd));
	unsigned char *m = mmap(NULL, n * PG, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
	cr_assert_neq(m, MAP_FAILED, "mmap devmem export: %s", strerror(errno));
	for (unsigned i = 0; i < n; i++)
		memset(m + i * PG, base + i, PG);
	munmap(m, n * PG);
	if (id)
		*id = e.export_id;
	return dfd;
}

Test(dmabuf, caps_and_provider_advertised)
{
	int fd = hm_open();
	struct hmemreg_version v = { .size = sizeof(v) };

	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_VERSION, &v), 0);
	cr_assert(v.caps & HMEMREG_CAP_EXPORT_DMABUF);
	cr_assert_geq(v.abi_minor, 2);
	close(fd);
}

Test(dmabuf, static_importer_of_wrapped_devmem)
{
	int fd = hm_open(), ifd = imp_open();
	int64_t h;
	uint64_t inner_id;
	struct hmemreg_export we;
	struct hmimp_op op;
	unsigned char rd[64], wr[64];

	int inner = dev_inner(fd, 4, 0x40, &h, &inner_id);
	int w = hm_wrap(fd, inner, 0, 4 * PG, HMEMREG_EXPORT_WRITE, &we);
	cr_assert_geq(w, 0, "wrap: %s", strerror(-w));
	struct ledger_export le = export_by_id(we.export_id);
	cr_assert_eq(le.provider, HMEMREG_PROVIDER_DMABUF);
	cr_assert_str_eq(le.inner, "hmemreg", "the ledger names the inner exporter");
	cr_assert_eq(le.len, 4 * PG);
	cr_assert_eq(le.handle, (uint64_t)inner);
	cr_assert_eq(le.owner_pid, (uint32_t)getpid());
	cr_assert_eq(le.attach_live + le.pins_live + le.maps_live, 0, "wrapping pins nothing");
	cr_assert_eq(export_by_id(inner_id).attach_live, 0);

	int id = imp_attach(ifd, w, 0);
	cr_assert_geq(id, 0, "static attach: %s", strerror(-id));
	le = export_by_id(we.export_id);
	cr_assert_eq(le.attach_live, 1);
	// The core pins and maps a static importer at attach (6.1, 6.12) or
	// at its first map (6.18): pinned and mapped once it has mapped.
	cr_assert_eq(le.pins_live, le.maps_live, "pinned and mapped at attach, or neither yet");
	cr_assert_leq(le.pins_live, 1);
	cr_assert_str_eq(le.att_device, "hmemreg_importer");
	cr_assert_eq(le.att_dynamic, 0);
	struct ledger_export li = export_by_id(inner_id);
	cr_assert_eq(li.attach_live, 1, "the attachment is forwarded to the inner buffer");
	cr_assert_str_eq(li.att_device, "hmemreg_importer", "for the same device");
	cr_assert_eq(li.att_dynamic, 0);

	cr_assert_eq(imp_op(ifd, HMIMP_IOC_MAP, id, HMIMP_BIDIRECTIONAL, 0, &op), 0);
	cr_assert_eq(op.mapped, 4 * PG);
	le = export_by_id(we.export_id);
	cr_assert_eq(le.pins_live, 1, "the core pins the wrapper for a static importer");
	cr_assert_eq(le.maps_live, 1);
	cr_assert_eq(export_by_id(inner_id).pins_live, 1,
		     "the inner core pins it for a static attachment");
	cr_assert_eq(hm_dev_free(fd, h), -EBUSY, "memory under a wrapper's importer is busy");
	cr_assert_eq(imp_access(ifd, id, 0, 3 * PG + 10, rd, sizeof(rd)), 0);
	for (unsigned i = 0; i < sizeof(rd); i++)
		cr_assert_eq(rd[i], 0x43, "byte %u of page 3 through the wrapper", i);
	memset(wr, 'w', sizeof(wr));
	cr_assert_eq(imp_access(ifd, id, 1, 100, wr, sizeof(wr)), 0);
	unsigned char *m = mmap(NULL, 4 * PG, PROT_READ, MAP_SHARED, inner, 0);
	cr_assert_neq(m, MAP_FAILED);
	cr_assert_eq(memcmp(m + 100, wr, sizeof(wr)), 0, "device write through the wrapper");
	munmap(m, 4 * PG);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_UNMAP, id, 0, 0, NULL), 0);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_DETACH, id, 0, 0, NULL), 0);
	le = export_by_id(we.export_id);
	cr_assert_eq(le.attach_live + le.pins_live + le.maps_live, 0);
	cr_assert_eq(le.pins_total, 1);
	li = export_by_id(inner_id);
	cr_assert_eq(li.attach_live + li.pins_live + li.maps_live, 0);
	close(w);
	cr_assert(!export_exists(we.export_id), "closing the wrapper releases it");
	close(inner);
	cr_assert_eq(hm_dev_free(fd, h), 0);
	close(ifd);
	close(fd);
	hm_assert_ledger_idle();
}

Test(dmabuf, dynamic_importer_of_wrapped_host_pins_and_maps_through)
{
	int fd = hm_open(), ifd = imp_open();
	char *buf = hm_map_anon(4 * PG);
	struct hmemreg_export ie, we;
	struct hmimp_op op;
	char rd[PG];

	int inner = hm_export_host(fd, buf, 4 * PG, HMEMREG_EXPORT_WRITE, 1, &ie);
	cr_assert_geq(inner, 0);
	int w = hm_wrap(fd, inner, 0, 4 * PG, HMEMREG_EXPORT_WRITE, &we);
	cr_assert_geq(w, 0, "wrap: %s", strerror(-w));
	int id = imp_attach(ifd, w, HMIMP_DYNAMIC);
	cr_assert_geq(id, 0);
	struct ledger_export le = export_by_id(we.export_id), li = export_by_id(ie.export_id);
	cr_assert_eq(le.att_dynamic, 1);
	cr_assert_eq(li.att_dynamic, 1, "a dynamic importer's attachment is dynamic inside too");
	cr_assert_eq(le.pins_live + le.maps_live + li.pins_live + li.maps_live, 0,
		     "dynamic attach pins nothing on either buffer");
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_PIN, id, 0, 0, NULL), 0);
	cr_assert_eq(export_by_id(we.export_id).pins_live, 1);
	cr_assert_eq(export_by_id(ie.export_id).pins_live, 1, "the pin goes through");
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_MAP, id, HMIMP_BIDIRECTIONAL, 0, &op), 0);
	cr_assert_eq(op.mapped, 4 * PG);
	cr_assert_eq(export_by_id(we.export_id).maps_live, 1);
	cr_assert_eq(export_by_id(ie.export_id).maps_live, 1, "the map goes through");
	memset(buf + 2 * PG, 0x77, PG);
	cr_assert_eq(imp_access(ifd, id, 0, 2 * PG, rd, PG), 0);
	cr_assert_eq(memcmp(rd, buf + 2 * PG, PG), 0);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_UNMAP, id, 0, 0, NULL), 0);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_UNPIN, id, 0, 0, NULL), 0);
	le = export_by_id(we.export_id);
	li = export_by_id(ie.export_id);
	cr_assert_eq(le.pins_live + le.maps_live + li.pins_live + li.maps_live, 0);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_DETACH, id, 0, 0, NULL), 0);
	cr_assert_eq(export_by_id(ie.export_id).attach_live, 0);
	close(w);
	close(inner);
	close(ifd);
	close(fd);
	hm_assert_ledger_idle();
}

Test(dmabuf, a_window_maps_mmaps_and_reports_only_its_range)
{
	int fd = hm_open(), ifd = imp_open();
	int64_t h;
	struct hmemreg_export we;
	struct hmimp_op op;
	unsigned char c;

	int inner = dev_inner(fd, 8, 0x10, &h, NULL);
	int w = hm_wrap(fd, inner, 2 * PG, 3 * PG, HMEMREG_EXPORT_WRITE, &we);
	cr_assert_geq(w, 0, "wrap: %s", strerror(-w));
	struct ledger_export le = export_by_id(we.export_id);
	cr_assert_eq(le.addr, 2 * PG);
	cr_assert_eq(le.len, 3 * PG);
	int id = imp_attach(ifd, w, HMIMP_DYNAMIC);
	cr_assert_geq(id, 0);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_PIN, id, 0, 0, NULL), 0);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_MAP, id, HMIMP_BIDIRECTIONAL, 0, &op), 0);
	cr_assert_eq(op.mapped, 3 * PG, "the importer's table covers the window only");
	cr_assert_eq(imp_access(ifd, id, 0, 0, &c, 1), 0);
	cr_assert_eq(c, 0x12, "byte 0 of the wrapper is byte 0 of inner page 2");
	cr_assert_eq(imp_access(ifd, id, 0, 3 * PG - 1, &c, 1), 0);
	cr_assert_eq(c, 0x14);
	cr_assert_eq(imp_access(ifd, id, 0, 3 * PG, &c, 1), -ERANGE);
	unsigned char *m = mmap(NULL, 3 * PG, PROT_READ, MAP_SHARED, w, 0);
	cr_assert_neq(m, MAP_FAILED, "mmap of the wrapper: %s", strerror(errno));
	cr_assert_eq(m[0], 0x12);
	cr_assert_eq(m[PG], 0x13);
	cr_assert_eq(m[3 * PG - 1], 0x14);
	munmap(m, 3 * PG);
	m = mmap(NULL, PG, PROT_READ, MAP_SHARED, w, 2 * PG);
	cr_assert_neq(m, MAP_FAILED);
	cr_assert_eq(m[0], 0x14, "mmap offsets are the wrapper's");
	munmap(m, PG);
	cr_assert_eq(mmap(NULL, 4 * PG, PROT_READ, MAP_SHARED, w, 0), MAP_FAILED,
		     "no mapping past the window");
	close(ifd);	/* the importer's release unmaps, unpins and detaches */
	close(w);
	close(inner);
	close(fd);
	hm_assert_ledger_idle();
}

Test(dmabuf, inner_move_notify_reaches_the_wrappers_dynamic_importer)
{
	int fd = hm_open(), ifd = imp_open();
	char *buf = hm_map_anon(2 * PG);
	struct hmemreg_export we;

	// An EXPORT_WATCH host export moves (goes stale) when its range is
	// unmapped, and tells its unpinned dynamic importers: the wrapper's
	// inner attachment is one, and passes it on.
	int inner = hm_export_host(fd, buf, 2 * PG, HMEMREG_EXPORT_WRITE | HMEMREG_EXPORT_WATCH,
				   2, NULL);
	cr_assert_geq(inner, 0);
	int w = hm_wrap(fd, inner, 0, 2 * PG, HMEMREG_EXPORT_WRITE, &we);
	cr_assert_geq(w, 0);
	int id = imp_attach(ifd, w, HMIMP_DYNAMIC);
	cr_assert_geq(id, 0);
	cr_assert_eq(imp_status(ifd, id).moves, 0);
	munmap(buf, 2 * PG);
	cr_assert(WAIT_FOR(imp_status(ifd, id).moves > 0),
		  "the inner exporter's move_notify did not reach the wrapper's importer");
	cr_assert_eq(imp_status(ifd, id).moves, 1);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_MAP, id, HMIMP_BIDIRECTIONAL, 0, NULL), -ESTALE,
		     "the inner exporter's refusal comes back unchanged");
	cr_assert_eq(export_by_id(we.export_id).maps_live, 0);
	close(ifd);
	close(w);
	close(inner);
	close(fd);
	hm_assert_ledger_idle();
}

Test(dmabuf, bad_input_gets_a_clear_errno_and_pins_nothing)
{
	int fd = hm_open();
	int64_t h;
	int p[2];

	int inner = dev_inner(fd, 4, 0, &h, NULL);
	int n0 = ledger_count_exports(getpid());
	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(hm_wrap(fd, p[0], 0, PG, 0, NULL), -EINVAL, "a pipe is not a dma-buf");
	cr_assert_eq(hm_wrap(fd, fd, 0, PG, 0, NULL), -EINVAL, "/dev/hmemreg is not a dma-buf");
	int dead = dup(p[1]);
	close(dead);
	cr_assert_eq(hm_wrap(fd, dead, 0, PG, 0, NULL), -EBADF, "a closed fd");
	cr_assert_eq(hm_wrap(fd, 1ULL << 40, 0, PG, 0, NULL), -EBADF, "no such fd number");
	cr_assert_eq(hm_wrap(fd, inner, 4 * PG, PG, 0, NULL), -ERANGE, "offset at the end");
	cr_assert_eq(hm_wrap(fd, inner, 0, 5 * PG, 0, NULL), -ERANGE, "length past the end");
	cr_assert_eq(hm_wrap(fd, inner, 2 * PG, 3 * PG, 0, NULL), -ERANGE, "window past the end");
	cr_assert_eq(hm_wrap(fd, inner, 100, PG, 0, NULL), -EINVAL, "unaligned offset");
	cr_assert_eq(hm_wrap(fd, inner, 0, PG + 1, 0, NULL), -EINVAL, "unaligned length");
	cr_assert_eq(hm_wrap(fd, inner, 0, 0, 0, NULL), -EINVAL, "empty");
	cr_assert_eq(hm_wrap(fd, inner, 0, PG, HMEMREG_EXPORT_WATCH, NULL), -EINVAL,
		     "another exporter's memory cannot be watched");
	int ro = hm_export_dev(fd, h, 0, PG, 0, NULL);
	cr_assert_geq(ro, 0);
	cr_assert_eq(hm_wrap(fd, ro, 0, PG, HMEMREG_EXPORT_WRITE, NULL), -EACCES,
		     "a writable wrapper of a read-only buffer");
	int w = hm_wrap(fd, inner, 0, PG, 0, NULL);
	cr_assert_geq(w, 0);
	cr_assert_eq(hm_wrap(fd, w, 0, PG, 0, NULL), -ELOOP, "a wrapper of a wrapper");
	cr_assert_eq(ledger_count_exports(getpid()), n0 + 2, "only ro and w were exported");
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_PINS_LIVE), 0);
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_ATTACH_LIVE), 0);
	close(w);
	close(ro);
	close(inner);
	close(p[0]);
	close(p[1]);
	close(fd);
	hm_assert_ledger_idle();
}

Test(dmabuf, closing_the_inner_fd_first_changes_nothing)
{
	int fd = hm_open(), ifd = imp_open();
	int64_t h;
	uint64_t inner_id;
	struct hmemreg_export we;
	unsigned char c;

	int inner = dev_inner(fd, 2, 0x60, &h, &inner_id);
	int w = hm_wrap(fd, inner, 0, 2 * PG, HMEMREG_EXPORT_WRITE, &we);
	cr_assert_geq(w, 0);
	close(inner);
	cr_assert(export_exists(inner_id), "the wrapper holds the inner buffer");
	int id = imp_attach(ifd, w, 0);
	cr_assert_geq(id, 0);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_MAP, id, HMIMP_BIDIRECTIONAL, 0, NULL), 0);
	cr_assert_eq(imp_access(ifd, id, 0, PG, &c, 1), 0);
	cr_assert_eq(c, 0x61);
	close(w);
	cr_assert(export_exists(we.export_id), "the importer holds the wrapper");
	cr_assert_eq(hm_dev_free(fd, h), -EBUSY);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_DETACH, id, 0, 0, NULL), 0);
	cr_assert(!export_exists(we.export_id), "detached and closed: released");
	cr_assert(!export_exists(inner_id), "and the inner buffer with it");
	cr_assert_eq(hm_dev_free(fd, h), 0);
	close(ifd);
	close(fd);
	hm_assert_ledger_idle();
}

// Child: wrap a devmem buffer, attach it to ifd (dynamic), pin and map,
// report the wrapper's export id on wp, then wait to be killed.
static void child_wrap_and_wait(int ifd, int wp)
{
	int fd = open(HMEMREG_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	struct hmemreg_devmem_alloc a = { .size = sizeof(a), .len = 2 * PG };
	uint64_t id = 0;

	if (fd < 0 || ioctl(fd, HMEMREG_IOC_DEVMEM_ALLOC, &a))
		_exit(2);
	struct hmemreg_export e = { .size = sizeof(e), .provider = HMEMREG_PROVIDER_DEVMEM,
				    .flags = HMEMREG_EXPORT_WRITE, .len = 2 * PG,
				    .handle = a.handle };
	if (ioctl(fd, HMEMREG_IOC_EXPORT, &e))
		_exit(3);
	struct hmemreg_export we = { .size = sizeof(we), .provider = HMEMREG_PROVIDER_DMABUF,
				     .flags = HMEMREG_EXPORT_WRITE, .len = 2 * PG,
				     .handle = (uint64_t)e.fd };
	if (ioctl(fd, HMEMREG_IOC_EXPORT, &we))
		_exit(4);
	struct hmimp_attach at = { .fd = we.fd, .flags = HMIMP_DYNAMIC };
	if (ioctl(ifd, HMIMP_IOC_ATTACH, &at))
		_exit(5);
	struct hmimp_op op = { .id = at.id, .dir = HMIMP_BIDIRECTIONAL };
	if (ioctl(ifd, HMIMP_IOC_PIN, &op) || ioctl(ifd, HMIMP_IOC_MAP, &op))
		_exit(6);
	id = we.export_id;
	if (write(wp, &id, sizeof(id)) != sizeof(id))
		_exit(7);
	for (;;)
		pause();
}

// Fork a child that runs child_wrap_and_wait(ifd): its pid, the wrapper's
// export id in *id once it is attached, pinned and mapped.
static pid_t spawn_wrapper(int ifd, uint64_t *id)
{
	int p[2];

	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (!pid) {
		close(p[0]);
		child_wrap_and_wait(ifd, p[1]);
	}
	close(p[1]);
	struct pollfd pfd = { .fd = p[0], .events = POLLIN };
	cr_assert_eq(poll(&pfd, 1, 20000), 1, "the child did not report within 20 s");
	ssize_t n = read(p[0], id, sizeof(*id));
	close(p[0]);
	if (n != sizeof(*id)) {
		int st;

		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		cr_assert_fail("child failed: status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	return pid;
}

Test(dmabuf, kill_9_of_the_wrapping_process_leaves_the_ledger_idle)
{
	int ifd = imp_open();
	uint64_t id;
	int st;

	pid_t pid = spawn_wrapper(ifd, &id);
	close(ifd);	/* the child's copy is now the only one */
	// Read before the kill, asserted after it (a failed assertion must
	// not leave the child holding its pins for the next tests).
	int n = ledger_count_exports(pid);
	uint32_t pins = export_by_id(id).pins_live;
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFSIGNALED(st));
	cr_assert_eq(n, 2, "inner and wrapper of the child");
	// PIN, and MAP pins again where the kernel has no DMABUF_MOVE_NOTIFY.
	cr_assert_geq(pins, 1);
	hm_assert_ledger_idle();
}

Test(dmabuf, a_wrapper_whose_owner_died_is_orphaned_until_its_importer_lets_go)
{
	int ifd = imp_open();
	uint64_t id;
	int st;

	pid_t pid = spawn_wrapper(ifd, &id);
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	// This process's importer fd still holds the child's attachment.
	struct ledger_export le = export_by_id(id);
	cr_assert(le.state & HMEMREG_EXP_STATE_ORPHANED, "state %#x", le.state);
	cr_assert(le.state & HMEMREG_EXP_STATE_PINNED);
	cr_assert_str_eq(le.inner, "hmemreg");
	cr_assert_eq(le.owner_pid, (uint32_t)pid);
	cr_assert_geq(hm_stat(HMEMREG_NLA_STAT_ORPHANS_LIVE), 1);
	close(ifd);
	hm_assert_ledger_idle();
}

static long module_refcnt(void)
{
	FILE *f = fopen("/sys/module/hmemreg/refcnt", "r");
	long n = -1;

	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%ld", &n), 1);
	fclose(f);
	return n;
}

Test(dmabuf, a_live_wrapper_holds_the_module)
{
	long base = module_refcnt();
	int fd = hm_open();
	int64_t h;

	int inner = dev_inner(fd, 1, 0, &h, NULL);
	int w = hm_wrap(fd, inner, 0, PG, 0, NULL);
	cr_assert_geq(w, 0);
	close(inner);
	close(fd);
	// rmmod (delete_module) is refused while the count is above zero.
	cr_assert_geq(module_refcnt(), base + 1, "a wrapper alone must keep hmemreg.ko loaded");
	close(w);
	cr_assert_eq(module_refcnt(), base);
	hm_assert_ledger_idle();
}

// Random wrap / attach / pin / map / access / unmap / unpin / detach / close
// sequences over devmem and host inner buffers, with children that wrap
// and are killed midway; every mapped byte read is checked against the
// inner buffer's pattern. Bounded: HMEMREG_DMABUF_STEPS (default 3000).
#define NI 4
#define NW 8
#define NA 12

struct rinner {
	int fd;		/* -1: closed (may live on in wrappers) */
	int64_t h;	/* devmem handle, 0 for host */
	char *buf;	/* host memory, NULL for devmem */
	unsigned pages;
	unsigned char base;
};

struct rwrap {
	int fd;
	int inner;	/* index in inners */
	unsigned off;	/* pages */
	unsigned pages;
	bool writable;
};

struct ratt {
	int id;		/* -1: free */
	int wrap;
	bool dynamic, pinned, mapped;
};

static unsigned char pattern(const struct rinner *in, unsigned byte)
{
	return (unsigned char)(in->base + byte / PG * 7 + byte % 13);
}

Test(dmabuf, random_sequences_leave_the_ledger_idle, .timeout = 600)
{
	const char *s = getenv("HMEMREG_DMABUF_STEPS");
	unsigned steps = s ? (unsigned)atoi(s) : 3000;
	unsigned seed = (unsigned)time(NULL);
	int fd = hm_open(), ifd = imp_open();
	struct rinner in[NI];
	struct rwrap wr[NW];
	struct ratt at[NA];
	uint64_t unb = hm_stat(HMEMREG_NLA_STAT_UNBALANCED);
	unsigned ok = 0, refused = 0, kills = 0, checked = 0;

	fprintf(stderr, "dmabuf random: seed %u, %u steps\n", seed, steps);
	srand(seed);
	for (int i = 0; i < NI; i++) {
		in[i].pages = 2 + i * 2;
		in[i].base = (unsigned char)(0x20 * i + 1);
		if (i % 2) {
			in[i].buf = hm_map_anon(in[i].pages * PG);
			in[i].h = 0;
			in[i].fd = hm_export_host(fd, in[i].buf, in[i].pages * PG,
						  HMEMREG_EXPORT_WRITE, i, NULL);
			for (unsigned b = 0; b < in[i].pages * PG; b++)
				in[i].buf[b] = (char)pattern(&in[i], b);
		} else {
			in[i].buf = NULL;
			in[i].h = hm_dev_alloc(fd, in[i].pages * PG);
			cr_assert_gt(in[i].h, 0);
			in[i].fd = hm_export_dev(fd, in[i].h, 0, in[i].pages * PG,
						 HMEMREG_EXPORT_WRITE, NULL);
			cr_assert_geq(in[i].fd, 0);
			unsigned char *m = mmap(NULL, in[i].pages * PG, PROT_READ | PROT_WRITE,
						MAP_SHARED, in[i].fd, 0);
			cr_assert_neq(m, MAP_FAILED);
			for (unsigned b = 0; b < in[i].pages * PG; b++)
				m[b] = pattern(&in[i], b);
			munmap(m, in[i].pages * PG);
		}
		cr_assert_geq(in[i].fd, 0);
	}
	for (int i = 0; i < NW; i++)
		wr[i].fd = -1;
	for (int i = 0; i < NA; i++)
		at[i].id = -1;

	for (unsigned step = 0; step < steps; step++) {
		int op = rand() % 100;
		int r;

		if (op < 15) {					/* wrap */
			int wi = rand() % NW, ii = rand() % NI;

			if (wr[wi].fd >= 0 || in[ii].fd < 0)
				continue;
			unsigned off = rand() % in[ii].pages;
			unsigned pages = 1 + rand() % (in[ii].pages - off);
			bool wrt = rand() % 4;
			r = hm_wrap(fd, in[ii].fd, off * PG, pages * PG,
				    wrt ? HMEMREG_EXPORT_WRITE : 0, NULL);
			cr_assert_geq(r, 0, "step %u: wrap: %s", step, strerror(-r));
			wr[wi] = (struct rwrap){ r, ii, off, pages, wrt };
			ok++;
		} else if (op < 30) {				/* attach */
			int ai = rand() % NA, wi = rand() % NW;
			bool dyn = rand() % 2;

			if (at[ai].id >= 0 || wr[wi].fd < 0)
				continue;
			r = imp_attach(ifd, wr[wi].fd, dyn ? HMIMP_DYNAMIC : 0);
			if (!dyn && !wr[wi].writable) {
				cr_assert_lt(r, 0, "step %u: static attach of a read-only wrapper", step);
				refused++;
				continue;
			}
			cr_assert_geq(r, 0, "step %u: attach: %s", step, strerror(-r));
			at[ai] = (struct ratt){ r, wi, dyn, false, !dyn };
			/* A static attachment is mapped by the core; MAP returns it. */
			if (!dyn)
				cr_assert_eq(imp_op(ifd, HMIMP_IOC_MAP, r, HMIMP_BIDIRECTIONAL, 0,
						    NULL), 0);
			ok++;
		} else if (op < 40) {				/* pin */
			int ai = rand() % NA;

			if (at[ai].id < 0 || !at[ai].dynamic || at[ai].pinned)
				continue;
			cr_assert_eq(imp_op(ifd, HMIMP_IOC_PIN, at[ai].id, 0, 0, NULL), 0);
			at[ai].pinned = true;
			ok++;
		} else if (op < 52) {				/* map */
			int ai = rand() % NA;

			if (at[ai].id < 0 || at[ai].mapped)
				continue;
			bool w = wr[at[ai].wrap].writable;
			struct hmimp_op o;

			r = imp_op(ifd, HMIMP_IOC_MAP, at[ai].id,
				   w ? HMIMP_BIDIRECTIONAL : HMIMP_TO_DEVICE, 0, &o);
			cr_assert_eq(r, 0, "step %u: map: %s", step, strerror(-r));
			at[ai].mapped = true;
			ok++;
		} else if (op < 66) {				/* access, checked */
			int ai = rand() % NA;

			if (at[ai].id < 0 || !at[ai].mapped)
				continue;
			const struct rwrap *w = &wr[at[ai].wrap];
			const struct rinner *ii = &in[w->inner];
			unsigned len = w->pages * PG;
			unsigned o = rand() % len, n = 1 + rand() % (len - o < 256 ? len - o : 256);
			unsigned char b[256];

			cr_assert_eq(imp_access(ifd, at[ai].id, 0, o, b, n), 0, "step %u", step);
			for (unsigned k = 0; k < n; k++)
				cr_assert_eq(b[k], pattern(ii, w->off * PG + o + k),
					     "step %u: byte %u of a wrapper at page %u of inner %d",
					     step, o + k, w->off, w->inner);
			checked += n;
			ok++;
		} else if (op < 75) {				/* unmap */
			int ai = rand() % NA;

			if (at[ai].id < 0 || !at[ai].mapped || !at[ai].dynamic)
				continue;
			cr_assert_eq(imp_op(ifd, HMIMP_IOC_UNMAP, at[ai].id, 0, 0, NULL), 0);
			at[ai].mapped = false;
			ok++;
		} else if (op < 82) {				/* unpin */
			int ai = rand() % NA;

			if (at[ai].id < 0 || !at[ai].pinned || at[ai].mapped)
				continue;
			cr_assert_eq(imp_op(ifd, HMIMP_IOC_UNPIN, at[ai].id, 0, 0, NULL), 0);
			at[ai].pinned = false;
			ok++;
		} else if (op < 91) {				/* detach (mapped or not) */
			int ai = rand() % NA;

			if (at[ai].id < 0)
				continue;
			if (at[ai].mapped)
				cr_assert_eq(imp_op(ifd, HMIMP_IOC_UNMAP, at[ai].id, 0, 0, NULL), 0);
			if (at[ai].pinned)
				cr_assert_eq(imp_op(ifd, HMIMP_IOC_UNPIN, at[ai].id, 0, 0, NULL), 0);
			cr_assert_eq(imp_op(ifd, HMIMP_IOC_DETACH, at[ai].id, 0, 0, NULL), 0);
			at[ai].id = -1;
			ok++;
		} else if (op < 97) {				/* close a wrapper fd */
			int wi = rand() % NW;

			if (wr[wi].fd < 0)
				continue;
			close(wr[wi].fd);
			wr[wi].fd = -1;
			ok++;
			/*
			 * Its attachments would live on (closing_the_inner_fd_first
			 * checks that); detached here so a reused slot's geometry is
			 * never confused with theirs.
			 */
			for (int a = 0; a < NA; a++)
				if (at[a].id >= 0 && at[a].wrap == wi) {
					if (at[a].mapped)
						imp_op(ifd, HMIMP_IOC_UNMAP, at[a].id, 0, 0, NULL);
					if (at[a].pinned)
						imp_op(ifd, HMIMP_IOC_UNPIN, at[a].id, 0, 0, NULL);
					cr_assert_eq(imp_op(ifd, HMIMP_IOC_DETACH, at[a].id, 0, 0,
							    NULL), 0);
					at[a].id = -1;
				}
		} else if (op < 98) {				/* kill a wrapping child */
			uint64_t id;
			int st;
			pid_t pid = spawn_wrapper(ifd, &id);

			if (rand() % 2)
				usleep(rand() % 2000);
			kill(pid, SIGKILL);
			cr_assert_eq(waitpid(pid, &st, 0), pid);
			kills++;
		} else {		/* close an inner fd (its wrappers keep it), export anew */
			int ii = rand() % NI;

			close(in[ii].fd);
			in[ii].fd = in[ii].h ? hm_export_dev(fd, in[ii].h, 0, in[ii].pages * PG,
							      HMEMREG_EXPORT_WRITE, NULL)
					     : hm_export_host(fd, in[ii].buf, in[ii].pages * PG,
							      HMEMREG_EXPORT_WRITE, ii, NULL);
			cr_assert_geq(in[ii].fd, 0, "step %u: export anew", step);
			ok++;
		}
	}
	fprintf(stderr, "dmabuf random: %u ops done, %u refused as expected, %u kills, %u bytes checked\n",
		ok, refused, kills, checked);
	close(ifd);	/* detaches everything, the killed children's too */
	for (int i = 0; i < NW; i++)
		if (wr[i].fd >= 0)
			close(wr[i].fd);
	for (int i = 0; i < NI; i++) {
		if (in[i].fd >= 0)
			close(in[i].fd);
		if (in[i].h > 0)
			cr_assert_eq(hm_dev_free(fd, in[i].h), 0);
	}
	close(fd);
	hm_assert_ledger_idle();
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_UNBALANCED), unb, "no unbalanced pin or map");
}
