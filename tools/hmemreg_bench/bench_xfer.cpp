// SPDX-License-Identifier: MIT
// hmemreg_bench xfer: bandwidth of engine writes between two engines in one
// process (each with its own progress thread), next to a reference measured
// in the same run: iperf3 over loopback for tcp, memcpy for shm, fi_rma_bw
// (fabtests) or ib_write_bw for verbs when present.
//
// Columns follow fabtests (bytes iters total time MB/sec usec/xfer
// Mxfers/sec; MB = 10^6 B), plus chunks, rails, Gbps, the reference and the
// percentage of it.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "bench.hpp"
#include "engine/engine.hpp"

using namespace hmemreg;
using namespace hmemreg::engine;
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
};

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

size_t parse_size(const std::string &s)
{
	char *end = nullptr;
	double v = std::strtod(s.c_str(), &end);
	switch (end && *end ? *end : ' ') {
	case 'k': case 'K': v *= 1024; break;
	case 'm': case 'M': v *= 1024 * 1024; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
	default: break;
	}
	return static_cast<size_t>(v);
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
std::string capture(const std::string &cmd)
{
	std::string out;
	FILE *p = popen(cmd.c_str(), "r");
	if (!p)
		return out;
	char b[4096];
	size_t n;
	while ((n = fread(b, 1, sizeof(b), p)) > 0)
		out.append(b, n);
	pclose(p);
	return out;
}

// iperf3 over loopback, one stream, 1 MiB writes: Gbps (0 when unavailable).
double iperf3_gbps(std::string &what)
{
	const int port = 5201 + static_cast<int>(getpid() % 2000);
	pid_t srv = fork();
	if (srv == 0) {
		std::string p = std::to_string(port);
		if (!std::freopen("/dev/null", "w", stdout))
			_exit(127);
		execlp("iperf3", "iperf3", "-s", "-1", "-p", p.c_str(), "-B", "127.0.0.1", (char *)nullptr);
		_exit(127);
	}
	std::this_thread::sleep_for(std::chrono::milliseconds(300));
	std::string out = capture("iperf3 -c 127.0.0.1 -p " + std::to_string(port) + " -t 3 -l 1M -f g 2>/dev/null");
	int st;
	waitpid(srv, &st, 0);
	// Last "receiver" line: "[  5]   0.00-3.00  sec  ... GBytes  NN.N Gbits/sec  receiver"
	double g = 0;
	for (const auto &line : split(out, '\n')) {
		if (line.find("receiver") == std::string::npos)
			continue;
		size_t at = line.find("Gbits/sec");
		if (at == std::string::npos)
			continue;
		size_t b = line.rfind(' ', at - 2);
		g = std::atof(line.substr(b + 1, at - b - 1).c_str());
	}
	what = "iperf3 lo 1x1MiB";
	return g;
}

// Single-threaded memcpy between two buffers of `size` bytes (what shm's
// single copy is bounded by).
double memcpy_gbps(size_t size, double seconds)
{
	std::vector<uint8_t> a(size, 1), b(size, 2);
	size_t iters = 0;
	auto t0 = Clock::now();
	double el = 0;
	do {
		for (int k = 0; k < 8; k++, iters++)
			std::memcpy(iters & 1 ? a.data() : b.data(), iters & 1 ? b.data() : a.data(), size);
		el = std::chrono::duration<double>(Clock::now() - t0).count();
	} while (el < seconds);
	return static_cast<double>(iters) * size * 8 / el / 1e9;
}

struct Result {
	size_t iters;
	double seconds;
};

// Transfers of `size` bytes in `nchunks` chunks for about `seconds`, `window`
// in flight; each completion posts the next from the progress thread.
Result run_writes(Engine &a, PeerId peer, const Region &src, const Bytes &desc, size_t size, size_t nchunks,
		  double seconds, size_t window, size_t max_iters = SIZE_MAX)
{
	std::vector<Chunk> chunks;
	size_t per = size / nchunks;
	for (size_t k = 0; k < nchunks; k++) {
		size_t len = k + 1 == nchunks ? size - per * k : per;
		// Scattered: chunk k of the source lands in reverse order at the target.
		chunks.push_back({&src, per * k, len, nchunks == 1 ? 0 : size - per * k - len});
	}
	std::atomic<size_t> posted{0}, done{0};
	std::atomic<bool> stop{false};
	std::atomic<int> failed{0};
	std::function<void(const Transfer &)> cb;
	auto post_one = [&] {
		if (stop.load(std::memory_order_relaxed))
			return;
		if (posted.fetch_add(1) >= max_iters) {
			posted.fetch_sub(1);
			return;
		}
		a.write(peer, chunks, desc, 0, cb);
	};
	cb = [&](const Transfer &t) {
		if (t.status() != 0 && failed.exchange(1) == 0)
			std::fprintf(stderr, "xfer: transfer failed: %s\n", t.error().c_str());
		done.fetch_add(1);
		post_one();
	};
	auto t0 = Clock::now();
	auto end = t0 + std::chrono::duration<double>(seconds);
	for (size_t i = 0; i < window; i++)
		post_one();
	while (Clock::now() < end && done.load() < max_iters && !failed.load())
		std::this_thread::sleep_for(std::chrono::microseconds(200));
	stop = true;
	while (done.load() < posted.load() && !failed.load())
		std::this_thread::sleep_for(std::chrono::microseconds(20));
	double el = std::chrono::duration<double>(Clock::now() - t0).count();
	if (failed.load())
		throw Error(HMEMREG_EFABRIC, "xfer: a transfer failed");
	return {done.load(), el};
}

int run_provider(const Options &o, const std::string &prov, bench::Printer &pr)
{
	Config cfg;
	cfg.provider = prov;
	if (!o.node.empty())
		cfg.node = o.node;
	else if (prov.find("tcp") != std::string::npos)
		cfg.node = "127.0.0.1";
	cfg.idle_spin = 1u << 30; // a benchmark spins

	std::string ref_what;
	double fixed_ref = 0;
	bool per_size_memcpy = false;
	if (prov.find("tcp") != std::string::npos) {
		fixed_ref = iperf3_gbps(ref_what);
		if (fixed_ref <= 0)
			std::fprintf(stderr, "xfer: iperf3 reference unavailable (is iperf3 installed?)\n");
	} else if (prov == "shm") {
		per_size_memcpy = true;
		ref_what = "memcpy";
	} else {
		ref_what = "none";
	}

	for (unsigned rails : o.rails) {
		cfg.rails = rails;
		Engine a(cfg), b(cfg);
		PeerId peer = a.add_peer(b.address(), true);
		if (!o.json)
			std::printf("\n# xfer %s, %u rail(s), window %zu; reference: %s\n# %s\n", prov.c_str(), rails,
				    o.window, ref_what.c_str(), a.caps().describe().c_str());
		pr.section("xfer " + prov);
		size_t maxbuf = o.max_size;
		void *ps = nullptr, *pd = nullptr;
		if (posix_memalign(&ps, 4096, maxbuf) || posix_memalign(&pd, 4096, maxbuf))
			throw Error(HMEMREG_ENOMEM, "xfer: cannot allocate buffers");
		std::unique_ptr<void, decltype(&std::free)> fs(ps, std::free), fd(pd, std::free);
		std::memset(ps, 0x5a, maxbuf);
		std::memset(pd, 0, maxbuf);
		auto src = a.register_region(ps, maxbuf);
		auto dst = b.register_region(pd, maxbuf);
		Bytes desc = b.descriptor(*dst);

		for (size_t size = o.min_size; size <= o.max_size; size *= 4) {
			for (size_t nch : o.chunks) {
				if (size / nch < 64)
					continue;
				// Best of `repeat` runs, the reference likewise, interleaved,
				// so both see the same machine (this one is shared).
				Result r{0, 1};
				double ref = fixed_ref;
				for (unsigned k = 0; k < o.repeat; k++) {
					Result t = run_writes(a, peer, *src, desc, size, nch, o.seconds, o.window);
					if (t.iters / t.seconds > r.iters / r.seconds)
						r = t;
					if (per_size_memcpy)
						ref = std::max(k ? ref : 0.0, memcpy_gbps(size, o.seconds / 2));
				}
				if (o.verify) {
					std::memset(pd, 0, size);
					run_writes(a, peer, *src, desc, size, nch, 10, 1, 1);
					if (std::memcmp(ps, pd, size) != 0)
						throw Error(HMEMREG_EFABRIC, "xfer: verification failed at " + human(size));
				}
				double bytes = static_cast<double>(size) * r.iters;
				double gbps = bytes * 8 / r.seconds / 1e9;
				bench::Row row;
				if (o.json)
					row.add("bench", "xfer").add("provider", prov).add("mem", "host");
				row.add("bytes", o.json ? std::to_string(size) : human(size));
				row.add("chunks", nch).add("rails", static_cast<int>(rails)).add("iters", r.iters);
				row.add("total", o.json ? std::to_string(static_cast<long long>(bytes)) : human(bytes));
				row.add("time", r.seconds, 3);
				row.add("MB/sec", bytes / r.seconds / 1e6, 2);
				row.add("usec/xfer", r.seconds * 1e6 / r.iters, 2);
				row.add("Mxfers/sec", r.iters / r.seconds / 1e6, 4);
				row.add("gbps", gbps, 2);
				row.add("ref", ref_what);
				row.add("ref_gbps", ref, 2);
				row.add("pct_ref", ref > 0 ? 100.0 * gbps / ref : 0.0, 1);
				if (o.json)
					row.add("verified", o.verify ? "yes" : "no");
				pr.print(row);
			}
		}
	}
	return 0;
}

int usage()
{
	std::fprintf(stderr,
		     "usage: hmemreg_bench xfer [--json] [--provider P[,P]] [--node ADDR] [--min SIZE] [--max SIZE]\n"
		     "                          [--chunks N[,N]] [--rails R[,R]] [--window W] [--seconds S] [--repeat N] [--verify]\n"
		     "  sizes go up by 4x from --min (4k) to --max (64m; up to 1g); providers default tcp;ofi_rxm,shm;\n"
		     "  each row is the best of --repeat runs of --seconds, the reference measured alongside\n");
	return 2;
}

int xfer_main(int argc, char **argv)
{
	Options o;
	o.json = bench::take_flag(argc, argv, "--json");
	o.verify = bench::take_flag(argc, argv, "--verify");
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		if (i + 1 >= argc)
			return usage();
		std::string v = argv[++i];
		if (a == "--provider")
			o.providers = split(v, ',');
		else if (a == "--node")
			o.node = v;
		else if (a == "--min")
			o.min_size = parse_size(v);
		else if (a == "--max")
			o.max_size = parse_size(v);
		else if (a == "--chunks") {
			o.chunks.clear();
			for (auto &c : split(v, ','))
				o.chunks.push_back(std::max<size_t>(1, std::strtoull(c.c_str(), nullptr, 0)));
		} else if (a == "--rails") {
			o.rails.clear();
			for (auto &c : split(v, ','))
				o.rails.push_back(std::max(1u, static_cast<unsigned>(std::atoi(c.c_str()))));
		} else if (a == "--window")
			o.window = std::max<size_t>(1, std::strtoull(v.c_str(), nullptr, 0));
		else if (a == "--repeat")
			o.repeat = std::max(1, std::atoi(v.c_str()));
		else if (a == "--seconds")
			o.seconds = std::atof(v.c_str());
		else
			return usage();
	}
	if (o.min_size == 0 || o.max_size < o.min_size)
		return usage();
	bench::Printer pr(o.json);
	try {
		for (const auto &p : o.providers)
			run_provider(o, p, pr);
	} catch (const Error &e) {
		std::fprintf(stderr, "xfer: %s\n", e.what());
		return 1;
	}
	return 0;
}

} // namespace

HMEMREG_BENCH("xfer", xfer_main, "transfer engine bandwidth vs iperf3/memcpy/fabtests (tcp, shm, verbs)");
