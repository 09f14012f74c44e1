// SPDX-License-Identifier: MIT
#include "xfer_cuda_procs.hpp"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "bench.hpp"
#include <hmemreg/engine.hpp>

#include "cuda_driver.hpp"

namespace hmemreg::bench {

namespace {

using Clock = std::chrono::steady_clock;

uint8_t byte_at(size_t i)
{
	return static_cast<uint8_t>(i * 131 + 7 + (i >> 12));
}

void check(CUresult r, const char *what)
{
	if (r != CUDA_SUCCESS)
		throw Error(HMEMREG_EFABRIC, std::string("xfer: ") + what + ": " + cuda::error_text(r));
}

const cuda::Driver &gpu()
{
	const cuda::Driver &d = cuda::Driver::get();
	if (!d.loaded)
		throw Error(HMEMREG_ENOTSUP, "xfer --mem cuda: " + d.why_not);
	if (cuda::use_device(0) < 0)
		throw Error(HMEMREG_ENOTSUP, "xfer --mem cuda: no CUDA device 0");
	return d;
}

// Framed messages on the socket pair: 32-bit length, then the bytes.
void send_msg(int fd, const void *p, uint32_t n)
{
	if (write(fd, &n, 4) != 4 || (n && write(fd, p, n) != static_cast<ssize_t>(n)))
		throw Error(HMEMREG_ESYS, "xfer: the target's socket broke");
}

Bytes recv_msg(int fd)
{
	uint32_t n = 0;
	if (read(fd, &n, 4) != 4)
		throw Error(HMEMREG_ESYS, "xfer: the target's socket closed");
	Bytes b(n);
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, b.data() + got, n - got);
		if (r <= 0)
			throw Error(HMEMREG_ESYS, "xfer: the target's socket closed");
		got += static_cast<size_t>(r);
	}
	return b;
}

EngineConfig config(const CudaProcsOptions &o)
{
	EngineConfig c;
	c.provider = o.provider;
	if (o.provider.find("tcp") != std::string::npos)
		c.node = "127.0.0.1";
	return c;
}

// The child: a device target of max_size bytes; commands 'Z' n (zero),
// 'V' n (verify the first n bytes), 'C' (notifications so far), 'Q'.
[[noreturn]] void target(const CudaProcsOptions &o, int fd)
{
	int rc = 0;
	try {
		const cuda::Driver &d = gpu();
		CUdeviceptr dst = 0;
		check(d.cuMemAlloc(&dst, o.max_size), "cuMemAlloc");
		check(d.cuMemsetD8(dst, 0, o.max_size), "cuMemsetD8");
		{
			Engine e(config(o));
			std::atomic<uint64_t> notes{0};
			e.on_notify([&](const Notification &) { notes.fetch_add(1); });
			auto region = e.register_region(reinterpret_cast<void *>(dst), o.max_size);
			Bytes a = e.address(), desc = e.descriptor(*region);
			send_msg(fd, a.data(), static_cast<uint32_t>(a.size()));
			send_msg(fd, desc.data(), static_cast<uint32_t>(desc.size()));
			uint8_t staged = region->staged();
			send_msg(fd, &staged, 1);
			for (;;) {
				Bytes m = recv_msg(fd);
				if (m.empty() || m[0] == 'Q')
					break;
				uint64_t n = 0;
				if (m.size() >= 9)
					std::memcpy(&n, m.data() + 1, 8);
				n = std::min<uint64_t>(n, o.max_size);
				uint64_t reply = 0;
				if (m[0] == 'Z') {
					check(d.cuMemsetD8(dst, 0, n), "cuMemsetD8");
				} else if (m[0] == 'V') {
					std::vector<uint8_t> h(n);
					check(d.cuMemcpyDtoH(h.data(), dst, n), "cuMemcpyDtoH");
					reply = ~0ULL;
					for (size_t i = 0; i < n; i++)
						if (h[i] != byte_at(i)) {
							reply = i;
							break;
						}
				} else if (m[0] == 'C') {
					reply = notes.load();
				}
				send_msg(fd, &reply, 8);
			}
		}
		d.cuMemFree(dst);
	} catch (const std::exception &e) {
		std::fprintf(stderr, "xfer target: %s\n", e.what());
		rc = 1;
	}
	std::_Exit(rc);
}

