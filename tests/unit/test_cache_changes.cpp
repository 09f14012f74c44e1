// SPDX-License-Identifier: MIT
// Every kind of memory change against every host-memory monitor usable here
// (uffd on this kernel; kmod where hmemreg.ko is loaded: the VM lane
// tests/vm.d/20-cache.sh). The registrar is the in-memory one, wrapped to
// record the physical page numbers (/proc/self/pagemap, needs root) of what
// it registered, like a pinning registrar would hold them. After each
// change the test touches the pages and asks again: a returned
// registration whose recorded pages differ from the pages mapped now is
// stale (RDMA would go to the old pages). What must not be cached at all
// (uffd: shared and file-backed mappings) is checked through the stats.
#include <criterion/criterion.h>
#include <cstdlib>
#include <fcntl.h>
#include <linux/falloc.h>
#include <malloc.h>
#include <map>
#include <string>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "cache_test_util.hpp"
#include "mrcache/kmod_monitor.hpp"
#include "mrcache/uffd_monitor.hpp"

using namespace t;

namespace {

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif

// Fault every page of [p, p + len) in (writable if the mapping allows)
// without changing its bytes, as a pinning registration would.
void populate(const void *p, size_t len)
{
	auto *a = const_cast<void *>(p);
	if (::madvise(a, len, MADV_POPULATE_WRITE) != 0)
		cr_assert_eq(::madvise(a, len, MADV_POPULATE_READ), 0, "populate %p+%zu: %s", p, len, strerror(errno));
}

std::vector<uint64_t> pfns(uintptr_t s, uintptr_t e)
{
	static int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	std::vector<uint64_t> out((e - s) / page());
	ssize_t want = static_cast<ssize_t>(out.size() * sizeof(uint64_t));
	cr_assert_eq(::pread(fd, out.data(), static_cast<size_t>(want), static_cast<off_t>(s / page() * 8)), want);
	for (auto &v : out)
		v = (v >> 63) ? (v & ((1ULL << 55) - 1)) : 0; // present: PFN; else 0
	return out;
}

// MemoryRegistrar plus the page numbers behind each registration.
class PfnRegistrar final : public Registrar {
public:
	const char *name() const override { return "memory+pfn"; }
	int reg(const Request &q, Range r, Registration &o) override
	{
		int rc = mem_.reg(q, r, o);
		if (rc == 0) {
			populate(reinterpret_cast<void *>(r.start), r.size());
			pages_[o.key] = pfns(r.start, r.end);
		}
		return rc;
	}
	void dereg(Registration &r) noexcept override
	{
		pages_.erase(r.key);
		mem_.dereg(r);
	}
	std::map<uint64_t, std::vector<uint64_t>> pages_; // key -> PFNs at registration
	MemoryRegistrar mem_;
};

struct Monitored {
	const char *name;
	std::unique_ptr<Cache> cache;
};

// The caches to run a case under: one per monitor this process can open.
std::vector<Monitored> caches()
{
	if (pfns(reinterpret_cast<uintptr_t>(&caches) & ~(page() - 1),
		 (reinterpret_cast<uintptr_t>(&caches) & ~(page() - 1)) + page())[0] == 0)
		cr_skip_test("page numbers in /proc/self/pagemap need CAP_SYS_ADMIN");
	std::vector<Monitored> out;
	std::shared_ptr<Monitor> m;
	if (UffdMonitor::instance(m) == 0) {
		std::unique_ptr<Cache> c;
		cr_assert_eq(Cache::create(std::make_unique<PfnRegistrar>(), config(1024, 1ULL << 40, HMEMREG_MONITOR_UFFD), m, c), 0);
		out.push_back({"uffd", std::move(c)});
	}
	if (KmodMonitor::open(m) == 0) {
		std::unique_ptr<Cache> c;
		cr_assert_eq(Cache::create(std::make_unique<PfnRegistrar>(), config(1024, 1ULL << 40, HMEMREG_MONITOR_KMOD), m, c), 0);
		out.push_back({"kmod", std::move(c)});
	}
	if (out.empty())
		cr_skip_test("neither userfaultfd nor hmemreg.ko usable here");
	// The VM lane says which monitors must be there (so none is skipped unseen).
	if (const char *want = std::getenv("HMEMREG_TEST_EXPECT_MONITORS")) {
		std::string have;
		for (auto &m : out)
			have += std::string(" ") + m.name;
		for (const char *n : {"uffd", "kmod"})
			cr_assert(!std::strstr(want, n) || have.find(n) != std::string::npos,
				  "monitor %s expected (HMEMREG_TEST_EXPECT_MONITORS=%s), have:%s", n, want, have.c_str());
	}
	return out;
}

struct Seen {
	uint64_t key;
	bool hit;    // a registration made before this get
	bool cached; // in the index (else registered uncached)
};

// Touch [p, p + len), get a registration for it and check that the pages it
// was made for are the pages mapped there now. Puts it back.
Seen check(Monitored &m, const void *p, size_t len, const char *what)
{
	populate(p, len);
	Cache &c = *m.cache;
	auto &reg = static_cast<PfnRegistrar &>(c.registrar());
	uint64_t regs0 = reg.mem_.regs();
	Entry *e = nullptr;
	int rc = c.get(req(p, len), e);
	cr_assert_eq(rc, 0, "[%s] %s: get: %s", m.name, what, hmemreg_strerror(rc));
	Seen s{e->reg.key, reg.mem_.regs() == regs0, !(e->state().load() & kOrphan)};
	auto it = reg.pages_.find(e->reg.key);
	cr_assert(it != reg.pages_.end(), "[%s] %s: no pages recorded", m.name, what);
	auto now = pfns(e->range.start, e->range.end);
	for (size_t i = 0; i < now.size(); i++)
		cr_assert_eq(now[i], it->second[i],
			     "[%s] %s: STALE registration (key %lu, %s): page %zu of [%#lx, %#lx) was pfn %#lx when "
			     "registered, is %#lx now",
			     m.name, what, static_cast<unsigned long>(e->reg.key), s.hit ? "hit" : "new", i,
			     static_cast<unsigned long>(e->range.start), static_cast<unsigned long>(e->range.end),
			     static_cast<unsigned long>(it->second[i]), static_cast<unsigned long>(now[i]));
	cr_assert_eq(c.put(e), 0);
	return s;
}

// Registered, then hit: the case starts from a cached registration (private
// anonymous memory is cached by every monitor).
void cached(Monitored &m, const void *p, size_t len, const char *what)
{
	check(m, p, len, what);
	Seen s = check(m, p, len, what);
	cr_assert(s.hit && s.cached, "[%s] %s: private anonymous memory is cached", m.name, what);
}

char *anon(size_t len, void *at = nullptr, int extra = 0)
{
	void *p = ::mmap(at, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra | (at ? MAP_FIXED : 0), -1, 0);
	cr_assert_neq(p, MAP_FAILED, "mmap: %s", strerror(errno));
	::madvise(p, len, MADV_NOHUGEPAGE); // no khugepaged collapse moving unpinned pages under the test
	std::memset(p, 0x5a, len);
	return static_cast<char *>(p);
}

// A memfd of `pages` pages, mapped shared (or private) at `at` or anywhere.
struct Memfd {
	int fd;
	size_t len;
	explicit Memfd(size_t l) : len(l)
	{
		fd = static_cast<int>(::syscall(SYS_memfd_create, "hmemreg-test", 0));
		cr_assert_geq(fd, 0);
		cr_assert_eq(::ftruncate(fd, static_cast<off_t>(len)), 0);
	}
	~Memfd() { ::close(fd); }
	char *map(int flags = MAP_SHARED, size_t l = 0, off_t off = 0) const
	{
		void *p = ::mmap(nullptr, l ? l : len, PROT_READ | PROT_WRITE, flags, fd, off);
		cr_assert_neq(p, MAP_FAILED, "mmap memfd: %s", strerror(errno));
		std::memset(p, 0x33, l ? l : len);
		return static_cast<char *>(p);
	}
};

// Under uffd a shared or file-backed range is never cached, and says why.
void expect_unwatched(Monitored &m, const Seen &s, const char *what)
{
	if (std::string(m.name) != "uffd")
		return;
	cr_assert(!s.cached, "[uffd] %s: a shared/file mapping must be registered uncached", what);
	cr_assert_geq(stats(*m.cache).uncached_by[HMEMREG_UNCACHED_UNWATCHABLE], 1, "[uffd] %s: counted", what);
}

constexpr size_t kPages = 8;

} // namespace

