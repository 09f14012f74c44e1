// SPDX-License-Identifier: MIT
// The engine on CUDA memory: staged through pinned host mirrors where the
// provider has no FI_HMEM (libfabric 1.17's shm and tcp, 2.x's tcp), direct
// where it has (2.x shm built with CUDA): scattered device -> device writes
// between two processes (then cuMemFree + cuMemAlloc of the source at the
// same address and a second write: the new bytes land), host <-> device
// within one, verified byte for byte; which path was taken; bad input.
// HMEMREG_GPU_DIRECT=shm,... names the providers that must take the direct
// path in this run (the run on libfabric 2.6.0); all others must stage.
#include "gpu_test.hpp"

#include <poll.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <chrono>
#include <thread>
#include <tuple>
#include <vector>

#include "engine/facade.hpp"
#include "hmem/cuda_driver.hpp"

using namespace hmemreg;
using namespace hmemreg::engine;
using hmemreg::cuda::Driver;

namespace {

const Driver &drv(int device = 0)
{
	const Driver &d = Driver::get();
	GPU_ASSERT(d.loaded, "%s", d.why_not.c_str());
	GPU_ASSERT(cuda::use_device(device) == 0, "no CUDA device %d", device);
	return d;
}

int gpu_count()
{
	const Driver &d = drv();
	int n = 0;
	GPU_ASSERT(d.cuDeviceGetCount(&n) == CUDA_SUCCESS);
	return n;
}

Config config(const char *provider)
{
	Config c;
	c.provider = provider;
	if (std::string(provider).find("tcp") != std::string::npos)
		c.node = "127.0.0.1";
	c.staging_piece = 1u << 20; // several pieces per transfer
	return c;
}

uint8_t pattern(size_t i, unsigned salt = 0)
{
	return static_cast<uint8_t>(i * 131 + 7 + (i >> 12) + salt * 29);
}

// Whether this run expects `provider` to register CUDA memory directly.
bool expect_direct(const char *provider)
{
	const char *v = std::getenv("HMEMREG_GPU_DIRECT");
	std::string p(provider);
	p = p.substr(0, p.find(';'));
	return v && ("," + std::string(v) + ",").find("," + p + ",") != std::string::npos;
}

void check_path(const Facade &e, const char *provider)
{
	const bool direct = expect_direct(provider);
	GPU_ASSERT(e.caps().hmem == direct, "%s: expected the %s path; device memory: %s", provider,
		   direct ? "direct" : "staged", e.caps().device_memory.c_str());
	GPU_ASSERT(e.caps().device_memory.find(direct ? "direct" : "staged") != std::string::npos, "%s",
		   e.caps().device_memory.c_str());
}

// Scattered chunks with odd sizes, crossing piece boundaries, landing in
// reverse order with gaps; total source span and target span returned.
std::vector<Chunk> scatter(const Region *src, size_t &src_len, size_t &dst_len)
{
	const size_t sizes[] = {1, 4095, (64 << 10) + 3, 1 << 20, (5 << 20) + 17, 333, (2 << 20) - 1, 8};
	std::vector<Chunk> v;
	size_t off = 0;
	for (size_t n : sizes) {
		v.push_back({src, off, n, 0});
		off += n + 512; // gaps at the source too
	}
	src_len = off;
	size_t roff = 4096;
	for (auto it = v.rbegin(); it != v.rend(); ++it) {
		it->remote_offset = roff;
		roff += it->len + 100;
	}
	dst_len = roff;
	return v;
}

CUdeviceptr device_fill(const Driver &d, size_t n, bool with_pattern, unsigned salt = 0)
{
	CUdeviceptr p;
	GPU_ASSERT(d.cuMemAlloc(&p, n) == CUDA_SUCCESS);
	std::vector<uint8_t> h(n, 0);
	if (with_pattern)
		for (size_t i = 0; i < n; i++)
			h[i] = pattern(i, salt);
	GPU_ASSERT(d.cuMemcpyHtoD(p, h.data(), n) == CUDA_SUCCESS);
	return p;
}

std::vector<uint8_t> device_read(const Driver &d, CUdeviceptr p, size_t n)
{
	std::vector<uint8_t> h(n);
	GPU_ASSERT(d.cuMemcpyDtoH(h.data(), p, n) == CUDA_SUCCESS);
	return h;
}

// Byte i of the target after the chunks landed (0 where nothing was written).
std::vector<uint8_t> expected(std::span<const Chunk> chunks, size_t dst_len, unsigned salt = 0)
{
	std::vector<uint8_t> e(dst_len, 0);
	for (const Chunk &c : chunks)
		for (size_t k = 0; k < c.len; k++)
			e[c.remote_offset + k] = pattern(c.local_offset + k, salt);
	return e;
}

size_t first_difference(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b)
{
	for (size_t i = 0; i < a.size(); i++)
		if (a[i] != b[i])
			return i;
	return SIZE_MAX;
}

void put_blob(int fd, const Bytes &b)
{
	uint32_t n = static_cast<uint32_t>(b.size());
	GPU_ASSERT(write(fd, &n, 4) == 4 && write(fd, b.data(), n) == static_cast<ssize_t>(n));
}

Bytes get_blob(int fd)
{
	uint32_t n = 0;
	GPU_ASSERT(read(fd, &n, 4) == 4);
	Bytes b(n);
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, b.data() + got, n - got);
		GPU_ASSERT(r > 0);
		got += static_cast<size_t>(r);
	}
	return b;
}

