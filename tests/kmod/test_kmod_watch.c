// SPDX-License-Identifier: MIT
// Watches, the generation page and the event ring of /dev/hmemreg (in the VM).
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <sys/wait.h>

#include "kmod_test.h"

static struct hmemreg_event expect_one_event(int fd, uint64_t cookie, uint32_t reason)
{
	struct hmemreg_event ev[4];
	int n = hm_read_events(fd, ev, 4);

	cr_assert_eq(n, 1, "expected one event, got %d", n);
	cr_assert_eq(ev[0].cookie, cookie);
	cr_assert_eq(ev[0].reason, reason, "reason %u, want %u", ev[0].reason, reason);
	return ev[0];
}

static void expect_no_event(int fd)
{
	struct hmemreg_event ev;

	cr_assert_eq(hm_read_events(fd, &ev, 1), -EAGAIN);
}

Test(watch, info_and_page_layout)
{
	int fd = hm_open();
	struct hmemreg_watch_info i = hm_info(fd);
	const struct hmemreg_gen_page *p = hm_map_gen(fd);

	cr_assert_gt(i.max_watches, 0);
	cr_assert_gt(i.ring_events, 0);
	cr_assert_eq(i.event_size, sizeof(struct hmemreg_event));
	cr_assert_eq(i.gen_offset, sizeof(struct hmemreg_gen_page));
	cr_assert_geq(i.map_size, i.gen_offset + 8ULL * i.max_watches);
	cr_assert_eq(i.map_size % PG, 0);
	cr_assert_eq(p->magic, HMEMREG_GEN_MAGIC);
	cr_assert_eq(p->version, HMEMREG_GEN_VERSION);
	cr_assert_eq(p->max_watches, i.max_watches);
	cr_assert_eq(p->gen_offset, i.gen_offset);
	cr_assert_eq(p->watches_live, 0);
	close(fd);
}

