// SPDX-License-Identifier: MIT
// hmemreg_bench nccl: an NCCL net plugin driven as NCCL drives it, two
// processes on one host: bandwidth (isend/irecv streams, `--window` in
// flight) and one-way latency (half a ping-pong) per message size, next to
// iperf3 over TCP loopback and, with --peer-plugin, next to another plugin
// (aws-ofi-nccl: tools/vendor/build-aws-ofi-nccl) and, with --baseline, next
// to another build of hmemreg's plugin (before/after), all in the same run.
//
//   hmemreg_bench nccl [--json] [--plugin PATH] [--peer-plugin PATH] [--baseline PATH]
//                      [--provider P] [--node ADDR]
//                      [--window W] [--sizes a,b,...] [--lat-sizes a,b,...] [--seconds S]
//                      [--repeat N] [--iters N] [--no-ref] [--no-bw] [--no-lat] [--log warn|info]
//                      [--mem host|cuda|export]
//
// As NCCL does: the table is ncclNetPlugin_v11, else _v10; init gets a
// logger; devices and properties are read before listen; each direction is
// its own connection (a send comm and a recv comm); a buffer is registered
// on the comm that uses it and deregistered before that comm is closed.
// Every size first runs a checked pass (untimed): each byte of 2 x window
// streamed messages and of a few ping-pongs is a pattern of its message and
// offset, verified by the receiver; a row says how many bytes were checked.
// Each figure is the best of --repeat (3) timed runs of about --seconds (and
// of --rounds: the plugins take turns that many times). Latency is the median
// round trip of a run, halved (its mean beside it).
// --mem cuda: both ranks' buffers are cuMemAlloc'ed memory on GPU 0,
// registered as NCCL_PTR_CUDA (the plugin must offer it: FI_HMEM); patterns
// are written and checked through host copies, after an iflush, as NCCL
// flushes a GPU receive. Run it next to --mem host for the host reference.
// --mem export: both ranks' buffers are hmemreg.ko devmem exports (the
// module's emulated device memory) handed to regMrDmaBuf by their DMA-BUF
// fd as NCCL_PTR_DMABUF, as NCCL hands over a GPU buffer's; every receive is
// flushed with iflush, which must post a read-back (a request) that
// completes, and checked through the export's CPU mapping (the VM's
// Soft-RoCE lane: the NIC imports the DMA-BUF).
#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.hpp"
#include "cli.hpp"
#include "nccl_net_abi.h"
#include "reference_tools.hpp"
#include "cuda_driver.hpp"
#include <hmemreg/export.h>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
	std::string plugin;
	std::string peer_plugin; // "" = none
	std::string baseline;    // another build of hmemreg's plugin ("" = none)
	std::string provider = "tcp;ofi_rxm";
	std::string node = "127.0.0.1";
	long window = 8; // NCCL keeps up to 8 steps in flight per connection
	double seconds = 0.5;
	long repeat = 3;
	long rounds = 1;
	long iters = 0; // timed messages or round trips per run; 0: calibrated to `seconds`
	bool ref = true, bw = true, lat = true;
	std::string log = "warn";
	std::string mem = "host";
	std::vector<uint64_t> sizes = {1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
	std::vector<uint64_t> lat_sizes = {8, 64, 512, 1 << 10, 4 << 10, 16 << 10, 64 << 10};
};

constexpr long kCheckPingPongs = 4;

// The plugin beside this binary: the build tree's (tools/../plugins/nccl/),
// else the installed one (bindir/../libdir, from CMake), else by name through
// the loader's search path, as NCCL itself finds it.
std::string default_plugin()
{
	static const char kName[] = "libnccl-net-hmemreg.so";
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return kName;
	exe[n] = 0;
	std::string dir(exe);
	dir = dir.substr(0, dir.rfind('/'));
	for (const std::string &p : {dir + "/../plugins/nccl/" + kName, dir + "/" HMEMREG_BENCH_BIN_TO_LIBDIR "/" + kName})
		if (access(p.c_str(), R_OK) == 0)
			return p;
	return kName;
}

bool xfer(int fd, void *p, size_t n, bool out)
{
	auto *b = static_cast<uint8_t *>(p);
	for (size_t done = 0; done < n;) {
		ssize_t r = out ? write(fd, b + done, n - done) : read(fd, b + done, n - done);
		if (r <= 0)
			return false;
		done += static_cast<size_t>(r);
	}
	return true;
}
template <typename T> bool put(int fd, T v) { return xfer(fd, &v, sizeof(v), true); }
template <typename T> bool get(int fd, T &v) { return xfer(fd, &v, sizeof(v), false); }

// ---- the plugin's logger (NCCL always passes one; plugins call it)

int g_log_level = NCCL_LOG_WARN;
const char *g_log_label = "plugin";

void plugin_logger(ncclDebugLogLevel level, unsigned long, const char *file, int line, const char *fmt, ...)
{
	if (level == NCCL_LOG_NONE || static_cast<int>(level) > g_log_level)
		return;
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	std::vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	const char *what = level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_INFO ? "INFO" : "TRACE";
	std::fprintf(stderr, "nccl bench [%s pid %d] %s %s:%d %s\n", g_log_label, static_cast<int>(getpid()), what,
		     file ? file : "?", line, text);
}

// ---- a plugin's table, v11 or v10, with the v11 calling convention