uint64_t ask(int fd, char op, uint64_t n = 0)
{
	uint8_t m[9];
	m[0] = static_cast<uint8_t>(op);
	std::memcpy(m + 1, &n, 8);
	send_msg(fd, m, 9);
	Bytes r = recv_msg(fd);
	uint64_t v = 0;
	if (r.size() == 8)
		std::memcpy(&v, r.data(), 8);
	return v;
}

// GB/s of `fn` moving `bytes` per call, best of `repeat` runs of ~seconds.
template <typename F> double best_gbps(size_t bytes, unsigned repeat, double seconds, F fn)
{
	fn(); // warm-up
	auto t0 = Clock::now();
	fn();
	double one = std::chrono::duration<double>(Clock::now() - t0).count();
	long iters = std::clamp(static_cast<long>(seconds / std::max(one, 1e-7)), 3L, 100000L);
	double best = 0;
	for (unsigned r = 0; r < repeat; r++) {
		auto s = Clock::now();
		for (long i = 0; i < iters; i++)
			fn();
		double sec = std::chrono::duration<double>(Clock::now() - s).count();
		best = std::max(best, static_cast<double>(bytes) * static_cast<double>(iters) / sec / 1e9);
	}
	return best;
}

} // namespace

int xfer_cuda_two_processes(const CudaProcsOptions &o)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		throw Error(HMEMREG_ESYS, "xfer: socketpair failed");
	std::fflush(stdout);
	pid_t pid = fork(); // before this process touches CUDA or libfabric
	if (pid < 0)
		throw Error(HMEMREG_ESYS, "xfer: fork failed");
	if (pid == 0) {
		close(sv[0]);
		target(o, sv[1]);
	}
	close(sv[1]);
	const int fd = sv[0];
	int status = 0;
	try {
		const cuda::Driver &d = gpu();
		Bytes addr = recv_msg(fd), desc = recv_msg(fd);
		const bool target_staged = recv_msg(fd).at(0) != 0;
		CUdeviceptr src = 0, copy = 0;
		check(d.cuMemAlloc(&src, o.max_size), "cuMemAlloc");
		check(d.cuMemAlloc(&copy, o.max_size), "cuMemAlloc");
		{
			std::vector<uint8_t> h(o.max_size);
			for (size_t i = 0; i < h.size(); i++)
				h[i] = byte_at(i);
			check(d.cuMemcpyHtoD(src, h.data(), h.size()), "cuMemcpyHtoD");
		}
		void *pinned = nullptr;
		check(d.cuMemHostAlloc(&pinned, o.max_size, 0), "cuMemHostAlloc");
		Engine a(config(o));
		PeerId peer = a.add_peer(addr, true);
		auto region = a.register_region(reinterpret_cast<void *>(src), o.max_size);
		const bool staged = region->staged() || target_staged;
		Printer pr(o.json);
		pr.section("xfer " + o.provider + ", cuda memory, GPU 0 -> GPU 0 in a child process");
		if (!o.json)
			std::printf("# %s\n", a.describe().c_str());
		for (size_t n = o.min_size; n <= o.max_size; n *= 2) {
			Chunk c{region->handle(), 0, n, 0};
			uint64_t tag = 1;
			// A window of writes, then until the target was notified of all
			// of them: its notification means the bytes are in its device
			// memory (the writer's completion only that shm's target side
			// queued its copy).
			uint64_t notified = ask(fd, 'C');
			auto writes = [&] {
				std::vector<TransferRef> xs;
				for (unsigned w = 0; w < o.window; w++)
					xs.push_back(a.write(peer, std::span<const Chunk>(&c, 1), desc, tag++));
				for (auto &x : xs)
					if (!a.wait(*x, std::chrono::seconds(60)) || x->status() != 0)
						throw Error(HMEMREG_EFABRIC, "xfer: a write failed: " + x->error());
				notified += o.window;
				auto until = Clock::now() + std::chrono::seconds(60);
				while (ask(fd, 'C') < notified)
					if (Clock::now() > until)
						throw Error(HMEMREG_EFABRIC, "xfer: the target was not notified in 60 s");
			};
			double gbps = best_gbps(n * o.window, o.repeat, o.seconds, writes);
			std::string verified = "no";
			if (o.verify) {
				ask(fd, 'Z', n);
				uint64_t before = ask(fd, 'C');
				Chunk one{region->handle(), 0, n, 0};
				auto x = a.write(peer, std::span<const Chunk>(&one, 1), desc, tag++);
				if (!a.wait(*x, std::chrono::seconds(60)) || x->status() != 0)
					throw Error(HMEMREG_EFABRIC, "xfer: the verified write failed");
				auto until = Clock::now() + std::chrono::seconds(30);
				while (ask(fd, 'C') == before && Clock::now() < until)
					std::this_thread::sleep_for(std::chrono::milliseconds(1));
				uint64_t at = ask(fd, 'V', n);
				verified = at == ~0ULL ? "yes" : "NO: byte " + std::to_string(at) + " differs";
			}
			double d2d = best_gbps(n, o.repeat, o.seconds / 4, [&] {
				check(d.cuMemcpyDtoD(copy, src, n), "cuMemcpyDtoD");
				check(d.cuCtxSynchronize(), "cuCtxSynchronize");
			});
			double d2h = best_gbps(n, 1, o.seconds / 4, [&] { check(d.cuMemcpyDtoH(pinned, src, n), "cuMemcpyDtoH"); });
			double h2d = best_gbps(n, 1, o.seconds / 4, [&] { check(d.cuMemcpyHtoD(copy, pinned, n), "cuMemcpyHtoD"); });
			const struct hmemreg_engine_path_stats ps = a.path_stats();
			const std::string address_why = a.text(HMEMREG_ENGINE_TEXT_DEVICE_ADDRESS_WHY);
			const std::string wrap = a.text(HMEMREG_ENGINE_TEXT_DEVICE_WRAP);
			Row r;
			r.add("bench", "xfer").add("provider", o.provider).add("mem", "cuda").add("target", "child");
			r.add("bytes", static_cast<long long>(n)).add("window", static_cast<long long>(o.window));
			r.add("path", staged ? "staged" : "direct");
			r.add("registered", staged ? "host mirror"
					    : ps.device_regs_dmabuf ? "FI_MR_DMABUF"
					    : "by address (" + (address_why.empty() ? std::string("API < 1.20") : address_why) + ")");
			if (!staged && ps.device_regs_dmabuf)
				r.add("wrapped", wrap);
			r.add("GBps", gbps, 2).add("d2d_GBps", d2d, 1).add("pinned_GBps", std::min(d2h, h2d), 1);
			r.add("x_of_d2d", d2d > 0 ? gbps / d2d : 0.0, 4);
			r.add("verified", verified);
			pr.print(r);
			if (o.verify && verified != "yes")
				status = 1;
		}
		d.cuMemFreeHost(pinned);
		region.reset();
		d.cuMemFree(src);
		d.cuMemFree(copy);
	} catch (const std::exception &e) {
		std::fprintf(stderr, "%s\n", e.what());
		status = 1;
	}
	uint8_t q = 'Q';
	try {
		send_msg(fd, &q, 1);
	} catch (const Error &) {
	}
	close(fd);
	int st = 0;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		status = 1;
	return status;
}

} // namespace hmemreg::bench
