// SPDX-License-Identifier: MIT
// DMA-BUF export of host pages and emulated device memory (in the VM).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "kmod_test.h"

static int find_export(uint32_t pid, uint64_t id, struct ledger_export *out)
{
	struct ledger_export e[64];
	int n = ledger_exports(pid, e, 64);

	cr_assert_geq(n, 0);
	for (int i = 0; i < n && i < 64; i++)
		if (e[i].id == id) {
			*out = e[i];
			return 1;
		}
	return 0;
}

static void send_fd(int sock, int fd)
{
	char c = 0;
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	char ctl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof(ctl) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	cr_assert_eq(sendmsg(sock, &m, 0), 1);
}

static int recv_fd(int sock)
{
	char c;
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	char ctl[CMSG_SPACE(sizeof(int))];
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof(ctl) };
	int fd;

	if (recvmsg(sock, &m, 0) != 1 || !CMSG_FIRSTHDR(&m))
		return -1;
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
	return fd;
}

Test(export, host_readonly_is_tracked_and_released)
{
	int fd = hm_open();
	char *buf = hm_map_anon(4 * PG);
	struct hmemreg_export e;
	struct ledger_export le;
	uint64_t pinned0 = hm_stat(HMEMREG_NLA_STAT_HOST_PAGES_PINNED);

	int dfd = hm_export_host(fd, buf, 4 * PG, 0, 0xabc, &e);
	cr_assert_geq(dfd, 0, "export: %s", strerror(-dfd));
	cr_assert_neq(e.export_id, 0);
	cr_assert_eq(e.watch_slot, HMEMREG_WATCH_NO_SLOT);
	cr_assert_eq(fcntl(dfd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	cr_assert_eq(fcntl(dfd, F_GETFL) & O_ACCMODE, O_RDONLY);
	cr_assert_eq(lseek(dfd, 0, SEEK_END), 4 * PG, "dma-buf size");
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_HOST_PAGES_PINNED), pinned0 + 4);
	cr_assert(find_export(getpid(), e.export_id, &le));
	cr_assert_eq(le.provider, HMEMREG_PROVIDER_HOST);
	cr_assert_eq(le.addr, (uintptr_t)buf);
	cr_assert_eq(le.len, 4 * PG);
	cr_assert_eq(le.cookie, 0xabc);
	cr_assert_eq(le.owner_pid, (uint32_t)getpid());
	cr_assert_eq(le.state & HMEMREG_EXP_STATE_WRITABLE, 0);
	cr_assert_eq(le.attach_live, 0);
	// Read-only: readable through the dma-buf, never writable.
	cr_assert_eq(mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0), MAP_FAILED);
	cr_assert_eq(errno, EACCES);
	char *m = mmap(NULL, 4 * PG, PROT_READ, MAP_SHARED, dfd, 0);
	cr_assert_neq(m, MAP_FAILED, "%s", strerror(errno));
	buf[3 * PG + 1] = 42;
	cr_assert_eq(m[3 * PG + 1], 42, "dma-buf maps the very same pages");
	munmap(m, 4 * PG);
	close(dfd);
	hm_assert_no_exports_of_self();
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_HOST_PAGES_PINNED), pinned0);
	close(fd);
	hm_assert_ledger_idle();
}

Test(export, host_writable_mmap_roundtrip)
{
	int fd = hm_open();
	char *buf = hm_map_anon(2 * PG);
	int dfd = hm_export_host(fd, buf, 2 * PG, HMEMREG_EXPORT_WRITE, 1, NULL);

	cr_assert_geq(dfd, 0);
	cr_assert_eq(fcntl(dfd, F_GETFL) & O_ACCMODE, O_RDWR);
	char *m = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
	cr_assert_neq(m, MAP_FAILED, "%s", strerror(errno));
	m[PG + 7] = 'x';
	cr_assert_eq(buf[PG + 7], 'x');
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_USER_MMAPS_LIVE), 1);
	// Mapping a window at an offset works too.
	char *w = mmap(NULL, PG, PROT_READ, MAP_SHARED, dfd, PG);
	cr_assert_neq(w, MAP_FAILED);
	cr_assert_eq(w[7], 'x');
	munmap(w, PG);
	munmap(m, 2 * PG);
	close(dfd);
	close(fd);
	munmap(buf, 2 * PG);
	hm_assert_ledger_idle();
}