#define TRY(call)                                                                                                    \
	do {                                                                                                         \
		ncclResult_t r_ = (call);                                                                            \
		if (r_ != ncclSuccess) {                                                                             \
			std::fprintf(stderr, "nccl bench [%s]: %s failed: %d\n", g_log_label, #call, r_);           \
			return false;                                                                                \
		}                                                                                                    \
	} while (0)

struct Net {
	ncclNet_v11_t *v11 = nullptr;
	ncclNet_v10_t *v10 = nullptr;
	void *ctx = nullptr;
	std::string name; // the device's name (getProperties)

	bool open(const std::string &path)
	{
		void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
		if (!lib) {
			std::fprintf(stderr, "nccl bench: %s\n", dlerror());
			return false;
		}
		// Newest first, as NCCL 2.28 looks.
		v11 = static_cast<ncclNet_v11_t *>(dlsym(lib, "ncclNetPlugin_v11"));
		if (!v11)
			v10 = static_cast<ncclNet_v10_t *>(dlsym(lib, "ncclNetPlugin_v10"));
		if (!v11 && !v10) {
			std::fprintf(stderr, "nccl bench: %s has neither ncclNetPlugin_v11 nor _v10\n", path.c_str());
			return false;
		}
		return true;
	}
	ncclResult_t init()
	{
		ncclNetCommConfig_t cfg{-1};
		return v11 ? v11->init(&ctx, 0x6e63636c62656e63ULL, &cfg, plugin_logger, nullptr)
			   : v10->init(plugin_logger, nullptr);
	}
	ncclResult_t devices(int *n) { return v11 ? v11->devices(n) : v10->devices(n); }
	ncclResult_t properties(ncclNetProperties_v11_t *p)
	{
		std::memset(p, 0, sizeof(*p));
		return v11 ? v11->getProperties(0, p) : v10->getProperties(0, reinterpret_cast<ncclNetProperties_v10_t *>(p));
	}
	ncclResult_t listen(void *handle, void **lc) { return v11 ? v11->listen(ctx, 0, handle, lc) : v10->listen(0, handle, lc); }
	ncclResult_t connect(void *handle, void **sc)
	{
		ncclNetDeviceHandle_t *dev = nullptr;
		ncclNetCommConfig_t cfg{-1};
		return v11 ? v11->connect(ctx, 0, handle, sc, &dev) : v10->connect(0, &cfg, handle, sc, &dev);
	}
#define HMEMREG_NET_CALL(fn, ...) (v11 ? v11->fn(__VA_ARGS__) : v10->fn(__VA_ARGS__))
	ncclResult_t accept(void *lc, void **rc)
	{
		ncclNetDeviceHandle_t *dev = nullptr;
		return HMEMREG_NET_CALL(accept, lc, rc, &dev);
	}
	ncclResult_t reg(void *comm, void *p, size_t n, int type, void **mh)
	{
		return HMEMREG_NET_CALL(regMr, comm, p, n, type, mh);
	}
	ncclResult_t reg_dmabuf(void *comm, void *p, size_t n, int fd, void **mh)
	{
		return HMEMREG_NET_CALL(regMrDmaBuf, comm, p, n, NCCL_PTR_DMABUF, 0, fd, mh);
	}
	ncclResult_t flush(void *rc, void *p, size_t n, void *mh, void **rq)
	{
		int sizes[1] = {static_cast<int>(n)};
		void *d[1] = {p}, *m[1] = {mh};
		return HMEMREG_NET_CALL(iflush, rc, 1, d, sizes, m, rq);
	}
	ncclResult_t dereg(void *comm, void *mh) { return HMEMREG_NET_CALL(deregMr, comm, mh); }
	ncclResult_t isend(void *sc, void *p, size_t n, int tag, void *mh, void **rq)
	{
		return HMEMREG_NET_CALL(isend, sc, p, n, tag, mh, nullptr, rq);
	}
	ncclResult_t irecv(void *rc, void *p, size_t n, int tag, void *mh, void **rq)
	{
		size_t sizes[1] = {n};
		int tags[1] = {tag};
		void *d[1] = {p}, *m[1] = {mh};
		return HMEMREG_NET_CALL(irecv, rc, 1, d, sizes, tags, m, nullptr, rq);
	}
	ncclResult_t test(void *rq, int *done, int *size) { return HMEMREG_NET_CALL(test, rq, done, size); }
	ncclResult_t close_send(void *c) { return HMEMREG_NET_CALL(closeSend, c); }
	ncclResult_t close_recv(void *c) { return HMEMREG_NET_CALL(closeRecv, c); }
	ncclResult_t close_listen(void *c) { return HMEMREG_NET_CALL(closeListen, c); }
#undef HMEMREG_NET_CALL
	ncclResult_t finalize() { return v11 && v11->finalize ? v11->finalize(ctx) : ncclSuccess; }
};

// ---- every byte of a message is a function of (seed, offset)

uint64_t word_of(uint64_t seed, uint64_t i) { return (seed * 0x9E3779B97F4A7C15ULL) ^ ((i + 1) * 0xD6E8FEB86659FD93ULL); }

void fill(uint8_t *p, size_t n, uint64_t seed)
{
	const size_t words = n / 8;
	for (size_t i = 0; i < words; i++) {
		uint64_t w = word_of(seed, i);
		std::memcpy(p + 8 * i, &w, 8);
	}
	uint64_t w = word_of(seed, words);
	std::memcpy(p + 8 * words, &w, n % 8);
}

// The first byte that is not the pattern's, or n.
size_t first_wrong(const uint8_t *p, size_t n, uint64_t seed)
{
	const size_t words = n / 8;
	for (size_t i = 0; i < words; i++) {
		uint64_t w = word_of(seed, i), got;
		std::memcpy(&got, p + 8 * i, 8);
		if (got != w)
			return 8 * i;
	}
	uint64_t w = word_of(seed, words);
	return std::memcmp(p + 8 * words, &w, n % 8) ? 8 * words : n;
}

uint64_t seed_of(size_t n, long seq, int dir) { return (uint64_t(n) << 24) ^ (uint64_t(seq) << 1) ^ uint64_t(dir); }

// ---- one rank of a pair

struct Rank {
	Net net;
	int fd = -1;     // to the other rank
	bool initiator;  // rank 0: streams out, starts each ping-pong
	void *sc = nullptr, *rc = nullptr, *lc = nullptr;
	uint8_t *sbuf = nullptr, *rbuf = nullptr;
	size_t slen = 0, rlen = 0;
	void *smh = nullptr, *rmh = nullptr;
	uint64_t checked = 0; // bytes this rank verified
	bool cuda = false;	      // sbuf/rbuf are device pointers (--mem cuda)
	bool exports = false;	      // sbuf/rbuf are devmem exports' mappings (--mem export)
	bool host_sends = false;      // --mem export-recv: sbuf is host memory
	hmemreg_export_t *sexp = nullptr, *rexp = nullptr;
	uint64_t read_backs = 0;      // iflushes that posted a read-back (--mem export)
	std::vector<uint8_t> scratch; // host copy of a device message

	Rank(bool init, const std::string &mem)
		: initiator(init), cuda(mem == "cuda"), exports(mem.starts_with("export")), host_sends(mem == "export-recv")
	{
	}

	// The pattern written, a slot cleared, a message checked: in place for
	// host memory, through a host copy for device memory.
	bool fill_msg(uint8_t *p, size_t n, uint64_t seed)
	{
		if (!cuda) {
			fill(p, n, seed);
			return true;
		}
		scratch.resize(n);
		fill(scratch.data(), n, seed);
		// Synchronous: a copy from pageable memory may still be in flight
		// when cuMemcpyHtoD returns, and the plugin's provider (shm's CUDA
		// IPC) reads the buffer from another process's stream.
		const hmemreg::cuda::Driver &cu = hmemreg::cuda::Driver::get();
		return cu.cuMemcpyHtoD(dptr(p), scratch.data(), n) == CUDA_SUCCESS && cu.cuCtxSynchronize() == CUDA_SUCCESS;
	}
	bool clear_msg(uint8_t *p, size_t n)
	{
		if (!cuda) {
			std::memset(p, 0, n);
			return true;
		}
		// cuMemsetD8 is asynchronous: done before the receive is posted, so
		// that it cannot land after the sender's data.
		const hmemreg::cuda::Driver &cu = hmemreg::cuda::Driver::get();
		return cu.cuMemsetD8(dptr(p), 0, n) == CUDA_SUCCESS && cu.cuCtxSynchronize() == CUDA_SUCCESS;
	}
	// The first wrong byte, n if none; a device receive is flushed first.
	size_t check_msg(const uint8_t *p, size_t n, uint64_t seed)
	{
		if (exports) { // the NIC wrote device memory: read back, then look
			void *rq = nullptr;
			if (net.flush(rc, const_cast<uint8_t *>(p), n, rmh, &rq) != ncclSuccess || !rq ||
			    !wait(rq, n, Clock::now() + std::chrono::seconds(30), false)) {
				std::fprintf(stderr, "nccl bench [%s]: iflush of a %zu-byte receive %s\n", g_log_label, n,
					     rq ? "failed" : "posted no read-back");
				return 0;
			}
			read_backs++;
			return first_wrong(p, n, seed);
		}
		if (!cuda)
			return first_wrong(p, n, seed);
		void *rq = nullptr;
		if (net.flush(rc, const_cast<uint8_t *>(p), n, rmh, &rq) != ncclSuccess ||
		    (rq && !wait(rq, n, Clock::now() + std::chrono::seconds(30), false))) {
			std::fprintf(stderr, "nccl bench [%s]: iflush of a %zu-byte receive failed\n", g_log_label, n);
			return 0;
		}
		scratch.resize(n);
		if (hmemreg::cuda::Driver::get().cuMemcpyDtoH(scratch.data(), dptr(p), n) != CUDA_SUCCESS) {
			std::fprintf(stderr, "nccl bench [%s]: cuMemcpyDtoH of %zu bytes failed\n", g_log_label, n);
			return 0;
		}
		return first_wrong(scratch.data(), n, seed);
	}
	static CUdeviceptr dptr(const uint8_t *p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }

	bool wait(void *rq, size_t expect, Clock::time_point deadline, bool sized = true)
	{
		for (;;) {
			int done = 0, size = -1;
			TRY(net.test(rq, &done, &size));
			if (done) {
				if (sized && static_cast<size_t>(size) != expect) {
					std::fprintf(stderr, "nccl bench [%s]: %d bytes completed, %zu expected\n", g_log_label,
						     size, expect);
					return false;
				}
				return true;
			}
			if (Clock::now() > deadline) {
				std::fprintf(stderr, "nccl bench [%s]: a request not done after 300 s\n", g_log_label);
				return false;
			}
		}
	}
	bool post_send(void *p, size_t n, int tag, void **rq, Clock::time_point deadline)
	{
		do {
			TRY(net.isend(sc, p, n, tag, smh, rq));
			if (!*rq && Clock::now() > deadline) {
				std::fprintf(stderr, "nccl bench [%s]: isend not accepted after 300 s\n", g_log_label);
				return false;
			}
		} while (!*rq);
		return true;
	}
	bool post_recv(void *p, size_t n, int tag, void **rq, Clock::time_point deadline)
	{
		do {
			TRY(net.irecv(rc, p, n, tag, rmh, rq));
			if (!*rq && Clock::now() > deadline) {
				std::fprintf(stderr, "nccl bench [%s]: irecv not accepted after 300 s\n", g_log_label);
				return false;
			}
		} while (!*rq);
		return true;
	}

	// `iters` messages of n bytes from rank 0 to rank 1, `window` in flight,
	// completed in order (as NCCL tests its steps). check: rank 0 writes the
	// pattern of each message before posting it, rank 1 clears its slot before
	// posting and verifies every byte after completion.
	bool stream(size_t n, long iters, long window, bool check)
	{
		std::vector<void *> inflight(static_cast<size_t>(window), nullptr);
		auto deadline = Clock::now() + std::chrono::seconds(300);
		uint8_t *base = initiator ? sbuf : rbuf;
		long posted = 0, completed = 0;
		while (completed < iters) {
			const size_t slot = static_cast<size_t>(posted % window);
			if (posted < iters && !inflight[slot]) {
				uint8_t *p = base + slot * n;
				void *rq = nullptr;
				if (initiator) {
					if (check && !fill_msg(p, n, seed_of(n, posted, 0)))
						return false;
					TRY(net.isend(sc, p, n, static_cast<int>(posted & 0xffff), smh, &rq));
				} else {
					if (check && !clear_msg(p, n))
						return false;
					TRY(net.irecv(rc, p, n, static_cast<int>(posted & 0xffff), rmh, &rq));
				}
				if (rq) {
					inflight[slot] = rq;
					posted++;
					continue;
				}
			}
			const size_t oldest = static_cast<size_t>(completed % window);
			if (!inflight[oldest])
				continue; // not accepted yet: post again
			int done = 0, size = -1;
			TRY(net.test(inflight[oldest], &done, &size));
			if (done) {
				if (static_cast<size_t>(size) != n) {
					std::fprintf(stderr, "nccl bench [%s]: %d bytes completed, %zu expected\n", g_log_label,
						     size, n);
					return false;
				}
				if (check && !initiator) {
					const uint8_t *p = base + oldest * n;
					size_t bad = check_msg(p, n, seed_of(n, completed, 0));
					if (bad != n) {
						std::fprintf(stderr, "nccl bench [%s]: message %ld of %zu bytes: byte %zu is wrong\n",
							     g_log_label, completed, n, bad);
						return false;
					}
					checked += n;
				}
				inflight[oldest] = nullptr;
				completed++;
			}
			if (Clock::now() > deadline) {
				std::fprintf(stderr, "nccl bench [%s]: stream not done after 300 s\n", g_log_label);
				return false;
			}
		}
		return true;
	}

	// `iters` round trips of n bytes: rank 0 sends, rank 1 answers. Each side
	// posts its receive before it sends (as NCCL posts receives ahead).
	bool pingpong(size_t n, long iters, bool check, std::vector<double> *rtt = nullptr)
	{
		auto deadline = Clock::now() + std::chrono::seconds(300);
		if (rtt)
			rtt->clear();
		for (long i = 0; i < iters; i++) {
			const auto t0 = Clock::now();
			const int tag = static_cast<int>(i & 0xffff);
			void *rr = nullptr, *sr = nullptr;
			if (check && !clear_msg(rbuf, n))
				return false;
			if (!post_recv(rbuf, n, tag, &rr, deadline))
				return false;
			if (initiator) {
				if (check && !fill_msg(sbuf, n, seed_of(n, i, 1)))
					return false;
				if (!post_send(sbuf, n, tag, &sr, deadline) || !wait(sr, n, deadline) || !wait(rr, n, deadline))
					return false;
			} else {
				if (!wait(rr, n, deadline))
					return false;
				if (check && !fill_msg(sbuf, n, seed_of(n, i, 2)))
					return false;
				if (!post_send(sbuf, n, tag, &sr, deadline) || !wait(sr, n, deadline))
					return false;
			}
			if (check) {
				size_t bad = check_msg(rbuf, n, seed_of(n, i, initiator ? 2 : 1));
				if (bad != n) {
					std::fprintf(stderr, "nccl bench [%s]: ping-pong %ld of %zu bytes: byte %zu is wrong\n",
						     g_log_label, i, n, bad);
					return false;
				}
				checked += n;
			}
			if (rtt)
				rtt->push_back(std::chrono::duration<double>(Clock::now() - t0).count());
		}
		return true;
	}

	// Both directions connected: each rank listens, the handles cross, each
	// connects to the other and accepts the other's connection.
	bool connect_both()
	{
		int ndev = 0;
		TRY(net.devices(&ndev));
		if (ndev < 1) {
			std::fprintf(stderr, "nccl bench [%s]: the plugin has no device\n", g_log_label);
			return false;
		}
		ncclNetProperties_v11_t props;
		TRY(net.properties(&props));
		net.name = props.name ? props.name : "?";
		// Exports: host memory to NCCL (no CUDA), registered by DMA-BUF.
		if (!(props.ptrSupport & (cuda ? NCCL_PTR_CUDA : NCCL_PTR_HOST))) {
			std::fprintf(stderr, "nccl bench [%s]: device 0 takes no %s (ptrSupport %d%s)\n", g_log_label,
				     cuda ? "CUDA memory" : "host memory", props.ptrSupport,
				     cuda ? ": its provider has no FI_HMEM" : "");
			return false;
		}
		char mine[NCCL_NET_HANDLE_MAXSIZE] = {}, theirs[NCCL_NET_HANDLE_MAXSIZE];
		TRY(net.listen(mine, &lc));
		if (!xfer(fd, mine, sizeof(mine), true) || !xfer(fd, theirs, sizeof(theirs), false))
			return false;
		auto deadline = Clock::now() + std::chrono::seconds(30);
		while ((!sc || !rc) && Clock::now() < deadline) {
			if (!sc)
				TRY(net.connect(theirs, &sc));
			if (!rc)
				TRY(net.accept(lc, &rc));
		}
		if (!sc || !rc) {
			std::fprintf(stderr, "nccl bench [%s]: connection setup timed out\n", g_log_label);
			return false;
		}
		return true;
	}

	bool buffers(size_t stream_len, size_t pp_len)
	{
		slen = initiator ? std::max(stream_len, pp_len) : pp_len;
		rlen = initiator ? pp_len : std::max(stream_len, pp_len);
		if (cuda) {
			const hmemreg::cuda::Driver &cu = hmemreg::cuda::Driver::get();
			CUdeviceptr s = 0, r = 0;
			if (!cu.loaded || hmemreg::cuda::use_device(0) || cu.cuMemAlloc(&s, slen) != CUDA_SUCCESS ||
			    cu.cuMemAlloc(&r, rlen) != CUDA_SUCCESS || cu.cuMemsetD8(s, 0x5a, slen) != CUDA_SUCCESS ||
			    cu.cuMemsetD8(r, 0, rlen) != CUDA_SUCCESS || cu.cuCtxSynchronize() != CUDA_SUCCESS) {
				std::fprintf(stderr, "nccl bench [%s]: no CUDA memory for %zu + %zu bytes (%s)\n", g_log_label,
					     slen, rlen, cu.loaded ? "cuMemAlloc" : cu.why_not.c_str());
				if (s)
					cu.cuMemFree(s);
				return false;
			}
			sbuf = reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(s));
			rbuf = reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(r));
		} else if (exports) {
			const size_t page = 4096;
			slen = (slen + page - 1) / page * page;
			rlen = (rlen + page - 1) / page * page;
			void *hs = nullptr;
			if ((host_sends ? posix_memalign(&hs, page, slen) != 0 : hmemreg_export_devmem(slen, &sexp) != 0) ||
			    hmemreg_export_devmem(rlen, &rexp)) {
				std::fprintf(stderr, "nccl bench [%s]: no devmem exports of %zu + %zu bytes: %s\n",
					     g_log_label, slen, rlen, hmemreg_export_last_error());
				hmemreg_export_free(sexp);
				sexp = nullptr;
				std::free(hs);
				return false;
			}
			sbuf = host_sends ? static_cast<uint8_t *>(hs) : static_cast<uint8_t *>(hmemreg_export_addr(sexp));
			rbuf = static_cast<uint8_t *>(hmemreg_export_addr(rexp));
			std::memset(sbuf, 0x5a, slen);
			std::memset(rbuf, 0, rlen);
			// NCCL's way with a GPU buffer: its DMA-BUF fd, offset 0.
			if (host_sends)
				TRY(net.reg(sc, sbuf, slen, NCCL_PTR_HOST, &smh));
			else
				TRY(net.reg_dmabuf(sc, sbuf, slen, hmemreg_export_fd(sexp), &smh));
			TRY(net.reg_dmabuf(rc, rbuf, rlen, hmemreg_export_fd(rexp), &rmh));
			return true;
		} else {
			void *s = nullptr, *r = nullptr;
			if (posix_memalign(&s, 4096, slen) || posix_memalign(&r, 4096, rlen)) {
				std::free(s);
				std::fprintf(stderr, "nccl bench [%s]: no memory for %zu + %zu bytes\n", g_log_label, slen,
					     rlen);
				return false;
			}
			sbuf = static_cast<uint8_t *>(s);
			rbuf = static_cast<uint8_t *>(r);
			std::memset(sbuf, 0x5a, slen);
			std::memset(rbuf, 0, rlen);
		}
		// Each buffer on the comm that uses it (NCCL registers per comm).
		const int type = cuda ? NCCL_PTR_CUDA : NCCL_PTR_HOST;
		TRY(net.reg(sc, sbuf, slen, type, &smh));
		TRY(net.reg(rc, rbuf, rlen, type, &rmh));
		return true;
	}

	// NCCL's order: deregister on the comm, then close it.
	bool teardown()
	{
		TRY(net.dereg(sc, smh));
		TRY(net.dereg(rc, rmh));
		TRY(net.close_send(sc));
		TRY(net.close_recv(rc));
		TRY(net.close_listen(lc));
		TRY(net.finalize());
		if (cuda) {
			hmemreg::cuda::Driver::get().cuMemFree(dptr(sbuf));
			hmemreg::cuda::Driver::get().cuMemFree(dptr(rbuf));
		} else if (exports) {
			std::fprintf(stderr, "nccl bench [%s]: %llu receives read back by iflush\n", g_log_label,
				     static_cast<unsigned long long>(read_backs));
			if (host_sends)
				std::free(sbuf);
			if (hmemreg_export_free(sexp) || hmemreg_export_free(rexp)) {
				std::fprintf(stderr, "nccl bench [%s]: export still registered after deregMr: %s\n",
					     g_log_label, hmemreg_export_last_error());
				return false;
			}
		} else {
			std::free(sbuf);
			std::free(rbuf);
		}
		return true;
	}
};