// ---- the five changes userfaultfd reports nothing for

Test(cache_changes, memfd_punch_hole)
{
	for (auto &m : caches()) {
		Memfd f(kPages * page());
		char *p = f.map();
		expect_unwatched(m, check(m, p, f.len, "memfd"), "memfd");
		cr_assert_eq(::fallocate(f.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(f.len)), 0);
		check(m, p, f.len, "after fallocate(PUNCH_HOLE)");
		::munmap(p, f.len);
	}
}

Test(cache_changes, memfd_truncate_and_regrow)
{
	for (auto &m : caches()) {
		Memfd f(kPages * page());
		char *p = f.map();
		check(m, p, f.len, "memfd");
		cr_assert_eq(::ftruncate(f.fd, 0), 0);
		cr_assert_eq(::ftruncate(f.fd, static_cast<off_t>(f.len)), 0);
		check(m, p, f.len, "after ftruncate(0) and back");
		::munmap(p, f.len);
	}
}

Test(cache_changes, madv_remove_through_another_mapping)
{
	for (auto &m : caches()) {
		Memfd f(kPages * page());
		char *p = f.map(), *q = f.map();
		check(m, p, f.len, "memfd");
		cr_assert_eq(::madvise(q, f.len, MADV_REMOVE), 0);
		check(m, p, f.len, "after MADV_REMOVE through the other mapping");
		::munmap(p, f.len);
		::munmap(q, f.len);
	}
}

