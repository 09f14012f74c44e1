// SPDX-License-Identifier: MIT
// Out of memory at every allocation a write makes on the caller's thread
// (this binary's operator new fails the k-th one, for k = 0, 1, ...): the
// write either throws and no callback ever comes (the NCCL plugin frees
// its request then), or returns and exactly one callback comes; either way
// the engine keeps nothing of it (max_transfers 1: a transfer left behind
// makes the next write say EAGAIN for ever). On a fresh pair each time, so
// the rails' submission queues grow (allocate) at the write too.
#include <atomic>
#include <cstdlib>
#include <new>

#include "harness.hpp"

using namespace fx;

namespace {
thread_local long t_fail_in = -1; // allocations on this thread before one fails; -1: none fails
bool t_failed = false;

void *allocate(std::size_t n, std::size_t align)
{
	if (t_fail_in >= 0 && t_fail_in-- == 0) {
		t_failed = true;
		throw std::bad_alloc();
	}
	void *p = nullptr;
	if (align <= alignof(std::max_align_t) ? (p = std::malloc(n ? n : 1)) != nullptr
					       : posix_memalign(&p, align, n ? n : 1) == 0)
		return p;
	throw std::bad_alloc();
}

// post() (a write or send) retried while the engine says EAGAIN (its one
// transfer slot still taken) for up to 5 s; null if it never went.
template <class Post> TransferRef once_admitted(Post post)
{
	TransferRef u;
	const bool went = eventually(
		[&] {
			try {
				u = post();
				return true;
			} catch (const hmemreg::Error &e) {
				if (e.code() != HMEMREG_EAGAIN)
					throw;
				return false;
			}
		},
		5s);
	return went ? u : nullptr;
}
} // namespace

void *operator new(std::size_t n) { return allocate(n, 0); }
void *operator new[](std::size_t n) { return allocate(n, 0); }
void *operator new(std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a)); }
void *operator new[](std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a)); }
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }

// (A Pair per allocation: some 30 of them, slow on a loaded machine; hence
// not PROVIDER_TEST, whose timeout is shorter.)
static void write_out_of_memory(Config::Notify mode, const std::string &prov)
{
	notify_mode() = mode;
	constexpr size_t kLen = 512 << 10;
	for (long k = 0;; k++) {
		cr_assert_lt(k, 400, "a write allocating more than 400 times");
		Config c = loopback(prov);
		c.rails = 2;                // writes striped over both: a failure between their queues
		c.max_write = 64 << 10;     // 8 writes
		c.max_transfers = 1;
		Buffer src(kLen), dst(kLen); // outlive the engines: an immediate write may still land as they close
		Pair p(c, c);
		auto rs = p.a.register_region(src.data(), src.len);
		auto rd = p.b.register_region(dst.data(), dst.len);
		const Bytes desc = p.b.descriptor(*rd);
		const std::vector<Chunk> one{{rs.get(), 0, kLen, 0}};
		auto calls = std::make_shared<std::atomic<int>>(0);
		bool threw = false;
		TransferRef t;
		t_failed = false;
		t_fail_in = k;
		try {
			t = p.a.write(p.b_at_a, one, desc, 7, [calls](const Transfer &) { calls->fetch_add(1); });
		} catch (const std::bad_alloc &) {
			threw = true;
		} catch (const hmemreg::Error &e) {
			cr_assert_eq(e.code(), HMEMREG_ENOMEM, "k=%ld: %s", k, e.what());
			threw = true;
		}
		t_fail_in = -1;
		if (!threw) {
			cr_assert(p.a.wait(*t, 30s), "k=%ld: the write never completed", k);
			cr_assert(t_failed || t->status() == 0, "k=%ld: %s", k, t->error().c_str());
			cr_assert(!t_failed || t->status() == 0 || t->status() == -HMEMREG_ENOMEM, "k=%ld: %s", k,
				  t->error().c_str());
			cr_assert(eventually([&] { return calls->load() == 1; }, 10s), "k=%ld: callback never came", k);
		}
		// The next write goes (nothing left behind in the one slot).
		TransferRef u = once_admitted([&] { return p.a.write(p.b_at_a, one, desc, 8); });
		cr_assert(u, "k=%ld: the engine kept the failed write (max_transfers full)", k);
		cr_assert(p.a.wait(*u, 30s) && u->status() == 0, "k=%ld: %s", k, u->error().c_str());
		std::this_thread::sleep_for(20ms); // a late callback of a write that threw would show now
		cr_assert_eq(calls->load(), threw ? 0 : 1, "k=%ld: %d callbacks of a write that %s", k, calls->load(),
			     threw ? "threw" : "returned");
		if (!t_failed) {
			cr_log_info("%s: a write allocates %ld times here; every one failed once", prov.c_str(), k);
			break; // the write made fewer than k allocations: every one was tried
		}
	}
}