Test(export, file_backed_range)
{
	int fd = hm_open();
	char path[] = "/tmp/hmemreg-export-XXXXXX";
	int ffd = mkstemp(path);

	cr_assert_geq(ffd, 0);
	unlink(path);
	cr_assert_eq(ftruncate(ffd, 2 * PG), 0);
	char *f = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, ffd, 0);
	cr_assert_neq(f, MAP_FAILED);
	f[5] = 9;
	int dfd = hm_export_host(fd, f, 2 * PG, HMEMREG_EXPORT_WRITE, 2, NULL);
	cr_assert_geq(dfd, 0, "%s", strerror(-dfd));
	char *m = mmap(NULL, 2 * PG, PROT_READ, MAP_SHARED, dfd, 0);
	cr_assert_neq(m, MAP_FAILED);
	cr_assert_eq(m[5], 9);
	munmap(m, 2 * PG);
	close(dfd);
	munmap(f, 2 * PG);
	close(ffd);
	close(fd);
	hm_assert_ledger_idle();
}

/*
 * A file on a disk filesystem (tests/vm.d/10-kmod.sh mounts ext4 on a loop
 * device at HMEMREG_EXT4_DIR): its pages are written back, so a shared
 * writable mapping of it cannot be exported writable on any kernel; read-only
 * or MAP_PRIVATE it can.
 */
Test(export, disk_file_shared_mapping_not_writable)
{
	const char *dir = getenv("HMEMREG_EXT4_DIR");

	if (!dir)
		cr_skip_test("needs HMEMREG_EXT4_DIR, an ext4 mount (tests/vm.d/10-kmod.sh)");
	char path[256];
	snprintf(path, sizeof(path), "%s/export-XXXXXX", dir);
	int fd = hm_open(), ffd = mkstemp(path);

	cr_assert_geq(ffd, 0, "%s: %s", path, strerror(errno));
	unlink(path);
	cr_assert_eq(ftruncate(ffd, 2 * PG), 0);
	char *f = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, ffd, 0);
	cr_assert_neq(f, MAP_FAILED);
	f[PG + 3] = 7;
	cr_assert_eq(hm_export_host(fd, f, 2 * PG, HMEMREG_EXPORT_WRITE, 3, NULL), -EOPNOTSUPP);
	cr_assert_eq(hm_export_host(fd, f + PG, PG, HMEMREG_EXPORT_WRITE, 3, NULL), -EOPNOTSUPP,
		     "any page of such a mapping");
	int dfd = hm_export_host(fd, f, 2 * PG, 0, 3, NULL);
	cr_assert_geq(dfd, 0, "read-only: %s", strerror(-dfd));
	char *m = mmap(NULL, 2 * PG, PROT_READ, MAP_SHARED, dfd, 0);
	cr_assert_neq(m, MAP_FAILED);
	cr_assert_eq(m[PG + 3], 7);
	munmap(m, 2 * PG);
	close(dfd);
	char *p = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, ffd, 0);
	cr_assert_neq(p, MAP_FAILED);
	dfd = hm_export_host(fd, p, 2 * PG, HMEMREG_EXPORT_WRITE, 4, NULL);
	cr_assert_geq(dfd, 0, "MAP_PRIVATE, writable: %s", strerror(-dfd));
	m = mmap(NULL, 2 * PG, PROT_READ, MAP_SHARED, dfd, 0);
	cr_assert_neq(m, MAP_FAILED);
	cr_assert_eq(m[PG + 3], 7, "the private copy starts as the file");
	munmap(m, 2 * PG);
	close(dfd);
	munmap(p, 2 * PG);
	munmap(f, 2 * PG);
	close(ffd);
	close(fd);
	hm_assert_ledger_idle();
}

Test(export, readonly_memory_cannot_be_exported_writable)
{
	int fd = hm_open();
	char *buf = hm_map_anon(PG);

	cr_assert_eq(mprotect(buf, PG, PROT_READ), 0);
	cr_assert_eq(hm_export_host(fd, buf, PG, HMEMREG_EXPORT_WRITE, 0, NULL), -EFAULT);
	int dfd = hm_export_host(fd, buf, PG, 0, 0, NULL);
	cr_assert_geq(dfd, 0, "read-only export of read-only memory: %s", strerror(-dfd));
	close(dfd);
	close(fd);
	hm_assert_ledger_idle();
}

