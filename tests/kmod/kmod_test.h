// SPDX-License-Identifier: MIT
// Helpers shared by the hmemreg.ko ABI suites (they run inside the VM).
#pragma once

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/hmemreg.h>

#include "ledger.h"

#define PG 4096UL

static inline int hm_open(void)
{
	int fd = open(HMEMREG_DEVICE_PATH, O_RDWR | O_CLOEXEC);

	cr_assert_geq(fd, 0, "open %s: %s", HMEMREG_DEVICE_PATH, strerror(errno));
	return fd;
}

// ioctl returning 0 or -errno.
static inline int hm_ioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

static inline int hm_arm(int fd, const void *addr, uint64_t len, uint64_t cookie,
			 uint32_t flags, uint32_t *slot, uint64_t *gen)
{
	struct hmemreg_watch_arm a = {
		.size = sizeof(a), .flags = flags, .addr = (uintptr_t)addr,
		.len = len, .cookie = cookie,
	};
	int ret = hm_ioctl(fd, HMEMREG_IOC_WATCH_ARM, &a);

	if (!ret) {
		if (slot)
			*slot = a.slot;
		if (gen)
			*gen = a.gen;
	}
	return ret;
}

static inline int hm_disarm(int fd, uint32_t slot, uint64_t gen)
{
	struct hmemreg_watch_disarm d = { .size = sizeof(d), .slot = slot, .gen = gen };

	return hm_ioctl(fd, HMEMREG_IOC_WATCH_DISARM, &d);
}

static inline struct hmemreg_watch_info hm_info(int fd)
{
	struct hmemreg_watch_info i = { .size = sizeof(i) };

	cr_assert_eq(hm_ioctl(fd, HMEMREG_IOC_WATCH_INFO, &i), 0);
	return i;
}

// The fd's read-only generation page.
static inline const struct hmemreg_gen_page *hm_map_gen(int fd)
{
	struct hmemreg_watch_info i = hm_info(fd);
	void *p = mmap(NULL, i.map_size, PROT_READ, MAP_SHARED, fd, 0);

	cr_assert_neq(p, MAP_FAILED, "mmap gen page: %s", strerror(errno));
	return p;
}

static inline uint64_t hm_gen(const struct hmemreg_gen_page *p, uint32_t slot)
{
	const volatile uint64_t *g = (const volatile uint64_t *)((const char *)p + p->gen_offset);

	return g[slot];
}

// Non-blocking read of up to max events: count, or -errno.
static inline int hm_read_events(int fd, struct hmemreg_event *ev, int max)
{
	int fl = fcntl(fd, F_GETFL);
	ssize_t n;

	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	n = read(fd, ev, sizeof(*ev) * max);
	fcntl(fd, F_SETFL, fl);
	return n < 0 ? -errno : (int)(n / sizeof(*ev));
}

static inline void *hm_map_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	cr_assert_neq(p, MAP_FAILED);
	memset(p, 0x5a, len);
	return p;
}

// Nothing this process exported, pinned or armed is left in the ledger.
static inline void hm_assert_no_exports_of_self(void)
{
	int n = ledger_count_exports(getpid());

	cr_assert_eq(n, 0, "%d exports of pid %d still in the ledger", n, getpid());
}

// Export [addr, addr + len) of this process; the DMA-BUF fd or -errno.
static inline int hm_export_host(int fd, const void *addr, uint64_t len, uint32_t flags,
				 uint64_t cookie, struct hmemreg_export *out)
{
	struct hmemreg_export e = {
		.size = sizeof(e), .provider = HMEMREG_PROVIDER_HOST, .flags = flags,
		.addr = (uintptr_t)addr, .len = len, .cookie = cookie,
	};
	int ret = hm_ioctl(fd, HMEMREG_IOC_EXPORT, &e);

	if (out)
		*out = e;
	return ret ? ret : e.fd;
}

static inline int hm_export_dev(int fd, uint64_t handle, uint64_t off, uint64_t len,
				uint32_t flags, struct hmemreg_export *out)
{
	struct hmemreg_export e = {
		.size = sizeof(e), .provider = HMEMREG_PROVIDER_DEVMEM, .flags = flags,
		.addr = off, .len = len, .handle = handle, .cookie = handle,
	};
	int ret = hm_ioctl(fd, HMEMREG_IOC_EXPORT, &e);

	if (out)
		*out = e;
	return ret ? ret : e.fd;
}

// Wrap [off, off + len) of the DMA-BUF inner: the wrapper's fd or -errno.
static inline int hm_wrap(int fd, int64_t inner, uint64_t off, uint64_t len, uint32_t flags,
		   struct hmemreg_export *out)
{
	struct hmemreg_export e = {
		.size = sizeof(e), .provider = HMEMREG_PROVIDER_DMABUF, .flags = flags,
		.addr = off, .len = len, .handle = (uint64_t)inner, .cookie = 0xd0b,
	};
	int ret = hm_ioctl(fd, HMEMREG_IOC_EXPORT, &e);

	if (out)
		*out = e;
	return ret ? ret : e.fd;
}

// A devmem handle, or -errno.
static inline int64_t hm_dev_alloc(int fd, uint64_t len)
{
	struct hmemreg_devmem_alloc a = { .size = sizeof(a), .len = len };
	int ret = hm_ioctl(fd, HMEMREG_IOC_DEVMEM_ALLOC, &a);

	return ret ? ret : (int64_t)a.handle;
}

static inline int hm_dev_free(int fd, uint64_t handle)
{
	struct hmemreg_devmem_free f = { .size = sizeof(f), .handle = handle };

	return hm_ioctl(fd, HMEMREG_IOC_DEVMEM_FREE, &f);
}

static inline uint64_t hm_stat(int attr)
{
	struct ledger_stats st;

	cr_assert_eq(ledger_stats(&st), 0, "ledger over netlink");
	return st.v[attr];
}

// Every "live" counter of the ledger, for before/after comparisons.
static const int hm_live_stats[] = {
	HMEMREG_NLA_STAT_EXPORTS_LIVE, HMEMREG_NLA_STAT_EXPORTED_BYTES,
	HMEMREG_NLA_STAT_ORPHANS_LIVE, HMEMREG_NLA_STAT_ATTACH_LIVE,
	HMEMREG_NLA_STAT_PINS_LIVE, HMEMREG_NLA_STAT_MAPS_LIVE,
	HMEMREG_NLA_STAT_HOST_PAGES_PINNED, HMEMREG_NLA_STAT_DEVMEM_USED_BYTES,
	HMEMREG_NLA_STAT_DEVMEM_HANDLES_LIVE, HMEMREG_NLA_STAT_WATCHES_LIVE,
	HMEMREG_NLA_STAT_USER_MMAPS_LIVE,
};

// The suites run one test at a time (tests/vm.d/10-kmod.sh): when a test
// has closed everything, every live counter must be zero.
static inline void hm_assert_ledger_idle(void)
{
	struct ledger_stats st;

	cr_assert_eq(ledger_stats(&st), 0);
	for (unsigned i = 0; i < sizeof(hm_live_stats) / sizeof(hm_live_stats[0]); i++)
		cr_assert_eq(st.v[hm_live_stats[i]], 0, "ledger attribute %d is %llu, want 0",
			     hm_live_stats[i], (unsigned long long)st.v[hm_live_stats[i]]);
}