// What rank 0 sends the parent: one record per figure, then the device name.
struct Record {
	uint32_t mode; // 0 bandwidth (value Gbps), 1 latency (value one-way us: median; mean: the mean)
	uint64_t bytes;
	double value;
	uint64_t checked; // bytes both ranks verified in its checked pass
	double mean = 0;
	// Context switches per message (bandwidth) or round trip (latency) in
	// the timed runs, both ranks with all their threads (getrusage): a
	// count a loaded host barely moves, unlike the times.
	double vcsw = 0, ivcsw = 0;
	// CPU time (user + system, both ranks, every thread) per message or
	// round trip, in microseconds: what a message costs where cores are
	// scarce, and whether a rate is bound by work or by waiting.
	double cpu_us = 0;
};

// This process's voluntary and involuntary context switches and CPU time
// (microseconds) so far (every thread).
struct Switches {
	double v = 0, iv = 0, cpu_us = 0;
	static Switches now()
	{
		rusage u{};
		getrusage(RUSAGE_SELF, &u);
		const auto us = [](const timeval &t) { return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec); };
		return {static_cast<double>(u.ru_nvcsw), static_cast<double>(u.ru_nivcsw), us(u.ru_utime) + us(u.ru_stime)};
	}
	Switches operator-(const Switches &o) const { return {v - o.v, iv - o.iv, cpu_us - o.cpu_us}; }
};

