// SPDX-License-Identifier: MIT
// hmemreg_bench cache: lookup cost of the registration cache, side by side
// with UCX's rcache (Debian libucx 1.13.1) measured in the same run.
//
// Both caches get the same regions (8 KiB every 64 KiB of one reserved
// mapping, so UCX never merges them), the same no-op registration, the same
// per-thread random access sequences. "hit": get+put of a cached region, N
// regions, T threads each walking all N at random; ns_per_op is per get+put
// pair per thread. "miss": a cache limited to N entries walked cyclically
// over 2N regions, so every get registers and evicts (one thread).
// Each case runs --reps times and the fastest run counts, for both.
// UCX runs first, in a child process (this binary re-executed): creating an
// rcache patches mmap/munmap for the whole process, which must not touch
// the hmemreg measurement; libucs is dlopen()ed there only.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <random>
#include <spawn.h>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <vector>

#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>

#include "bench.hpp"
#include "cli.hpp"
#include "hmemreg/hmemreg.h"

extern char **environ;

namespace hmemreg::bench {

namespace {

constexpr size_t kStride = 64 << 10;
constexpr size_t kRegionLen = 8 << 10;

struct Options {
	std::vector<long> entries{1, 64, 1024, 16384};
	std::vector<long> threads{1, 2};
	long iters = 1000000; // get+put pairs per thread, hit case
	long miss_iters = 20000;
	long reps = 3; // each case runs reps times; the fastest counts (noise only adds)
	bool ucx = true;
	bool hit = true, miss = true;
};

// A get+put implementation under test.
struct Impl {
	virtual ~Impl() = default;
	virtual bool open(long max_entries) = 0;
	virtual void close() = 0;
	virtual bool getput(char *addr) = 0;
};

// Random region indices per thread, precomputed so the loop measures the cache.
std::vector<uint32_t> sequence(long n, unsigned seed)
{
	std::vector<uint32_t> v(1 << 16);
	std::mt19937 rng(seed);
	for (auto &x : v)
		x = static_cast<uint32_t>(rng() % static_cast<unsigned long>(n));
	return v;
}

// ns per get+put per thread, or <0 on failure.
double run_hit(Impl &impl, char *base, long n, int threads, long iters)
{
	if (!impl.open(std::max<long>(2 * n, 64)))
		return -1;
	for (long i = 0; i < n; i++) // warm: every region cached
		if (!impl.getput(base + i * kStride))
			return -1;
	std::atomic<int> ready{0};
	std::atomic<bool> go{false}, ok{true};
	std::vector<double> ns(threads);
	std::vector<std::thread> th;
	for (int t = 0; t < threads; t++) {
		th.emplace_back([&, t] {
			auto seq = sequence(n, 1234 + t);
			ready++;
			while (!go.load())
				;
			auto t0 = std::chrono::steady_clock::now();
			for (long i = 0; i < iters; i++)
				if (!impl.getput(base + seq[i & 0xffff] * kStride))
					ok = false;
			auto t1 = std::chrono::steady_clock::now();
			ns[t] = std::chrono::duration<double, std::nano>(t1 - t0).count() / iters;
		});
	}
	while (ready.load() != threads)
		;
	go = true;
	for (auto &x : th)
		x.join();
	impl.close();
	if (!ok)
		return -1;
	double sum = 0;
	for (double x : ns)
		sum += x;
	return sum / threads;
}

double run_miss(Impl &impl, char *base, long n, long iters)
{
	if (!impl.open(n))
		return -1;
	long span = 2 * n;
	for (long i = 0; i < span; i++)
		impl.getput(base + i * kStride);
	auto t0 = std::chrono::steady_clock::now();
	for (long i = 0; i < iters; i++)
		if (!impl.getput(base + (i % span) * kStride))
			return -1;
	auto t1 = std::chrono::steady_clock::now();
	impl.close();
	return std::chrono::duration<double, std::nano>(t1 - t0).count() / iters;
}

// ---------------------------------------------------------------- hmemreg

struct HmemregImpl final : Impl {
	hmemreg_cache *c = nullptr;
	bool open(long max_entries) override
	{
		hmemreg_cache_config cfg;
		if (hmemreg_cache_config_init(&cfg))
			return false;
		cfg.max_count = static_cast<uint64_t>(max_entries);
		cfg.max_size = ~0ULL;
		std::snprintf(cfg.name, sizeof(cfg.name), "bench");
		int rc = hmemreg_cache_create_memory(&cfg, &c);
		if (rc)
			std::fprintf(stderr, "hmemreg_cache_create_memory: %s\n", hmemreg_strerror(rc));
		return rc == 0;
	}
	void close() override
	{
		hmemreg_cache_destroy(c);
		c = nullptr;
	}
	bool getput(char *addr) override
	{
		hmemreg_mr mr;
		if (hmemreg_mr_get(c, addr, kRegionLen, &mr))
			return false;
		return hmemreg_mr_put(c, &mr) == 0;
	}
};

// ---------------------------------------------------------------- UCX

struct Ucs {
	decltype(&ucs_rcache_create) create;
	decltype(&ucs_rcache_destroy) destroy;
	decltype(&ucs_rcache_get) get;
	decltype(&ucs_rcache_region_put) put;
	bool load()
	{
		void *h = dlopen("libucs.so.0", RTLD_NOW | RTLD_GLOBAL);
		if (!h)
			return false;
		create = reinterpret_cast<decltype(create)>(dlsym(h, "ucs_rcache_create"));
		destroy = reinterpret_cast<decltype(destroy)>(dlsym(h, "ucs_rcache_destroy"));
		get = reinterpret_cast<decltype(get)>(dlsym(h, "ucs_rcache_get"));
		put = reinterpret_cast<decltype(put)>(dlsym(h, "ucs_rcache_region_put"));
		return create && destroy && get && put;
	}
};

ucs_status_t noop_reg(void *, ucs_rcache_t *, void *, ucs_rcache_region_t *, uint16_t) { return UCS_OK; }
void noop_dereg(void *, ucs_rcache_t *, ucs_rcache_region_t *) {}
void noop_dump(void *, ucs_rcache_t *, ucs_rcache_region_t *, char *buf, size_t max)
{
	if (max)
		buf[0] = 0;
}
const ucs_rcache_ops_t kUcxOps = {noop_reg, noop_dereg, noop_dump};

struct UcxImpl final : Impl {
	Ucs ucs;
	ucs_rcache_t *rc = nullptr;
	bool open(long max_entries) override
	{
		ucs_rcache_params_t p{};
		p.region_struct_size = sizeof(ucs_rcache_region_t);
		p.alignment = 16; // UCS_RCACHE_MIN_ALIGNMENT
		p.max_alignment = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
		p.ucm_events = UCM_EVENT_VM_UNMAPPED;
		p.ucm_event_priority = 1000;
		p.ops = &kUcxOps;
		p.context = nullptr;
		p.flags = 0; // not NO_PFN_CHECK: with it UCX never evicts
		p.max_regions = static_cast<unsigned long>(max_entries);
		p.max_size = SIZE_MAX;
		p.max_unreleased = SIZE_MAX;
		return ucs.create(&p, "bench", nullptr, &rc) == UCS_OK;
	}
	void close() override
	{
		ucs.destroy(rc);
		rc = nullptr;
	}
	bool getput(char *addr) override
	{
		ucs_rcache_region_t *r;
		if (ucs.get(rc, addr, kRegionLen, PROT_READ | PROT_WRITE, nullptr, &r) != UCS_OK)
			return false;
		ucs.put(rc, r);
		return true;
	}
};

// ---------------------------------------------------------------- driver

using Key = std::tuple<long, int, std::string>; // entries, threads, case

char *reserve(long max_entries)
{
	size_t len = static_cast<size_t>(2 * max_entries + 1) * kStride;
	void *p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? nullptr : static_cast<char *>(p);
}

// Runs every case with impl; calls emit(entries, threads, case, ns).
template <typename Emit>
int run_all(Impl &impl, const Options &o, Emit emit)
{
	long maxn = *std::max_element(o.entries.begin(), o.entries.end());
	char *base = reserve(maxn);
	if (!base)
		return 1;
	for (long n : o.entries) {
		auto best = [&](auto fn) {
			double b = -1;
			for (long r = 0; r < o.reps; r++) {
				double x = fn();
				if (x < 0)
					return x;
				b = b < 0 ? x : std::min(b, x);
			}
			return b;
		};
		for (long t : o.threads)
			if (o.hit)
				emit(n, static_cast<int>(t), "hit", best([&] { return run_hit(impl, base, n, static_cast<int>(t), o.iters); }));
		if (o.miss)
			emit(n, 1, "miss", best([&] { return run_miss(impl, base, n, std::max(o.miss_iters, 4 * n)); }));
	}
	return 0;
}

int ucx_child(const Options &o, int fd)
{
	UcxImpl u;
	if (!u.ucs.load()) {
		std::fprintf(stderr, "hmemreg_bench: cannot load libucs.so.0 (%s)\n", dlerror());
		return 1;
	}
	FILE *out = fdopen(fd, "w");
	int rc = run_all(u, o, [&](long n, int t, const char *c, double ns) {
		std::fprintf(out, "%ld %d %s %.3f\n", n, t, c, ns);
		std::fflush(out);
	});
	std::fclose(out);
	return rc;
}

// Re-executes this binary as the UCX child and collects its results.
std::map<Key, double> run_ucx(int argc, char **argv)
{
	std::map<Key, double> res;
	int pfd[2];
	if (::pipe(pfd))
		return res;
	std::vector<std::string> args{"/proc/self/exe", "cache", "--ucx-child", std::to_string(pfd[1])};
	for (int i = 1; i < argc; i++)
		if (std::strcmp(argv[i], "--json"))
			args.emplace_back(argv[i]);
	std::vector<char *> av;
	for (auto &a : args)
		av.push_back(a.data());
	av.push_back(nullptr);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addclose(&fa, pfd[0]);
	pid_t pid;
	int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, av.data(), environ);
	posix_spawn_file_actions_destroy(&fa);
	::close(pfd[1]);
	if (rc) {
		::close(pfd[0]);
		return res;
	}
	FILE *in = fdopen(pfd[0], "r");
	long n;
	int t;
	char c[16];
	double ns;
	while (std::fscanf(in, "%ld %d %15s %lf", &n, &t, c, &ns) == 4)
		res[{n, t, c}] = ns;
	std::fclose(in);
	int st;
	waitpid(pid, &st, 0);
	return res;
}

int bench_cache(int argc, char **argv)
{
	Options o;
	int child_fd = -1;
	std::vector<std::string> cases{"hit", "miss"};
	cli::Parser p("cache", "registration cache get+put latency (hits, misses) vs UCX rcache, no-op registration");
	p.counts("--entries", o.entries, "cache sizes (entries) to run");
	p.counts("--threads", o.threads, "thread counts for the hit case");
	p.count("--iters", o.iters, "get+put pairs per thread, hit case");
	p.count("--miss-iters", o.miss_iters, "get+put pairs, miss case (at least 4x entries)");
	p.count("--reps", o.reps, "runs per case; the fastest counts");
	p.texts("--cases", cases, "hit, miss or both")->check(CLI::IsMember({"hit", "miss"}));
	p.app().add_flag("!--no-ucx", o.ucx, "skip the UCX reference");
	p.app().add_option("--ucx-child", child_fd)->group("");
	if (int rc = p.parse(argc, argv); rc >= 0)
		return rc;
	o.hit = std::count(cases.begin(), cases.end(), "hit") > 0;
	o.miss = std::count(cases.begin(), cases.end(), "miss") > 0;
	if (child_fd >= 0)
		return ucx_child(o, child_fd);

	std::map<Key, double> ucx;
	if (o.ucx)
		ucx = run_ucx(argc, argv);
	Printer pr(p.json);
	pr.section("cache: get+put latency (ns per op per thread), no-op registration; vs_ucx = hmemreg/ucx");
	HmemregImpl h;
	hmemreg_cache_config probe;
	hmemreg_cache_config_init(&probe);
	return run_all(h, o, [&](long n, int t, const char *c, double ns) {
		auto it = ucx.find({n, t, c});
		double u = it != ucx.end() ? it->second : -1;
		if (u > 0) {
			Row r;
			r.add("bench", "cache").add("impl", "ucx").add("entries", n).add("threads", t).add("case", c);
			r.add("ns_per_op", u).add("vs_ucx", 1.0);
			pr.print(r);
		}
		Row r;
		r.add("bench", "cache").add("impl", "hmemreg").add("entries", n).add("threads", t).add("case", c);
		r.add("ns_per_op", ns).add("vs_ucx", u > 0 && ns > 0 ? ns / u : -1.0);
		pr.print(r);
	});
}

} // namespace

HMEMREG_BENCH("cache", bench_cache, "registration cache hit/miss latency vs UCX rcache");

} // namespace hmemreg::bench
