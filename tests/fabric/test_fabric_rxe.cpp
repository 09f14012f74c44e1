// SPDX-License-Identifier: MIT
// verbs;ofi_rxm over Soft-RoCE (rxe on a veth) inside the VM: registrations
// really pin pages, writes go through the kernel's RDMA stack. Set up by
// tests/vm.d/30-engine-rxe.sh, which passes HMEMREG_RXE_NODE (the veth address).
#include <cstdlib>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.hpp"

using namespace fx;

static Config rxe()
{
	const char *node = std::getenv("HMEMREG_RXE_NODE");
	if (!node || !*node)
		cr_skip_test("needs Soft-RoCE: run by tests/vm.d/30-engine-rxe.sh inside the VM");
	Config c;
	c.provider = "verbs;ofi_rxm";
	c.node = node;
	c.progress_threads = 1;
	c.idle_spin = 200;
	c.idle_sleep_us = 50;
	return c;
}

Test(rxe, reports_and_sizes_from_device_limits, .timeout = 300)
{
	Facade e(rxe());
	const Capabilities &c = e.caps();
	cr_log_info("%s", c.describe().c_str());
	cr_assert_eq(c.provider, "verbs;ofi_rxm");
	cr_assert(c.rma);
	cr_assert(c.rail_domains[0].find("rxe") != std::string::npos, "%s", c.describe().c_str());
	// verbs carries 4 B of remote CQ data (RDMA write with immediate), and
	// ofi_rxm passes that on: immediate notification with 4-byte keys.
	cr_log_info("cq_data_size %zu", c.cq_data_size);
	cr_assert_eq(c.cq_data_size, 4u, "%s", c.describe().c_str());
	cr_assert(c.notify_immediate, "%s", c.describe().c_str());
	cr_assert_eq(c.imm_key_bytes, 4u, "%s", c.describe().c_str());
	cr_assert(c.describe().find("4-byte keys") != std::string::npos, "%s", c.describe().c_str());
	if (!std::getenv("FI_UNIVERSE_SIZE_FROM_ENV")) {
		std::string d = c.describe();
		cr_assert(d.find("capped ofi_rxm's universe size") != std::string::npos,
			  "no note about capping the universe size:\n%s", d.c_str());
	}
}

Test(rxe, writes_verified_and_messages, .timeout = 300)
{
	Pair p(rxe(), rxe()); // waits for both writer indices (4-byte keys)
	cr_assert(p.a.immediate_to(p.b_at_a));
	const size_t n = 8 << 20;
	Buffer src(n), dst(n);
	fill(src.data(), n, 31);
	auto rs = p.a.register_region(src.data(), n);
	auto rd = p.b.register_region(dst.data(), n);
	auto desc = p.b.descriptor(*rd);
	size_t notes = 0;
	for (size_t size : {size_t(1), size_t(4096), size_t(1) << 20, n}) {
		std::memset(dst.data(), 0, n);
		Chunk c{rs.get(), 0, size, 0};
		auto t = p.a.write(p.b_at_a, {&c, 1}, desc, size);
		cr_assert(p.a.wait(*t, 60s), "write of %zu did not complete", size);
		cr_assert_eq(t->status(), 0, "%s", t->error().c_str());
		// The target's notification says the data landed (with immediate
		// notification the writer completes first).
		notes++;
		cr_assert(eventually([&] { return p.in_b.nnotes.load() == notes; }, 60s));
		cr_assert(check_bytes(dst.data(), 31, size), "bytes differ after %zu", size);
	}
	// 512 scattered chunks, reversed at the target.
	std::memset(dst.data(), 0, n);
	std::vector<Chunk> ch;
	const size_t k = 512, len = n / k;
	for (size_t i = 0; i < k; i++)
		ch.push_back({rs.get(), i * len, len, (k - 1 - i) * len});
	auto t = p.a.write(p.b_at_a, ch, desc, 7);
	cr_assert(p.a.wait(*t, 120s));
	cr_assert_eq(t->status(), 0, "%s", t->error().c_str());
	cr_assert(eventually([&] { return p.in_b.nnotes.load() == 5; }, 60s));
	for (size_t i = 0; i < k; i++)
		cr_assert(check_bytes(dst.data() + (k - 1 - i) * len, 31, len, i * len), "chunk %zu misplaced", i);
	{
		std::lock_guard l(p.in_b.mu);
		for (const Notification &note : p.in_b.notes)
			cr_assert_eq(note.from, p.a_at_b);
	}
	// Every transfer was notified from counted writes with 4-byte keys.
	auto ps = p.b.path_stats();
	cr_assert_eq(ps.immediate_notices, 5u, "%llu immediate notices", (unsigned long long)ps.immediate_notices);
	cr_assert_eq(ps.immediate_abandoned, 0u);
	cr_assert_eq(ps.immediate_writers, 1u);
	cr_assert_eq(p.a.path_stats().message_writes, 0u);
	for (int i = 0; i < 50; i++) {
		uint8_t m[3] = {uint8_t(i), 1, 2};
		p.a.send(p.b_at_a, m);
	}
	cr_assert(eventually([&] { return p.in_b.nmsgs.load() == 50; }, 60s));
	// Bad input still answered clearly, nothing posted.
	Chunk bad{rs.get(), n - 10, 20, 0};
	try {
		p.a.write(p.b_at_a, {&bad, 1}, desc);
		cr_assert_fail("accepted a chunk outside its region");
	} catch (const hmemreg::Error &e) {
		cr_assert_eq(e.code(), HMEMREG_EINVAL);
	}
}