// Both ranks' switches over `ops` operations, into rank 0's record.
bool switches_per_op(int fd, bool initiator, Switches mine, double ops, Record &rec)
{
	Switches theirs;
	if (!(initiator ? get(fd, theirs) : put(fd, mine)))
		return false;
	rec.vcsw = (mine.v + theirs.v) / ops;
	rec.ivcsw = (mine.iv + theirs.iv) / ops;
	rec.cpu_us = (mine.cpu_us + theirs.cpu_us) / ops;
	return true;
}

long calibrate(double per_op, double seconds, long lo, long hi)
{
	return std::clamp(static_cast<long>(seconds / std::max(per_op, 1e-7)), lo, hi);
}

bool run_rank(const Options &o, const std::string &path, bool initiator, int fd, int out)
{
	Rank k(initiator, o.mem);
	k.fd = fd;
	if (!k.net.open(path))
		return false;
	hmemreg::bench::report_crashes(); // after the plugin's libraries loaded
	TRY(k.net.init());
	if (!k.connect_both())
		return false;
	const size_t max_bw = o.bw ? *std::max_element(o.sizes.begin(), o.sizes.end()) : 0;
	const size_t max_lat = o.lat ? *std::max_element(o.lat_sizes.begin(), o.lat_sizes.end()) : 1;
	if (!k.buffers(max_bw * static_cast<size_t>(o.window), max_lat))
		return false;
	const long window = o.window;
	for (size_t n : o.bw ? o.sizes : std::vector<uint64_t>{}) {
		k.checked = 0;
		if (!k.stream(n, 2 * window, window, true)) // checked; also warms up
			return false;
		uint64_t their = 0;
		if (!(initiator ? get(fd, their) : put(fd, k.checked)))
			return false;
		auto w0 = Clock::now();
		if (!k.stream(n, 2 * window, window, false))
			return false;
		const double per_op = std::chrono::duration<double>(Clock::now() - w0).count() / static_cast<double>(2 * window);
		long iters = o.iters ? o.iters : calibrate(per_op, o.seconds, 2 * window, 200000);
		if (!xfer(fd, &iters, sizeof(iters), initiator))
			return false;
		double best = 0;
		const Switches s0 = Switches::now();
		for (long rep = 0; rep < o.repeat; rep++) {
			auto t0 = Clock::now();
			if (!k.stream(n, iters, window, false))
				return false;
			const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
			best = std::max(best, static_cast<double>(n) * static_cast<double>(iters) * 8 / sec / 1e9);
		}
		Record rec{0, n, best, k.checked + their};
		if (!switches_per_op(fd, initiator, Switches::now() - s0, static_cast<double>(iters * o.repeat), rec))
			return false;
		if (initiator && !put(out, rec))
			return false;
	}
	for (size_t n : o.lat ? o.lat_sizes : std::vector<uint64_t>{}) {
		k.checked = 0;
		if (!k.pingpong(n, kCheckPingPongs, true))
			return false;
		uint64_t their = 0;
		if (!(initiator ? get(fd, their) : put(fd, k.checked)))
			return false;
		auto w0 = Clock::now();
		if (!k.pingpong(n, 16, false))
			return false;
		long iters = o.iters ? o.iters
				     : calibrate(std::chrono::duration<double>(Clock::now() - w0).count() / 16, o.seconds, 16,
						 100000);
		if (!xfer(fd, &iters, sizeof(iters), initiator))
			return false;
		// Rank 0's round trips, halved: the median of a run (a busy host
		// preempts now and then; the median ignores those, the mean not),
		// the best run's of --repeat, and the mean of that run.
		double best = 1e30, best_mean = 0;
		std::vector<double> rtt;
		const Switches s0 = Switches::now();
		for (long rep = 0; rep < o.repeat; rep++) {
			if (!k.pingpong(n, iters, false, &rtt))
				return false;
			double sum = 0;
			for (double x : rtt)
				sum += x;
			std::nth_element(rtt.begin(), rtt.begin() + static_cast<long>(rtt.size() / 2), rtt.end());
			const double median = rtt[rtt.size() / 2] / 2 * 1e6;
			if (median < best) {
				best = median;
				best_mean = sum / static_cast<double>(rtt.size()) / 2 * 1e6;
			}
		}
		Record rec{1, n, best, k.checked + their, best_mean};
		if (!switches_per_op(fd, initiator, Switches::now() - s0, static_cast<double>(iters * o.repeat), rec))
			return false;
		if (initiator && !put(out, rec))
			return false;
	}
	uint8_t bye = 0; // both ranks done before either closes
	if (!xfer(fd, &bye, 1, initiator) || !xfer(fd, &bye, 1, !initiator))
		return false;
	if (!k.teardown())
		return false;
	if (initiator) {
		uint32_t len = static_cast<uint32_t>(k.net.name.size());
		if (!put(out, Record{2, len, 0, 0}) || !xfer(out, k.net.name.data(), len, true))
			return false;
	}
	return true;
}

