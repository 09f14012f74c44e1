// SPDX-License-Identifier: MIT
// Read-backs (GPUDirect RDMA's flush, NCCL's iflush) over real providers on
// loopback: each rail reads a few bytes of its own registration through its
// own endpoint, completed through the handle; after a peer's writes, as the
// plugin posts them; bad input refused. And registrations through a
// caller's DMA-BUF fd refuse what they cannot register (without hmemreg.ko
// and CUDA here: the VM and GPU lanes register real ones).
#include <sys/mman.h>
#include <unistd.h>

#include "harness.hpp"

using namespace fx;

namespace {

// The hmemreg error code a call throws, 0 when it returns.
template <typename F> int error_code(F &&call)
{
	try {
		call();
	} catch (const hmemreg::Error &err) {
		return err.code();
	}
	return 0;
}

} // namespace

PROVIDER_TEST(read_back, after_each_write)
{
	for (unsigned rails : {1u, 2u}) {
		Config ca = loopback(prov), cb = loopback(prov);
		ca.rails = cb.rails = rails;
		Pair p(ca, cb);
		Buffer src(1 << 20), dst(1 << 20);
		auto rs = p.a.register_region(src.data(), src.len);
		auto rd = p.b.register_region(dst.data(), dst.len);
		auto desc = p.b.descriptor(*rd);
		for (size_t n : {size_t(1), size_t(4096), size_t(1) << 20}) {
			fill(src.data(), n, n + rails);
			const size_t before = p.in_b.nnotes.load();
			Chunk c{rs.get(), 0, n, 0};
			auto t = p.a.write(p.b_at_a, {&c, 1}, desc, n);
			cr_assert(p.a.wait(*t, 60s) && t->status() == 0, "write of %zu: %s", n, t->error().c_str());
			cr_assert(eventually([&] { return p.in_b.nnotes.load() > before; }), "no notification");
			// As NCCL's iflush: the last bytes of the received buffer.
			const size_t len = std::min<size_t>(n, 4);
			auto f = p.b.read_back(*rd, n - len, len);
			cr_assert(p.b.wait(*f, 20s), "read-back after %zu B on %u rail(s) did not complete", n, rails);
			cr_assert_eq(f->status(), 0, "read-back: %s", f->error().c_str());
			cr_assert_eq(f->bytes(), len);
			cr_assert(check_bytes(dst.data(), n + rails, n), "bytes differ after a %zu B write", n);
		}
		// Many at once: each completes, none waits for a write.
		std::vector<TransferRef> many;
		for (size_t i = 0; i < 200; i++)
			many.push_back(p.b.read_back(*rd, (i * 4096) % dst.len, 64));
		for (auto &f : many) {
			cr_assert(p.b.wait(*f, 20s), "one of 200 read-backs did not complete");
			cr_assert_eq(f->status(), 0, "%s", f->error().c_str());
		}
	}
}

PROVIDER_TEST(read_back, caller_driven_progress)
{
	Facade e(loopback(prov, 0));
	cr_assert(e.caps().read_back, "%s: no FI_READ", prov.c_str());
	Buffer b(8192);
	auto r = e.register_region(b.data(), b.len);
	auto f = e.read_back(*r, 100, 8);
	cr_assert(e.wait(*f, 20s), "read-back without progress threads did not complete");
	cr_assert_eq(f->status(), 0, "%s", f->error().c_str());
}

Test(read_back, bad_input, .timeout = 60)
{
	Facade e(loopback("tcp;ofi_rxm")), other(loopback("tcp;ofi_rxm"));
	Buffer b(8192);
	auto r = e.register_region(b.data(), b.len);
	cr_assert_eq(error_code([&] { e.read_back(*r, 0, 0); }), HMEMREG_EINVAL, "zero bytes");
	cr_assert_eq(error_code([&] { e.read_back(*r, 0, 65); }), HMEMREG_EINVAL, "more than 64 bytes");
	cr_assert_eq(error_code([&] { e.read_back(*r, 8190, 4); }), HMEMREG_EINVAL, "past the region's end");
	cr_assert_eq(error_code([&] { e.read_back(*r, ~size_t(0), 1); }), HMEMREG_EINVAL, "offset overflows");
	cr_assert_eq(error_code([&] { other.read_back(*r, 0, 4); }), HMEMREG_EINVAL, "another engine's region");
	cr_assert_eq(error_code([&] { e.read_back(*r, 8188, 4); }), 0, "the last 4 bytes");
}

