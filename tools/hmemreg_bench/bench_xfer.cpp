// SPDX-License-Identifier: MIT
// hmemreg_bench xfer: bandwidth of engine writes between two engines, in one
// process, with the target engine in a child process (--procs 2), or in a
// bench server on another host (--serve there, --connect here; each engine
// with one progress thread per rail unless --threads says otherwise), next
// to a reference measured in the same run: iperf3 over
// loopback for tcp and net, memcpy for shm (with R rails: R iperf3 pairs, R memcpy
// threads, so a rail is compared with one stream or one copying core),
// perftest's ib_write_bw on the same device for verbs (e.g. Soft-RoCE in
// the VM).
//
// With --mem cuda, source and target are CUDA device memory (--devices S,D;
// default 0,0), moved the way the engine chooses (staged through pinned host
// mirrors where the provider has no FI_HMEM: the path column says so); the
// reference is then the slower of cuMemcpy device->host and host->device
// from pinned memory of the same size, next to the device-to-device copy
// (cuMemcpyPeer across two GPUs) that a device-direct NIC path approaches
// (d2d/xfer = that gap). host_gbps is the same transfer between host
// buffers over the same provider in the same run: staged/host is what
// staging costs on top of the wire.
//
// Columns follow fabtests (bytes iters total time MB/sec usec/xfer
// Mxfers/sec; MB = 10^6 B), plus chunks, rails, Gbps, the reference and the
// percentage of it. For tcp, net and shm a second figure, the ceiling, is what
// the provider's own data path moves at the same size and footprint without
// libfabric or the engine: a loopback TCP stream of size-byte buffers (iperf3
// stops at 1 MiB buffers, which stay in cache), and process_vm_writev of
// size bytes (the single kernel copy shm uses for large RMA). pct_ceiling
// says how much of that the engine keeps. op_ceil_gbps is the same stream or
// copies moved in the engine's writes (op_bytes per send() or per
// process_vm_writev, into op_pieces remote ranges): the provider's per-write
// cost at that size, which the engine cannot go below without larger writes.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <hmemreg/engine.hpp>

#include "bench.hpp"
#include "cli.hpp"
#include "reference_tools.hpp"
#include "cuda_driver.hpp"
#include "xfer_cuda_procs.hpp"
#include "xfer_payload.hpp"
#include "xfer_server.hpp"
#include "xfer_target.hpp"

using namespace hmemreg;
using Config = EngineConfig;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
	std::vector<std::string> providers{"tcp;ofi_rxm", "shm"};
	std::string node;
	size_t min_size = 4096, max_size = 64ull << 20;
	std::vector<size_t> chunks{1, 64};
	std::vector<unsigned> rails{1};
	size_t window = 16;
	double seconds = 0.25; // per run
	unsigned repeat = 3;   // runs per row: the best is reported
	bool json = false;
	bool verify = false;
	bool cuda = false;
	int src_dev = 0, dst_dev = 0;
	size_t max_write = 0; // 0: the engine's default
	unsigned threads = 0; // progress threads per engine; 0: one per rail
	std::vector<size_t> write_iov{0}; // chunks per write; 0: the engine's default
	bool more = false;
	unsigned procs = 1;   // 2: the target engines live in a child process
	std::string connect;  // HOST:PORT of a bench server holding the target engines
	std::string serve;    // [HOST]:PORT: be that server
	// Target notification modes, each its own engine pair, run interleaved.
	struct NotifyRun {
		Config::Notify mode;
		size_t imm_bytes; // Config::imm_data_bytes (4: immediate4)
	};
	std::vector<NotifyRun> notify{{Config::Notify::Auto, 0}};
};

const char *notify_name(Options::NotifyRun n)
{
	if (n.imm_bytes == 4)
		return "immediate4";
	return n.mode == Config::Notify::Immediate ? "immediate" : n.mode == Config::Notify::Message ? "message" : "auto";
}

std::vector<std::string> split(const std::string &s, char sep)
{
	std::vector<std::string> v;
	size_t b = 0;
	while (true) {
		size_t e = s.find(sep, b);
		v.push_back(s.substr(b, e == std::string::npos ? e : e - b));
		if (e == std::string::npos)
			break;
		b = e + 1;
	}
	return v;
}

std::string human(double bytes)
{
	const char *u[] = {"", "k", "m", "g", "t"};
	int i = 0;
	while (bytes >= 1024 && i < 4) {
		bytes /= 1024;
		i++;
	}
	char b[32];
	std::snprintf(b, sizeof(b), bytes == static_cast<long long>(bytes) ? "%.0f%s" : "%.1f%s", bytes, u[i]);
	return b;
}

// Runs a command, returns its stdout ("" on failure).
// iperf3 over loopback, or to a remote bench server's host (its servers
// started there), 1 MiB writes, 1 s: Gbps summed over `streams`
// server/client pairs running at once (one per rail: a tcp rail is one
// connection with its own progress thread, and iperf3 before 3.16 runs all
// of -P's streams on one thread), 0 when unavailable.
double iperf3_gbps(std::string &what, unsigned streams, bench::Targets &targets)
{
	const int port0 = 5201 + static_cast<int>(getpid() % 2000) * 8;
	std::fflush(stdout);
	const bool remote = targets.remote_buffers();
	what = remote ? "iperf3" : "iperf3-lo";
	std::string host = "127.0.0.1";
	bench::Spawned local; // ended on return
	try {
		if (remote)
			host = targets.start_iperf3(port0, streams);
		else
			bench::start_iperf3_servers(local, port0, streams, host);
	} catch (const Error &e) {
		std::fprintf(stderr, "%s\n", e.what()); // no iperf3: no reference
		return 0;
	}
	std::vector<double> g(streams, 0);
	std::vector<std::thread> clients;
	for (size_t i = 0; i < g.size(); i++)
		clients.emplace_back([&, i] {
			// The server may take a while to listen on a busy machine: retry.
			for (int attempt = 0; attempt < 20 && g[i] <= 0; attempt++) {
				std::this_thread::sleep_for(std::chrono::milliseconds(100));
				g[i] = bench::iperf3_client_gbps(host, port0 + static_cast<int>(i), 1, 1 << 20);
			}
		});
	for (auto &c : clients)
		c.join();
	double sum = 0;
	for (double x : g) {
		if (x <= 0)
			return 0; // one pair failed: no reference rather than a low one
		sum += x;
	}
	return sum;
}

