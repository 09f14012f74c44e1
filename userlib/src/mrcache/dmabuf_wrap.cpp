// SPDX-License-Identifier: MIT
#include "mrcache/dmabuf_wrap.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <linux/hmemreg.h>
#include <map>
#include <mutex>
#include <sys/ioctl.h>
#include <sys/stat.h>
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

// The live wrappers by inner buffer. Never destroyed: registrations held
// by caches that static destructors tear down may outlive any static.
struct Table {
	std::mutex mu;
	std::map<WrapKey, std::weak_ptr<const Wrapper>> live;
};

Table &table()
{
	static Table *t = new Table;
	return *t;
}

WrapperRef find(const WrapKey &key)
{
	Table &t = table();
	std::lock_guard l(t.mu);
	auto it = t.live.find(key);
	return it == t.live.end() ? nullptr : it->second.lock();
}

// Publish `made` unless another thread published a live wrapper of the same
// buffer meanwhile: then that one is used and `made` closes.
WrapperRef publish(const WrapKey &key, UniqueFd made)
{
	auto w = std::make_shared<const Wrapper>(key, std::move(made));
	Table &t = table();
	std::lock_guard l(t.mu);
	auto [it, inserted] = t.live.try_emplace(key, w);
	if (!inserted) {
		if (WrapperRef other = it->second.lock())
			return other; // w's destructor runs after the lock is released
		it->second = w;
	}
	return w;
}

} // namespace

Wrapper::~Wrapper()
{
	Table &t = table();
	std::lock_guard l(t.mu);
	auto it = t.live.find(key_);
	// Another thread may have published a new wrapper of the key already.
	if (it != t.live.end() && it->second.expired())
		t.live.erase(it);
}

int shared_wrapper(int fd, WrapperRef &out, std::string &why)
{
	struct stat st;
	if (::fstat(fd, &st) != 0) {
		why = std::string("cannot stat the DMA-BUF: ") + std::strerror(errno);
		return -HMEMREG_EINVAL;
	}
	WrapKey key{WrapKey::file, st.st_dev, st.st_ino, 0};
	if ((out = find(key)))
		return 0;
	UniqueFd made;
	int rc = wrap_dmabuf(fd, made, why);
	if (rc == 0)
		out = publish(key, std::move(made));
	return rc;
}

int shared_wrapper(const WrapKey &key, const std::function<int(UniqueFd &, std::string &)> &export_inner,
		   WrapperRef &out, std::string &why)
{
	if ((out = find(key)))
		return 0;
	if (!module().dev) {
		why = module().why_not;
		return -HMEMREG_ENOTSUP;
	}
	UniqueFd inner, made;
	int rc = export_inner(inner, why);
	if (rc == 0)
		rc = wrap_dmabuf(inner.get(), made, why);
	if (rc == 0)
		out = publish(key, std::move(made));
	return rc;
}

size_t live_wrappers()
{
	Table &t = table();
	std::lock_guard l(t.mu);
	return t.live.size();
}

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