// A NIC copy: the bytes of one registration land in another through the
// rail's own endpoint, at offsets, from 1 byte to an eager slot's size, many
// in flight; the CPU copies nothing.
PROVIDER_TEST(nic_copy, copies_through_the_nic)
{
	Facade e(loopback(prov));
	cr_assert(e.caps().read_back, "%s: no FI_READ", prov.c_str());
	Buffer src(1 << 20), dst(1 << 20);
	auto rs = e.register_region(src.data(), src.len);
	auto rd = e.register_region(dst.data(), dst.len);
	for (size_t n : {size_t(1), size_t(4097), size_t(512) << 10}) {
		const size_t from = 8, to = dst.len - n - 3;
		fill(src.data() + from, n, n);
		std::memset(dst.data(), 0, dst.len);
		auto t = e.nic_copy(*rd, to, *rs, from, n);
		cr_assert(e.wait(*t, 20s), "NIC copy of %zu B did not complete", n);
		cr_assert_eq(t->status(), 0, "NIC copy of %zu B: %s", n, t->error().c_str());
		cr_assert(check_bytes(dst.data() + to, n, n), "bytes differ after a NIC copy of %zu B", n);
		cr_assert_eq(dst.data()[to - 1], 0, "a byte before the copy was written");
		cr_assert_eq(dst.data()[to + n], 0, "a byte after the copy was written");
	}
	std::vector<TransferRef> many;
	fill(src.data(), src.len, 77);
	for (size_t i = 0; i < 64; i++)
		many.push_back(e.nic_copy(*rd, i * 16384, *rs, i * 16384, 16384));
	for (auto &t : many) {
		cr_assert(e.wait(*t, 20s), "one of 64 NIC copies did not complete");
		cr_assert_eq(t->status(), 0, "%s", t->error().c_str());
	}
	cr_assert(check_bytes(dst.data(), 77, src.len), "bytes differ after 64 NIC copies");
}

Test(nic_copy, bad_input, .timeout = 60)
{
	Facade e(loopback("tcp;ofi_rxm")), other(loopback("tcp;ofi_rxm"));
	Buffer a(8192), b(8192);
	auto ra = e.register_region(a.data(), a.len);
	auto rb = e.register_region(b.data(), b.len);
	auto ro = other.register_region(b.data(), b.len);
	cr_assert_eq(error_code([&] { e.nic_copy(*ra, 0, *rb, 0, 0); }), HMEMREG_EINVAL, "zero bytes");
	cr_assert_eq(error_code([&] { e.nic_copy(*ra, 8000, *rb, 0, 200); }), HMEMREG_EINVAL, "past dst's end");
	cr_assert_eq(error_code([&] { e.nic_copy(*ra, 0, *rb, 8000, 200); }), HMEMREG_EINVAL, "past src's end");
	cr_assert_eq(error_code([&] { e.nic_copy(*ra, ~size_t(0), *rb, 0, 1); }), HMEMREG_EINVAL, "offset overflows");
	cr_assert_eq(error_code([&] { e.nic_copy(*ra, 0, *ro, 0, 4); }), HMEMREG_EINVAL, "another engine's region");
	auto t = e.nic_copy(*ra, 0, *rb, 0, 8192);
	cr_assert(e.wait(*t, 20s) && t->status() == 0, "the whole region: %s", t->error().c_str());
}

Test(register_dmabuf, refuses_what_it_cannot_register, .timeout = 60)
{
	Facade e(loopback("tcp;ofi_rxm"));
	Buffer b(8192);
	cr_assert_eq(error_code([&] { e.register_dmabuf(b.data(), b.len, -1, 0); }), HMEMREG_EINVAL, "no fd");
	cr_assert_eq(error_code([&] { e.register_dmabuf(nullptr, b.len, 0, 0); }), HMEMREG_EINVAL, "null address");
	cr_assert_eq(error_code([&] { e.register_dmabuf(b.data(), 0, 0, 0); }), HMEMREG_EINVAL, "zero length");
	// Host memory behind an fd that is no export of this process: a memfd.
	const int fd = memfd_create("not-a-dmabuf", 0);
	cr_assert(fd >= 0);
	cr_assert_eq(error_code([&] { e.register_dmabuf(b.data(), b.len, fd, 0); }), HMEMREG_ENOENT,
		     "an fd that is no hmemreg.ko export");
	close(fd);
	// A closed fd.
	cr_assert_eq(error_code([&] { e.register_dmabuf(b.data(), b.len, fd, 0); }), HMEMREG_ENOENT, "a closed fd");
}