// ---- memory changes under the registration cache, with real pinned
// registrations: after each change the region is registered again through
// the engine's cache and written; the bytes must be in the pages the
// process sees now. A stale registration shows as data loss: on the target
// side the write lands in the old pinned pages (the process reads zeros or
// old bytes), on the source side the peer receives the old bytes. Run under
// the uffd monitor by 30-engine-rxe.sh and under kmod by 20-cache.sh.

namespace {

constexpr size_t kChangeLen = 16 * 4096;

// One memory area of a change case, and how to undo it.
struct Area {
	uint8_t *p = nullptr;
	size_t len = kChangeLen;
	int fd = -1;  // memfd, when file-backed
	int shm = -1; // SysV segment attached over it
	uint8_t *other = nullptr; // a second mapping of fd
	uint8_t *extra = nullptr; // an address the change moved pages to
	~Area()
	{
		if (shm >= 0)
			::shmdt(p);
		else if (p)
			::munmap(p, len);
		if (other)
			::munmap(other, len);
		if (extra)
			::munmap(extra, len);
		if (fd >= 0)
			::close(fd);
	}
};

uint8_t *must_map(void *at, size_t len, int flags, int fd = -1, off_t off = 0)
{
	void *p = ::mmap(at, len, PROT_READ | PROT_WRITE, flags | (at ? MAP_FIXED : 0), fd, off);
	cr_assert_neq(p, MAP_FAILED, "mmap: %s", strerror(errno));
	return static_cast<uint8_t *>(p);
}

void anon_area(Area &a) { a.p = must_map(nullptr, a.len, MAP_PRIVATE | MAP_ANONYMOUS); }

void memfd_area(Area &a, size_t file_len = kChangeLen)
{
	a.fd = static_cast<int>(::syscall(SYS_memfd_create, "hmemreg-rxe", 0));
	cr_assert_geq(a.fd, 0);
	cr_assert_eq(::ftruncate(a.fd, static_cast<off_t>(file_len)), 0);
	a.p = must_map(nullptr, a.len, MAP_SHARED, a.fd);
}

struct ChangeCase {
	const char *name;
	void (*make)(Area &);
	void (*change)(Area &);
};

const ChangeCase kChanges[] = {
	{"memfd fallocate(PUNCH_HOLE)", [](Area &a) { memfd_area(a); },
	 [](Area &a) {
		 cr_assert_eq(::fallocate(a.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(a.len)), 0);
	 }},
	{"memfd ftruncate(0) and back", [](Area &a) { memfd_area(a); },
	 [](Area &a) {
		 cr_assert_eq(::ftruncate(a.fd, 0), 0);
		 cr_assert_eq(::ftruncate(a.fd, static_cast<off_t>(a.len)), 0);
	 }},
	{"MADV_REMOVE through a second mapping",
	 [](Area &a) {
		 memfd_area(a);
		 a.other = must_map(nullptr, a.len, MAP_SHARED, a.fd);
	 },
	 [](Area &a) { cr_assert_eq(::madvise(a.other, a.len, MADV_REMOVE), 0); }},
	{"remap_file_pages onto other offsets", [](Area &a) { memfd_area(a, 2 * kChangeLen); },
	 [](Area &a) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
		 cr_assert_eq(::remap_file_pages(a.p, a.len, 0, a.len / 4096, 0), 0, "%s", strerror(errno));
#pragma GCC diagnostic pop
	 }},
	{"shmat(SHM_REMAP) over private memory", anon_area,
	 [](Area &a) {
		 int id = ::shmget(IPC_PRIVATE, a.len, IPC_CREAT | 0600);
		 cr_assert_geq(id, 0);
		 cr_assert_eq(::shmat(id, a.p, SHM_REMAP), a.p, "shmat: %s", strerror(errno));
		 ::shmctl(id, IPC_RMID, nullptr);
		 a.shm = id;
	 }},
	{"munmap + mmap at the same address", anon_area,
	 [](Area &a) {
		 ::munmap(a.p, a.len);
		 must_map(a.p, a.len, MAP_PRIVATE | MAP_ANONYMOUS);
	 }},
	{"MAP_FIXED over part of it", anon_area,
	 [](Area &a) { must_map(a.p + 4 * 4096, 2 * 4096, MAP_PRIVATE | MAP_ANONYMOUS); }},
	{"partial munmap and mmap again", anon_area,
	 [](Area &a) {
		 ::munmap(a.p + 4096, 4096);
		 must_map(a.p + 4096, 4096, MAP_PRIVATE | MAP_ANONYMOUS);
	 }},
	{"mremap away, new memory in its place", anon_area,
	 [](Area &a) {
		 void *q = ::mremap(a.p, a.len, a.len, MREMAP_MAYMOVE | MREMAP_FIXED,
				    ::mmap(nullptr, a.len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
		 cr_assert_neq(q, MAP_FAILED);
		 must_map(a.p, a.len, MAP_PRIVATE | MAP_ANONYMOUS);
		 a.extra = static_cast<uint8_t *>(q);
	 }},
	{"mremap shrink and grow back", anon_area,
	 [](Area &a) {
		 cr_assert_eq(::mremap(a.p, a.len, a.len / 2, 0), a.p);
		 cr_assert_eq(::mremap(a.p, a.len / 2, a.len, 0), a.p, "%s", strerror(errno));
	 }},
	{"mremap MREMAP_DONTUNMAP", anon_area,
	 [](Area &a) {
		 void *q = ::mremap(a.p, a.len, a.len, MREMAP_MAYMOVE | 4 /* MREMAP_DONTUNMAP */, nullptr);
		 cr_assert_neq(q, MAP_FAILED, "%s", strerror(errno));
		 a.extra = static_cast<uint8_t *>(q);
	 }},
	{"MADV_DONTNEED", anon_area, [](Area &a) { cr_assert_eq(::madvise(a.p, a.len, MADV_DONTNEED), 0); }},
	{"MADV_FREE", anon_area, [](Area &a) { cr_assert_eq(::madvise(a.p, a.len, MADV_FREE), 0); }},
	{"fork, the child writes", anon_area,
	 [](Area &a) {
		 pid_t pid = ::fork();
		 if (pid == 0) {
			 std::memset(a.p, 0xee, a.len);
			 _exit(0);
		 }
		 int st;
		 ::waitpid(pid, &st, 0);
	 }},
	{"mprotect read-only and back", anon_area,
	 [](Area &a) {
		 cr_assert_eq(::mprotect(a.p, a.len, PROT_READ), 0);
		 cr_assert_eq(::mprotect(a.p, a.len, PROT_READ | PROT_WRITE), 0);
	 }},
};

// a writes len bytes of src into the region b described; waits until b was
// notified.
void write_and_wait(Pair &p, Region &src, size_t len, const Bytes &desc, size_t &notes)
{
	Chunk c{&src, 0, len, 0};
	auto t = p.a.write(p.b_at_a, {&c, 1}, desc, notes);
	cr_assert(p.a.wait(*t, 60s), "write did not complete");
	cr_assert_eq(t->status(), 0, "%s", t->error().c_str());
	notes++;
	cr_assert(eventually([&] { return p.in_b.nnotes.load() == notes; }, 60s), "no notification");
}

const char *monitor_name()
{
	const char *m = std::getenv("HMEMREG_MR_CACHE_MONITOR");
	return m && *m ? m : "auto";
}

// The engine's cache uses the monitor the lane asked for (none unseen).
void expect_monitor(Facade &e)
{
	const std::string want = monitor_name(), d = e.caps().describe();
	const char *says = want == "kmod" ? "monitor hmemreg.ko" : want == "uffd" ? "monitor userfaultfd" : "";
	cr_assert(d.find(says) != std::string::npos, "monitor %s asked, engine says:\n%s", want.c_str(), d.c_str());
}

} // namespace

// The changed memory is the target: the second write must land in it.
Test(rxe, changes_at_the_target_never_lose_writes, .timeout = 600)
{
	Pair p(rxe(), rxe());
	expect_monitor(p.b);
	Buffer src(kChangeLen);
	size_t notes = 0;
	std::string stale; // every case is tried; the stale ones are listed ("before": stale already
			   // on the fresh area, left by an earlier case at the same address)
	for (const ChangeCase &k : kChanges) {
		Area a;
		k.make(a);
		std::memset(a.p, 0, a.len);
		fill(src.data(), a.len, 1);
		{
			auto rs = p.a.register_region(src.data(), a.len);
			auto rd = p.b.register_region(a.p, a.len);
			write_and_wait(p, *rs, a.len, p.b.descriptor(*rd), notes);
		}
		if (!check_bytes(a.p, 1, a.len)) // an earlier case's registration still returned
			stale += std::string("\n  (before) ") + k.name;
		k.change(a);
		std::memset(a.p, 0, a.len); // the process's pages now
		fill(src.data(), a.len, 2);
		auto rs = p.a.register_region(src.data(), a.len);
		auto rd = p.b.register_region(a.p, a.len); // the cache: hit or new
		write_and_wait(p, *rs, a.len, p.b.descriptor(*rd), notes);
		if (!check_bytes(a.p, 2, a.len))
			stale += std::string("\n  ") + k.name;
	}
	cr_assert(stale.empty(), "[%s] STALE target registrations (the write went to pages the process no longer has) after:%s",
		  monitor_name(), stale.c_str());
}

// The changed memory is the source: the peer must receive its bytes now.
Test(rxe, changes_at_the_source_send_the_new_bytes, .timeout = 600)
{
	Pair p(rxe(), rxe());
	expect_monitor(p.a);
	Buffer dst(kChangeLen);
	size_t notes = 0;
	std::string stale; // every case is tried; the stale ones are listed ("before": stale already
			   // on the fresh area, left by an earlier case at the same address)
	for (const ChangeCase &k : kChanges) {
		Area a;
		k.make(a);
		fill(a.p, a.len, 3);
		auto rd = p.b.register_region(dst.data(), a.len);
		auto desc = p.b.descriptor(*rd);
		{
			auto rs = p.a.register_region(a.p, a.len);
			write_and_wait(p, *rs, a.len, desc, notes);
		}
		if (!check_bytes(dst.data(), 3, a.len)) // an earlier case's registration still returned
			stale += std::string("\n  (before) ") + k.name;
		k.change(a);
		fill(a.p, a.len, 4); // the process's pages now
		auto rs = p.a.register_region(a.p, a.len); // the cache: hit or new
		write_and_wait(p, *rs, a.len, desc, notes);
		if (!check_bytes(dst.data(), 4, a.len))
			stale += std::string("\n  ") + k.name;
	}
	cr_assert(stale.empty(), "[%s] STALE source registrations (the peer got bytes the process no longer has) after:%s",
		  monitor_name(), stale.c_str());
}
