// SPDX-License-Identifier: MIT
// ABI suite for /dev/hmemreg. Runs inside the VM with hmemreg.ko loaded.
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/hmemreg.h>

#include "hmemreg/hmemreg.h"

static int open_dev(void)
{
	int fd = open(HMEMREG_DEVICE_PATH, O_RDWR | O_CLOEXEC);

	cr_assert_geq(fd, 0, "open %s: %s", HMEMREG_DEVICE_PATH, strerror(errno));
	return fd;
}

Test(version, library_handshake)
{
	struct hmemreg_kmod_info info;

	cr_assert_eq(hmemreg_kmod_query(&info), 0);
	cr_assert_eq(info.abi_major, HMEMREG_ABI_MAJOR);
	cr_assert_geq(info.abi_minor, 0);
}

Test(version, raw_ioctl_fills_struct)
{
	int fd = open_dev();
	struct hmemreg_version v = { .size = sizeof(v), .abi_major = 77 };

	cr_assert_eq(ioctl(fd, HMEMREG_IOC_VERSION, &v), 0, "%s", strerror(errno));
	cr_assert_eq(v.size, sizeof(v));
	cr_assert_eq(v.abi_major, HMEMREG_ABI_MAJOR);
	cr_assert_eq(v.abi_minor, HMEMREG_ABI_MINOR);
	uint64_t want = HMEMREG_CAP_EXPORT_HOST | HMEMREG_CAP_EXPORT_DEVMEM | HMEMREG_CAP_WATCH |
			HMEMREG_CAP_NETLINK | HMEMREG_CAP_FAULT_INJECT | HMEMREG_CAP_EXPORT_DMABUF;
	cr_assert_eq(v.caps, want, "caps 0x%llx", (unsigned long long)v.caps);
	close(fd);
}

Test(version, reserved_must_be_zero)
{
	int fd = open_dev();
	struct hmemreg_version v = { .size = sizeof(v), .reserved = 1 };

	cr_assert_eq(ioctl(fd, HMEMREG_IOC_VERSION, &v), -1);
	cr_assert_eq(errno, EINVAL);
	close(fd);
}

Test(version, short_size_is_einval)
{
	int fd = open_dev();
	struct hmemreg_version v = { .size = 4 };

	cr_assert_eq(ioctl(fd, HMEMREG_IOC_VERSION, &v), -1);
	cr_assert_eq(errno, EINVAL);
	close(fd);
}

Test(version, bad_pointer_is_efault)
{
	int fd = open_dev();

	cr_assert_eq(ioctl(fd, HMEMREG_IOC_VERSION, (void *)8), -1);
	cr_assert_eq(errno, EFAULT);
	close(fd);
}

Test(ioctl, unknown_command_is_enotty)
{
	int fd = open_dev();
	struct hmemreg_version v = { .size = sizeof(v) };

	cr_assert_eq(ioctl(fd, _IOWR(HMEMREG_IOC_MAGIC, 0x7f, struct hmemreg_version), &v), -1);
	cr_assert_eq(errno, ENOTTY);
	cr_assert_eq(ioctl(fd, _IOWR('x', 0x00, struct hmemreg_version), &v), -1);
	cr_assert_eq(errno, ENOTTY);
	close(fd);
}

Test(device, node_is_not_world_accessible)
{
	struct stat st;

	cr_assert_eq(stat(HMEMREG_DEVICE_PATH, &st), 0);
	cr_assert(S_ISCHR(st.st_mode));
	cr_assert_eq(st.st_mode & 0007, 0, "mode %o", st.st_mode & 0777);
}
