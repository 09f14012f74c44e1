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
// Each case runs --reps times and the fastest run counts, for both (a
// size's hit runs go round its thread counts, rep by rep). Every row says
// "scaling", t threads' hit throughput over one thread's (t x ns at 1 /
// ns at t), and "vs_smallest", its hit against the hit of the run's first
// --entries at the same thread count (-1 on misses and where the run has
// no such row).
// A run stops at --max-seconds (UCX's rcache takes a lock per get, so at 8
// or 16 threads its hit case ran for minutes): ns_per_op is then over the
// pairs done by then, later reps are skipped, and the row says "bounded".
// UCX runs in a child process (this binary re-executed): creating an
// rcache patches mmap/munmap for the whole process, which must not touch
// the hmemreg measurement; libucs is dlopen()ed there only. The child runs
// a case when asked, so UCX's runs, the ceiling's and hmemreg's take turns
// rep by rep (run_all): on a machine whose speed drifts (the H200 host's
// misses moved by 1.5x between processes), the ratios compare runs of the
// same moments.
// "ceiling" rows (hit case): the same threads, sequences and timing over a
// bare array of one 64-byte line per region (huge pages where it can),
// one load per get+put: what a random-order hit costs at that size when
// nothing but one line of memory is read (DRAM latency at 1M entries).
// "chase" column (hit rows): two steps of a dependent pointer chase per
// get+put in the footprint a hit reads (n lines of a memo-sized array,
// then n state words): a hit's two dependent loads at that size's memory
// latency (run_chase). A hit near it is bound by memory, not by its code;
// one below it overlaps consecutive gets (the bench's addresses do not
// depend on each other, the chase's do).
// --cpus: thread t of each run, whichever implementation, on the t-th CPU
// of one list (cpu_binding.hpp); the header names it.
// The hmemreg rows' "cached" says what percent of the gets the cache served
// from its entries (100; -1 where not known; below 100 would mean the
// monitor refused ranges, e.g. a mapping limit).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dlfcn.h>
#include <fcntl.h>
#include <map>
#include <memory>
#include <random>
#include <signal.h>
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
#include "cpu_binding.hpp"
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
	bool ceiling = true;
	bool hit = true, miss = true;
	std::string monitor = "auto"; // hmemreg's (HMEMREG_MONITOR_*)
};

// A get+put implementation under test.
struct Impl {
	virtual ~Impl() = default;
	virtual bool open(long max_entries) = 0;
	virtual void close() = 0;
	virtual bool getput(char *addr) = 0;
	// What the last case's cache served from its entries (hits and
	// cached misses) out of every get since open(); <0: not known.
	virtual double cached_fraction() { return -1; }
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
	double cached = -1; // Impl::cached_fraction() at the end of the run
};

using Clock = std::chrono::steady_clock;
constexpr long kDeadlineCheck = 4096; // pairs between looks at the clock

// --cpu-clock: the calling thread's CPU time instead of wall time (a
// loaded machine: time spent descheduled does not count; deadlines stay
// on the wall clock).
bool g_cpu_clock = false;
double op_clock_ns()
{
	if (g_cpu_clock) {
		timespec ts;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
		return 1e9 * static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec);
	}
	return std::chrono::duration<double, std::nano>(Clock::now().time_since_epoch()).count();
}

// --cpus: thread t of every run on the same CPU, whichever implementation
// runs (UCX's child gets the parent's list); the main thread, which opens
// the caches, warms them and runs the misses, as thread 0.
CpuBinding g_cpus;
void bind_thread(int t)
{
	std::string err;
	if (!g_cpus.bind(t, err))
		std::fprintf(stderr, "hmemreg_bench: %s (runs unbound)\n", err.c_str());
}

