/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * hmemreg: memory registration helper for RDMA from accelerator memory.
 *
 * This is the one ABI header shared by hmemreg.ko and libhmemreg.
 *
 * Rules for this file:
 *  - fixed-width fields only (no pointers, no size_t, no enums in structs);
 *  - every argument struct starts with a __u32 size that the caller sets to
 *    sizeof() of the struct it was built with; the kernel accepts smaller
 *    (older) structs when the missing tail is optional and zero-fills it;
 *  - ioctl numbers are assigned once and never change; extend with a _V2.
 */
#ifndef _UAPI_LINUX_HMEMREG_H
#define _UAPI_LINUX_HMEMREG_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define HMEMREG_DEVICE_NAME	"hmemreg"
#define HMEMREG_DEVICE_PATH	"/dev/hmemreg"

/* ABI version: major changes break userspace, minor ones only add. */
#define HMEMREG_ABI_MAJOR	1
#define HMEMREG_ABI_MINOR	0

/* ioctl magic; not listed in Documentation/userspace-api/ioctl/ioctl-number.rst. */
#define HMEMREG_IOC_MAGIC	0xB5

/**
 * struct hmemreg_version - HMEMREG_IOC_VERSION argument
 * @size:      IN  sizeof(struct hmemreg_version) as built by the caller
 * @abi_major: OUT HMEMREG_ABI_MAJOR of the loaded module
 * @abi_minor: OUT HMEMREG_ABI_MINOR of the loaded module
 * @caps:      OUT HMEMREG_CAP_* bits the loaded module supports
 *
 * Errors: EFAULT bad pointer; EINVAL @size smaller than the v1 struct.
 */
struct hmemreg_version {
	__u32 size;
	__u32 abi_major;
	__u32 abi_minor;
	__u32 reserved;
	__u64 caps;
};

#define HMEMREG_IOC_VERSION	_IOWR(HMEMREG_IOC_MAGIC, 0x00, struct hmemreg_version)

#endif /* _UAPI_LINUX_HMEMREG_H */