// perftest's ib_write_bw on the rail's device (server and client on this
// host, `size` bytes, RC writes): Gbps average (0 when it does not run).
double ib_write_bw_gbps(const std::string &device, size_t size)
{
	const std::string port = std::to_string(18515 + getpid() % 2000);
	const std::vector<std::string> args{"ib_write_bw", "-d", device, "-p", port, "-s", std::to_string(size),
					    "-n", "200", "-F", "--report_gbits"};
	bench::Spawned server; // ended on return
	try {
		server.start(args);
	} catch (const Error &e) {
		std::fprintf(stderr, "%s\n", e.what());
		return 0;
	}
	std::string common;
	for (const std::string &a : args)
		common += a + " ";
	std::string out;
	// The server takes seconds to listen in an emulated VM: retry for 30 s.
	for (int attempt = 0; attempt < 60 && out.find("#bytes") == std::string::npos; attempt++) {
		std::this_thread::sleep_for(std::chrono::milliseconds(500));
		out = bench::capture(common + "127.0.0.1 2>/dev/null");
	}
	server.stop();
	// The row after the "#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec]" header.
	bool next = false;
	for (const auto &line : split(out, '\n')) {
		if (line.find("#bytes") != std::string::npos) {
			next = true;
			continue;
		}
		if (!next)
			continue;
		double bytes = 0, iters = 0, peak = 0, avg = 0;
		if (std::sscanf(line.c_str(), "%lf %lf %lf %lf", &bytes, &iters, &peak, &avg) == 4)
			return avg;
	}
	return 0;
}

// memcpy between two buffers of `size` bytes (what shm's single copy is
// bounded by), by `threads` threads (one per rail) each copying its share
// back and forth, started together: Gbps of all of them.
double memcpy_gbps(size_t size, double seconds, unsigned threads)
{
	std::vector<uint8_t> a(size, 1), b(size, 2);
	std::vector<size_t> copied(threads, 0);
	std::vector<std::thread> th;
	std::atomic<bool> go{false};
	const size_t share = size / threads;
	for (unsigned t = 0; t < threads; t++)
		th.emplace_back([&, t] {
			const size_t off = share * t, n = t + 1 == threads ? size - off : share;
			while (!go.load())
				;
			auto start = Clock::now();
			size_t i = 0;
			do {
				for (int k = 0; k < 8; k++, i++)
					std::memcpy((i & 1 ? a.data() : b.data()) + off, (i & 1 ? b.data() : a.data()) + off, n);
			} while (std::chrono::duration<double>(Clock::now() - start).count() < seconds);
			copied[t] = i * n;
		});
	auto t0 = Clock::now();
	go = true;
	for (auto &x : th)
		x.join();
	double el = std::chrono::duration<double>(Clock::now() - t0).count();
	size_t bytes = 0;
	for (size_t x : copied)
		bytes += x;
	return static_cast<double>(bytes) * 8 / el / 1e9;
}

// Starts of the streams of a ceiling: each gets its buffers and connection
// ready before the clock starts.
struct Gate {
	std::atomic<unsigned> ready{0};
	std::atomic<bool> go{false}, stop{false};
	void arrive()
	{
		ready++;
		while (!go.load())
			std::this_thread::yield();
	}
};

// Runs `streams` copies of body(src, dst, gate) at once for `seconds` once
// all are ready, each with buffers of its share of `size` (size / streams,
// the last takes the rest); each returns the bytes it moved. Gbps of all of
// them, 0 if any failed (returned 0, or its buffers could not be had).
template <typename Body>
double concurrent_gbps(size_t size, double seconds, unsigned streams, Body body)
{
	streams = static_cast<unsigned>(std::min<size_t>(streams, size)); // no empty share
	std::vector<size_t> moved(streams, 0);
	std::vector<std::thread> th;
	Gate gate;
	const size_t share = size / streams;
	for (unsigned i = 0; i < streams; i++)
		th.emplace_back([&, i] {
			const size_t n = i + 1 == streams ? size - share * i : share;
			std::vector<uint8_t> src, dst;
			try {
				src.assign(n, 1);
				dst.assign(n, 2);
			} catch (const std::bad_alloc &) {
				gate.arrive(); // moved[i] stays 0
				return;
			}
			moved[i] = body(src, dst, gate);
		});
	while (gate.ready.load() < streams)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	auto t0 = Clock::now();
	gate.go = true;
	std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
	gate.stop = true;
	for (auto &t : th)
		t.join();
	double el = std::chrono::duration<double>(Clock::now() - t0).count();
	size_t bytes = 0;
	for (size_t m : moved) {
		if (!m)
			return 0;
		bytes += m;
	}
	return static_cast<double>(bytes) * 8 / el / 1e9;
}

// The tcp ceiling: a kernel TCP stream over loopback, sending its share of
// `size` in sends of `op` bytes each (SIZE_MAX: the whole share per send), each
// received by recv() calls into its own place in a buffer of the share's size,
// as tcp receives a write (bytes received; a failed setup still arrives at
// the gate, and returns 0).
size_t tcp_stream(std::span<uint8_t> src, std::span<uint8_t> dst, Gate &gate, size_t op = SIZE_MAX)
{
	const size_t n = src.size();
	op = std::clamp<size_t>(op, 1, n);
	int ls = socket(AF_INET, SOCK_STREAM, 0), s = -1, r = -1;
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t al = sizeof(a);
	if (ls >= 0 && !bind(ls, reinterpret_cast<sockaddr *>(&a), sizeof(a)) && !listen(ls, 1) &&
	    !getsockname(ls, reinterpret_cast<sockaddr *>(&a), &al)) {
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (s >= 0 && !connect(s, reinterpret_cast<sockaddr *>(&a), sizeof(a)))
			r = accept(ls, nullptr, nullptr);
	}
	if (ls >= 0)
		close(ls);
	gate.arrive();
	size_t got = 0;
	if (r >= 0) {
		std::thread sender([&] {
			bool ok = true;
			do { // at least one buffer, however late this thread starts
				for (size_t off = 0; ok && off < n;) {
					const size_t end = std::min(n, (off / op + 1) * op); // this op's end
					ssize_t w = send(s, src.data() + off, end - off, MSG_NOSIGNAL);
					ok = w > 0;
					off += ok ? static_cast<size_t>(w) : 0;
				}
			} while (ok && !gate.stop.load(std::memory_order_relaxed));
			shutdown(s, SHUT_WR); // the receiver reads to the end, also after a failed send
		});
		for (ssize_t k; (k = recv(r, dst.data() + got % n, std::min(n, (got % n / op + 1) * op) - got % n, 0)) > 0;)
			got += static_cast<size_t>(k);
		close(r); // after a receive error too: a sender blocked in send() fails
		sender.join();
	}
	if (s >= 0)
		close(s);
	return got;
}