bool wait_flag(const std::atomic<int> &f, int seconds)
{
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
	while (!f.load() && std::chrono::steady_clock::now() < end)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	return f.load() != 0;
}

// Target process: a device region; per round (salt 0, then 1), reports over
// `out` whether what landed is exactly what the writer sent.
[[noreturn]] void target(const char *provider, int device, int in, int out)
{
	const Driver &d = drv(device);
	Facade b(config(provider));
	size_t src_len, dst_len;
	auto chunks = scatter(nullptr, src_len, dst_len);
	CUdeviceptr dst = device_fill(d, dst_len, false);
	auto region = b.register_region(reinterpret_cast<void *>(dst), dst_len);
	std::atomic<int> notified{0};
	Notification got{};
	b.on_notify([&](const Notification &n) {
		got = n;
		notified = 1;
	});
	put_blob(out, b.address());
	put_blob(out, b.descriptor(*region));
	for (unsigned salt = 0; salt < 2; salt++) {
		char go;
		GPU_ASSERT(read(in, &go, 1) == 1);
		if (!wait_flag(notified, 60))
			gpu_test::fail(__FILE__, __LINE__, "target: no notification in 60 s");
		notified = 0;
		auto seen = device_read(d, dst, dst_len);
		size_t at = first_difference(seen, expected(chunks, dst_len, salt));
		PathStats ps = b.path_stats();
		uint64_t report[4] = {at, got.tag, ps.staged_to_device_bytes, ps.staged_landings};
		GPU_ASSERT(write(out, report, sizeof(report)) == sizeof(report));
	}
	std::_Exit(0);
}