Test(export, bad_input)
{
	int fd = hm_open();
	char *buf = hm_map_anon(4 * PG);
	struct hmemreg_export e = { .size = sizeof(e), .provider = HMEMREG_PROVIDER_HOST,
				    .addr = (uintptr_t)buf, .len = PG };

	cr_assert_eq(hm_export_host(fd, buf, 0, 0, 0, NULL), -EINVAL, "zero length");
	cr_assert_eq(hm_export_host(fd, buf + 1, PG, 0, 0, NULL), -EINVAL, "unaligned address");
	cr_assert_eq(hm_export_host(fd, buf, PG + 1, 0, 0, NULL), -EINVAL, "unaligned length");
	cr_assert_eq(hm_export_host(fd, (void *)-PG, 2 * PG, 0, 0, NULL), -EINVAL, "wraps");
	cr_assert_eq(hm_export_host(fd, (void *)(1ULL << 47), PG, 0, 0, NULL), -EFAULT, "kernel half");
	cr_assert_eq(hm_export_host(fd, buf, PG, 0x100, 0, NULL), -EINVAL, "unknown flag");
	cr_assert_eq(hm_export_host(fd, buf, 2048ULL << 20, 0, 0, NULL), -ENOSPC, "over max_export_mb");
	cr_assert_eq(munmap(buf + 2 * PG, PG), 0);
	cr_assert_eq(hm_export_host(fd, buf, 4 * PG, 0, 0, NULL), -EFAULT, "hole in the range");
	cr_assert_eq(hm_export_host(fd, (void *)PG, PG, 0, 0, NULL), -EFAULT, "never mapped");
	e.provider = 77;
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_EXPORT, &e), -EINVAL, "unknown provider");
	e.provider = HMEMREG_PROVIDER_HOST;
	e.handle = 5;
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_EXPORT, &e), -EINVAL, "handle with host");
	// Refused before its watch is armed: no watch was ever made for it.
	uint64_t watches = hm_stat(HMEMREG_NLA_STAT_WATCHES_TOTAL);
	e.flags = HMEMREG_EXPORT_WATCH;
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_EXPORT, &e), -EINVAL, "handle with host, watched");
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_WATCHES_TOTAL), watches);
	e.flags = 0;
	e.handle = 0;
	e.reserved = 1;
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_EXPORT, &e), -EINVAL, "reserved");
	e.reserved = 0;
	e.size = 12;
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_EXPORT, &e), -EINVAL, "short size");
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_EXPORT, (void *)8), -EFAULT, "bad pointer");
	// An export whose result cannot be written back leaves nothing behind.
	e.size = sizeof(e);
	char *ro = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memcpy(ro, &e, sizeof(e));
	mprotect(ro, PG, PROT_READ);
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_EXPORT, ro), -EFAULT, "result not writable");
	close(fd);
	hm_assert_ledger_idle();
}

Test(export, watch_flag_reports_unmap_of_exported_range)
{
	int fd = hm_open();
	const struct hmemreg_gen_page *p = hm_map_gen(fd);
	char *buf = hm_map_anon(2 * PG);
	struct hmemreg_export e;
	struct hmemreg_event ev;

	buf[0] = 'k';
	int dfd = hm_export_host(fd, buf, 2 * PG, HMEMREG_EXPORT_WATCH, 0x77, &e);
	cr_assert_geq(dfd, 0);
	cr_assert_neq(e.watch_slot, HMEMREG_WATCH_NO_SLOT);
	cr_assert_eq(hm_gen(p, e.watch_slot), e.watch_gen);
	munmap(buf, 2 * PG);
	cr_assert_eq(hm_gen(p, e.watch_slot), 0);
	cr_assert_eq(hm_read_events(fd, &ev, 1), 1);
	cr_assert_eq(ev.cookie, 0x77);
	cr_assert_eq(ev.flags, HMEMREG_EVF_EXPORT);
	cr_assert_eq(ev.reason, HMEMREG_EV_UNMAP);
	// The dma-buf still holds the pinned pages: importers are never left dangling.
	char *m = mmap(NULL, 2 * PG, PROT_READ, MAP_SHARED, dfd, 0);
	cr_assert_neq(m, MAP_FAILED);
	cr_assert_eq(m[0], 'k');
	munmap(m, 2 * PG);
	close(dfd);
	cr_assert_eq(hm_export_dev(fd, 1, 0, PG, HMEMREG_EXPORT_WATCH, NULL), -EINVAL,
		     "watch is host-only");
	// The fired watch is reaped by a work item, or at the fd's release; the
	// generation page's mapping holds the file, so drop it first for the
	// release (and the ledger check) to happen at close.
	munmap((void *)p, hm_info(fd).map_size);
	close(fd);
	hm_assert_ledger_idle();
}