// The shm ceiling: process_vm_writev of a share of `size` into this process,
// one call per share, or (op < SIZE_MAX) one call per op bytes, each into
// `pieces` remote ranges, as shm copies a write (bytes copied).
size_t cma_copy(std::span<uint8_t> src, std::span<uint8_t> dst, Gate &gate, size_t op = SIZE_MAX,
		size_t pieces = 1)
{
	const size_t n = src.size();
	op = std::clamp<size_t>(op, 1, n);
	pieces = std::clamp<size_t>(pieces, 1, std::min<size_t>(op, 64));
	gate.arrive();
	size_t moved = 0;
	do { // at least one copy, however late this thread starts
		for (size_t off = 0; off < n;) {
			const size_t len = std::min(op, n - off), per = len / pieces;
			iovec l{src.data() + off, len}, r[64];
			size_t k = 0;
			for (size_t at = 0; at < len; k++) {
				const size_t part = k + 1 == pieces ? len - at : per;
				r[k] = {dst.data() + off + at, part};
				at += part;
			}
			if (process_vm_writev(getpid(), &l, 1, r, k, 0) != static_cast<ssize_t>(len))
				return 0;
			off += len;
			moved += len;
		}
	} while (!gate.stop.load(std::memory_order_relaxed));
	return moved;
}

// The bytes of one RDMA write the engine posts for a transfer of `size` in
// `nchunks` chunks (bench::placements; with `rails`, pieces are dealt round
// robin, so a rail's writes join its own consecutive pieces), and the pieces
// per write: the write planner's grouping (write_plan.hpp), for the same-op
// ceilings.
struct WriteOp {
	size_t bytes, pieces;
};
WriteOp engine_write(size_t size, size_t nchunks, size_t max_write, size_t write_iov)
{
	const size_t chunk = size / nchunks;
	if (nchunks <= 1 || chunk == 0 || chunk >= max_write) // joined (contiguous) or split at max_write
		return {std::min(size, max_write), 1};
	const size_t k = std::max<size_t>(1, std::min({write_iov, max_write / chunk, nchunks}));
	return {k * chunk, k};
}

struct Result {
	size_t iters;
	double seconds;
};

// Transfers of `size` bytes in `nchunks` chunks for about `seconds`, `window`
// in flight; each completion posts the next from the progress thread.
// Scattered: chunk k of the source lands in reverse order at the target.
std::vector<Chunk> layout(const Region &src, size_t size, size_t nchunks)
{
	std::vector<Chunk> chunks;
	for (const bench::Placement &p : bench::placements(size, nchunks))
		chunks.push_back({src.handle(), p.local, p.len, p.remote});
	return chunks;
}