struct PluginRun {
	bool ok = false;
	std::string name;
	std::vector<Record> bw, lat;
};

// The two ranks of one plugin as child processes (each its own environment
// and its own copy of the plugin), rank 0 reporting through a pipe.
PluginRun run_plugin(const Options &o, const std::string &path, const char *label, bool peer)
{
	PluginRun res;
	int sv[2], pp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || pipe(pp))
		return res;
	pid_t pids[2];
	for (int r = 0; r < 2; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			close(sv[1 - r]);
			close(pp[0]);
			g_log_label = label;
			if (peer) {
				// aws-ofi-nccl on loopback: the core provider of --provider, lo
				// (its default excludes it), two-sided (its RDMA protocol needs
				// libfabric API >= 1.18). The caller's environment wins.
				std::string core = o.provider.substr(0, o.provider.find(';'));
				setenv("FI_PROVIDER", core.c_str(), 0);
				if (o.node == "127.0.0.1" || o.node == "localhost")
					setenv("FI_TCP_IFACE", "lo", 0);
				setenv("OFI_NCCL_EXCLUDE_TCP_IF", "docker0", 0);
				setenv("OFI_NCCL_PROTOCOL", "SENDRECV", 0);
			} else {
				setenv("HMEMREG_NCCL_PROVIDER", o.provider.c_str(), 1);
				// No NCCL kernels wait here: the staged device path is
				// safe (the plugin's default keeps GPU buffers from it).
				// The plugin stages only where CUDA loads kernels eagerly
				// (pointer_policy.hpp); this rank has not started CUDA yet.
				if (o.mem == "cuda") {
					setenv("HMEMREG_NCCL_DEVICE_MEMORY", "staged", 0);
					setenv("CUDA_MODULE_LOADING", "EAGER", 0);
				}
				if (!o.node.empty())
					setenv("HMEMREG_NCCL_NODE", o.node.c_str(), 1);
			}
			_exit(run_rank(o, path, r == 0, sv[r], pp[1]) ? 0 : 1);
		}
	}
	close(sv[0]);
	close(sv[1]);
	close(pp[1]);
	// Records until rank 0 closes the pipe. A rank that fails ends the other,
	// which would wait for it until its own deadlines (minutes).
	int pidfd[2];
	bool reaped[2] = {}, ended_by_us[2] = {}, piped = true;
	int st[2] = {};
	for (int r = 0; r < 2; r++)
		pidfd[r] = static_cast<int>(syscall(SYS_pidfd_open, pids[r], 0));
	while (piped || !reaped[0] || !reaped[1]) {
		pollfd fds[3] = {{piped ? pp[0] : -1, POLLIN, 0},
				 {reaped[0] ? -1 : pidfd[0], POLLIN, 0},
				 {reaped[1] ? -1 : pidfd[1], POLLIN, 0}};
		if (!piped && (pidfd[0] < 0 || pidfd[1] < 0)) { // no pidfds: wait in turn
			for (int r = 0; r < 2; r++)
				if (!reaped[r] && waitpid(pids[r], &st[r], 0) == pids[r])
					reaped[r] = true;
			break;
		}
		if (poll(fds, 3, -1) < 0)
			continue; // EINTR
		if (fds[0].revents) {
			Record rec;
			if (!get(pp[0], rec)) {
				piped = false;
			} else if (rec.mode == 2) {
				res.name.resize(rec.bytes);
				xfer(pp[0], res.name.data(), rec.bytes, false);
			} else {
				(rec.mode == 0 ? res.bw : res.lat).push_back(rec);
			}
		}
		for (int r = 0; r < 2; r++) {
			if (reaped[r] || !fds[1 + r].revents || waitpid(pids[r], &st[r], WNOHANG) != pids[r])
				continue;
			reaped[r] = true;
			const bool failed = !WIFEXITED(st[r]) || WEXITSTATUS(st[r]) != 0;
			if (failed && !reaped[1 - r] && kill(pids[1 - r], SIGKILL) == 0)
				ended_by_us[1 - r] = true;
		}
	}
	close(pp[0]);
	res.ok = true;
	for (int r = 0; r < 2; r++) {
		if (pidfd[r] >= 0)
			close(pidfd[r]);
		if (WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0)
			continue;
		res.ok = false;
		if (ended_by_us[r])
			std::fprintf(stderr, "nccl bench: rank %d (pid %d) of %s was ended (SIGKILL) when rank %d failed\n",
				     r, static_cast<int>(pids[r]), label, 1 - r);
		else if (WIFSIGNALED(st[r]))
			std::fprintf(stderr, "nccl bench: rank %d (pid %d) of %s (%s) was killed by SIG%s%s\n", r,
				     static_cast<int>(pids[r]), label, path.c_str(),
				     sigabbrev_np(WTERMSIG(st[r])) ? sigabbrev_np(WTERMSIG(st[r])) : "?",
				     WCOREDUMP(st[r]) ? " (core dumped)" : "");
		else
			std::fprintf(stderr, "nccl bench: rank %d (pid %d) of %s (%s) exited with status %d\n", r,
				     static_cast<int>(pids[r]), label, path.c_str(), WEXITSTATUS(st[r]));
	}
	return res;
}