Test(watch, gen_page_is_read_only_and_bounded)
{
	int fd = hm_open();
	struct hmemreg_watch_info i = hm_info(fd);

	cr_assert_eq(mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
	cr_assert_eq(errno, EPERM);
	cr_assert_eq(mmap(NULL, PG, PROT_READ, MAP_SHARED, fd, PG), MAP_FAILED);
	cr_assert_eq(errno, EINVAL);
	cr_assert_eq(mmap(NULL, i.map_size + PG, PROT_READ, MAP_SHARED, fd, 0), MAP_FAILED);
	cr_assert_eq(errno, EINVAL);
	void *p = mmap(NULL, PG, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(p, MAP_FAILED);
	cr_assert_eq(mprotect(p, PG, PROT_READ | PROT_WRITE), -1, "gen page became writable");
	close(fd);
}

Test(watch, arm_publishes_generation)
{
	int fd = hm_open();
	const struct hmemreg_gen_page *p = hm_map_gen(fd);
	char *buf = hm_map_anon(4 * PG);
	uint32_t s1 = 0, s2 = 0;
	uint64_t g1 = 0, g2 = 0;

	cr_assert_eq(hm_arm(fd, buf, 4 * PG, 11, 0, &s1, &g1), 0);
	cr_assert_eq(hm_arm(fd, buf + 5, 10, 12, 0, &s2, &g2), 0, "unaligned ranges are fine");
	cr_assert_neq(s1, s2);
	cr_assert_neq(g1, 0);
	cr_assert_neq(g1, g2);
	cr_assert_eq(hm_gen(p, s1), g1);
	cr_assert_eq(hm_gen(p, s2), g2);
	cr_assert_eq(p->watches_live, 2);
	expect_no_event(fd);
	close(fd);
	munmap(buf, 4 * PG);
}

Test(watch, munmap_fires_before_returning)
{
	int fd = hm_open();
	const struct hmemreg_gen_page *p = hm_map_gen(fd);
	char *buf = hm_map_anon(4 * PG);
	uint32_t slot = 0;
	uint64_t gen = 0;

	cr_assert_eq(hm_arm(fd, buf, 4 * PG, 0xc0ffee, 0, &slot, &gen), 0);
	cr_assert_eq(munmap(buf + PG, PG), 0);
	cr_assert_eq(hm_gen(p, slot), 0, "generation still valid after munmap returned");
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	cr_assert_eq(poll(&pfd, 1, 0), 1);
	cr_assert(pfd.revents & POLLIN);
	struct hmemreg_event ev = expect_one_event(fd, 0xc0ffee, HMEMREG_EV_UNMAP);
	cr_assert_eq(ev.addr, (uintptr_t)buf);
	cr_assert_eq(ev.len, 4 * PG);
	cr_assert_eq(ev.slot, slot);
	cr_assert_eq(ev.gen, gen);
	cr_assert_eq(ev.flags, 0);
	cr_assert_eq(hm_disarm(fd, slot, gen), -ENOENT, "a fired watch is gone");
	cr_assert_eq(p->events_total, 1);
	cr_assert_eq(p->events_pending, 0);
	munmap(buf, 4 * PG);
	expect_no_event(fd);	/* fires once */
	close(fd);
}

Test(watch, untouched_neighbours_do_not_fire)
{
	int fd = hm_open();
	const struct hmemreg_gen_page *p = hm_map_gen(fd);
	char *buf = hm_map_anon(8 * PG);
	uint32_t slot = 0;
	uint64_t gen = 0;

	cr_assert_eq(hm_arm(fd, buf + 2 * PG, 2 * PG, 1, 0, &slot, &gen), 0);
	cr_assert_eq(munmap(buf, 2 * PG), 0);
	cr_assert_eq(munmap(buf + 4 * PG, 4 * PG), 0);
	cr_assert_eq(madvise(buf + 2 * PG, 0, MADV_DONTNEED), 0);
	cr_assert_eq(hm_gen(p, slot), gen);
	expect_no_event(fd);
	close(fd);
	munmap(buf + 2 * PG, 2 * PG);
}

Test(watch, mremap_fires_unmap)
{
	int fd = hm_open();
	const struct hmemreg_gen_page *p = hm_map_gen(fd);
	char *buf = hm_map_anon(4 * PG);
	char *dst = mmap(NULL, 4 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint32_t slot = 0;
	uint64_t gen = 0;

	cr_assert_eq(hm_arm(fd, buf, 4 * PG, 2, 0, &slot, &gen), 0);
	cr_assert_neq(mremap(buf, 4 * PG, 4 * PG, MREMAP_MAYMOVE | MREMAP_FIXED, dst), MAP_FAILED);
	cr_assert_eq(hm_gen(p, slot), 0);
	expect_one_event(fd, 2, HMEMREG_EV_UNMAP);
	cr_assert_eq(dst[0], 0x5a, "data moved along");
	munmap(dst, 4 * PG);
	close(fd);
}

Test(watch, mremap_shrink_fires)
{
	int fd = hm_open();
	char *buf = hm_map_anon(4 * PG);

	cr_assert_eq(hm_arm(fd, buf + 3 * PG, PG, 3, 0, NULL, NULL), 0);
	cr_assert_eq(mremap(buf, 4 * PG, 2 * PG, 0), buf);
	expect_one_event(fd, 3, HMEMREG_EV_UNMAP);
	munmap(buf, 2 * PG);
	close(fd);
}

Test(watch, madvise_dontneed_fires_clear)
{
	int fd = hm_open();
	const struct hmemreg_gen_page *p = hm_map_gen(fd);
	char *buf = hm_map_anon(4 * PG);
	uint32_t slot = 0;
	uint64_t gen = 0;

	cr_assert_eq(hm_arm(fd, buf, 4 * PG, 4, 0, &slot, &gen), 0);
	cr_assert_eq(madvise(buf + PG, PG, MADV_DONTNEED), 0);
	cr_assert_eq(hm_gen(p, slot), 0);
	expect_one_event(fd, 4, HMEMREG_EV_CLEAR);
	munmap(buf, 4 * PG);
	close(fd);
}

Test(watch, mprotect_only_with_prot_flag)
{
	int fd = hm_open();
	const struct hmemreg_gen_page *p = hm_map_gen(fd);
	char *buf = hm_map_anon(4 * PG);
	uint32_t s1 = 0, s2 = 0;
	uint64_t g1 = 0, g2 = 0;

	cr_assert_eq(hm_arm(fd, buf, 2 * PG, 5, 0, &s1, &g1), 0);
	cr_assert_eq(hm_arm(fd, buf + 2 * PG, 2 * PG, 6, HMEMREG_WATCH_PROT, &s2, &g2), 0);
	cr_assert_eq(mprotect(buf, 4 * PG, PROT_READ), 0);
	cr_assert_eq(hm_gen(p, s1), g1, "protection change fired a default watch");
	cr_assert_eq(hm_gen(p, s2), 0);
	expect_one_event(fd, 6, HMEMREG_EV_PROTECTION);
	munmap(buf, 4 * PG);
	close(fd);
}

Test(watch, fork_child_exit_leaves_parent_watch_alone)
{
	int fd = hm_open();
	const struct hmemreg_gen_page *p = hm_map_gen(fd);
	char *buf = hm_map_anon(4 * PG);
	uint32_t slot = 0;
	uint64_t gen = 0;
	int st;

	cr_assert_eq(hm_arm(fd, buf, 4 * PG, 7, 0, &slot, &gen), 0);
	pid_t pid = fork();
	if (pid == 0) {
		// The child inherits the fd but not the parent's address space.
		buf[0] = 1;
		int r = hm_arm(fd, buf, PG, 8, 0, NULL, NULL);
		_exit(r == -EXDEV ? 0 : 1);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child's arm was not refused with EXDEV");
	cr_assert_eq(hm_gen(p, slot), gen, "fork or the child's exit invalidated the parent");
	expect_no_event(fd);
	cr_assert_eq(buf[0], 0x5a);
	munmap(buf, 4 * PG);
	expect_one_event(fd, 7, HMEMREG_EV_UNMAP);
	close(fd);
}

Test(watch, owner_exit_fires_release_for_fd_holder)
{
	int fd = hm_open();
	const struct hmemreg_gen_page *p = hm_map_gen(fd);
	struct hmemreg_event ev[4];
	int st, n;

	pid_t pid = fork();
	if (pid == 0) {
		// The child binds the fd to its own address space, then exits.
		char *b = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		b[0] = 1;
		_exit(hm_arm(fd, b, PG, 21, 0, NULL, NULL) || hm_arm(fd, b + PG, PG, 22, 0, NULL, NULL));
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	n = hm_read_events(fd, ev, 4);
	cr_assert_eq(n, 2, "got %d events", n);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(ev[i].reason, HMEMREG_EV_RELEASE);
	cr_assert_eq(ev[0].cookie + ev[1].cookie, 43);
	cr_assert_eq(hm_gen(p, ev[0].slot), 0);
	char *buf = hm_map_anon(PG);
	cr_assert_eq(hm_arm(fd, buf, PG, 1, 0, NULL, NULL), -EXDEV, "fd stays bound to the dead mm");
	close(fd);
	munmap(buf, PG);
}

Test(watch, disarm_is_silent_and_exact)
{
	int fd = hm_open();
	const struct hmemreg_gen_page *p = hm_map_gen(fd);
	struct hmemreg_watch_info i = hm_info(fd);
	char *buf = hm_map_anon(PG);
	uint32_t slot = 0, slot2 = 0;
	uint64_t gen = 0, gen2 = 0;

	cr_assert_eq(hm_arm(fd, buf, PG, 9, 0, &slot, &gen), 0);
	cr_assert_eq(hm_disarm(fd, slot, gen + 1), -ENOENT, "wrong generation");
	cr_assert_eq(hm_disarm(fd, i.max_watches, gen), -ENOENT, "slot out of range");
	cr_assert_eq(hm_disarm(fd, slot, gen), 0);
	cr_assert_eq(hm_gen(p, slot), 0);
	cr_assert_eq(hm_disarm(fd, slot, gen), -ENOENT, "double disarm");
	// The slot is reused with a fresh generation: the old pair never matches.
	cr_assert_eq(hm_arm(fd, buf, PG, 10, 0, &slot2, &gen2), 0);
	cr_assert_eq(slot2, slot);
	cr_assert_neq(gen2, gen);
	cr_assert_eq(hm_disarm(fd, slot, gen), -ENOENT);
	munmap(buf, PG);
	expect_one_event(fd, 10, HMEMREG_EV_UNMAP);
	close(fd);
}

Test(watch, bad_input)
{
	int fd = hm_open();
	char *buf = hm_map_anon(2 * PG);
	struct hmemreg_watch_arm a = { .size = sizeof(a), .addr = (uintptr_t)buf, .len = PG };
	struct {
		struct hmemreg_watch_arm a;
		uint64_t tail;
	} big = { .a = a, .tail = 0 };

	cr_assert_eq(hm_arm(fd, buf, 0, 1, 0, NULL, NULL), -EINVAL, "zero length");
	cr_assert_eq(hm_arm(fd, (void *)-4096L, 8192, 1, 0, NULL, NULL), -EINVAL, "wraps");
	cr_assert_eq(hm_arm(fd, (void *)(1ULL << 48), PG, 1, 0, NULL, NULL), -EINVAL, "beyond TASK_SIZE");
	cr_assert_eq(hm_arm(fd, buf, PG, 1, 0x80, NULL, NULL), -EINVAL, "unknown flag");
	cr_assert_eq(munmap(buf + PG, PG), 0);
	cr_assert_eq(hm_arm(fd, buf, 2 * PG, 1, 0, NULL, NULL), -EFAULT, "half unmapped");
	cr_assert_eq(hm_arm(fd, (void *)4096, PG, 1, 0, NULL, NULL), -EFAULT, "never mapped");
	a.reserved = 1;
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_WATCH_ARM, &a), -EINVAL, "reserved");
	a.reserved = 0;
	a.size = 8;
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_WATCH_ARM, &a), -EINVAL, "short size");
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_WATCH_ARM, (void *)16), -EFAULT, "bad pointer");
	// A newer, longer struct is fine when its tail is zero, E2BIG otherwise.
	big.a.size = sizeof(big);
	cr_assert_eq(ioctl(fd, _IOWR(HMEMREG_IOC_MAGIC, 0x04, typeof(big)), &big), -1, "size is in the cmd");
	cr_assert_eq(errno, ENOTTY);
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_WATCH_ARM, &big), 0, "zero tail");
	big.a.size = sizeof(big);
	big.tail = 1;
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_WATCH_ARM, &big), -E2BIG, "non-zero unknown tail");
	struct hmemreg_events_ack ack = { .size = sizeof(ack), .flags = 1 };
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_EVENTS_ACK, &ack), -EINVAL);
	char small[8];
	cr_assert_eq(read(fd, small, sizeof(small)), -1);
	cr_assert_eq(errno, EINVAL);
	struct hmemreg_event ev;
	cr_assert_eq(pread(fd, &ev, sizeof(ev), 0), -1);
	cr_assert_eq(errno, ESPIPE);
	cr_assert_eq(lseek(fd, 0, SEEK_SET), -1, "an event stream has no position");
	cr_assert_eq(errno, ESPIPE);
	close(fd);
	munmap(buf, PG);
}