void device_to_device_between_processes(const char *provider, int src_dev = 0, int dst_dev = 0)
{
	int to_t[2], from_t[2];
	GPU_ASSERT(pipe(to_t) == 0 && pipe(from_t) == 0);
	pid_t pid = fork();
	if (pid == 0)
		target(provider, dst_dev, to_t[0], from_t[1]);
	const Driver &d = drv(src_dev);
	Bytes addr = get_blob(from_t[0]);
	Bytes desc = get_blob(from_t[0]);
	Facade a(config(provider));
	check_path(a, provider);
	const bool direct = expect_direct(provider);
	PeerId peer = a.add_peer(addr, true);
	size_t src_len, dst_len;
	auto probe = scatter(nullptr, src_len, dst_len);
	CUdeviceptr src = device_fill(d, src_len, true);
	uint64_t staged_total = 0;
	for (unsigned salt = 0; salt < 2; salt++) {
		if (salt) {
			// Free the source and allocate again (the driver usually hands
			// out the same address): the next registration must not be the
			// old one, in the cache or below it.
			CUdeviceptr old = src;
			GPU_ASSERT(d.cuMemFree(src) == CUDA_SUCCESS);
			src = device_fill(d, src_len, true, salt);
			GPU_LOG("source reallocated at %s address", src == old ? "the same" : "another");
		}
		auto region = a.register_region(reinterpret_cast<void *>(src), src_len);
		GPU_ASSERT(region->staged() == !direct);
		auto chunks = scatter(region.get(), src_len, dst_len);
		GPU_ASSERT(write(to_t[1], "g", 1) == 1);
		auto x = a.write(peer, chunks, desc, 0xfeed + salt);
		GPU_ASSERT(a.wait(*x, std::chrono::seconds(60)), "write did not complete");
		GPU_ASSERT(x->status() == 0, "%s", x->error().c_str());
		GPU_ASSERT(x->staged() == !direct);
		size_t total = 0;
		for (auto &c : chunks)
			total += c.len;
		PathStats ps = a.path_stats();
		if (direct) {
			GPU_ASSERT(ps.staged_writes == 0 && ps.direct_writes == salt + 1);
			GPU_ASSERT(ps.device_regs_dmabuf + ps.device_regs_address == salt + 1,
				   "%llu device registrations for %u allocations",
				   (unsigned long long)(ps.device_regs_dmabuf + ps.device_regs_address), salt + 1);
		} else {
			staged_total += total;
			GPU_ASSERT(ps.staged_writes == salt + 1 && ps.direct_writes == 0);
			GPU_ASSERT(ps.staged_to_host_bytes == staged_total, "%llu of %llu bytes copied to host",
				   (unsigned long long)ps.staged_to_host_bytes, (unsigned long long)staged_total);
		}
		uint64_t report[4];
		GPU_ASSERT(read(from_t[0], report, sizeof(report)) == sizeof(report), "target died");
		GPU_ASSERT(report[0] == UINT64_MAX, "round %u: target byte %llu differs", salt,
			   (unsigned long long)report[0]);
		GPU_ASSERT(report[1] == 0xfeed + salt, "tag %llx", (unsigned long long)report[1]);
		GPU_ASSERT(report[2] == (direct ? 0 : staged_total), "target copied %llu bytes to the device",
			   (unsigned long long)report[2]);
		GPU_ASSERT(report[3] == (direct ? 0 : salt + 1));
		GPU_LOG("%s: %zu bytes in %zu chunks, GPU %d -> GPU %d (another process), %s, verified%s; %s", provider,
			total, chunks.size(), src_dev, dst_dev, direct ? "direct" : "staged",
			salt ? " (after cuMemFree + cuMemAlloc)" : "",
			direct ? (ps.device_regs_dmabuf ? "FI_MR_DMABUF" : ("by address: " + ps.device_address_why).c_str())
			       : "");
		// Whether hmemreg.ko wrapped the DMA-BUFs (its pin ledger sees them),
		// and why not. Without the module every one is registered unwrapped
		// and says so.
		if (direct && ps.device_regs_dmabuf) {
			if (access("/dev/hmemreg", F_OK) != 0)
				GPU_ASSERT(ps.device_regs_wrapped == 0 && !ps.device_wrap_why.empty(),
					   "no /dev/hmemreg, yet %llu wrapped (why: '%s')",
					   (unsigned long long)ps.device_regs_wrapped, ps.device_wrap_why.c_str());
			GPU_LOG("%s: %llu of %llu DMA-BUF registrations wrapped by hmemreg.ko%s%s", provider,
				(unsigned long long)ps.device_regs_wrapped, (unsigned long long)ps.device_regs_dmabuf,
				ps.device_wrap_why.empty() ? "" : "; not wrapped: ", ps.device_wrap_why.c_str());
		} else if (direct) {
			GPU_LOG("%s: no DMA-BUF registration, nothing for hmemreg.ko to wrap", provider);
		}
	}
	int st;
	waitpid(pid, &st, 0);
	GPU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "target failed");
	d.cuMemFree(src);
}

} // namespace

GPU_TEST(engine_cuda, device_to_device_shm)
{
	device_to_device_between_processes("shm");
}

GPU_TEST(engine_cuda, device_to_device_tcp)
{
	device_to_device_between_processes("tcp;ofi_rxm");
}