// `threads` threads, started together once each has run prepare(t) (its
// state), each running step(state, from, count) over [0, iters) in blocks
// of kDeadlineCheck. Every thread stops at the first one's deadline, so the
// rest do not run alone (and faster) at the end. The mean ns per iteration.
template <class Prepare, class Step>
Result timed_threads(int threads, long iters, double max_seconds, Prepare prepare, Step step)
{
	std::atomic<int> ready{0};
	std::atomic<bool> go{false}, stop{false};
	std::vector<double> ns(threads);
	Clock::time_point deadline;
	std::vector<std::thread> th;
	for (int t = 0; t < threads; t++) {
		th.emplace_back([&, t] {
			bind_thread(t);
			auto state = prepare(t);
			ready++;
			while (!go.load())
				;
			const double t0 = op_clock_ns();
			long done = 0;
			while (done < iters) {
				const long count = std::min(kDeadlineCheck, iters - done);
				step(state, done, count);
				done += count;
				if (stop.load(std::memory_order_relaxed))
					break;
				if (Clock::now() > deadline) {
					stop = true;
					break;
				}
			}
			ns[t] = (op_clock_ns() - t0) / static_cast<double>(done);
		});
	}
	while (ready.load() != threads)
		;
	deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(max_seconds));
	go = true;
	for (auto &x : th)
		x.join();
	double sum = 0;
	for (double x : ns)
		sum += x;
	return {sum / threads, stop.load(), -1};
}

Result run_hit(Impl &impl, char *base, long n, int threads, long iters, double max_seconds)
{
	if (!impl.open(std::max<long>(2 * n, 64)))
		return {};
	// Warm: every region cached, then used once more (hmemreg memoises an
	// entry at its first hit, not at its miss), so what is timed is hits.
	for (int pass = 0; pass < 2; pass++)
		for (long i = 0; i < n; i++)
			if (!impl.getput(base + i * kStride))
				return {};
	std::atomic<bool> ok{true};
	Result r = timed_threads(
		threads, iters, max_seconds, [&](int t) { return sequence(n, 1234 + t); },
		[&](const std::vector<uint32_t> &seq, long from, long count) {
			for (long i = from; i < from + count; i++)
				if (!impl.getput(base + seq[i & 0xffff] * kStride))
					ok = false;
		});
	r.cached = impl.cached_fraction();
	impl.close();
	return ok ? r : Result{};
}

Result run_miss(Impl &impl, char *base, long n, long iters, double max_seconds)
{
	if (!impl.open(n))
		return {};
	long span = 2 * n;
	for (long i = 0; i < span; i++)
		impl.getput(base + i * kStride);
	const double c0 = op_clock_ns();
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
	const double c1 = op_clock_ns();
	const double cached = impl.cached_fraction();
	impl.close();
	return {(c1 - c0) / static_cast<double>(done), bounded, cached};
}

// ---------------------------------------------------------------- hmemreg