Test(export, devmem_alloc_export_mmap_free)
{
	int fd = hm_open();
	int64_t h = hm_dev_alloc(fd, 8 * PG);
	struct hmemreg_export e;
	struct ledger_export le;

	cr_assert_gt(h, 0, "alloc: %s", strerror((int)-h));
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_DEVMEM_USED_BYTES), 8 * PG);
	int dfd = hm_export_dev(fd, h, 2 * PG, 4 * PG, HMEMREG_EXPORT_WRITE, &e);
	cr_assert_geq(dfd, 0, "%s", strerror(-dfd));
	char *m = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
	cr_assert_neq(m, MAP_FAILED, "%s", strerror(errno));
	cr_assert_eq(m[100], 0, "device memory starts zeroed");
	memset(m, 0xd1, 4 * PG);
	// Mapped by userspace: the allocation is in use and cannot be freed.
	cr_assert_eq(hm_dev_free(fd, h), -EBUSY);
	munmap(m, 4 * PG);
	// Exported but unused: the handle goes, the memory lives on for the dma-buf.
	cr_assert_eq(hm_dev_free(fd, h), 0);
	cr_assert_eq(hm_dev_free(fd, h), -ENOENT, "double free");
	cr_assert(find_export(getpid(), e.export_id, &le));
	cr_assert_eq(le.provider, HMEMREG_PROVIDER_DEVMEM);
	cr_assert_eq(le.handle, (uint64_t)h);
	cr_assert_eq(le.addr, 2 * PG);
	cr_assert(le.state & HMEMREG_EXP_STATE_HANDLE_FREED);
	m = mmap(NULL, 4 * PG, PROT_READ, MAP_SHARED, dfd, 0);
	cr_assert_neq(m, MAP_FAILED);
	cr_assert_eq((unsigned char)m[4 * PG - 1], 0xd1);
	munmap(m, 4 * PG);
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_DEVMEM_USED_BYTES), 8 * PG);
	close(dfd);
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_DEVMEM_USED_BYTES), 0);
	close(fd);
	hm_assert_ledger_idle();
}

Test(export, devmem_bad_input)
{
	int fd = hm_open();
	uint64_t pool = hm_stat(HMEMREG_NLA_STAT_DEVMEM_POOL_BYTES);
	struct hmemreg_devmem_alloc a = { .size = sizeof(a), .len = PG, .flags = 1 };

	cr_assert_gt(pool, 0, "load hmemreg with devmem_mb > 0");
	cr_assert_eq(hm_dev_alloc(fd, 0), -EINVAL);
	cr_assert_eq(hm_dev_alloc(fd, PG + 1), -EINVAL);
	cr_assert_eq(hm_dev_alloc(fd, pool + PG), -ENOSPC);
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_DEVMEM_ALLOC, &a), -EINVAL, "flags");
	int64_t h = hm_dev_alloc(fd, pool);
	cr_assert_gt(h, 0, "the whole pool");
	cr_assert_eq(hm_dev_alloc(fd, PG), -ENOSPC, "pool exhausted");
	cr_assert_eq(hm_dev_free(fd, h + 100), -ENOENT);
	cr_assert_eq(hm_export_dev(fd, h + 100, 0, PG, 0, NULL), -ENOENT);
	cr_assert_eq(hm_export_dev(fd, h, pool, PG, 0, NULL), -ERANGE);
	cr_assert_eq(hm_export_dev(fd, h, pool - PG, 2 * PG, 0, NULL), -ERANGE);
	cr_assert_eq(hm_export_dev(fd, h, 1, PG, 0, NULL), -EINVAL);
	// Handles are per fd.
	int fd2 = hm_open();
	cr_assert_eq(hm_export_dev(fd2, h, 0, PG, 0, NULL), -ENOENT);
	cr_assert_eq(hm_dev_free(fd2, h), -ENOENT);
	close(fd2);
	cr_assert_eq(hm_dev_free(fd, h), 0);
	// Closing the fd frees what it still holds.
	cr_assert_gt(hm_dev_alloc(fd, 4 * PG), 0);
	close(fd);
	hm_assert_ledger_idle();
}