// Issue 9, run 1: one process per GPU (skipped where there is one GPU).
GPU_TEST(engine_cuda, two_gpus_two_processes)
{
	int n = 0;
	{
		// Count in a child: this process must fork before CUDA is initialised.
		int fds[2];
		GPU_ASSERT(pipe(fds) == 0);
		pid_t pid = fork();
		if (pid == 0) {
			int c = gpu_count();
			GPU_ASSERT(write(fds[1], &c, sizeof(c)) == sizeof(c));
			std::_Exit(0);
		}
		GPU_ASSERT(read(fds[0], &n, sizeof(n)) == sizeof(n));
		waitpid(pid, nullptr, 0);
	}
	if (n < 2) {
		GPU_LOG("SKIP: %d GPU(s) here; this case needs two", n);
		return;
	}
	// Each direction from a fresh process (CUDA does not survive fork()).
	for (auto [prov, from, to] : {std::tuple{"shm", 0, 1}, std::tuple{"tcp;ofi_rxm", 1, 0}}) {
		std::fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			device_to_device_between_processes(prov, from, to);
			std::fflush(stdout);
			std::_Exit(0);
		}
		int st = 0;
		waitpid(pid, &st, 0);
		GPU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s GPU %d -> GPU %d failed", prov, from, to);
	}
}

// Host -> device and device -> host, two engines in one process.
GPU_TEST(engine_cuda, host_and_device_mixed)
{
	const Driver &d = drv();
	Facade a(config("shm")), b(config("shm"));
	check_path(a, "shm");
	const bool direct = expect_direct("shm");
	std::atomic<int> notified{0};
	b.on_notify([&](const Notification &) { notified++; });
	PeerId peer = a.add_peer(b.address(), true);
	size_t src_len, dst_len;
	scatter(nullptr, src_len, dst_len);
	std::vector<uint8_t> hsrc(src_len);
	for (size_t i = 0; i < src_len; i++)
		hsrc[i] = pattern(i);
	std::vector<uint8_t> hdst(dst_len, 0);
	CUdeviceptr dsrc = device_fill(d, src_len, true);
	CUdeviceptr ddst = device_fill(d, dst_len, false);
	auto rhs = a.register_region(hsrc.data(), src_len);
	auto rds = a.register_region(reinterpret_cast<void *>(dsrc), src_len);
	auto rhd = b.register_region(hdst.data(), dst_len);
	auto rdd = b.register_region(reinterpret_cast<void *>(ddst), dst_len);
	GPU_ASSERT(!rhs->staged() && rds->staged() == !direct && !rhd->staged() && rdd->staged() == !direct);

	// host -> device
	auto c1 = scatter(rhs.get(), src_len, dst_len);
	auto x = a.write(peer, c1, b.descriptor(*rdd), 1);
	GPU_ASSERT(a.wait(*x, std::chrono::seconds(30)) && x->status() == 0, "%s", x->error().c_str());
	GPU_ASSERT(wait_flag(notified, 30));
	size_t at = first_difference(device_read(d, ddst, dst_len), expected(c1, dst_len));
	GPU_ASSERT(at == SIZE_MAX, "host -> device: byte %zu differs", at);

	// device -> host
	auto c2 = scatter(rds.get(), src_len, dst_len);
	x = a.write(peer, c2, b.descriptor(*rhd), 2);
	GPU_ASSERT(a.wait(*x, std::chrono::seconds(30)) && x->status() == 0, "%s", x->error().c_str());
	auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
	while (notified.load() < 2 && std::chrono::steady_clock::now() < until)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	GPU_ASSERT(notified.load() == 2);
	at = first_difference(hdst, expected(c2, dst_len));
	GPU_ASSERT(at == SIZE_MAX, "device -> host: byte %zu differs", at);

	// host -> host stays direct
	x = a.write(peer, c1, b.descriptor(*rhd), 3);
	GPU_ASSERT(a.wait(*x, std::chrono::seconds(30)) && x->status() == 0 && !x->staged());
	PathStats ps = a.path_stats();
	GPU_ASSERT(ps.staged_writes == (direct ? 0 : 2) && ps.direct_writes == (direct ? 3 : 1),
		   "staged %llu direct %llu", (unsigned long long)ps.staged_writes, (unsigned long long)ps.direct_writes);
	d.cuMemFree(dsrc);
	d.cuMemFree(ddst);
}