struct HmemregImpl final : Impl {
	hmemreg_cache *c = nullptr;
	uint32_t monitor = HMEMREG_MONITOR_AUTO;
	bool open(long max_entries) override
	{
		hmemreg_cache_config cfg;
		if (hmemreg_cache_config_init(&cfg))
			return false;
		cfg.monitor = monitor;
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
	double cached_fraction() override
	{
		hmemreg_cache_stats st{};
		if (hmemreg_cache_get_stats(c, &st))
			return -1;
		const double gets = static_cast<double>(st.hits + st.misses);
		return gets > 0 ? static_cast<double>(st.hits + st.misses - st.uncached_registrations) / gets : -1;
	}
	bool getput(char *addr) override
	{
		hmemreg_mr mr;
		if (hmemreg_mr_get(c, addr, kRegionLen, &mr))
			return false;
		return hmemreg_mr_put(c, &mr) == 0;
	}
};

// ---------------------------------------------------------------- ceiling

// One 64-byte line per region, one load per get+put (see the top).
struct CeilingImpl final : Impl {
	char *base = nullptr; // the regions' reservation (address -> index)
	uint64_t *lines = nullptr;
	size_t len = 0;
	std::atomic<uint64_t> sink{0};
	explicit CeilingImpl(char *b) : base(b) {}
	bool open(long max_entries) override
	{
		len = static_cast<size_t>(max_entries) * 64;
		void *p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return false;
		::madvise(p, len, MADV_HUGEPAGE); // as the cache's memo and entries
		lines = static_cast<uint64_t *>(p);
		for (size_t i = 0; i < len / 8; i += 8)
			lines[i] = i;
		return true;
	}
	void close() override
	{
		::munmap(lines, len);
		lines = nullptr;
	}
	bool getput(char *addr) override
	{
		const size_t i = static_cast<size_t>(addr - base) / kStride;
		// A load the compiler must keep (its value feeds nothing else).
		uint64_t v = *static_cast<volatile uint64_t *>(&lines[i * 8]);
		if (v == ~0ULL)
			sink.fetch_add(1, std::memory_order_relaxed);
		return true;
	}
};

// ---------------------------------------------------------------- chase

// What a hit of a cache of n entries can cost at best, as memory goes: a
// hit makes two dependent loads, its memo slot (one 64-byte line of a
// memo sized as memo.cpp sizes it, n of them in use) and then the entry's
// state word (8 bytes of a dense array; the thread's counter cell is
// loaded beside it, in parallel, and the entry's own 256 bytes not at
// all). The chase makes the same two loads in the same footprint: n
// lines at random places of a memo-sized array, each pointing to a state
// word, which points to the next entry's line, in one random cycle (huge
// pages where it can, as the cache's); each thread walks it from its own
// start. Two steps per get+put: the memory's latency at that size, the
// bound of a hit that does nothing but its loads.
size_t memo_slots(long n)
{
	uint64_t slots = 128, want = 4 * static_cast<uint64_t>(n), cap = 1ULL << 17;
	if (n > (1L << 15)) {
		want = std::max<uint64_t>(cap, 2 * static_cast<uint64_t>(n));
		cap = 1ULL << 21;
	}
	while (slots < want && slots < cap)
		slots <<= 1;
	return static_cast<size_t>(slots);
}

Result run_chase(long n, int threads, long iters, double max_seconds)
{
	const size_t slots = memo_slots(n), entries = static_cast<size_t>(n);
	const size_t len = slots * 64 + entries * 8;
	void *p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return {};
	::madvise(p, len, MADV_HUGEPAGE);
	auto *memo = static_cast<uintptr_t *>(p);
	auto *state = memo + slots * 8;
	{
		std::mt19937_64 rng(99);
		// The lines in use: n distinct slots at random (a partial shuffle).
		std::vector<uint32_t> slot(slots);
		for (size_t i = 0; i < slots; i++)
			slot[i] = static_cast<uint32_t>(i);
		for (size_t i = 0; i < entries && i + 1 < slots; i++)
			std::swap(slot[i], slot[i + rng() % (slots - i)]);
		// Sattolo's shuffle of the entries: one cycle through all of them.
		std::vector<uint32_t> cyc(entries);
		for (size_t i = 0; i < entries; i++)
			cyc[i] = static_cast<uint32_t>(i);
		for (size_t i = entries - 1; i > 0; i--)
			std::swap(cyc[i], cyc[rng() % i]);
		for (size_t i = 0; i < entries; i++) {
			const uint32_t e = cyc[i], next = cyc[(i + 1) % entries];
			memo[slot[e] * 8] = reinterpret_cast<uintptr_t>(&state[e]);
			state[e] = reinterpret_cast<uintptr_t>(&memo[slot[next] * 8]);
		}
	}
	std::atomic<uintptr_t> sink{0};
	Result r = timed_threads(
		threads, iters, max_seconds,
		[&](int t) {
			auto *at = reinterpret_cast<uintptr_t *>(state[static_cast<size_t>(t) * 7919 % entries]);
			for (long i = 0; i < 1000; i++) // into the walk
				at = reinterpret_cast<uintptr_t *>(*at);
			return at;
		},
		[&](uintptr_t *&at, long, long count) {
			for (long i = 0; i < count; i++) {
				at = reinterpret_cast<uintptr_t *>(*at); // two dependent loads per get+put
				at = reinterpret_cast<uintptr_t *>(*at);
			}
			sink.fetch_add(reinterpret_cast<uintptr_t>(at), std::memory_order_relaxed);
		});
	::munmap(p, len);
	return r;
}

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

// One implementation's runs, a case at a time.
struct Runner {
	virtual ~Runner() = default;
	virtual Result hit(long n, int threads) = 0;
	virtual Result miss(long n) = 0;
	virtual bool misses() const { return true; }
};

// An implementation in this process.
struct LocalRunner final : Runner {
	LocalRunner(Impl &impl, const Options &o, char *base, bool hits_only = false)
		: impl_(impl), o_(o), base_(base), hits_only_(hits_only)
	{
	}
	Result hit(long n, int t) override { return run_hit(impl_, base_, n, t, o_.iters, o_.max_seconds); }
	Result miss(long n) override { return run_miss(impl_, base_, n, std::max(o_.miss_iters, 4 * n), o_.max_seconds); }
	bool misses() const override { return !hits_only_; }

private:
	Impl &impl_;
	const Options &o_;
	char *base_;
	bool hits_only_;
};

using File = std::unique_ptr<FILE, int (*)(FILE *)>;

// The child's side of UcxRunner: one line per request ("hit N T" or "miss
// N"), one line per answer ("ns bounded cached"), until the parent closes
// the request pipe.
int ucx_child(const Options &o, int in_fd, int out_fd)
{
	File in(fdopen(in_fd, "r"), std::fclose), out(fdopen(out_fd, "w"), std::fclose);
	UcxImpl u;
	if (!in || !out)
		return 1;
	if (!u.ucs.load()) {
		std::fprintf(stderr, "hmemreg_bench: no UCX reference: cannot load libucs.so.0 (%s)\n", dlerror());
		return 1;
	}
	char *base = reserve(*std::max_element(o.entries.begin(), o.entries.end()));
	if (!base)
		return 1;
	char c[8];
	long n;
	int t;
	while (std::fscanf(in.get(), "%7s %ld %d", c, &n, &t) == 3) {
		Result r = std::strcmp(c, "hit") == 0
				   ? run_hit(u, base, n, t, o.iters, o.max_seconds)
				   : run_miss(u, base, n, std::max(o.miss_iters, 4 * n), o.max_seconds);
		std::fprintf(out.get(), "%.3f %d %.6f\n", r.ns, r.bounded ? 1 : 0, r.cached);
		std::fflush(out.get());
	}
	return 0;
}

// UCX's rcache in a child process (this binary re-executed with
// --ucx-child; an rcache patches mmap/munmap for its whole process, which
// must not touch the hmemreg measurement; libucs is dlopen()ed there
// only). The child runs one case per request, so its runs and ours take
// turns. A child that cannot run answers nothing: every case is then -1.
class UcxRunner final : public Runner {
public:
	UcxRunner(int argc, char **argv)
	{
		// A child that ended early (no libucs) must not kill us with
		// SIGPIPE at our next request: the write fails instead.
		struct sigaction ign = {};
		ign.sa_handler = SIG_IGN;
		sigaction(SIGPIPE, &ign, &old_pipe_);
		int req[2], ans[2];
		if (::pipe2(req, O_CLOEXEC))
			return;
		if (::pipe2(ans, O_CLOEXEC)) {
			::close(req[0]);
			::close(req[1]);
			return;
		}
		// The child inherits its two ends only (ours stay close-on-exec,
		// so that it sees EOF when we close the request pipe).
		::fcntl(req[0], F_SETFD, 0);
		::fcntl(ans[1], F_SETFD, 0);
		std::vector<std::string> args{"/proc/self/exe", "cache", "--ucx-child",
					      std::to_string(req[0]) + "," + std::to_string(ans[1])};
		// The same options, but --json (the child answers on its pipe)
		// and --cpus: it gets the list this process resolved ("auto"
		// there would read the main thread's binding).
		for (int i = 1; i < argc; i++) {
			if (!std::strcmp(argv[i], "--cpus")) {
				i++;
				continue;
			}
			if (std::strcmp(argv[i], "--json") && std::strncmp(argv[i], "--cpus=", 7))
				args.emplace_back(argv[i]);
		}
		args.insert(args.end(), {"--cpus", g_cpus.list()});
		std::vector<char *> av;
		for (auto &a : args)
			av.push_back(a.data());
		av.push_back(nullptr);
		int rc = posix_spawn(&pid_, "/proc/self/exe", nullptr, nullptr, av.data(), environ);
		::close(req[0]);
		::close(ans[1]);
		if (rc) {
			pid_ = -1;
			::close(req[1]);
			::close(ans[0]);
			return;
		}
		to_.reset(fdopen(req[1], "w"));
		from_.reset(fdopen(ans[0], "r"));
	}
	~UcxRunner() override
	{
		to_.reset(); // EOF: the child ends
		from_.reset();
		if (pid_ > 0) {
			int st;
			waitpid(pid_, &st, 0);
		}
		sigaction(SIGPIPE, &old_pipe_, nullptr);
	}
	UcxRunner(const UcxRunner &) = delete;
	UcxRunner &operator=(const UcxRunner &) = delete;

