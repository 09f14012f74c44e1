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
// A run stops at --max-seconds (UCX's rcache takes a lock per get, so at 8
// or 16 threads its hit case ran for minutes): ns_per_op is then over the
// pairs done by then, later reps are skipped, and the row says "bounded".
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
	double max_seconds = 10; // per run of a case (both caches); then bounded
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

// One run: ns per get+put (per thread), or <0 on failure; bounded when
// it stopped at the deadline.
struct Result {
	double ns = -1;
	bool bounded = false;
};

using Clock = std::chrono::steady_clock;
constexpr long kDeadlineCheck = 4096; // pairs between looks at the clock

Result run_hit(Impl &impl, char *base, long n, int threads, long iters, double max_seconds)
{
	if (!impl.open(std::max<long>(2 * n, 64)))
		return {};
	for (long i = 0; i < n; i++) // warm: every region cached
		if (!impl.getput(base + i * kStride))
			return {};
	std::atomic<int> ready{0};
	std::atomic<bool> go{false}, ok{true}, stop{false};
	std::vector<double> ns(threads);
	Clock::time_point deadline;
	std::vector<std::thread> th;
	for (int t = 0; t < threads; t++) {
		th.emplace_back([&, t] {
			auto seq = sequence(n, 1234 + t);
			ready++;
			while (!go.load())
				;
			auto t0 = Clock::now();
			long done = 0;
			while (done < iters) {
				long chunk = std::min(kDeadlineCheck, iters - done);
				for (long i = done; i < done + chunk; i++)
					if (!impl.getput(base + seq[i & 0xffff] * kStride))
						ok = false;
				done += chunk;
				// Every thread stops at the first one's deadline, so the
				// rest do not run alone (and faster) at the end.
				if (stop.load(std::memory_order_relaxed))
					break;
				if (Clock::now() > deadline) {
					stop = true;
					break;
				}
			}
			auto t1 = Clock::now();
			ns[t] = std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(done);
		});
	}
	while (ready.load() != threads)
		;
	deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(max_seconds));
	go = true;
	for (auto &x : th)
		x.join();
	impl.close();
	if (!ok)
		return {};
	double sum = 0;
	for (double x : ns)
		sum += x;
	return {sum / threads, stop.load()};
}

Result run_miss(Impl &impl, char *base, long n, long iters, double max_seconds)
{
	if (!impl.open(n))
		return {};
	long span = 2 * n;
	for (long i = 0; i < span; i++)
		impl.getput(base + i * kStride);
	auto t0 = Clock::now();
	auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(max_seconds));
	long done = 0;
	bool bounded = false;
	while (done < iters && !bounded) {
		long chunk = std::min(kDeadlineCheck, iters - done);
		for (long i = done; i < done + chunk; i++)
			if (!impl.getput(base + (i % span) * kStride))
				return {};
		done += chunk;
		bounded = done < iters && Clock::now() > deadline;
	}
	auto t1 = Clock::now();
	impl.close();
	return {std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(done), bounded};
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
			Result b;
			for (long r = 0; r < o.reps; r++) {
				Result x = fn();
				if (x.ns < 0)
					return x;
				if (b.ns < 0 || x.ns < b.ns)
					b = x;
				if (x.bounded) // a longer case: one run says enough
					break;
			}
			return b;
		};
		for (long t : o.threads)
			if (o.hit)
				emit(n, static_cast<int>(t), "hit", best([&] {
					     return run_hit(impl, base, n, static_cast<int>(t), o.iters, o.max_seconds);
				     }));
		if (o.miss)
			emit(n, 1, "miss", best([&] { return run_miss(impl, base, n, std::max(o.miss_iters, 4 * n), o.max_seconds); }));
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
	int rc = run_all(u, o, [&](long n, int t, const char *c, Result r) {
		std::fprintf(out, "%ld %d %s %.3f %d\n", n, t, c, r.ns, r.bounded ? 1 : 0);
		std::fflush(out);
	});
	std::fclose(out);
	return rc;
}

// Re-executes this binary as the UCX child and collects its results.
std::map<Key, Result> run_ucx(int argc, char **argv)
{
	std::map<Key, Result> res;
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
	int bounded;
	while (std::fscanf(in, "%ld %d %15s %lf %d", &n, &t, c, &ns, &bounded) == 5)
		res[{n, t, c}] = Result{ns, bounded != 0};
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
	p.app().add_option("--max-seconds", o.max_seconds, "a run of a case stops here (row: bounded)")->check(CLI::PositiveNumber);
	p.texts("--cases", cases, "hit, miss or both")->check(CLI::IsMember({"hit", "miss"}));
	p.app().add_flag("!--no-ucx", o.ucx, "skip the UCX reference");
	p.app().add_option("--ucx-child", child_fd)->group("");
	if (int rc = p.parse(argc, argv); rc >= 0)
		return rc;
	o.hit = std::count(cases.begin(), cases.end(), "hit") > 0;
	o.miss = std::count(cases.begin(), cases.end(), "miss") > 0;
	if (child_fd >= 0)
		return ucx_child(o, child_fd);

	std::map<Key, Result> ucx;
	if (o.ucx)
		ucx = run_ucx(argc, argv);
	Printer pr(p.json);
	pr.section("cache: get+put latency (ns per op per thread), no-op registration; vs_ucx = hmemreg/ucx");
	HmemregImpl h;
	hmemreg_cache_config probe;
	hmemreg_cache_config_init(&probe);
	auto note = [&](bool bounded) {
		char b[48];
		std::snprintf(b, sizeof(b), "bounded %gs", o.max_seconds);
		return bounded ? std::string(b) : std::string("-");
	};
	return run_all(h, o, [&](long n, int t, const char *c, Result res) {
		auto it = ucx.find({n, t, c});
		Result u = it != ucx.end() ? it->second : Result{};
		if (u.ns > 0) {
			Row r;
			r.add("bench", "cache").add("impl", "ucx").add("entries", n).add("threads", t).add("case", c);
			r.add("ns_per_op", u.ns).add("vs_ucx", 1.0).add("note", note(u.bounded));
			pr.print(r);
		}
		Row r;
		r.add("bench", "cache").add("impl", "hmemreg").add("entries", n).add("threads", t).add("case", c);
		r.add("ns_per_op", res.ns).add("vs_ucx", u.ns > 0 && res.ns > 0 ? res.ns / u.ns : -1.0);
		r.add("note", note(res.bounded));
		pr.print(r);
	});
}

} // namespace

HMEMREG_BENCH("cache", bench_cache, "registration cache hit/miss latency vs UCX rcache");

} // namespace hmemreg::bench