// iperf3 over loopback with `len`-byte writes (iperf3 caps TCP writes at
// 1 MiB, so larger sizes compare with a 1 MiB-write stream): Gbps, or < 0.
double iperf3_gbps(size_t len, double seconds)
{
	len = std::min<size_t>(len, 1 << 20);
	const int port = 5400 + static_cast<int>(getpid() % 500);
	hmemreg::bench::Spawned server; // ended on return
	try {
		server.start({"iperf3", "-s", "-1", "-p", std::to_string(port), "-B", "127.0.0.1"});
	} catch (const std::exception &e) {
		std::fprintf(stderr, "hmemreg_bench nccl: no iperf3 reference: %s\n", e.what());
		return -1;
	}
	double gbps = 0;
	// The server may take a while to listen on a busy machine: retry.
	for (int attempt = 0; attempt < 20 && gbps <= 0; attempt++) {
		usleep(100000);
		gbps = hmemreg::bench::iperf3_client_gbps("127.0.0.1", port, std::max(1.0, seconds * 2), len);
	}
	return gbps > 0 ? gbps : -1;
}

// Folds one round into the best so far (bandwidth: highest, latency: lowest).
bool keep_best(PluginRun &best, PluginRun run)
{
	if (!run.ok)
		return false;
	if (!best.ok) {
		best = std::move(run);
		return true;
	}
	for (size_t i = 0; i < best.bw.size() && i < run.bw.size(); i++)
		if (run.bw[i].value > best.bw[i].value)
			best.bw[i] = run.bw[i];
	for (size_t i = 0; i < best.lat.size() && i < run.lat.size(); i++)
		if (run.lat[i].value < best.lat[i].value)
			best.lat[i] = run.lat[i];
	return true;
}

