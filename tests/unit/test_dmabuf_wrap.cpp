// SPDX-License-Identifier: MIT
// wrap_dmabuf(): device memory's DMA-BUF wrapped by hmemreg.ko's DMABUF
// provider before registration. Without the module (host lane) it says
// why not; with it (VM lane, tests/vm.d/20-cache.sh loads it with a devmem
// pool) a devmem export is wrapped whole, and bad input is refused with
// the module's reason. shared_wrapper(): one wrapper per inner buffer while
// anyone holds it, closed with the last holder. Criterion forks per test:
// the module is opened (or found absent) once per test process.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <linux/hmemreg.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <dirent.h>
#include <string>

#include "hmemreg/hmemreg.h"
#include "mrcache/dmabuf_wrap.hpp"

using hmemreg::UniqueFd;
using hmemreg::mr::live_wrappers;
using hmemreg::mr::shared_wrapper;
using hmemreg::mr::WrapKey;
using hmemreg::mr::WrapperRef;
using hmemreg::mr::wrap_dmabuf;

namespace {

bool module_here()
{
	return ::access(HMEMREG_DEVICE_PATH, F_OK) == 0;
}

// A writable devmem export of len bytes (the module's pool), or -1.
int devmem_export(int dev, uint64_t len)
{
	hmemreg_devmem_alloc a{};
	a.size = sizeof(a);
	a.len = len;
	if (::ioctl(dev, HMEMREG_IOC_DEVMEM_ALLOC, &a))
		return -1;
	hmemreg_export e{};
	e.size = sizeof(e);
	e.provider = HMEMREG_PROVIDER_DEVMEM;
	e.flags = HMEMREG_EXPORT_WRITE;
	e.len = len;
	e.handle = a.handle;
	return ::ioctl(dev, HMEMREG_IOC_EXPORT, &e) ? -1 : e.fd;
}

// DMA-BUF files open in this process.
int dmabuf_fds()
{
	int n = 0;
	DIR *d = ::opendir("/proc/self/fd");
	cr_assert_not_null(d);
	while (dirent *e = ::readdir(d)) {
		char link[256];
		std::string path = std::string("/proc/self/fd/") + e->d_name;
		ssize_t len = ::readlink(path.c_str(), link, sizeof(link) - 1);
		if (len > 0 && std::string(link, len).find("dmabuf") != std::string::npos)
			n++;
	}
	::closedir(d);
	return n;
}

} // namespace

Test(dmabuf_wrap, module_absent_says_so)
{
	if (module_here())
		cr_skip_test("hmemreg.ko is loaded here");
	UniqueFd out;
	std::string why;
	int p[2];
	cr_assert_eq(::pipe(p), 0);
	cr_assert_eq(wrap_dmabuf(p[0], out, why), -HMEMREG_ENOTSUP);
	cr_assert(!out);
	cr_assert(why.find("hmemreg.ko not loaded") != std::string::npos, "why: %s", why.c_str());
	// Shared: nothing is exported for a wrapper that cannot be made.
	WrapperRef w;
	int exports = 0;
	auto export_inner = [&exports](UniqueFd &, std::string &) { return ++exports, 0; };
	cr_assert_eq(shared_wrapper(WrapKey{WrapKey::cuda_allocation, 0, 1 << 20, 7}, export_inner, w, why), -HMEMREG_ENOTSUP);
	cr_assert_eq(exports, 0);
	cr_assert(!w);
	cr_assert_eq(live_wrappers(), 0u);
	::close(p[0]);
	::close(p[1]);
}

Test(dmabuf_wrap, setting_off_says_so)
{
	::setenv("HMEMREG_WRAP_DMABUF", "0", 1);
	UniqueFd out;
	std::string why;
	cr_assert_eq(wrap_dmabuf(0, out, why), -HMEMREG_ENOTSUP);
	cr_assert_eq(why, "HMEMREG_WRAP_DMABUF=0");
}