Test(cache_changes, memfd_private_mapping_truncated)
{
	for (auto &m : caches()) {
		Memfd f(kPages * page());
		char *p = f.map(MAP_PRIVATE);
		expect_unwatched(m, check(m, p, f.len, "private memfd"), "private memfd");
		cr_assert_eq(::ftruncate(f.fd, 0), 0);
		cr_assert_eq(::ftruncate(f.fd, static_cast<off_t>(f.len)), 0);
		check(m, p, f.len, "private memfd after ftruncate");
		::munmap(p, f.len);
	}
}

Test(cache_changes, remap_file_pages)
{
	for (auto &m : caches()) {
		Memfd f(2 * kPages * page());
		char *p = f.map(MAP_SHARED, kPages * page());
		check(m, p, kPages * page(), "memfd first half");
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
		cr_assert_eq(::remap_file_pages(p, kPages * page(), 0, kPages, 0), 0, "%s", strerror(errno));
#pragma GCC diagnostic pop
		check(m, p, kPages * page(), "after remap_file_pages onto the second half");
		::munmap(p, kPages * page());
	}
}

Test(cache_changes, shmat_remap_over_private_memory)
{
	for (auto &m : caches()) {
		size_t len = kPages * page();
		char *p = anon(len);
		cached(m, p, len, "anonymous");
		int id = ::shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
		cr_assert_geq(id, 0);
		cr_assert_eq(::shmat(id, p, SHM_REMAP), p, "shmat: %s", strerror(errno));
		::shmctl(id, IPC_RMID, nullptr);
		std::memset(p, 0x44, len);
		check(m, p, len, "after shmat(SHM_REMAP)");
		// What shmat left is not registered with the userfaultfd: later
		// changes there must still be seen.
		cr_assert_eq(::shmdt(p), 0);
		anon(len, p);
		cached(m, p, len, "anonymous again after shmdt");
		::munmap(p, len);
		anon(len, p);
		check(m, p, len, "after munmap + mmap once more");
		::munmap(p, len);
	}
}

// ---- changes userfaultfd reports (and kmod sees)

Test(cache_changes, munmap_mmap_same_address)
{
	for (auto &m : caches()) {
		size_t len = kPages * page();
		char *p = anon(len);
		cached(m, p, len, "anonymous");
		::munmap(p, len);
		anon(len, p);
		check(m, p, len, "after munmap + mmap at the same address");
		::munmap(p, len);
	}
}