const Record *find(const std::vector<Record> &v, uint64_t bytes)
{
	for (const Record &r : v)
		if (r.bytes == bytes)
			return &r;
	return nullptr;
}

int bench_nccl(int argc, char **argv)
{
	using namespace hmemreg::bench;
	Options o;
	o.plugin = default_plugin();
	cli::Parser p("nccl", "NCCL net plugin bandwidth and latency per size, two processes, driven as NCCL does; "
			      "vs iperf3 on loopback and, with --peer-plugin, vs another plugin in the same run");
	p.text("--plugin", o.plugin, "the NCCL net plugin to load");
	p.text("--peer-plugin", o.peer_plugin,
	       "a second plugin (e.g. aws-ofi-nccl's libnccl-net-ofi.so) run the same way in the same run; it gets "
	       "FI_PROVIDER (the core of --provider), FI_TCP_IFACE=lo, OFI_NCCL_EXCLUDE_TCP_IF=docker0, "
	       "OFI_NCCL_PROTOCOL=SENDRECV unless set");
	p.text("--baseline", o.baseline, "another build of hmemreg's plugin (e.g. main's), run the same way in the same run");
	p.text("--provider", o.provider, "libfabric provider (HMEMREG_NCCL_PROVIDER)");
	p.text("--node", o.node, "fabric address (HMEMREG_NCCL_NODE)");
	p.count("--window", o.window, "sends in flight (bandwidth)");
	p.sizes("--sizes", o.sizes, "bandwidth message sizes")->default_str("1k,4k,16k,64k,256k,1m,4m,16m,64m");
	p.sizes("--lat-sizes", o.lat_sizes, "latency (ping-pong) message sizes")->default_str("8,64,512,1k,4k,16k,64k");
	p.seconds("--seconds", o.seconds, "time per size and repeat");
	p.count("--repeat", o.repeat, "runs per size; the best counts");
	p.count("--rounds", o.rounds,
		"the plugins run one after the other this many times (a busy host's quiet and loaded moments "
		"reach all of them); the best counts");
	p.count("--iters", o.iters,
		"timed messages (bandwidth) or round trips (latency) per run instead of --seconds' worth: a known "
		"count, to divide system calls or perf events by")
		->default_str("--seconds' worth");
	p.app().add_flag("!--no-ref", o.ref, "skip the iperf3 reference");
	p.app().add_flag("!--no-bw", o.bw, "skip bandwidth");
	p.app().add_flag("!--no-lat", o.lat, "skip latency");
	p.text("--mem", o.mem,
	       "host, cuda (cuMemAlloc'ed buffers on GPU 0, NCCL_PTR_CUDA), or export (hmemreg.ko devmem exports "
	       "through regMrDmaBuf, each receive read back by iflush), or export-recv (receives into exports, "
	       "sends from host memory: NCCL_NET_GDR_READ=0's shape, where small sends come inline or eager and the "
	       "NIC copies them into the exports)")
		->check(CLI::IsMember({"host", "cuda", "export", "export-recv"}));
	p.app().add_option("--log", o.log, "plugin log level shown (the logger NCCL would pass)")
		->check(CLI::IsMember({"none", "warn", "info", "trace"}))
		->capture_default_str();
	if (int rc = p.parse(argc, argv); rc >= 0)
		return rc;
	const bool json = p.json;
	for (const auto *v : {&o.sizes, &o.lat_sizes})
		if (v->empty() || std::count(v->begin(), v->end(), 0)) {
			std::fprintf(stderr, "hmemreg_bench nccl: --sizes, --lat-sizes: sizes must be more than 0\n");
			return 2;
		}
	if (!o.bw && !o.lat) {
		std::fprintf(stderr, "hmemreg_bench nccl: --no-bw and --no-lat: nothing to measure\n");
		return 2;
	}
	g_log_level = o.log == "none" ? NCCL_LOG_NONE
		      : o.log == "info" ? NCCL_LOG_INFO
		      : o.log == "trace" ? NCCL_LOG_TRACE
					 : NCCL_LOG_WARN;
	signal(SIGPIPE, SIG_IGN);

	PluginRun ours, peer, base;
	const bool with_peer = !o.peer_plugin.empty(), with_base = !o.baseline.empty();
	for (long round = 0; round < o.rounds; round++) {
		if (!keep_best(ours, run_plugin(o, o.plugin, "hmemreg", false)) ||
		    (with_peer && !keep_best(peer, run_plugin(o, o.peer_plugin, "peer", true))) ||
		    (with_base && !keep_best(base, run_plugin(o, o.baseline, "baseline", false))))
			return 1;
	}

	Printer pr(json);
	if (o.bw) {
		pr.section("NCCL plugin isend/irecv bandwidth (window " + std::to_string(o.window) + ")" +
			   (with_peer ? " vs " + peer.name : "") + " vs iperf3 TCP loopback");
		for (const Record &r : ours.bw) {
			double ref = o.ref ? iperf3_gbps(r.bytes, o.seconds) : -1;
			Row row;
			row.add("bench", "nccl").add("mode", "bw").add("plugin", ours.name).add("provider", o.provider).add("mem", o.mem);
			row.add("bytes", static_cast<unsigned long long>(r.bytes)).add("gbps", r.value, 3);
			row.add("checked_bytes", static_cast<unsigned long long>(r.checked));
			row.add("vcsw_msg", r.vcsw, 3).add("ivcsw_msg", r.ivcsw, 3).add("cpu_us_msg", r.cpu_us, 2);
			if (with_peer) {
				const Record *q = find(peer.bw, r.bytes);
				row.add("peer", peer.name).add("peer_gbps", q ? q->value : 0.0, 3);
				row.add("peer_checked_bytes", static_cast<unsigned long long>(q ? q->checked : 0));
				row.add("peer_vcsw_msg", q ? q->vcsw : 0.0, 3)
					    .add("peer_ivcsw_msg", q ? q->ivcsw : 0.0, 3)
					    .add("peer_cpu_us_msg", q ? q->cpu_us : 0.0, 2);
				row.add("vs_peer", q && q->value > 0 ? r.value / q->value : 0.0, 3);
			}
			if (with_base) {
				const Record *b = find(base.bw, r.bytes);
				row.add("base_gbps", b ? b->value : 0.0, 3);
				row.add("base_vcsw_msg", b ? b->vcsw : 0.0, 3)
				    .add("base_ivcsw_msg", b ? b->ivcsw : 0.0, 3)
				    .add("base_cpu_us_msg", b ? b->cpu_us : 0.0, 2);
			}
			row.add("ref", o.ref ? "iperf3" : "none").add("ref_gbps", ref, 3);
			row.add("ratio", ref > 0 ? r.value / ref : 0.0, 3);
			pr.print(row);
		}
	}
	if (o.lat) {
		pr.section("NCCL plugin one-way latency (half a ping-pong)" + (with_peer ? " vs " + peer.name : ""));
		for (const Record &r : ours.lat) {
			Row row;
			row.add("bench", "nccl").add("mode", "lat").add("plugin", ours.name).add("provider", o.provider).add("mem", o.mem);
			row.add("bytes", static_cast<unsigned long long>(r.bytes)).add("lat_us", r.value, 2).add("mean_us", r.mean, 2);
			row.add("checked_bytes", static_cast<unsigned long long>(r.checked));
			row.add("vcsw_rt", r.vcsw, 3).add("ivcsw_rt", r.ivcsw, 3).add("cpu_us_rt", r.cpu_us, 2);
			if (with_peer) {
				const Record *q = find(peer.lat, r.bytes);
				row.add("peer", peer.name).add("peer_lat_us", q ? q->value : 0.0, 2).add("peer_mean_us", q ? q->mean : 0.0, 2);
				row.add("peer_checked_bytes", static_cast<unsigned long long>(q ? q->checked : 0));
				row.add("peer_vcsw_rt", q ? q->vcsw : 0.0, 3)
					    .add("peer_ivcsw_rt", q ? q->ivcsw : 0.0, 3)
					    .add("peer_cpu_us_rt", q ? q->cpu_us : 0.0, 2);
				// Ours over the peer's: at most 1 means we are as fast or faster.
				row.add("vs_peer", q && q->value > 0 ? r.value / q->value : 0.0, 3);
			}
			if (with_base) {
				const Record *b = find(base.lat, r.bytes);
				row.add("base_lat_us", b ? b->value : 0.0, 2).add("base_mean_us", b ? b->mean : 0.0, 2);
				row.add("base_vcsw_rt", b ? b->vcsw : 0.0, 3)
				    .add("base_ivcsw_rt", b ? b->ivcsw : 0.0, 3)
				    .add("base_cpu_us_rt", b ? b->cpu_us : 0.0, 2);
			}
			pr.print(row);
		}
	}
	return 0;
}

} // namespace

HMEMREG_BENCH("nccl", bench_nccl, "NCCL plugin bandwidth and latency per size, vs iperf3 and a peer plugin");