Test(export, fd_passing_and_exit_ordering)
{
	int sv[2];
	int st;

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid_t pid = fork();
	if (pid == 0) {
		// The exporter: export, hand the dma-buf over, exit.
		int fd = open(HMEMREG_DEVICE_PATH, O_RDWR);
		char *b = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		memset(b, 'c', 2 * PG);
		int d = hm_export_host(fd, b, 2 * PG, 0, 0x51, NULL);
		if (d < 0)
			_exit(1);
		send_fd(sv[1], d);
		_exit(0);
	}
	close(sv[1]);	/* a child that fails to export ends the receive (EOF) */
	int dfd = recv_fd(sv[0]);
	cr_assert_geq(dfd, 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct ledger_export le[4];
	cr_assert_eq(ledger_exports(pid, le, 4), 1, "the export outlives its owner");
	cr_assert(le[0].state & HMEMREG_EXP_STATE_ORPHANED);
	cr_assert_eq(le[0].cookie, 0x51);
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_ORPHANS_LIVE), 1);
	char *m = mmap(NULL, 2 * PG, PROT_READ, MAP_SHARED, dfd, 0);
	cr_assert_neq(m, MAP_FAILED);
	cr_assert_eq(m[PG], 'c', "the dead owner's pages are still there");
	munmap(m, 2 * PG);
	close(dfd);
	cr_assert_eq(ledger_exports(pid, le, 4), 0);
	close(sv[0]);
	hm_assert_ledger_idle();
}

Test(export, hmemreg_fd_closed_before_dmabuf)
{
	int fd = hm_open();
	char *buf = hm_map_anon(PG);
	int64_t h = hm_dev_alloc(fd, PG);
	int hfd = hm_export_host(fd, buf, PG, 0, 0, NULL);
	int dfd = hm_export_dev(fd, h, 0, PG, HMEMREG_EXPORT_WRITE, NULL);

	cr_assert_geq(hfd, 0);
	cr_assert_geq(dfd, 0);
	close(fd);
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_EXPORTS_LIVE), 2);
	cr_assert_eq(hm_stat(HMEMREG_NLA_STAT_DEVMEM_HANDLES_LIVE), 0);
	char *m = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
	cr_assert_neq(m, MAP_FAILED);
	m[0] = 1;
	munmap(m, PG);
	close(hfd);
	close(dfd);
	hm_assert_ledger_idle();
}

static int module_refcnt(void)
{
	FILE *f = fopen("/sys/module/hmemreg/refcnt", "r");
	int n = -1;

	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%d", &n), 1);
	fclose(f);
	return n;
}

Test(export, module_refuses_unload_while_exported)
{
	int fd = hm_open();
	char *buf = hm_map_anon(PG);
	int dfd = hm_export_host(fd, buf, PG, 0, 0, NULL);

	cr_assert_geq(dfd, 0);
	int with_fd = module_refcnt();
	close(fd);
	int base = module_refcnt();
	cr_assert_eq(base, with_fd - 1, "an open /dev/hmemreg holds the module");
	// Only the dma-buf holds it now (plus modules that use hmemreg's symbols).
	int fd2 = hm_open();
	int dfd2 = hm_export_host(fd2, buf, PG, 0, 0, NULL);
	cr_assert_geq(dfd2, 0);
	close(fd2);
	cr_assert_eq(module_refcnt(), base + 1);
	cr_assert_neq(system("rmmod hmemreg 2>/dev/null"), 0, "rmmod succeeded with a live export");
	struct stat s;
	cr_assert_eq(stat(HMEMREG_DEVICE_PATH, &s), 0);
	close(dfd);
	close(dfd2);
	cr_assert_eq(module_refcnt(), base - 1, "each export held one module reference");
	hm_assert_ledger_idle();
}

Test(export, host_pins_are_charged_to_memlock)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		// Open as root, then become an unprivileged user (no CAP_IPC_LOCK).
		int fd = open(HMEMREG_DEVICE_PATH, O_RDWR);
		struct rlimit rl = { 4 * PG, 4 * PG };
		char *b = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		memset(b, 1, 8 * PG);
		if (fd < 0 || setrlimit(RLIMIT_MEMLOCK, &rl) || setgid(65534) || setuid(65534))
			_exit(10);
		if (hm_export_host(fd, b, 8 * PG, 0, 0, NULL) != -ENOMEM)
			_exit(11);
		int d = hm_export_host(fd, b, 4 * PG, 0, 0, NULL);
		if (d < 0)
			_exit(12);
		if (hm_export_host(fd, b + 4 * PG, PG, 0, 0, NULL) != -ENOMEM)
			_exit(13);
		close(d);	/* releases the charge */
		d = hm_export_host(fd, b + 4 * PG, 4 * PG, 0, 0, NULL);
		_exit(d < 0 ? 14 : 0);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child step %d failed", WEXITSTATUS(st));
	hm_assert_ledger_idle();
}