Test(oom, a_write_that_runs_out_of_memory_throws_without_callback_or_calls_back_once_tcp, .timeout = 400)
{
	write_out_of_memory(Config::Notify::Immediate, "tcp;ofi_rxm");
}
Test(oom, a_write_that_runs_out_of_memory_throws_without_callback_or_calls_back_once_shm, .timeout = 400)
{
	write_out_of_memory(Config::Notify::Immediate, "shm");
}
Test(oom, a_write_that_runs_out_of_memory_throws_without_callback_or_calls_back_once_tcp_msg, .timeout = 400)
{
	write_out_of_memory(Config::Notify::Message, "tcp;ofi_rxm");
}
Test(oom, a_write_that_runs_out_of_memory_throws_without_callback_or_calls_back_once_shm_msg, .timeout = 400)
{
	write_out_of_memory(Config::Notify::Message, "shm");
}

// The same for a control message (the plugin's small sends).
static void send_out_of_memory(const std::string &prov)
{
	for (long k = 0;; k++) {
		cr_assert_lt(k, 400, "a send allocating more than 400 times");
		Config c = loopback(prov);
		c.max_transfers = 1;
		Pair p(c, c);
		const std::vector<uint8_t> msg(64, 7);
		auto calls = std::make_shared<std::atomic<int>>(0);
		bool threw = false;
		TransferRef t;
		t_failed = false;
		t_fail_in = k;
		try {
			t = p.a.send(p.b_at_a, msg, [calls](const Transfer &) { calls->fetch_add(1); });
		} catch (const std::bad_alloc &) {
			threw = true;
		} catch (const hmemreg::Error &e) {
			cr_assert_eq(e.code(), HMEMREG_ENOMEM, "k=%ld: %s", k, e.what());
			threw = true;
		}
		t_fail_in = -1;
		if (!threw) {
			cr_assert(p.a.wait(*t, 30s), "k=%ld: the send never completed", k);
			cr_assert(eventually([&] { return calls->load() == 1; }, 10s), "k=%ld: callback never came", k);
		}
		TransferRef u = once_admitted([&] { return p.a.send(p.b_at_a, msg); });
		cr_assert(u, "k=%ld: the engine kept the failed send (max_transfers full)", k);
		cr_assert(p.a.wait(*u, 30s) && u->status() == 0, "k=%ld: %s", k, u->error().c_str());
		std::this_thread::sleep_for(20ms);
		cr_assert_eq(calls->load(), threw ? 0 : 1, "k=%ld: %d callbacks of a send that %s", k, calls->load(),
			     threw ? "threw" : "returned");
		if (!t_failed) {
			cr_log_info("%s: a send allocates %ld times here; every one failed once", prov.c_str(), k);
			break;
		}
	}
}

Test(oom, a_send_that_runs_out_of_memory_throws_without_callback_or_calls_back_once_tcp, .timeout = 400)
{
	send_out_of_memory("tcp;ofi_rxm");
}
Test(oom, a_send_that_runs_out_of_memory_throws_without_callback_or_calls_back_once_shm, .timeout = 400)
{
	send_out_of_memory("shm");
}

// Out of memory as a progress turn sets up (its per-thread event lists,
// the first turn on a thread): the turn throws, and this thread is not
// left marked as inside one of the engine's turns (drain() from there
// then said "called from a callback of this engine").
Test(oom, a_turn_that_runs_out_of_memory_leaves_the_thread_outside_the_engine, .timeout = 120)
{
	Config c = loopback("tcp;ofi_rxm", 0);
	Pair p(c, c);
	bool threw_once = false;
	for (long k = 0; k < 50; k++) {
		bool threw = false, drained = false;
		std::string why;
		std::thread([&] { // a fresh thread: its first turn allocates
			t_fail_in = k;
			try {
				p.a.progress();
			} catch (const std::bad_alloc &) {
				threw = true;
			}
			t_fail_in = -1;
			try {
				drained = p.a.drain(p.b_at_a, 1s);
			} catch (const hmemreg::Error &e) {
				why = e.what();
			}
		}).join();
		cr_assert(why.empty(), "k=%ld: drain after a turn that threw: %s", k, why.c_str());
		cr_assert(drained, "k=%ld", k);
		threw_once = threw_once || threw;
		if (!threw)
			break;
	}
	cr_assert(threw_once, "no allocation failed in a turn");
}
