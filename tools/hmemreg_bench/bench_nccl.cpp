// SPDX-License-Identifier: MIT
// hmemreg_bench nccl: send/recv bandwidth through the NCCL plugin's table
// (libnccl-net-hmemreg.so, dlopened as NCCL does), two processes on one
// host, per message size, next to iperf3 over TCP loopback with the same
// write size, measured in the same run.
//
//   hmemreg_bench nccl [--json] [--plugin PATH] [--provider P] [--node ADDR]
//                      [--window W] [--sizes a,b,...] [--seconds S] [--repeat N] [--no-ref]
//                      [--mem host|cuda]
// Each row is the best of --repeat (3) timed runs of about --seconds.
// --mem cuda: both ranks' buffers are cudaMalloc'ed memory on GPU 0,
// registered as NCCL_PTR_CUDA (the plugin must offer it: FI_HMEM); run it
// next to --mem host in the same session for the host-buffer reference.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.hpp"
#include "cli.hpp"
#include "reference_tools.hpp"
#include "xfer_target.hpp"
#include "cuda_driver.hpp"
#include "nccl_abi.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
	std::string plugin;
	std::string provider = "tcp;ofi_rxm";
	std::string node = "127.0.0.1";
	long window = 8; // NCCL keeps up to 8 steps in flight per connection
	double seconds = 0.5;
	long repeat = 3;
	bool ref = true;
	std::string mem = "host";
	std::vector<uint64_t> sizes = {1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
};

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