Test(cache_changes, map_fixed_over)
{
	for (auto &m : caches()) {
		size_t len = kPages * page();
		char *p = anon(len);
		cached(m, p, len, "anonymous");
		anon(2 * page(), p + 3 * page()); // over part of it
		check(m, p, len, "after MAP_FIXED over two pages");
		::munmap(p, len);
	}
}

Test(cache_changes, partial_munmap)
{
	for (auto &m : caches()) {
		size_t len = kPages * page();
		char *p = anon(len);
		cached(m, p, len, "anonymous");
		::munmap(p + 2 * page(), page());
		anon(page(), p + 2 * page());
		check(m, p, len, "after munmap of one page and mmap again");
		::munmap(p, len);
	}
}

Test(cache_changes, mremap_move)
{
	for (auto &m : caches()) {
		size_t len = kPages * page();
		char *p = anon(len);
		char *dst = static_cast<char *>(::mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
		cached(m, p, len, "anonymous");
		cr_assert_eq(::mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst), dst);
		anon(len, p); // at once: nothing else may take the hole
		check(m, dst, len, "the moved pages at their new address");
		check(m, p, len, "new memory at the old address");
		::munmap(p, len);
		::munmap(dst, len);
	}
}

Test(cache_changes, mremap_shrink_then_grow_back)
{
	for (auto &m : caches()) {
		size_t len = kPages * page();
		char *p = anon(len);
		cached(m, p, len, "anonymous");
		cr_assert_eq(::mremap(p, len, len / 2, 0), p);
		// At once (nothing else may take the hole): grow back in place.
		cr_assert_eq(::mremap(p, len / 2, len, 0), p, "grow in place: %s", strerror(errno));
		check(m, p, len, "after shrinking and growing back (new pages at the end)");
		check(m, p, len / 2, "the part that stayed");
		::munmap(p, len);
	}
}

