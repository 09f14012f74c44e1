// SPDX-License-Identifier: MIT
// Userspace side of the test importer (hmemreg_importer.ko).
#pragma once

#include "importer/hmemreg_importer.h"
#include "kmod_test.h"

static inline int imp_open(void)
{
	int fd = open(HMIMP_DEVICE_PATH, O_RDWR | O_CLOEXEC);

	cr_assert_geq(fd, 0, "open %s: %s (is hmemreg_importer.ko loaded?)", HMIMP_DEVICE_PATH,
		      strerror(errno));
	return fd;
}

static inline int imp_attach(int ifd, int dfd, uint32_t flags)
{
	struct hmimp_attach a = { .fd = dfd, .flags = flags };
	int ret = hm_ioctl(ifd, HMIMP_IOC_ATTACH, &a);

	return ret ? ret : (int)a.id;
}

// Attach as a DMA device of the attachment's own with these segment limits
// (boundary 0: none); *out says what the device reports. The id, or -errno.
static inline int imp_attach_dev(int ifd, int dfd, uint32_t flags, uint32_t max_seg,
				 uint64_t boundary, struct hmimp_attach *out)
{
	struct hmimp_attach a = { .fd = dfd, .flags = flags, .max_seg = max_seg,
				  .seg_boundary = boundary };
	int ret = hm_ioctl(ifd, HMIMP_IOC_ATTACH, &a);

	if (out)
		*out = a;
	return ret ? ret : (int)a.id;
}

// The HMIMP_SEGS_* segments of a mapped attachment into segs[room]: their
// count (may exceed room), or -errno.
static inline long imp_segs(int ifd, int id, uint32_t which, struct hmimp_seg *segs,
			    uint64_t room)
{
	struct hmimp_segs a = { .id = id, .which = which, .count = room,
				.segs = (uintptr_t)segs };
	int ret = hm_ioctl(ifd, HMIMP_IOC_SEGS, &a);

	return ret ? ret : (long)a.count;
}

static inline int imp_op(int ifd, unsigned long cmd, int id, uint32_t dir, uint32_t flags,
		  struct hmimp_op *out)
{
	struct hmimp_op op = { .id = id, .dir = dir, .flags = flags };
	int ret = hm_ioctl(ifd, cmd, &op);

	if (out)
		*out = op;
	return ret;
}

static inline int imp_access(int ifd, int id, int write, uint64_t off, void *buf, uint64_t len)
{
	struct hmimp_access a = { .id = id, .write = write, .offset = off, .len = len,
				  .buf = (uintptr_t)buf };

	return hm_ioctl(ifd, HMIMP_IOC_ACCESS, &a);
}


static inline struct hmimp_status imp_status(int ifd, int id)
{
	struct hmimp_status st = { .id = id };

	cr_assert_eq(hm_ioctl(ifd, HMIMP_IOC_STATUS, &st), 0, "status of attachment %d", id);
	return st;
}

// The kernel has CONFIG_DMABUF_MOVE_NOTIFY (the debug kernel): the core does
// not pin a dynamic importer's maps, and exporters may send move_notify.
static inline bool imp_kernel_move_notify(int ifd, int id)
{
	return imp_status(ifd, id).flags & HMIMP_ST_MOVE_NOTIFY;
}