#define TRY(call)                                                                                                    \
	do {                                                                                                         \
		ncclResult_t r_ = (call);                                                                            \
		if (r_ != ncclSuccess) {                                                                             \
			std::fprintf(stderr, "nccl bench: %s failed: %d\n", #call, r_);                              \
			return false;                                                                                \
		}                                                                                                    \
	} while (0)

struct Side {
	ncclNet_v11_t *net = nullptr;
	void *ctx = nullptr;
	void *comm = nullptr;
	void *mh = nullptr;
	bool sender = false;

	// Post one operation; false on error. *req NULL means "try again".
	bool post(void *buf, size_t n, int tag, void **req)
	{
		*req = nullptr;
		if (sender) {
			TRY(net->isend(comm, buf, n, tag, mh, nullptr, req));
		} else {
			size_t sizes[1] = {n};
			int tags[1] = {tag};
			void *d[1] = {buf}, *m[1] = {mh};
			TRY(net->irecv(comm, 1, d, sizes, tags, m, nullptr, req));
		}
		return true;
	}

	// `iters` operations of n bytes with `window` in flight.
	bool run(uint8_t *buf, size_t n, long iters, int window)
	{
		std::vector<void *> inflight(static_cast<size_t>(window), nullptr);
		long posted = 0, completed = 0;
		auto deadline = Clock::now() + std::chrono::seconds(300);
		while (completed < iters) {
			size_t slot = static_cast<size_t>(posted % window);
			if (posted < iters && inflight[slot] == nullptr) {
				void *req;
				if (!post(buf + slot * n, n, static_cast<int>(posted & 0xffff), &req))
					return false;
				if (req) {
					inflight[slot] = req;
					posted++;
					continue;
				}
			}
			size_t oldest = static_cast<size_t>(completed % window);
			int done = 0, size = 0;
			if (inflight[oldest] == nullptr)
				continue; // not posted yet (isend waits for the receive's advertisement)
			TRY(net->test(inflight[oldest], &done, &size));
			if (done) {
				if (static_cast<size_t>(size) != n) {
					std::fprintf(stderr, "nccl bench: %d bytes completed, %zu expected\n", size, n);
					return false;
				}
				inflight[oldest] = nullptr;
				completed++;
			}
			if (Clock::now() > deadline) {
				std::fprintf(stderr, "nccl bench: not done after 300 s\n");
				return false;
			}
		}
		return true;
	}
};

// One process of the pair; the parent sends and reports, the child receives.
bool pair_side(const Options &o, bool sender, int fd, std::vector<std::pair<size_t, double>> &out)
{
	void *lib = dlopen(o.plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		std::fprintf(stderr, "nccl bench: %s\n", dlerror());
		return false;
	}
	Side s;
	s.sender = sender;
	s.net = static_cast<ncclNet_v11_t *>(dlsym(lib, "ncclNetPlugin_v11"));
	if (!s.net) {
		std::fprintf(stderr, "nccl bench: no ncclNetPlugin_v11 in %s\n", o.plugin.c_str());
		return false;
	}
	ncclNetCommConfig_t cfg{-1};
	TRY(s.net->init(&s.ctx, 1, &cfg, nullptr, nullptr));
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *lc = nullptr;
	ncclNetDeviceHandle_t *dev = nullptr;
	auto deadline = Clock::now() + std::chrono::seconds(30);
	if (!sender) {
		TRY(s.net->listen(s.ctx, 0, handle, &lc));
		if (!xfer(fd, handle, sizeof(handle), true))
			return false;
		while (!s.comm && Clock::now() < deadline)
			TRY(s.net->accept(lc, &s.comm, &dev));
	} else {
		if (!xfer(fd, handle, sizeof(handle), false))
			return false;
		while (!s.comm && Clock::now() < deadline)
			TRY(s.net->connect(s.ctx, 0, handle, &s.comm, &dev));
	}
	if (!s.comm) {
		std::fprintf(stderr, "nccl bench: connection setup timed out\n");
		return false;
	}
	const size_t max = *std::max_element(o.sizes.begin(), o.sizes.end());
	const size_t len = max * static_cast<size_t>(o.window);
	void *mem = nullptr;
	CUdeviceptr dmem = 0;
	const hmemreg::cuda::Driver &cu = hmemreg::cuda::Driver::get();
	uint8_t *buf = nullptr;
	if (o.mem == "cuda") {
		ncclNetProperties_v11_t props{};
		TRY(s.net->getProperties(0, &props));
		if (!(props.ptrSupport & NCCL_PTR_CUDA)) {
			std::fprintf(stderr, "nccl bench: the plugin offers no NCCL_PTR_CUDA here (ptrSupport %d: its "
					     "provider has no FI_HMEM)\n", props.ptrSupport);
			return false;
		}
		if (!cu.loaded || hmemreg::cuda::use_device(0) || cu.cuMemAlloc(&dmem, len) != CUDA_SUCCESS ||
		    cu.cuMemsetD8(dmem, sender ? 0x5a : 0, len) != CUDA_SUCCESS) {
			std::fprintf(stderr, "nccl bench: no CUDA memory (%s)\n", cu.loaded ? "cuMemAlloc" : cu.why_not.c_str());
			return false;
		}
		buf = reinterpret_cast<uint8_t *>(static_cast<uintptr_t>(dmem));
	} else {
		if (posix_memalign(&mem, 4096, len))
			return false;
		std::memset(mem, sender ? 0x5a : 0, len);
		buf = static_cast<uint8_t *>(mem);
	}
	TRY(s.net->regMr(s.comm, buf, len, dmem ? NCCL_PTR_CUDA : NCCL_PTR_HOST, &s.mh));
	for (size_t n : o.sizes) {
		// Warm-up (connections, registrations), which also calibrates:
		// the sender picks the count that fills ~`seconds` and tells the
		// receiver.
		const long warm = 2L * o.window;
		auto w0 = Clock::now();
		if (!s.run(buf, n, warm, o.window))
			return false;
		double per_op = std::chrono::duration<double>(Clock::now() - w0).count() / static_cast<double>(warm);
		long iters = std::clamp(static_cast<long>(o.seconds / std::max(per_op, 1e-7)), 2L * o.window, 200000L);
		if (!xfer(fd, &iters, sizeof(iters), sender))
			return false;
		double best = 0; // best of --repeat runs: this host is shared and noisy
		for (long rep = 0; rep < o.repeat; rep++) {
			auto t0 = Clock::now();
			if (!s.run(buf, n, iters, o.window))
				return false;
			double sec = std::chrono::duration<double>(Clock::now() - t0).count();
			best = std::max(best, static_cast<double>(n) * static_cast<double>(iters) * 8 / sec / 1e9);
		}
		if (sender)
			out.emplace_back(n, best);
	}
	uint8_t bye = 0;
	xfer(fd, &bye, 1, sender); // both sides done before closing
	TRY(sender ? s.net->closeSend(s.comm) : s.net->closeRecv(s.comm));
	if (lc)
		TRY(s.net->closeListen(lc));
	TRY(s.net->deregMr(nullptr, s.mh));
	TRY(s.net->finalize(s.ctx));
	std::free(mem);
	if (dmem)
		cu.cuMemFree(dmem);
	return true;
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

int bench_nccl(int argc, char **argv)
{
	using namespace hmemreg::bench;
	Options o;
	o.plugin = default_plugin();
	cli::Parser p("nccl", "NCCL net plugin isend/irecv bandwidth per size, two processes, vs iperf3 on loopback");
	p.text("--plugin", o.plugin, "the NCCL net plugin to load");
	p.text("--provider", o.provider, "libfabric provider (HMEMREG_NCCL_PROVIDER)");
	p.text("--node", o.node, "fabric address (HMEMREG_NCCL_NODE)");
	p.count("--window", o.window, "sends in flight");
	p.sizes("--sizes", o.sizes, "message sizes")->default_str("1k,4k,16k,64k,256k,1m,4m,16m,64m");
	p.seconds("--seconds", o.seconds, "time per size and repeat");
	p.count("--repeat", o.repeat, "runs per size; the best counts");
	p.app().add_flag("!--no-ref", o.ref, "skip the iperf3 reference");
	p.text("--mem", o.mem, "host, or cuda (cudaMalloc'ed buffers on GPU 0, NCCL_PTR_CUDA)")
		->check(CLI::IsMember({"host", "cuda"}));
	if (int rc = p.parse(argc, argv); rc >= 0)
		return rc;
	const bool json = p.json;
	if (o.sizes.empty() || std::count(o.sizes.begin(), o.sizes.end(), 0)) {
		std::fprintf(stderr, "hmemreg_bench nccl: --sizes: sizes must be more than 0\n");
		return 2;
	}
	setenv("HMEMREG_NCCL_PROVIDER", o.provider.c_str(), 1);
	if (!o.node.empty())
		setenv("HMEMREG_NCCL_NODE", o.node.c_str(), 1);

	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	pid_t child = fork();
	if (child == 0) {
		close(sv[0]);
		std::vector<std::pair<size_t, double>> none;
		_exit(pair_side(o, false, sv[1], none) ? 0 : 1);
	}
	close(sv[1]);
	std::vector<std::pair<size_t, double>> rows;
	bool ok = pair_side(o, true, sv[0], rows);
	close(sv[0]);
	int st = 0;
	waitpid(child, &st, 0);
	if (!ok || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		std::fprintf(stderr, "nccl bench: a rank failed\n");
		return 1;
	}
	Printer pr(json);
	pr.section("NCCL plugin isend/irecv bandwidth (window " + std::to_string(o.window) + ") vs iperf3 TCP loopback");
	for (auto &[n, gbps] : rows) {
		double ref = o.ref ? iperf3_gbps(n, o.seconds) : -1;
		Row r;
		r.add("bench", "nccl").add("provider", o.provider).add("mem", o.mem).add("bytes", static_cast<long long>(n));
		r.add("gbps", gbps, 3).add("ref", o.ref ? "iperf3" : "none").add("ref_gbps", ref, 3);
		r.add("ratio", ref > 0 ? gbps / ref : 0.0, 3);
		pr.print(r);
	}
	return 0;
}

} // namespace

HMEMREG_BENCH("nccl", bench_nccl, "NCCL plugin send/recv bandwidth per size vs iperf3 (TCP loopback)");
