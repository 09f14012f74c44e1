// SPDX-License-Identifier: MIT
// Shared helpers of the fabric suites: engines on real providers, byte
// patterns, waiting with a bound.
#pragma once

#include <criterion/criterion.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "engine/facade.hpp"
#include "test_bytes.hpp"

namespace fx {

using namespace hmemreg::engine;
using namespace std::chrono_literals;

// How writers notify targets in this test (set by PROVIDER_TEST: every
// provider test runs in both modes; NOTIFY_TEST adds 4-byte keys on tcp).
inline Config::Notify &notify_mode()
{
	static Config::Notify m = Config::Notify::Auto;
	return m;
}
// Config::imm_data_bytes of this test's engines (0: the provider's).
inline size_t &imm_bytes_mode()
{
	static size_t b = 0;
	return b;
}
inline const char *notify_name()
{
	if (notify_mode() == Config::Notify::Message)
		return "message";
	return imm_bytes_mode() == 4 ? "immediate4" : "immediate";
}

// Loopback configuration of a provider under test.
inline Config loopback(const std::string &provider, unsigned threads = 1)
{
	Config c;
	c.provider = provider;
	c.notify = notify_mode();
	c.imm_data_bytes = imm_bytes_mode();
	if (provider.find("tcp") != std::string::npos)
		c.node = "127.0.0.1";
	c.progress_threads = threads;
	c.idle_spin = 2000;
	c.idle_sleep_us = 20;
	return c;
}

using Buffer = test_bytes::PageBuffer;
using test_bytes::fill;
using test_bytes::pattern;

// Collects what an engine receives.
// What an engine handed its application. Engines usually outlive their
// inbox in a test (declared first), and a target may still notify during
// its teardown (a write that landed after the writer's completion, which
// for an immediate-notify write only says its buffers may be reused): the
// handlers reach the inbox through a guard it clears when destroyed, so a
// late notice is dropped instead of landing in freed memory.
struct Inbox {
	std::mutex mu;
	std::vector<Notification> notes;
	std::vector<std::pair<PeerId, std::vector<uint8_t>>> msgs;
	std::atomic<size_t> nnotes{0}, nmsgs{0};

	Inbox() = default;
	Inbox(const Inbox &) = delete;
	Inbox &operator=(const Inbox &) = delete;
	~Inbox()
	{
		std::lock_guard l(guard_->mu);
		guard_->in = nullptr;
	}

	void attach(Facade &e)
	{
		e.on_notify([g = guard_](const Notification &n) {
			std::lock_guard gl(g->mu);
			if (!g->in)
				return;
			std::lock_guard l(g->in->mu);
			g->in->notes.push_back(n);
			g->in->nnotes++;
		});
		e.on_message([g = guard_](const Message &m) {
			std::lock_guard gl(g->mu);
			if (!g->in)
				return;
			std::lock_guard l(g->in->mu);
			g->in->msgs.emplace_back(m.from, std::vector<uint8_t>(m.data.begin(), m.data.end()));
			g->in->nmsgs++;
		});
	}

private:
	struct Guard {
		explicit Guard(Inbox *i) : in(i) {}
		std::mutex mu;
		Inbox *in;
	};
	std::shared_ptr<Guard> guard_ = std::make_shared<Guard>(this);
};

// Until pred() or the timeout; drives progress of caller-driven engines.
template <class Pred> bool eventually(Pred pred, std::chrono::milliseconds timeout = 20s,
				       std::vector<Facade *> drive = {})
{
	auto end = std::chrono::steady_clock::now() + timeout;
	while (!pred()) {
		if (std::chrono::steady_clock::now() > end)
			return false;
		for (Facade *e : drive)
			e->progress();
		if (drive.empty())
			std::this_thread::sleep_for(100us);
	}
	return true;
}

// Two engines that know each other: a writes into b.
struct Pair {
	Pair(const Config &ca, const Config &cb) : a(ca), b(cb)
	{
		in_b.attach(b);
		in_a.attach(a);
		b_at_a = a.add_peer(b.address());
		a_at_b = b.add_peer(a.address());
		// 4-byte keys: each side's writer index arrives asynchronously; until
		// then writes use Done messages. Tests counting immediate notices
		// start once both have theirs.
		if (a.caps().imm_key_bytes == 4 || b.caps().imm_key_bytes == 4)
			cr_assert(eventually([&] { return a.immediate_to(b_at_a) && b.immediate_to(a_at_b); }, 10s,
					     {&a, &b}),
				  "no writer index within 10 s");
	}
	explicit Pair(const std::string &prov) : Pair(loopback(prov), loopback(prov)) {}
	Facade a, b;
	Inbox in_a, in_b;
	PeerId b_at_a = 0, a_at_b = 0;
};

// Runs body for each provider the lane tests on loopback, with each way of
// notifying targets: immediate data (_tcp, _shm) and Done messages (_msg).
#define PROVIDER_TEST(suite, name)                                                                                     \
	static void suite##_##name(const std::string &prov);                                                          \
	static void suite##_##name##_in(Config::Notify mode, const char *prov, size_t imm_bytes = 0)                  \
	{                                                                                                              \
		notify_mode() = mode;                                                                                  \
		imm_bytes_mode() = imm_bytes;                                                                          \
		suite##_##name(prov);                                                                                  \
	}                                                                                                              \
	Test(suite, name##_tcp, .timeout = 120) { suite##_##name##_in(Config::Notify::Immediate, "tcp;ofi_rxm"); }    \
	Test(suite, name##_shm, .timeout = 120) { suite##_##name##_in(Config::Notify::Immediate, "shm"); }            \
	Test(suite, name##_tcp_msg, .timeout = 120) { suite##_##name##_in(Config::Notify::Message, "tcp;ofi_rxm"); }  \
	Test(suite, name##_shm_msg, .timeout = 120) { suite##_##name##_in(Config::Notify::Message, "shm"); }          \
	static void suite##_##name(const std::string &prov)

// A PROVIDER_TEST that also runs with 4-byte immediate keys forced on tcp
// (the scheme of verbs and efa): for the suites about notifying targets.
#define NOTIFY_TEST(suite, name)                                                                                       \
	static void suite##_##name##_all(const std::string &prov);                                                    \
	PROVIDER_TEST(suite, name) { suite##_##name##_all(prov); }                                                     \
	Test(suite, name##_tcp_imm4, .timeout = 120)                                                                   \
	{                                                                                                              \
		suite##_##name##_in(Config::Notify::Immediate, "tcp;ofi_rxm", 4);                                     \
	}                                                                                                              \
	static void suite##_##name##_all(const std::string &prov)

inline std::string hex(const std::vector<uint8_t> &b)
{
	std::string s;
	char x[3];
	for (uint8_t c : b) {
		std::snprintf(x, sizeof(x), "%02x", c);
		s += x;
	}
	return s;
}

inline bool check_bytes(const uint8_t *got, uint64_t seed, size_t n, size_t seed_offset = 0)
{
	for (size_t i = 0; i < n; i++)
		if (got[i] != pattern(seed, seed_offset + i)) {
			cr_log_error("byte %zu differs: got %u want %u", i, got[i], pattern(seed, seed_offset + i));
			return false;
		}
	return true;
}

} // namespace fx
