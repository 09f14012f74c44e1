// SPDX-License-Identifier: MIT
// verbs;ofi_rxm over Soft-RoCE (rxe on a veth) inside the VM: registrations
// really pin pages, writes go through the kernel's RDMA stack. Set up by
// tests/vm.d/30-engine-rxe.sh, which passes HMEMREG_RXE_NODE (the veth address).
#include <cstdlib>

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
	Engine e(rxe());
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