Test(cache_changes, mremap_grow_in_place_and_moving)
{
	for (auto &m : caches()) {
		size_t len = kPages * page();
		char *p = anon(2 * len);
		cached(m, p, len, "anonymous");
		::munmap(p + len, len); // room to grow into, used at once
		cr_assert_eq(::mremap(p, len, 2 * len, 0), p, "grow in place: %s", strerror(errno));
		std::memset(p + len, 1, len);
		check(m, p, len, "the old part after growing in place (same pages)");
		check(m, p, 2 * len, "the grown range");
		// Something right after it, so that growing must move.
		void *blk = ::mmap(p + 2 * len, page(), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		char *q = static_cast<char *>(::mremap(p, 2 * len, 4 * len, MREMAP_MAYMOVE));
		cr_assert_neq(q, MAP_FAILED);
		cr_assert_neq(q, p, "grew in place though the next page was taken");
		anon(2 * len, p); // at once
		check(m, p, 2 * len, "the old address after a moving grow");
		check(m, q, 4 * len, "the moved, grown range");
		::munmap(q, 4 * len);
		::munmap(p, 2 * len);
		if (blk == p + 2 * len)
			::munmap(blk, page());
	}
}

Test(cache_changes, mremap_dontunmap)
{
	for (auto &m : caches()) {
		size_t len = kPages * page();
		char *p = anon(len);
		cached(m, p, len, "anonymous");
		char *q = static_cast<char *>(::mremap(p, len, len, MREMAP_MAYMOVE | 4 /* MREMAP_DONTUNMAP */, nullptr));
		if (q == MAP_FAILED)
			cr_skip_test("MREMAP_DONTUNMAP: %s", strerror(errno));
		check(m, p, len, "the old range after MREMAP_DONTUNMAP (mapped, pages gone)");
		check(m, q, len, "the moved pages");
		::munmap(p, len);
		::munmap(q, len);
	}
}

Test(cache_changes, madv_dontneed)
{
	for (auto &m : caches()) {
		size_t len = kPages * page();
		char *p = anon(len);
		cached(m, p, len, "anonymous");
		cr_assert_eq(::madvise(p, len, MADV_DONTNEED), 0);
		check(m, p, len, "after MADV_DONTNEED");
		::munmap(p, len);
	}
}

Test(cache_changes, madv_free)
{
	for (auto &m : caches()) {
		size_t len = kPages * page();
		char *p = anon(len);
		cached(m, p, len, "anonymous");
		cr_assert_eq(::madvise(p, len, MADV_FREE), 0);
		check(m, p, len, "after MADV_FREE");
		::munmap(p, len);
	}
}

Test(cache_changes, madv_remove_shared_anonymous)
{
	for (auto &m : caches()) {
		size_t len = kPages * page();
		char *p = static_cast<char *>(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
		cr_assert_neq(p, MAP_FAILED);
		std::memset(p, 7, len);
		expect_unwatched(m, check(m, p, len, "shared anonymous"), "shared anonymous");
		cr_assert_eq(::madvise(p, len, MADV_REMOVE), 0);
		check(m, p, len, "after MADV_REMOVE");
		::munmap(p, len);
	}
}

Test(cache_changes, shared_anonymous_zapped_by_a_fork_child)
{
	for (auto &m : caches()) {
		size_t len = kPages * page();
		char *p = static_cast<char *>(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
		cr_assert_neq(p, MAP_FAILED);
		std::memset(p, 7, len);
		check(m, p, len, "shared anonymous");
		pid_t pid = ::fork();
		if (pid == 0)
			_exit(::madvise(p, len, MADV_REMOVE) ? 1 : 0);
		int st;
		::waitpid(pid, &st, 0);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		check(m, p, len, "after the child's MADV_REMOVE");
		::munmap(p, len);
	}
}

Test(cache_changes, brk_shrink_and_grow)
{
	// malloc must not move the break under the test: room at its top,
	// never trimmed, so that the cache's allocations need no sbrk.
	::mallopt(M_TRIM_THRESHOLD, 1 << 30);
	::mallopt(M_MMAP_THRESHOLD, 32 << 20);
	{
		auto *volatile room = static_cast<char *>(std::malloc(16 << 20)); // volatile: not elided
		room[0] = 1;
		std::free(room);
	}
	for (auto &m : caches()) {
		size_t len = kPages * page();
		auto top = reinterpret_cast<uintptr_t>(::sbrk(0));
		uintptr_t aligned = (top + page() - 1) & ~(page() - 1);
		char *p = static_cast<char *>(::sbrk(static_cast<intptr_t>(aligned - top + len)));
		cr_assert_neq(p, reinterpret_cast<char *>(-1));
		p = reinterpret_cast<char *>(aligned);
		std::memset(p, 9, len);
		cached(m, p, len, "heap grown by brk");
		if (::sbrk(0) != p + len)
			cr_skip_test("malloc moved the break meanwhile (%p, not %p): cannot shrink safely", ::sbrk(0), p + len);
		::sbrk(static_cast<intptr_t>(len)); // grow further: the range stays
		check(m, p, len, "after brk grew past it");
		if (::sbrk(0) != p + 2 * len)
			cr_skip_test("malloc moved the break meanwhile (%p, not %p): cannot shrink safely", ::sbrk(0), p + 2 * len);
		::sbrk(-static_cast<intptr_t>(2 * len)); // shrink below it
		::sbrk(static_cast<intptr_t>(2 * len));  // and grow back: new pages
		check(m, p, len, "after brk shrank below it and grew back");
		::sbrk(-static_cast<intptr_t>(2 * len));
	}
}

Test(cache_changes, fork_child_writes)
{
	for (auto &m : caches()) {
		size_t len = kPages * page();
		char *p = anon(len);
		cached(m, p, len, "anonymous");
		pid_t pid = ::fork();
		if (pid == 0) {
			std::memset(p, 0x77, len);
			_exit(0);
		}
		int st;
		::waitpid(pid, &st, 0);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		cr_assert_eq(p[0], 0x5a, "the child's writes stay in the child");
		check(m, p, len, "after a fork child wrote its copy");
		::munmap(p, len);
	}
}

Test(cache_changes, mprotect)
{
	for (auto &m : caches()) {
		size_t len = kPages * page();
		char *p = anon(len);
		cached(m, p, len, "anonymous");
		cr_assert_eq(::mprotect(p, len, PROT_READ), 0);
		check(m, p, len, "read-only");
		cr_assert_eq(::mprotect(p + page(), page(), PROT_NONE), 0);
		cr_assert_eq(::mprotect(p, len, PROT_READ | PROT_WRITE), 0);
		check(m, p, len, "writable again");
		::munmap(p, len);
	}
}
