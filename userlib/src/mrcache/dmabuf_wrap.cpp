// SPDX-License-Identifier: MIT
#include "mrcache/dmabuf_wrap.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <linux/hmemreg.h>
#include <mutex>
#include <sys/ioctl.h>
#include <unistd.h>

#include "hmemreg/hmemreg.h"
#include "settings/settings.hpp"

namespace hmemreg::mr {

namespace {

// /dev/hmemreg, opened once per process on the first device registration;
// why_not says why wrapping is off for good in this process.
struct Module {
	UniqueFd dev;
	std::string why_not;
};

Module &module()
{
	static Module m;
	static std::once_flag once;
	std::call_once(once, [] {
		bool on = true;
		settings::boolean("HMEMREG_WRAP_DMABUF", on);
		if (!on) {
			m.why_not = "HMEMREG_WRAP_DMABUF=0";
			return;
		}
		UniqueFd fd(::open(HMEMREG_DEVICE_PATH, O_RDWR | O_CLOEXEC));
		if (!fd) {
			m.why_not = std::string(errno == ENOENT ? "hmemreg.ko not loaded" : "hmemreg.ko not usable") +
				    " (" HMEMREG_DEVICE_PATH ": " + std::strerror(errno) + ")";
			return;
		}
		hmemreg_version v{};
		v.size = sizeof(v);
		if (::ioctl(fd.get(), HMEMREG_IOC_VERSION, &v) != 0 || !(v.caps & HMEMREG_CAP_EXPORT_DMABUF)) {
			m.why_not = "hmemreg.ko has no DMABUF provider (ABI " + std::to_string(v.abi_major) + "." +
				    std::to_string(v.abi_minor) + ", 1.2 needed)";
			return;
		}
		m.dev = std::move(fd);
	});
	return m;
}

} // namespace

int wrap_dmabuf(int fd, UniqueFd &out, std::string &why)
{
	Module &m = module();
	if (!m.dev) {
		why = m.why_not;
		return -HMEMREG_ENOTSUP;
	}
	// A DMA-BUF's size is its end (dma_buf_llseek).
	off_t size = ::lseek(fd, 0, SEEK_END);
	if (size <= 0) {
		why = std::string("cannot size the DMA-BUF: ") + std::strerror(errno);
		return -HMEMREG_EINVAL;
	}
	int fl = ::fcntl(fd, F_GETFL);
	hmemreg_export e{};
	e.size = sizeof(e);
	e.provider = HMEMREG_PROVIDER_DMABUF;
	e.flags = fl >= 0 && (fl & O_ACCMODE) != O_RDONLY ? HMEMREG_EXPORT_WRITE : 0;
	e.addr = 0;
	e.len = static_cast<uint64_t>(size);
	e.handle = static_cast<uint64_t>(fd);
	if (::ioctl(m.dev.get(), HMEMREG_IOC_EXPORT, &e) != 0) {
		int err = errno;
		why = std::string("hmemreg.ko refused to wrap it: ") + std::strerror(err);
		return err == ENOMEM ? -HMEMREG_ENOMEM : -HMEMREG_EINVAL;
	}
	out.reset(e.fd);
	return 0;
}

} // namespace hmemreg::mr