	Result hit(long n, int t) override { return ask("hit", n, t); }
	Result miss(long n) override { return ask("miss", n, 1); }

private:
	Result ask(const char *c, long n, int t)
	{
		if (!to_ || !from_)
			return {};
		Result r;
		int bounded = 0;
		if (std::fprintf(to_.get(), "%s %ld %d\n", c, n, t) < 0 || std::fflush(to_.get()) ||
		    std::fscanf(from_.get(), "%lf %d %lf", &r.ns, &bounded, &r.cached) != 3) {
			to_.reset(); // gone: ask no more
			return {};
		}
		r.bounded = bounded != 0;
		return r;
	}
	struct sigaction old_pipe_ = {};
	pid_t pid_ = -1;
	File to_{nullptr, std::fclose}, from_{nullptr, std::fclose};
};

// Every case with every runner, best of o.reps each. The reps go round:
// for each size, rep by rep, each thread count, each runner (the runners'
// order turning with the rep), so a drift of the machine's speed reaches
// every runner and thread count alike; the scaling and vs_ucx columns
// compare runs of the same moments. emit(runner, entries, threads, case,
// result).
template <typename Emit>
void run_all(const std::vector<std::unique_ptr<Runner>> &runners, const Options &o, Emit emit)
{
	const size_t nr = runners.size();
	auto keep = [](Result &best, const Result &x) {
		if (x.ns < 0 || best.ns < 0 || x.ns < best.ns)
			best = x;
		return x.ns < 0 || x.bounded; // a failure, or a longer case: one run says enough
	};
	for (long n : o.entries) {
		if (o.hit) {
			const size_t nt = o.threads.size();
			std::vector<Result> best(nr * nt);
			std::vector<char> done(nr * nt, 0);
			for (long r = 0; r < o.reps; r++)
				for (size_t i = 0; i < nt; i++)
					for (size_t j = 0; j < nr; j++) {
						const size_t k = (j + static_cast<size_t>(r)) % nr;
						if (!done[k * nt + i])
							done[k * nt + i] =
								keep(best[k * nt + i], runners[k]->hit(n, static_cast<int>(o.threads[i])));
					}
			for (size_t k = 0; k < nr; k++)
				for (size_t i = 0; i < nt; i++)
					emit(k, n, static_cast<int>(o.threads[i]), "hit", best[k * nt + i]);
		}
		if (o.miss) {
			std::vector<Result> best(nr);
			std::vector<char> done(nr, 0);
			for (size_t k = 0; k < nr; k++)
				done[k] = !runners[k]->misses();
			for (long r = 0; r < o.reps; r++)
				for (size_t j = 0; j < nr; j++) {
					const size_t k = (j + static_cast<size_t>(r)) % nr;
					if (!done[k])
						done[k] = keep(best[k], runners[k]->miss(n));
				}
			for (size_t k = 0; k < nr; k++)
				if (runners[k]->misses())
					emit(k, n, 1, "miss", best[k]);
		}
	}
}

int bench_cache(int argc, char **argv)
{
	Options o;
	std::string ucx_child_fds; // "R,W": run as UcxRunner's child
	std::vector<std::string> cases{"hit", "miss"};
	std::string cpus = "auto";
	cli::Parser p("cache", "registration cache get+put latency (hits, misses) vs UCX rcache, no-op registration");
	p.counts("--entries", o.entries, "cache sizes (entries) to run");
	p.counts("--threads", o.threads, "thread counts for the hit case");
	p.count("--iters", o.iters, "get+put pairs per thread, hit case");
	p.count("--miss-iters", o.miss_iters, "get+put pairs, miss case (at least 4x entries)");
	p.count("--reps", o.reps, "runs per case; the fastest counts");
	p.app().add_option("--max-seconds", o.max_seconds, "a run of a case stops here (row: bounded)")->check(CLI::PositiveNumber);
	p.texts("--cases", cases, "hit, miss or both")->check(CLI::IsMember({"hit", "miss"}));
	p.app().add_flag("!--no-ucx", o.ucx, "skip the UCX reference");
	p.app().add_flag("!--no-ceiling", o.ceiling,
			 "skip the same-size ceilings of the hit case: the 'ceiling' rows (one independent line load per "
			 "get+put) and the 'chase' column (two dependent loads per get+put, a memo line then a state word "
			 "as a hit makes them, chased in a footprint as large as a hit's at that cache size: the memory's "
			 "latency bound; a hit below it overlaps consecutive gets; -1 on other rows)");
	p.app().add_flag("--cpu-clock", g_cpu_clock,
			 "time each thread's CPU time, not wall time (a loaded machine; descheduled time does not count)");
	p.app()
		.add_option("--monitor", o.monitor, "hmemreg's memory monitor: auto (the cache's default), kmod, uffd, none")
		->check(CLI::IsMember({"auto", "kmod", "uffd", "none"}));
	p.text("--cpus", cpus,
	       "CPUs the runs use, a list such as 0-3,8: thread t of a run (UCX's, the ceiling's, hmemreg's alike) on "
	       "the t-th, the main thread on the first; auto: the CPUs this process may run on; none: unbound");
	p.app().add_option("--ucx-child", ucx_child_fds)->group("");
	if (int rc = p.parse(argc, argv); rc >= 0)
		return rc;
	o.hit = std::count(cases.begin(), cases.end(), "hit") > 0;
	o.miss = std::count(cases.begin(), cases.end(), "miss") > 0;
	if (std::string err; !g_cpus.set(cpus, err)) {
		std::fprintf(stderr, "hmemreg_bench cache: --cpus: %s\n", err.c_str());
		return 2;
	}
	if (!ucx_child_fds.empty()) {
		int in = -1, out = -1;
		if (std::sscanf(ucx_child_fds.c_str(), "%d,%d", &in, &out) != 2)
			return 1;
		bind_thread(0);
		return ucx_child(o, in, out);
	}

	Printer pr(p.json);
	pr.section("cache: get+put latency (ns per op per thread), no-op registration; vs_ucx = hmemreg/ucx; "
		   "scaling = t threads' hits per second / one thread's; vs_smallest = hit / hit at the first --entries; "
		   "threads on CPUs " + g_cpus.list());
	HmemregImpl h;
	h.monitor = o.monitor == "kmod"	  ? HMEMREG_MONITOR_KMOD
		    : o.monitor == "uffd" ? HMEMREG_MONITOR_UFFD
		    : o.monitor == "none" ? HMEMREG_MONITOR_NONE
					  : HMEMREG_MONITOR_AUTO;
	auto note = [&](const Result &r) {
		char b[48];
		std::snprintf(b, sizeof(b), "bounded %gs", o.max_seconds);
		return r.bounded ? std::string(b) : std::string("-");
	};
	// Percent of gets served from cached entries; -1: not known (UCX, ceiling).
	auto cached = [](const Result &r) { return r.cached >= 0 ? 100 * r.cached : -1.0; };
	char *base = reserve(*std::max_element(o.entries.begin(), o.entries.end()));
	if (!base)
		return 1;
	// Runners: UCX (a child process), the ceiling (hits), hmemreg.
	std::vector<std::unique_ptr<Runner>> runners;
	std::vector<std::map<Key, Result> *> into;
	std::map<Key, Result> ucx, ceiling, ours, chase;
	if (o.ucx) {
		runners.push_back(std::make_unique<UcxRunner>(argc, argv));
		into.push_back(&ucx);
	}
	CeilingImpl ci(base);
	if (o.ceiling && o.hit) {
		runners.push_back(std::make_unique<LocalRunner>(ci, o, base, true));
		into.push_back(&ceiling);
	}
	runners.push_back(std::make_unique<LocalRunner>(h, o, base));
	into.push_back(&ours);
	// Bound only now: UCX's child, spawned above, took this thread's CPUs
	// as its own, and may bind its threads to any CPU of the list.
	bind_thread(0);
	run_all(runners, o, [&](size_t k, long n, int t, const char *c, Result r) { (*into[k])[{n, t, c}] = r; });
	runners.clear(); // the UCX child ends
	if (o.ceiling && o.hit) {
		for (long n : o.entries)
			for (long t : o.threads) {
				Result b;
				for (long r = 0; r < o.reps; r++) {
					Result x = run_chase(n, static_cast<int>(t), o.iters, o.max_seconds);
					if (x.ns > 0 && (b.ns < 0 || x.ns < b.ns))
						b = x;
				}
				chase[{n, static_cast<int>(t), "hit"}] = b;
			}
	}
	// One row of impl's results m for (n, t, c): hmemreg's always, the
	// references' where they measured it. Its ratios are read off m's own
	// rows: scaling, what t threads get through against one thread
	// (t x ns(1) / ns(t)); vs_smallest, a hit against a hit in the run's
	// smallest cache at the same thread count; -1 where m lacks that row.
	auto print = [&](const char *impl, const std::map<Key, Result> &m, long n, int t, const std::string &c) {
		auto at = [&](const std::map<Key, Result> &mm, long nn, int tt) {
			auto it = mm.find({nn, tt, c});
			return it != mm.end() ? it->second : Result{};
		};
		const Result res = at(m, n, t), u = at(ucx, n, t);
		if (res.ns <= 0 && &m != &ours)
			return;
		const double chased = at(chase, n, t).ns, ch = chased > 0 ? chased : -1.0;
		const double one = at(m, n, 1).ns, small = at(m, o.entries.front(), t).ns;
		const bool hit = c == "hit";
		Row r;
		r.add("bench", "cache").add("impl", impl).add("entries", n).add("threads", t).add("case", c);
		r.add("ns_per_op", res.ns).add("vs_ucx", u.ns > 0 && res.ns > 0 ? res.ns / u.ns : -1.0);
		r.add("cached", cached(res)).add("chase", ch);
		r.add("scaling", hit && res.ns > 0 && one > 0 ? t * one / res.ns : -1.0);
		r.add("vs_smallest", hit && res.ns > 0 && small > 0 ? res.ns / small : -1.0);
		pr.print(r.add("note", note(res)));
	};
	// In run_all's order: each size's hit rows, then its miss row.
	auto print_all = [&](long n, int t, const std::string &c) {
		if (!ours.count({n, t, c}))
			return;
		print("ucx", ucx, n, t, c);
		print("ceiling", ceiling, n, t, c);
		print("hmemreg", ours, n, t, c);
	};
	for (long n : o.entries) {
		for (long t : o.threads)
			print_all(n, static_cast<int>(t), "hit");
		print_all(n, 1, "miss");
	}
	return 0;
}

} // namespace

HMEMREG_BENCH("cache", bench_cache, "registration cache hit/miss latency vs UCX rcache");

} // namespace hmemreg::bench