// VMM memory (cuMemCreate + cuMemMap) takes the path cudaMalloc memory takes.
GPU_TEST(engine_cuda, vmm_target)
{
	const Driver &d = drv();
	CUmemAllocationProp prop{};
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	prop.allocFlags.gpuDirectRDMACapable = 1;
	size_t gran = 0;
	GPU_ASSERT(d.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
	const size_t n = ((8u << 20) + gran - 1) / gran * gran;
	CUmemGenericAllocationHandle h;
	GPU_ASSERT(d.cuMemCreate(&h, n, &prop, 0) == CUDA_SUCCESS);
	CUdeviceptr p;
	GPU_ASSERT(d.cuMemAddressReserve(&p, n, 0, 0, 0) == CUDA_SUCCESS);
	GPU_ASSERT(d.cuMemMap(p, n, 0, h, 0) == CUDA_SUCCESS);
	CUmemAccessDesc acc{};
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	GPU_ASSERT(d.cuMemSetAccess(p, n, &acc, 1) == CUDA_SUCCESS);
	GPU_ASSERT(d.cuMemsetD8(p, 0, n) == CUDA_SUCCESS);

	Facade a(config("shm")), b(config("shm"));
	std::atomic<int> notified{0};
	b.on_notify([&](const Notification &) { notified = 1; });
	PeerId peer = a.add_peer(b.address(), true);
	std::vector<uint8_t> src(n);
	for (size_t i = 0; i < n; i++)
		src[i] = pattern(i);
	auto rs = a.register_region(src.data(), n);
	auto rd = b.register_region(reinterpret_cast<void *>(p), n);
	GPU_ASSERT(rd->staged() == !expect_direct("shm"));
	Chunk c{rs.get(), 0, n, 0};
	auto x = a.write(peer, std::span<const Chunk>(&c, 1), b.descriptor(*rd), 9);
	GPU_ASSERT(a.wait(*x, std::chrono::seconds(30)) && x->status() == 0, "%s", x->error().c_str());
	GPU_ASSERT(wait_flag(notified, 30));
	GPU_ASSERT(device_read(d, p, n) == src, "VMM target differs");
	rd.reset();
	d.cuMemUnmap(p, n);
	d.cuMemAddressFree(p, n);
	d.cuMemRelease(h);
}

GPU_TEST(engine_cuda, bad_input)
{
	const Driver &d = drv();
	Facade a(config("shm"));
	auto code_of = [&](void *p, size_t n) {
		try {
			a.register_region(p, n);
		} catch (const Error &e) {
			GPU_LOG("register_region(%p, %zu): %s", p, n, e.what());
			return e.code();
		}
		return 0;
	};
	CUdeviceptr m;
	GPU_ASSERT(d.cuMemAllocManaged(&m, 1 << 20, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
	GPU_ASSERT(code_of(reinterpret_cast<void *>(m), 1 << 20) == HMEMREG_EINVAL, "managed memory must be refused");
	d.cuMemFree(m);
	CUdeviceptr p;
	GPU_ASSERT(d.cuMemAlloc(&p, 2 << 20) == CUDA_SUCCESS);
	GPU_ASSERT(code_of(reinterpret_cast<void *>(p), 4 << 20) == HMEMREG_EINVAL,
		   "a range past the end of its allocation must be refused");
	GPU_ASSERT(d.cuMemFree(p) == CUDA_SUCCESS);
	GPU_ASSERT(code_of(reinterpret_cast<void *>(p), 4096) != 0, "freed device memory must be refused");

	// The direct path asked of a provider without FI_HMEM (tcp): a clear
	// error at creation, not a silent fallback to staging.
	Config need = config("tcp;ofi_rxm");
	need.require_hmem = true;
	int code = 0;
	try {
		Facade e(need);
		GPU_LOG("tcp with require_hmem: %s", e.caps().device_memory.c_str());
	} catch (const Error &e) {
		code = e.code();
		GPU_LOG("tcp with require_hmem: %s", e.what());
		GPU_ASSERT(std::string(e.what()).find("FI_HMEM") != std::string::npos);
	}
	GPU_ASSERT(code == HMEMREG_ENOTSUP || expect_direct("tcp"));

	// Staging off where the provider has no FI_HMEM: device memory refused.
	Config no = config("tcp;ofi_rxm");
	no.stage_device_memory = false;
	Facade direct_only(no);
	GPU_ASSERT(direct_only.caps().device_memory.find("refused") != std::string::npos);
	CUdeviceptr q;
	GPU_ASSERT(d.cuMemAlloc(&q, 1 << 20) == CUDA_SUCCESS);
	code = 0;
	try {
		direct_only.register_region(reinterpret_cast<void *>(q), 1 << 20);
	} catch (const Error &e) {
		code = e.code();
		GPU_LOG("staging off: %s", e.what());
	}
	GPU_ASSERT(code == HMEMREG_ENOTSUP);
	d.cuMemFree(q);
}

GPU_TEST_MAIN()
