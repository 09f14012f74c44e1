// SPDX-License-Identifier: MIT
// Talking to /dev/hmemreg: open with a clear error, and the version handshake.
#include <cerrno>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/hmemreg.h>

#include "hmemreg/hmemreg.h"
#include "kmod_device.hpp"

namespace hmemreg {

int KmodDevice::open(KmodDevice &out)
{
	int fd = ::open(HMEMREG_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENXIO || errno == ENODEV)
			return -HMEMREG_ENODEV;
		if (errno == EACCES || errno == EPERM)
			return -HMEMREG_EACCES;
		return -HMEMREG_ESYS;
	}
	out.fd_ = UniqueFd(fd);
	return 0;
}

int KmodDevice::query(hmemreg_kmod_info &info) const
{
	hmemreg_version v{};
	v.size = sizeof(v);
	if (::ioctl(fd_.get(), HMEMREG_IOC_VERSION, &v) != 0)
		return -HMEMREG_ESYS;
	if (v.abi_major != HMEMREG_ABI_MAJOR)
		return -HMEMREG_EABI;
	info.abi_major = v.abi_major;
	info.abi_minor = v.abi_minor;
	info.caps = v.caps;
	return 0;
}

} // namespace hmemreg

extern "C" int hmemreg_kmod_query(struct hmemreg_kmod_info *info)
{
	if (!info)
		return -HMEMREG_EINVAL;
	hmemreg::KmodDevice dev;
	int rc = hmemreg::KmodDevice::open(dev);
	if (rc)
		return rc;
	return dev.query(*info);
}