Test(dmabuf_wrap, wraps_a_whole_buffer_and_passes_on_refusals)
{
	if (!module_here())
		cr_skip_test("needs hmemreg.ko with a devmem pool (VM lane: tests/vm.d/20-cache.sh)");
	UniqueFd dev(::open(HMEMREG_DEVICE_PATH, O_RDWR | O_CLOEXEC));
	cr_assert(dev);
	UniqueFd inner(devmem_export(dev.get(), 8 * 4096));
	if (!inner)
		cr_skip_test("no devmem pool (module loaded without devmem_mb)");
	UniqueFd out;
	std::string why;
	cr_assert_eq(wrap_dmabuf(inner.get(), out, why), 0, "why: %s", why.c_str());
	cr_assert(out);
	cr_assert_eq(::lseek(out.get(), 0, SEEK_END), 8 * 4096, "the wrapper is the whole buffer");
	cr_assert_eq(::fcntl(out.get(), F_GETFL) & O_ACCMODE, O_RDWR, "a writable buffer's wrapper is writable");
	UniqueFd again;
	cr_assert_lt(wrap_dmabuf(out.get(), again, why), 0, "a wrapper of a wrapper");
	cr_assert(why.find("refused") != std::string::npos, "why: %s", why.c_str());
	int p[2];
	cr_assert_eq(::pipe(p), 0);
	cr_assert_lt(wrap_dmabuf(p[0], again, why), 0, "a pipe");
	::close(p[0]);
	::close(p[1]);
}

// Registrations of one buffer share one wrapper: the second pays no EXPORT
// ioctl, and the last holder's release closes it (nothing else holds it).
Test(dmabuf_wrap, one_wrapper_per_buffer_while_held)
{
	if (!module_here())
		cr_skip_test("needs hmemreg.ko with a devmem pool (VM lane: tests/vm.d/20-cache.sh)");
	UniqueFd dev(::open(HMEMREG_DEVICE_PATH, O_RDWR | O_CLOEXEC));
	cr_assert(dev);
	UniqueFd inner(devmem_export(dev.get(), 8 * 4096)), other(devmem_export(dev.get(), 4 * 4096));
	if (!inner || !other)
		cr_skip_test("no devmem pool (module loaded without devmem_mb)");
	const int before = dmabuf_fds();
	std::string why;
	WrapperRef a, b, c, d;
	cr_assert_eq(shared_wrapper(inner.get(), a, why), 0, "why: %s", why.c_str());
	UniqueFd dup(::dup(inner.get())); // the same buffer through another fd
	cr_assert_eq(shared_wrapper(dup.get(), b, why), 0, "why: %s", why.c_str());
	cr_assert_eq(a.get(), b.get(), "one wrapper for one buffer");
	cr_assert_eq(shared_wrapper(other.get(), c, why), 0, "why: %s", why.c_str());
	cr_assert_neq(a->fd(), c->fd(), "another buffer, another wrapper");
	cr_assert_eq(live_wrappers(), 2u);
	cr_assert_eq(dmabuf_fds(), before + 3, "two wrappers (and the dup) open");
	a.reset();
	cr_assert_eq(live_wrappers(), 2u, "still held");
	b.reset();
	c.reset();
	cr_assert_eq(live_wrappers(), 0u);
	cr_assert_eq(dmabuf_fds(), before + 1, "the last holder closed each wrapper");

	// A CUDA allocation's key: exported once while its wrapper lives, the
	// export closed once wrapped; another buffer ID is another allocation.
	int exports = 0;
	auto export_inner = [&](UniqueFd &out, std::string &) {
		exports++;
		out.reset(devmem_export(dev.get(), 4 * 4096));
		return out ? 0 : -HMEMREG_ENOMEM;
	};
	WrapKey k{WrapKey::cuda_allocation, 0, 1 << 20, 7}, k2 = k;
	k2.c = 8;
	cr_assert_eq(shared_wrapper(k, export_inner, a, why), 0, "why: %s", why.c_str());
	cr_assert_eq(shared_wrapper(k, export_inner, b, why), 0, "why: %s", why.c_str());
	cr_assert_eq(exports, 1);
	cr_assert_eq(a.get(), b.get());
	cr_assert_eq(shared_wrapper(k2, export_inner, d, why), 0, "why: %s", why.c_str());
	cr_assert_eq(exports, 2);
	cr_assert_neq(a.get(), d.get());
	cr_assert_eq(dmabuf_fds(), before + 3, "only the wrappers stay open");
	a.reset();
	b.reset();
	d.reset();
	cr_assert_eq(live_wrappers(), 0u);
	cr_assert_eq(dmabuf_fds(), before + 1);
	// An export that fails is the caller's error, and leaves nothing.
	auto failing = [](UniqueFd &, std::string &w) { return w = "no", -HMEMREG_EINVAL; };
	cr_assert_eq(shared_wrapper(k, failing, a, why), -HMEMREG_EINVAL);
	cr_assert_eq(why, "no");
	cr_assert_eq(live_wrappers(), 0u);
}