Test(watch, per_fd_limit)
{
	int fd = hm_open();
	struct hmemreg_watch_info i = hm_info(fd);
	char *buf = hm_map_anon(PG);
	uint32_t slot = 0;
	uint64_t gen = 0;

	cr_assert_leq(i.max_watches, 65536, "load the module with a small max_watches for this test");
	for (uint32_t n = 0; n < i.max_watches; n++)
		cr_assert_eq(hm_arm(fd, buf, PG, n, 0, &slot, &gen), 0, "arm %u", n);
	cr_assert_eq(hm_arm(fd, buf, PG, 1, 0, NULL, NULL), -ENOSPC);
	cr_assert_eq(hm_disarm(fd, slot, gen), 0);
	cr_assert_eq(hm_arm(fd, buf, PG, 1, 0, NULL, NULL), 0);
	cr_assert_eq(hm_arm(fd, buf, PG, 1, 0, NULL, NULL), -ENOSPC);
	struct ledger_stats st;
	cr_assert_eq(ledger_stats(&st), 0);
	cr_assert_geq(st.v[HMEMREG_NLA_STAT_WATCHES_LIVE], i.max_watches);
	// One munmap fires them all; fired slots are reaped and reusable.
	munmap(buf, PG);
	buf = hm_map_anon(PG);
	cr_assert_eq(hm_arm(fd, buf, PG, 1, 0, NULL, NULL), 0);
	close(fd);
	munmap(buf, PG);
}

