// SPDX-License-Identifier: MIT
// wrap_dmabuf(): device memory's DMA-BUF wrapped by hmemreg.ko's DMABUF
// provider before registration. Without the module (host lane) it says
// why not; with it (VM lane, tests/vm.d/20-cache.sh loads it with a devmem
// pool) a devmem export is wrapped whole, and bad input is refused with
// the module's reason. Criterion forks per test: the module is opened (or
// found absent) once per test process.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <linux/hmemreg.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "hmemreg/hmemreg.h"
#include "mrcache/dmabuf_wrap.hpp"

using hmemreg::UniqueFd;
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