// Until the engine holds no transfer to `peer` any more, whose callback
// captures locals of the caller: on destruction, also when unwinding. A dead
// peer's transfers fail within the engine's peer timeout; should they not
// (no timeout), the process ends rather than let a callback use freed memory.
class Drained {
public:
	Drained(Engine &e, PeerId peer) : e_(e), peer_(peer) {}
	Drained(const Drained &) = delete;
	Drained &operator=(const Drained &) = delete;
	~Drained() noexcept
	{
		const unsigned t = e_.caps().peer_timeout_ms();
		const auto bound = std::chrono::milliseconds(t ? t + 5000ull : 60'000ull);
		try {
			if (e_.drain(peer_, bound))
				return;
			std::fprintf(stderr, "xfer: transfers to the target still unfinished %lld ms on; exiting (their "
					     "callbacks would use freed memory)\n",
				     static_cast<long long>(bound.count()));
		} catch (const Error &e) {
			std::fprintf(stderr, "xfer: %s; exiting\n", e.what());
		}
		std::fflush(nullptr);
		std::_Exit(1);
	}

private:
	Engine &e_;
	PeerId peer_;
};

// A transfer counts once the target was notified (`notes`, counted by the
// target's on_notify): the writer's completion alone means its buffers are
// free again, which with immediate notification comes before the data lands.
// Returns only once every transfer it posted finished and its callback
// returned (the callbacks capture its locals).
Result run_writes(Engine &a, PeerId peer, const Region &src, const Bytes &desc, size_t size, size_t nchunks,
		  double seconds, size_t window, const std::function<size_t()> &notes, size_t max_iters = SIZE_MAX)
{
	const size_t notes0 = notes();
	std::vector<Chunk> chunks = layout(src, size, nchunks);
	std::atomic<size_t> posted{0}, done{0};
	std::atomic<bool> stop{false};
	std::atomic<int> failed{0};
	std::function<void(const Transfer &)> cb;
	auto fail = [&](const std::string &why) {
		if (failed.exchange(1) == 0)
			std::fprintf(stderr, "xfer: transfer failed: %s\n", why.c_str());
	};
	// Also from a callback: a write refused (dead peer) fails the run.
	auto post_one = [&] {
		if (stop.load(std::memory_order_relaxed) || failed.load(std::memory_order_relaxed))
			return;
		if (posted.fetch_add(1) >= max_iters) {
			posted.fetch_sub(1);
			return;
		}
		try {
			a.write(peer, chunks, desc, 0, cb);
		} catch (const Error &e) {
			posted.fetch_sub(1);
			fail(e.what());
		}
	};
	cb = [&](const Transfer &t) {
		if (t.status() != 0)
			fail(t.error());
		done.fetch_add(1);
		post_one();
	};
	auto t0 = Clock::now();
	auto end = t0 + std::chrono::duration<double>(seconds);
	{
		Drained drained(a, peer); // declared after what the callbacks use: runs before it goes
		for (size_t i = 0; i < window; i++)
			post_one();
		while (Clock::now() < end && done.load() < max_iters && !failed.load())
			std::this_thread::sleep_for(std::chrono::microseconds(200));
		stop = true;
	}
	auto give_up = Clock::now() + std::chrono::seconds(30);
	while (!failed.load() && notes() - notes0 < done.load() && Clock::now() < give_up)
		std::this_thread::sleep_for(std::chrono::microseconds(20));
	double el = std::chrono::duration<double>(Clock::now() - t0).count();
	if (failed.load())
		throw Error(HMEMREG_EFABRIC, "xfer: a transfer failed");
	if (const size_t seen = notes() - notes0; seen < done.load())
		throw Error(HMEMREG_EFABRIC, "xfer: " + std::to_string(done.load() - seen) +
						     " completed transfers were never notified at the target");
	return {done.load(), el};
}

// ---- CUDA memory (--mem cuda)

const cuda::Driver &driver()
{
	const cuda::Driver &d = cuda::Driver::get();
	if (!d.loaded)
		throw Error(HMEMREG_ENOTSUP, "xfer --mem cuda: " + d.why_not);
	return d;
}

void check(CUresult r, const char *what)
{
	if (r != CUDA_SUCCESS)
		throw Error(HMEMREG_EFABRIC, std::string("xfer: ") + what + ": " + cuda::error_text(r));
}

void use(int device)
{
	if (cuda::use_device(device) < 0)
		throw Error(HMEMREG_ENODEV, "xfer: no CUDA device " + std::to_string(device));
}

// The two buffers of a run: host (posix_memalign) or device memory.
class Buffers {
public:
	// shared_dst: the target buffer, in memory shared with the target's
	// process (host memory only), else allocated here unless the target is
	// remote (`no_dst`: its server holds it).
	Buffers(const Options &o, size_t n, void *shared_dst, bool no_dst)
		: o_(o), n_(n), own_dst_(!shared_dst && !no_dst)
	{
		std::vector<uint8_t> pat(n);
		for (size_t i = 0; i < n; i++)
			pat[i] = bench::pattern(i);
		if (!o.cuda) {
			dst_ = shared_dst;
			if (posix_memalign(&src_, 4096, n) || (own_dst_ && posix_memalign(&dst_, 4096, n)))
				throw Error(HMEMREG_ENOMEM, "xfer: cannot allocate buffers");
			std::memcpy(src_, pat.data(), n);
			return;
		}
		const cuda::Driver &d = driver();
		CUdeviceptr s, t;
		use(o.src_dev);
		check(d.cuMemAlloc(&s, n), "cuMemAlloc (source)");
		src_ = reinterpret_cast<void *>(s);
		check(d.cuMemcpyHtoD(s, pat.data(), n), "cuMemcpyHtoD");
		use(o.dst_dev);
		check(d.cuMemAlloc(&t, n), "cuMemAlloc (target)");
		dst_ = reinterpret_cast<void *>(t);
	}
	~Buffers()
	{
		if (!o_.cuda) {
			std::free(src_);
			if (own_dst_)
				std::free(dst_);
			return;
		}
		const cuda::Driver &d = cuda::Driver::get();
		d.cuMemFree(reinterpret_cast<CUdeviceptr>(src_));
		d.cuMemFree(reinterpret_cast<CUdeviceptr>(dst_));
	}
	Buffers(const Buffers &) = delete;
	Buffers &operator=(const Buffers &) = delete;
	void *src() const { return src_; }
	void *dst() const { return dst_; }
	void clear_dst(size_t n)
	{
		if (!o_.cuda)
			std::memset(dst_, 0, n);
		else
			check(cuda::Driver::get().cuMemsetD8(reinterpret_cast<CUdeviceptr>(dst_), 0, n), "cuMemsetD8");
	}
	std::vector<uint8_t> read_dst(size_t n) const
	{
		std::vector<uint8_t> h(n);
		if (!o_.cuda)
			std::memcpy(h.data(), dst_, n);
		else
			check(cuda::Driver::get().cuMemcpyDtoH(h.data(), reinterpret_cast<CUdeviceptr>(dst_), n),
			      "cuMemcpyDtoH");
		return h;
	}

private:
	const Options &o_;
	size_t n_;
	bool own_dst_;
	void *src_ = nullptr, *dst_ = nullptr;
};

// The copy limits of `size` bytes, measured now: device->host and
// host->device from pinned memory, and device->device (peer copy across GPUs).
struct CopyLimits {
	double d2h = 0, h2d = 0, d2d = 0;
};

CopyLimits copy_limits(const Options &o, const Buffers &b, size_t size, double seconds)
{
	const cuda::Driver &d = driver();
	CopyLimits l;
	void *pinned = nullptr;
	check(d.cuMemAllocHost(&pinned, size), "cuMemAllocHost");
	std::unique_ptr<void, void (*)(void *)> hold(pinned, [](void *p) { cuda::Driver::get().cuMemFreeHost(p); });
	CUcontext cs = nullptr, cd = nullptr;
	CUdevice dev;
	check(d.cuDeviceGet(&dev, o.src_dev), "cuDeviceGet");
	check(d.cuDevicePrimaryCtxRetain(&cs, dev), "cuDevicePrimaryCtxRetain");
	check(d.cuDeviceGet(&dev, o.dst_dev), "cuDeviceGet");
	check(d.cuDevicePrimaryCtxRetain(&cd, dev), "cuDevicePrimaryCtxRetain");
	auto src = reinterpret_cast<CUdeviceptr>(b.src()), dst = reinterpret_cast<CUdeviceptr>(b.dst());
	auto rate = [&](auto &&copy) {
		size_t iters = 0;
		auto t0 = Clock::now();
		double el = 0;
		do {
			copy();
			iters++;
			el = std::chrono::duration<double>(Clock::now() - t0).count();
		} while (el < seconds);
		return static_cast<double>(iters) * size * 8 / el / 1e9;
	};
	use(o.src_dev);
	l.d2h = rate([&] { check(d.cuMemcpyDtoH(pinned, src, size), "cuMemcpyDtoH"); });
	use(o.dst_dev);
	l.h2d = rate([&] { check(d.cuMemcpyHtoD(dst, pinned, size), "cuMemcpyHtoD"); });
	l.d2d = rate([&] {
		if (o.src_dev == o.dst_dev)
			check(d.cuMemcpyDtoD(dst, src, size), "cuMemcpyDtoD");
		else
			check(d.cuMemcpyPeer(dst, cd, src, cs, size), "cuMemcpyPeer");
		check(d.cuCtxSynchronize(), "cuCtxSynchronize");
	});
	return l;
}

// What a provider's rows are compared with: the reference measured per row
// (iperf3 over TCP, memcpy for shm, ib_write_bw for verbs here, the CUDA
// copies with --mem cuda) and, for tcp and shm, the provider's own ceiling.
struct Reference {
	std::string what;
	bool per_size_iperf = false;
	bool per_size_memcpy = false;
};

// A bench server elsewhere: iperf3 goes there too; the loopback stream
// ceiling and ib_write_bw (both sides here) do not apply.
Reference reference_for(const Options &o, const std::string &prov, bool over_tcp, bool remote)
{
	Reference ref;
	if (over_tcp) {
		ref.per_size_iperf = true;
		ref.what = remote ? "iperf3" : "iperf3-lo";
	} else if (prov == "shm") {
		ref.per_size_memcpy = true;
		ref.what = "memcpy";
	} else if (prov.find("verbs") != std::string::npos && !remote) {
		ref.what = "ib_write_bw";
	} else {
		ref.what = "none";
	}
	if (o.cuda) {
		ref.per_size_iperf = ref.per_size_memcpy = false;
		ref.what = "min(d2h,h2d)";
	}
	return ref;
}

// The writers' configuration for `prov` (rails, notification and write_iov
// are set per engine pair).
Config writer_config(const Options &o, const std::string &prov, bool over_tcp, bool remote)
{
	Config cfg;
	cfg.provider = prov;
	if (!o.node.empty())
		cfg.node = o.node;
	else if (over_tcp)
		cfg.node = "127.0.0.1";
	if (prov.find("verbs") != std::string::npos && o.node.empty())
		std::fprintf(stderr, "xfer: verbs: pass --node <address of the RDMA netdev>\n");
	if (remote && o.node.empty() && over_tcp)
		std::fprintf(stderr, "xfer: --connect: the engines here use 127.0.0.1 unless --node names this host's address\n");
	// The engine's idle spinning (20000 empty turns, then short sleeps) never
	// sleeps while transfers run, and it leaves the CPUs to the reference,
	// measured between runs: forever-spinning progress threads starved
	// ib_write_bw in a 2-CPU VM.
	cfg.max_write = o.max_write;
	if (o.more)
		cfg.flags |= HMEMREG_ENGINE_POST_MORE;
	return cfg;
}

// One engine pair per notification mode and write_iov, all measured in
// the same loop.
struct Setup {
	Options::NotifyRun mode;
	std::unique_ptr<Engine> a;
	bench::TargetEngine b; // in `targets`
	PeerId peer = 0;
	RegionRef src, hs;
	Bytes desc, hdesc;
};

// The writer engine, its target (regions: buf's target, and with --mem cuda
// the host target hdst too) and their registrations.
std::unique_ptr<Setup> make_setup(const Options &o, const Config &cfg, Options::NotifyRun mode, bench::Targets &targets,
				  const Buffers &buf, std::vector<uint8_t> &hsrc, std::vector<uint8_t> &hdst, size_t maxbuf)
{
	auto st = std::make_unique<Setup>();
	Setup &S = *st;
	S.mode = mode;
	S.a = std::make_unique<Engine>(cfg);
	std::vector<bench::Targets::Span> regions{{buf.dst(), maxbuf}};
	if (o.cuda)
		regions.push_back({hdst.data(), maxbuf});
	S.b = targets.make(cfg, regions);
	S.peer = S.a->add_peer(S.b.address, true);
	if (S.a->caps().imm_key_bytes() == 4) {
		// 4-byte keys: the target assigns the writer's index once it
		// knows the writer; measure with it.
		targets.add_peer(S.b.slot, S.a->address());
		for (int i = 0; i < 5000 && !S.a->immediate_to(S.peer); i++)
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}
	S.src = S.a->register_region(buf.src(), maxbuf);
	S.desc = S.b.descriptors[0];
	if (o.cuda) {
		S.hs = S.a->register_region(hsrc.data(), maxbuf);
		S.hdesc = S.b.descriptors[1];
	}
	return st;
}

void print_setup(const Options &o, const std::string &prov, unsigned rails, const bench::Targets &targets,
		 const Reference &ref, const Setup &S)
{
	std::printf("\n# xfer %s, %s memory%s, %u rail(s), window %zu, notify %s, target %s; reference: %s\n# %s\n",
		    prov.c_str(), o.cuda ? "cuda" : "host",
		    o.cuda ? (" (devices " + std::to_string(o.src_dev) + " -> " +
			      std::to_string(o.dst_dev) + ")").c_str() : "",
		    rails, o.window, notify_name(S.mode), targets.where(),
		    ref.what == "iperf3-lo" ? "iperf3 over loopback, one client/server pair per rail at once, 1 MiB writes, 1 s, per row"
		    : o.cuda ? "the slower of cuMemcpy D2H/H2D from pinned memory, per row"
			     : ref.what.c_str(),
		    S.a->describe().c_str());
}

// The first engine pair whose writes are the same op as pair m's (bytes
// and pieces per op): its op ceiling is m's.
size_t first_same_op(const std::vector<WriteOp> &ops, size_t m)
{
	size_t same = 0;
	while (same < m && (ops[same].bytes != ops[m].bytes || ops[same].pieces != ops[m].pieces))
		same++;
	return same;
}

// One row's figures for every engine pair: the best of `repeat` runs per
// pair, the reference and ceilings likewise, all interleaved, so every pair
// sees the same machine (it is shared).
struct Measured {
	std::vector<Result> r, host; // host: --mem cuda, the same between host buffers
	double ref = 0;
	double ceiling = 0; // tcp: same-size stream; shm: process_vm_writev
	// The same stream or copies in the engine's writes (same bytes per op,
	// same pieces per op), per engine pair.
	std::vector<WriteOp> ops;
	std::vector<double> op_ceiling;
	CopyLimits lim;
};

Measured measure(const Options &o, const std::vector<std::unique_ptr<Setup>> &setups, const Reference &ref,
		 bool remote, unsigned rails, bench::Targets &targets, const Buffers &buf, size_t size, size_t nch)
{
	Measured ms;
	ms.r.assign(setups.size(), Result{0, 1});
	ms.host.assign(setups.size(), Result{0, 1});
	for (const auto &S : setups)
		ms.ops.push_back(engine_write(size, nch, S->a->caps().raw.max_write, S->a->caps().write_iov()));
	ms.op_ceiling.assign(setups.size(), 0);
	auto measure_op_ceilings = [&](auto body) {
		for (size_t m = 0; m < setups.size(); m++) {
			if (first_same_op(ms.ops, m) < m)
				continue; // measured for an earlier pair with the same op
			ms.op_ceiling[m] = std::max(ms.op_ceiling[m], concurrent_gbps(size, o.seconds / 2, rails,
					[&](std::span<uint8_t> a, std::span<uint8_t> b, Gate &g) {
						return body(a, b, g, ms.ops[m]);
					}));
		}
	};
	for (unsigned k = 0; k < o.repeat; k++) {
		for (size_t m = 0; m < setups.size(); m++) {
			Setup &S = *setups[m];
			Result t = run_writes(*S.a, S.peer, *S.src, S.desc, size, nch, o.seconds, o.window, S.b.notes);
			if (t.iters / t.seconds > ms.r[m].iters / ms.r[m].seconds)
				ms.r[m] = t;
			if (o.cuda) {
				Result h = run_writes(*S.a, S.peer, *S.hs, S.hdesc, size, nch, o.seconds, o.window,
						      S.b.notes);
				if (h.iters / h.seconds > ms.host[m].iters / ms.host[m].seconds)
					ms.host[m] = h;
			}
		}
		if (ref.per_size_memcpy)
			ms.ref = std::max(k ? ms.ref : 0.0, memcpy_gbps(size, o.seconds / 2, rails));
		if (ref.what == "ib_write_bw")
			ms.ref = std::max(k ? ms.ref : 0.0, ib_write_bw_gbps(setups[0]->a->caps().rail_domains[0], size));
		if (ref.per_size_iperf) {
			std::string w;
			ms.ref = std::max(k ? ms.ref : 0.0, iperf3_gbps(w, rails, targets));
			if (!remote) {
				ms.ceiling = std::max(ms.ceiling, concurrent_gbps(size, o.seconds / 2, rails,
					[](std::span<uint8_t> a, std::span<uint8_t> b, Gate &g) {
						return tcp_stream(a, b, g);
					}));
				measure_op_ceilings([](std::span<uint8_t> a, std::span<uint8_t> b, Gate &g, WriteOp op) {
					return tcp_stream(a, b, g, op.bytes);
				});
			}
		}
		if (ref.per_size_memcpy) {
			ms.ceiling = std::max(ms.ceiling, concurrent_gbps(size, o.seconds / 2, rails,
				[](std::span<uint8_t> a, std::span<uint8_t> b, Gate &g) {
					return cma_copy(a, b, g);
				}));
			measure_op_ceilings([](std::span<uint8_t> a, std::span<uint8_t> b, Gate &g, WriteOp op) {
				return cma_copy(a, b, g, op.bytes, op.pieces);
			});
		}
		if (o.cuda) {
			CopyLimits c = copy_limits(o, buf, size, o.seconds / 2);
			ms.lim.d2h = std::max(ms.lim.d2h, c.d2h);
			ms.lim.h2d = std::max(ms.lim.h2d, c.h2d);
			ms.lim.d2d = std::max(ms.lim.d2d, c.d2d);
			ms.ref = std::min(ms.lim.d2h, ms.lim.h2d);
		}
	}
	return ms;
}

// One more transfer into a cleared target, compared byte for byte with
// where each source chunk must land (the run waits for the target's
// notification); a remote target compares its own bytes.
void verify_once(Setup &S, bench::Targets &targets, Buffers &buf, bool remote, size_t size, size_t nch)
{
	std::string why;
	if (remote)
		targets.zero(S.b.slot, 0, size);
	else
		buf.clear_dst(size);
	run_writes(*S.a, S.peer, *S.src, S.desc, size, nch, 10, 1, S.b.notes, 1);
	const bool same = remote ? targets.verify(S.b.slot, 0, size, nch, why)
				 : buf.read_dst(size) == bench::expected_target(size, nch);
	if (!same)
		throw Error(HMEMREG_EFABRIC, "xfer: verification failed at " + human(size) + " (notify " +
						     notify_name(S.mode) + ")" + (why.empty() ? "" : ": " + why));
}

// Pair m's row of one size and chunk count.
bench::Row row_of(const Options &o, const std::string &prov, const Setup &S, size_t m, const Measured &ms,
		  const Reference &ref, bool remote, unsigned rails, size_t size, size_t nch, const char *path)
{
	double bytes = static_cast<double>(size) * ms.r[m].iters;
	double gbps = bytes * 8 / ms.r[m].seconds / 1e9;
	bench::Row row;
	if (o.json)
		row.add("bench", "xfer").add("provider", prov).add("mem", o.cuda ? "cuda" : "host");
	if (o.json)
		row.add("bytes", static_cast<unsigned long long>(size));
	else
		row.add("bytes", human(size));
	row.add("chunks", nch).add("rails", static_cast<int>(rails))
		.add("target", !o.connect.empty() ? "remote" : o.procs == 2 ? "child" : "in-process");
	row.add("notify", !S.a->immediate_to(S.peer) ? "msg"
			  : S.a->caps().imm_key_bytes() == 4 ? "imm4" : "imm");
	row.add("iov", S.a->caps().write_iov());
	row.add("iters", ms.r[m].iters);
	if (o.json)
		row.add("total", static_cast<long long>(bytes));
	else
		row.add("total", human(bytes));
	row.add("time", ms.r[m].seconds, 3);
	row.add("MB/sec", bytes / ms.r[m].seconds / 1e6, 2);
	row.add("usec/xfer", ms.r[m].seconds * 1e6 / ms.r[m].iters, 2);
	row.add("Mxfers/sec", ms.r[m].iters / ms.r[m].seconds / 1e6, 4);
	row.add("gbps", gbps, 2);
	row.add("ref", rails > 1 && (ref.per_size_iperf || ref.per_size_memcpy)
				? ref.what + " x" + std::to_string(rails)
				: ref.what);
	row.add("ref_gbps", ms.ref, 2);
	row.add("pct_ref", ms.ref > 0 ? 100.0 * gbps / ms.ref : 0.0, 1);
	if ((ref.per_size_iperf && !remote) || ref.per_size_memcpy) {
		row.add("ceiling", ref.per_size_iperf ? "tcp-stream" : "cma");
		row.add("ceiling_gbps", ms.ceiling, 2);
		row.add("pct_ceiling", ms.ceiling > 0 ? 100.0 * gbps / ms.ceiling : 0.0, 1);
		// The same in the engine's writes: bytes and pieces per op.
		const double opc = ms.op_ceiling[first_same_op(ms.ops, m)];
		if (o.json)
			row.add("op_bytes", static_cast<unsigned long long>(ms.ops[m].bytes));
		else
			row.add("op_bytes", human(static_cast<double>(ms.ops[m].bytes)));
		row.add("op_pieces", ms.ops[m].pieces);
		row.add("op_ceil_gbps", opc, 2);
		row.add("pct_op_ceil", opc > 0 ? 100.0 * gbps / opc : 0.0, 1);
	}
	if (o.cuda) {
		const CopyLimits &lim = ms.lim;
		row.add("path", path);
		row.add("d2h_gbps", lim.d2h, 1).add("h2d_gbps", lim.h2d, 1);
		row.add(o.src_dev == o.dst_dev ? "d2d_gbps" : "peer_gbps", lim.d2d, 1);
		row.add("d2d/xfer", gbps > 0 ? lim.d2d / gbps : 0.0, 2);
		double hg = static_cast<double>(size) * ms.host[m].iters * 8 / ms.host[m].seconds / 1e9;
		row.add("host_gbps", hg, 2).add("staged/host", hg > 0 ? gbps / hg : 0.0, 2);
	}
	if (o.json)
		row.add("verified", o.verify ? "yes" : "no");
	return row;
}

int run_provider(const Options &o, const std::string &prov, bench::Targets &targets, bench::Printer &pr)
{
	// Over TCP sockets: tcp;ofi_rxm, and libfabric's native RDM over TCP, net.
	const bool over_tcp = prov.find("tcp") != std::string::npos || prov.rfind("net", 0) == 0;
	const bool remote = targets.remote_buffers();
	Config cfg = writer_config(o, prov, over_tcp, remote);
	const Reference ref = reference_for(o, prov, over_tcp, remote);
	// Target engines go after the writers, before the buffers they hold.
	struct ClearTargets {
		bench::Targets &t;
		~ClearTargets() { t.clear(); }
	};
	for (unsigned rails : o.rails) {
		cfg.rails = rails;
		cfg.progress_threads = o.threads ? o.threads : rails;
		const size_t maxbuf = o.max_size;
		Buffers buf(o, maxbuf, targets.shared(), remote);
		// --mem cuda: host buffers too, for the same transfer between host memory.
		std::vector<uint8_t> hsrc(o.cuda ? maxbuf : 0, 0x5a), hdst(o.cuda ? maxbuf : 0);
		ClearTargets clear_targets{targets};
		std::vector<std::unique_ptr<Setup>> setups;
		for (Options::NotifyRun mode : o.notify)
		for (size_t iov : o.write_iov) {
			cfg.write_iov = iov;
			cfg.notify = mode.mode;
			cfg.imm_data_bytes = mode.imm_bytes;
			setups.push_back(make_setup(o, cfg, mode, targets, buf, hsrc, hdst, maxbuf));
			if (!o.json)
				print_setup(o, prov, rails, targets, ref, *setups.back());
		}
		pr.section("xfer " + prov);
		const char *path = setups[0]->src->staged() || setups[0]->b.staged ? "staged" : "direct";

		for (size_t size = o.min_size; size <= o.max_size; size *= 4) {
			for (size_t nch : o.chunks) {
				if (size / nch < 64)
					continue;
				const Measured ms = measure(o, setups, ref, remote, rails, targets, buf, size, nch);
				for (size_t m = 0; m < setups.size(); m++) {
					if (o.verify)
						verify_once(*setups[m], targets, buf, remote, size, nch);
					pr.print(row_of(o, prov, *setups[m], m, ms, ref, remote, rails, size, nch, path));
				}
			}
		}
	}
	return 0;
}

const CLI::Validator kNonNegative(
	[](std::string &v) -> std::string {
		char *end = nullptr;
		long long x = std::strtoll(v.c_str(), &end, 10);
		return v.empty() || *end || x < 0 ? "'" + v + "' is not a whole number, 0 or more" : std::string();
	},
	"", "");

int xfer_main(int argc, char **argv)
{
	Options o;
	uint64_t min_size = o.min_size, max_size = o.max_size, max_write = 0;
	std::vector<long> chunks{1, 64}, rails{1}, devices;
	std::vector<long long> write_iov{0};
	long window = static_cast<long>(o.window), repeat = o.repeat, threads = 0;
	unsigned procs = 1;
	std::string mem = "host";
	std::vector<std::string> notify{"auto"};
	bench::cli::Parser p("xfer", "transfer engine bandwidth vs iperf3 (tcp, net), memcpy (shm), ib_write_bw (verbs); "
			      "each row the best of --repeat runs of --seconds, the reference measured alongside");
	p.texts("--provider", o.providers, "libfabric providers, each its own rows");
	p.text("--node", o.node, "fabric address of the engines (verbs: the RDMA netdev's)");
	p.size("--min", min_size, "smallest transfer; sizes go up by 4x")->default_str("4k");
	p.size("--max", max_size, "largest transfer (up to 1g)")->default_str("64m");
	p.counts("--chunks", chunks, "chunks per transfer, scattered over both buffers");
	p.counts("--rails", rails, "rails per engine");
	p.count("--window", window, "transfers in flight");
	p.seconds("--seconds", o.seconds, "time per run");
	p.count("--repeat", repeat, "runs per row; the best is reported");
	p.flag("--verify", o.verify, "check every byte that landed");
	p.flag("--more", o.more, "post with FI_MORE between the writes of a transfer");
	p.text("--mem", mem, "host or cuda (device memory)")->check(CLI::IsMember({"host", "cuda"}));
	p.app().add_option("--devices", devices, "CUDA devices of source and target (one: both)")
		->delimiter(',')
		->expected(1, 2)
		->type_name("SRC[,DST]")
		->check(kNonNegative);
	p.size("--max-write", max_write, "largest single write (0: the engine's)")->default_str("0");
	p.app().add_option("--write-iov", write_iov, "chunks per write (0: the engine's); several run interleaved")
		->delimiter(',')
		->type_name("N[,N...]")
		->check(kNonNegative);
	p.texts("--notify", notify, "target notification; several run interleaved, one row each")
		->check(CLI::IsMember({"auto", "immediate", "imm", "immediate4", "imm4", "message", "msg"}));
	p.count("--threads", threads, "progress threads per engine")->default_str("one per rail");
	p.app().add_option("--procs", procs, "2: the target engines run in a child process (with --mem cuda: "
					     "device memory on GPU 0 in both processes, one provider, one chunk, sizes doubling)")
		->check(CLI::IsMember({1u, 2u}))
		->capture_default_str();
	p.text("--connect", o.connect, "HOST:PORT of a bench server (--serve) holding the target engines");
	p.text("--serve", o.serve,
	       "[HOST]:PORT: be the target side for one --connect client (PORT 0: the kernel picks; the address "
	       "listened on is printed); the server makes the engines (fabric address --node) and buffers, "
	       "verifies what landed and starts iperf3 servers for the reference");
	if (int rc = p.parse(argc, argv); rc >= 0)
		return rc;
	o.json = p.json;
	o.min_size = min_size;
	o.max_size = max_size;
	o.max_write = max_write;
	o.chunks.assign(chunks.begin(), chunks.end());
	o.rails.assign(rails.begin(), rails.end());
	o.write_iov.assign(write_iov.begin(), write_iov.end());
	o.window = static_cast<size_t>(window);
	o.repeat = static_cast<unsigned>(repeat);
	o.threads = static_cast<unsigned>(threads);
	o.procs = procs;
	o.cuda = mem == "cuda";
	if (!devices.empty()) {
		o.src_dev = static_cast<int>(devices[0]);
		o.dst_dev = static_cast<int>(devices.back());
	}
	o.notify.clear();
	for (const auto &m : notify) {
		if (m == "auto")
			o.notify.push_back({Config::Notify::Auto, 0});
		else if (m == "immediate" || m == "imm")
			o.notify.push_back({Config::Notify::Immediate, 0});
		else if (m == "immediate4" || m == "imm4")
			o.notify.push_back({Config::Notify::Immediate, 4});
		else
			o.notify.push_back({Config::Notify::Message, 0});
	}
	if (o.max_size < o.min_size) {
		std::fprintf(stderr, "hmemreg_bench xfer: --max (%zu) is below --min (%zu)\n", o.max_size, o.min_size);
		return 2;
	}
	if (o.providers.empty() || o.notify.empty() || o.write_iov.empty()) {
		std::fprintf(stderr, "hmemreg_bench xfer: --provider, --notify and --write-iov each need a value\n");
		return 2;
	}
	if ((!o.connect.empty() || !o.serve.empty()) && o.cuda) {
		std::fprintf(stderr, "xfer: --connect and --serve move host memory only (--mem host)\n");
		return 2;
	}
	if (o.procs == 2 && o.cuda) {
		// Device memory between two processes (shm's CUDA IPC needs two):
		// xfer_cuda_procs.cpp, GPU 0 on both sides, one provider, 1 chunk.
		if (o.providers.size() != 1 || o.src_dev || o.dst_dev) {
			std::fprintf(stderr, "xfer: --mem cuda --procs 2 takes one --provider and GPU 0 on both sides\n");
			return 2;
		}
		bench::CudaProcsOptions c;
		c.provider = o.providers[0];
		c.min_size = o.min_size;
		c.max_size = o.max_size;
		c.window = static_cast<unsigned>(std::min<size_t>(o.window, 64));
		c.repeat = o.repeat;
		c.seconds = o.seconds;
		c.verify = o.verify;
		c.json = o.json;
		try {
			return bench::xfer_cuda_two_processes(c);
		} catch (const Error &e) {
			std::fprintf(stderr, "xfer: %s\n", e.what());
			return 1;
		}
	}
	if (!o.connect.empty() + !o.serve.empty() + (o.procs == 2) > 1) {
		std::fprintf(stderr, "xfer: --procs 2, --connect and --serve exclude each other\n");
		return 2;
	}
	bench::Printer pr(o.json);
	try {
		if (!o.serve.empty())
			return bench::serve(o.serve, o.node);
		// Forked before this process opens libfabric.
		std::unique_ptr<bench::Targets> targets =
			!o.connect.empty() ? bench::Targets::remote(o.connect)
			: o.procs == 2	   ? bench::Targets::child_process(o.max_size)
					   : bench::Targets::in_process();
		for (const auto &p : o.providers)
			run_provider(o, p, *targets, pr);
		if (!targets->finish())
			return 1;
	} catch (const Error &e) {
		const bool named = std::strncmp(e.what(), "xfer:", 5) == 0;
		std::fprintf(stderr, "%s%s\n", named ? "" : "xfer: ", e.what());
		return 1;
	}
	return 0;
}

} // namespace

HMEMREG_BENCH("xfer", xfer_main, "transfer engine bandwidth vs iperf3 (tcp, net), memcpy (shm), ib_write_bw (verbs)");