Test(watch, overflow_is_sticky_until_ack)
{
	int fd = hm_open();
	const struct hmemreg_gen_page *p = hm_map_gen(fd);
	struct hmemreg_watch_info i = hm_info(fd);
	uint32_t n = i.ring_events + 5;
	struct hmemreg_event ev;

	cr_assert_leq(n, i.max_watches, "needs max_watches > ring_events");
	char *buf = hm_map_anon(n * PG);
	for (uint32_t k = 0; k < n; k++)
		cr_assert_eq(hm_arm(fd, buf + k * PG, PG, k, 0, NULL, NULL), 0);
	cr_assert_eq(munmap(buf, n * PG), 0);
	cr_assert_eq(p->overflowed, 5);
	cr_assert_eq(p->events_pending, i.ring_events);
	cr_assert_eq(hm_read_events(fd, &ev, 1), -EOVERFLOW);
	cr_assert_eq(hm_read_events(fd, &ev, 1), -EOVERFLOW, "overflow is sticky");
	struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLPRI };
	cr_assert_eq(poll(&pfd, 1, 0), 1);
	cr_assert(pfd.revents & POLLPRI);
	// Every generation word is exact even though events were lost.
	const uint64_t *g = (const uint64_t *)((const char *)p + p->gen_offset);
	for (uint32_t k = 0; k < n; k++)
		cr_assert_eq(g[k], 0, "slot %u still valid", k);
	struct hmemreg_events_ack ack = { .size = sizeof(ack) };
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_EVENTS_ACK, &ack), 0);
	cr_assert_eq(ack.dropped, 5);
	cr_assert_eq(ack.discarded, i.ring_events);
	cr_assert_eq(p->overflowed, 0);
	cr_assert_eq(hm_read_events(fd, &ev, 1), -EAGAIN);
	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_EVENTS_ACK, &ack), 0);
	cr_assert_eq(ack.dropped, 0, "ack without overflow is a no-op");
	// Events flow again.
	buf = hm_map_anon(PG);
	cr_assert_eq(hm_arm(fd, buf, PG, 99, 0, NULL, NULL), 0);
	munmap(buf, PG);
	expect_one_event(fd, 99, HMEMREG_EV_UNMAP);
	close(fd);
}

Test(watch, batch_read_returns_whole_records)
{
	int fd = hm_open();
	char *buf = hm_map_anon(6 * PG);
	struct hmemreg_event ev[8];
	char raw[sizeof(struct hmemreg_event) * 2 + 7];

	for (int k = 0; k < 6; k++)
		cr_assert_eq(hm_arm(fd, buf + k * PG, PG, 100 + k, 0, NULL, NULL), 0);
	munmap(buf, 6 * PG);
	cr_assert_eq(read(fd, raw, sizeof(raw)), 2 * sizeof(struct hmemreg_event));
	cr_assert_eq(hm_read_events(fd, ev, 8), 4);
	uint64_t sum = 0;
	for (int k = 0; k < 4; k++)
		sum += ev[k].cookie;
	memcpy(&ev[4], raw, sizeof(struct hmemreg_event) * 2);
	sum += ev[4].cookie + ev[5].cookie;
	cr_assert_eq(sum, 6 * 100 + 15);
	close(fd);
}

struct unmapper {
	void *addr;
};

static void *unmap_later(void *arg)
{
	struct unmapper *u = arg;

	usleep(100 * 1000);
	munmap(u->addr, PG);
	return NULL;
}

Test(watch, blocking_read_wakes_on_event)
{
	int fd = hm_open();
	struct unmapper u = { .addr = hm_map_anon(PG) };
	struct hmemreg_event ev;
	pthread_t t;

	cr_assert_eq(hm_arm(fd, u.addr, PG, 77, 0, NULL, NULL), 0);
	pthread_create(&t, NULL, unmap_later, &u);
	cr_assert_eq(read(fd, &ev, sizeof(ev)), sizeof(ev));
	cr_assert_eq(ev.cookie, 77);
	pthread_join(t, NULL);
	close(fd);
}

Test(watch, close_releases_everything)
{
	struct ledger_stats before, after;
	char *buf = hm_map_anon(PG);
	int fd = hm_open();

	for (int k = 0; k < 10; k++)
		cr_assert_eq(hm_arm(fd, buf, PG, k, 0, NULL, NULL), 0);
	cr_assert_eq(ledger_stats(&before), 0);
	cr_assert_geq(before.v[HMEMREG_NLA_STAT_WATCHES_LIVE], 10);
	close(fd);
	cr_assert_eq(ledger_stats(&after), 0);
	cr_assert_eq(after.v[HMEMREG_NLA_STAT_WATCHES_LIVE],
		     before.v[HMEMREG_NLA_STAT_WATCHES_LIVE] - 10);
	cr_assert_eq(after.v[HMEMREG_NLA_STAT_CONTEXTS_LIVE],
		     before.v[HMEMREG_NLA_STAT_CONTEXTS_LIVE] - 1);
	munmap(buf, PG);
}
