// SPDX-License-Identifier: MIT
// Control messages, several peers, peers coming and going, queue pressure.
#include <thread>

#include "harness.hpp"

using namespace fx;

PROVIDER_TEST(control, send_recv_recycles_buffers)
{
	Config ca = loopback(prov), cb = loopback(prov);
	cb.recv_buffers = 4; // far fewer than messages: buffers must be recycled
	ca.send_buffers = 2;
	Pair p(ca, cb);
	const size_t n = 300;
	std::vector<TransferRef> sent;
	for (size_t i = 0; i < n; i++) {
		std::vector<uint8_t> m(i % 97 + 1);
		fill(m.data(), m.size(), i);
		sent.push_back(p.a.send(p.b_at_a, m));
		// Keep within the receiver's 4 buffers: wait for delivery every few.
		if (i % 4 == 3)
			cr_assert(eventually([&] { return p.in_b.nmsgs.load() == i + 1; }), "message %zu lost", i);
	}
	for (auto &t : sent) {
		cr_assert(p.a.wait(*t, 20s));
		cr_assert_eq(t->status(), 0, "%s", t->error().c_str());
	}
	cr_assert(eventually([&] { return p.in_b.nmsgs.load() == n; }));
	std::lock_guard l(p.in_b.mu);
	for (size_t i = 0; i < n; i++) {
		auto &[from, data] = p.in_b.msgs[i];
		cr_assert_eq(from, p.a_at_b);
		cr_assert_eq(data.size(), i % 97 + 1);
		cr_assert(check_bytes(data.data(), i, data.size()), "message %zu corrupted", i);
	}
}

// Messages queued together for one peer leave in bundles (several per
// send, each 8-byte aligned in one receive buffer) that never exceed a
// receive buffer; every message still arrives once, whole and in order.
// With bundling off each goes alone.
static void send_burst(const std::string &prov, bool bundle)
{
	Config ca = loopback(prov, 0), cb = loopback(prov);
	ca.max_message = cb.max_message = 1024; // a bundle holds a few of these
	ca.bundle_messages = bundle;
	Pair p(ca, cb);
	const size_t n = 200;
	std::vector<TransferRef> sent;
	for (size_t i = 0; i < n; i++) { // all queued: no thread, no progress() yet
		std::vector<uint8_t> m(i % 301 + 1);
		fill(m.data(), m.size(), i);
		sent.push_back(p.a.send(p.b_at_a, m));
	}
	cr_assert(eventually([&] {
		p.a.progress();
		return std::all_of(sent.begin(), sent.end(), [](const TransferRef &t) { return t->status() != -HMEMREG_EAGAIN; });
	}));
	for (auto &t : sent)
		cr_assert_eq(t->status(), 0, "%s", t->error().c_str());
	cr_assert(eventually([&] { return p.in_b.nmsgs.load() == n; }), "%zu of %zu messages arrived",
		  p.in_b.nmsgs.load(), n);
	{
		std::lock_guard l(p.in_b.mu);
		for (size_t i = 0; i < n; i++) {
			auto &[from, data] = p.in_b.msgs[i];
			cr_assert_eq(from, p.a_at_b);
			cr_assert_eq(data.size(), i % 301 + 1, "message %zu: %zu bytes", i, data.size());
			cr_assert(check_bytes(data.data(), i, data.size()), "message %zu corrupted", i);
		}
	}
	const RailStats s = p.a.stats()[0];
	cr_assert_eq(s.sends_posted, n);
	if (bundle) {
		// 200 messages of 1-301 bytes (+40 of header) into 1 KiB buffers:
		// at least 4 per send on average without the size limit, and the
		// limit keeps each send within one buffer.
		cr_assert_gt(s.sends_bundled, n / 2, "%llu of %zu messages bundled",
			     static_cast<unsigned long long>(s.sends_bundled), n);
		cr_assert_eq(p.b.stats()[0].recvs, n);
	} else {
		cr_assert_eq(s.sends_bundled, 0u);
	}
}

PROVIDER_TEST(control, burst_goes_in_bundles)
{
	send_burst(prov, true);
}

PROVIDER_TEST(control, burst_without_bundles)
{
	send_burst(prov, false);
}

PROVIDER_TEST(control, message_from_unknown_sender)
{
	Facade a(loopback(prov)), b(loopback(prov));
	Inbox in;
	in.attach(b);
	PeerId pb = a.add_peer(b.address()); // b never adds a
	uint8_t hello[3] = {1, 2, 3};
	auto t = a.send(pb, hello);
	cr_assert(a.wait(*t, 20s));
	cr_assert_eq(t->status(), 0, "%s", t->error().c_str());
	cr_assert(eventually([&] { return in.nmsgs.load() == 1; }));
	cr_assert_eq(in.msgs[0].first, kUnknownPeer);
}

PROVIDER_TEST(control, warmup_connects)
{
	Facade a(loopback(prov)), b(loopback(prov));
	PeerId pb = a.add_peer(b.address(), true);
	cr_assert_neq(pb, 0u);
	cr_assert(a.stats()[0].sends_posted >= 1, "warm-up sent nothing");
}

PROVIDER_TEST(control, several_peers_at_once)
{
	const int n = 3;
	Facade target(loopback(prov));
	Inbox in;
	in.attach(target);
	Buffer dst(n << 20);
	auto rd = target.register_region(dst.data(), dst.len);
	auto desc = target.descriptor(*rd);
	std::vector<std::unique_ptr<Facade>> src;
	std::vector<std::thread> th;
	std::atomic<int> ok{0};
	for (int i = 0; i < n; i++)
		src.push_back(std::make_unique<Facade>(loopback(prov)));
	for (int i = 0; i < n; i++) {
		th.emplace_back([&, i] {
			Facade &e = *src[i];
			Buffer b(1 << 20);
			fill(b.data(), b.len, 1000 + i);
			auto r = e.register_region(b.data(), b.len);
			PeerId t = e.add_peer(target.address());
			// 16 chunks of 64 KiB into this writer's own MiB of the target.
			std::vector<Chunk> c;
			for (size_t k = 0; k < 16; k++)
				c.push_back({r.get(), k << 16, 1 << 16, (size_t(i) << 20) + (k << 16)});
			auto x = e.write(t, c, desc, i);
			if (e.wait(*x, 30s) && x->status() == 0)
				ok++;
		});
	}
	for (auto &t : th)
		t.join();
	cr_assert_eq(ok.load(), n);
	cr_assert(eventually([&] { return in.nnotes.load() == n; }));
	for (int i = 0; i < n; i++)
		cr_assert(check_bytes(dst.data() + (size_t(i) << 20), 1000 + i, 1 << 20), "writer %d's bytes", i);
}

// A stream of writes to two peers; one is removed mid-stream. Its
// not-yet-posted transfers fail with ENOENT, the other peer's all complete,
// and the removed peer can be added back and written to.
PROVIDER_TEST(control, add_remove_peers_mid_stream)
{
	Config ca = loopback(prov);
	ca.queue_depth = 4; // keep most of the stream queued when removing
	Facade a(ca), b(loopback(prov)), c(loopback(prov));
	Inbox inb, inc;
	inb.attach(b);
	inc.attach(c);
	Buffer src(1 << 20), db(1 << 20), dc(1 << 20);
	fill(src.data(), src.len, 77);
	auto rs = a.register_region(src.data(), src.len);
	auto rb = b.register_region(db.data(), db.len);
	auto rc = c.register_region(dc.data(), dc.len);
	PeerId pb = a.add_peer(b.address()), pc = a.add_peer(c.address());
	std::vector<TransferRef> tb, tc;
	const size_t n = 64;
	for (size_t i = 0; i < n; i++) {
		std::vector<Chunk> ch;
		for (size_t k = 0; k < 16; k++)
			ch.push_back({rs.get(), k << 16, 1 << 16, k << 16});
		if (i <= n / 4)
			tb.push_back(a.write(pb, ch, b.descriptor(*rb), i));
		tc.push_back(a.write(pc, ch, c.descriptor(*rc), i));
		if (i == n / 4)
			a.remove_peer(pb); // most of b's writes are still queued (depth 4)
	}
	size_t b_ok = 0, b_removed = 0;
	for (auto &t : tb) {
		cr_assert(a.wait(*t, 30s));
		if (t->status() == 0)
			b_ok++;
		else {
			cr_assert_eq(t->status(), -HMEMREG_ENOENT, "%d %s", t->status(), t->error().c_str());
			cr_assert(t->error().find("removed") != std::string::npos, "%s", t->error().c_str());
			b_removed++;
		}
	}
	for (auto &t : tc) {
		cr_assert(a.wait(*t, 30s));
		cr_assert_eq(t->status(), 0, "the other peer's transfer failed: %s", t->error().c_str());
	}
	cr_assert(b_removed > 0, "removal failed nothing (all %zu done)", b_ok);
	cr_assert_eq(a.peer_count(), 1u);
	cr_assert_throw(a.write(pb, std::vector<Chunk>{{rs.get(), 0, 1, 0}}, b.descriptor(*rb)), hmemreg::Error);
	cr_assert(eventually([&] { return inc.nnotes.load() == n; }));
	cr_assert(check_bytes(dc.data(), 77, dc.len));
	// Back again: a new peer id, and writes work.
	std::memset(db.data(), 0, db.len);
	PeerId pb2 = a.add_peer(b.address());
	cr_assert_neq(pb2, pb);
	auto t = a.write(pb2, std::vector<Chunk>{{rs.get(), 0, src.len, 0}}, b.descriptor(*rb), 999);
	cr_assert(a.wait(*t, 30s));
	cr_assert_eq(t->status(), 0, "%s", t->error().c_str());
	cr_assert(eventually([&] {
			  std::lock_guard l(inb.mu);
			  return inb.notes.size() >= b_ok + 1 && inb.notes.back().tag == 999;
		  }),
		  "the re-added peer was not notified");
	cr_assert(check_bytes(db.data(), 77, db.len));
}

// Queue depth 1 and 2 send buffers: nearly every post is deferred, yet
// thousands of writes and messages all complete.
PROVIDER_TEST(control, small_queue_depth_pressure)
{
	Config ca = loopback(prov);
	ca.queue_depth = 1;
	ca.send_buffers = 2;
	ca.post_batch = 4;
	Pair p(ca, loopback(prov));
	const size_t nchunks = 3000;
	Buffer src(nchunks * 64), dst(nchunks * 64);
	fill(src.data(), src.len, 5);
	auto rs = p.a.register_region(src.data(), src.len);
	auto rd = p.b.register_region(dst.data(), dst.len);
	std::vector<TransferRef> ts;
	for (size_t x = 0; x < 10; x++) {
		std::vector<Chunk> ch;
		for (size_t k = x; k < nchunks; k += 10)
			ch.push_back({rs.get(), k * 64, 64, k * 64});
		ts.push_back(p.a.write(p.b_at_a, ch, p.b.descriptor(*rd), x));
		uint8_t m = static_cast<uint8_t>(x);
		ts.push_back(p.a.send(p.b_at_a, {&m, 1}));
	}
	for (auto &t : ts) {
		cr_assert(p.a.wait(*t, 60s));
		cr_assert_eq(t->status(), 0, "%s", t->error().c_str());
	}
	// The target's notifications say the data landed (with immediate
	// notification the writer's completion comes earlier).
	cr_assert(eventually([&] { return p.in_b.nnotes.load() == 10 && p.in_b.nmsgs.load() == 10; }));
	cr_assert(check_bytes(dst.data(), 5, dst.len));
	auto s = p.a.stats()[0];
	cr_assert(s.deferred > 0, "nothing was ever deferred");
	cr_assert_eq(s.queued, 0u);
	cr_assert_eq(s.inflight, 0u);
	cr_log_info("%s: %llu deferred turns, %llu provider EAGAIN", prov.c_str(), (unsigned long long)s.deferred,
		    (unsigned long long)s.eagain);
}

// Bounded memory: beyond max_transfers, write() says EAGAIN instead of queueing.
PROVIDER_TEST(control, max_transfers_bounds_memory)
{
	Config ca = loopback(prov, 0); // no progress: nothing completes meanwhile
	ca.max_transfers = 8;
	Buffer buf(4096); // outlives the engines: b may still be receiving
	Facade a(ca), b(loopback(prov));
	Inbox inb;
	inb.attach(b);
	auto rs = a.register_region(buf.data(), buf.len);
	auto rd = b.register_region(buf.data(), buf.len);
	PeerId pb = a.add_peer(b.address());
	std::vector<TransferRef> ts;
	Chunk c{rs.get(), 0, 16, 0};
	for (int i = 0; i < 8; i++)
		ts.push_back(a.write(pb, {&c, 1}, b.descriptor(*rd)));
	try {
		a.write(pb, {&c, 1}, b.descriptor(*rd));
		cr_assert_fail("a 9th transfer was accepted");
	} catch (const hmemreg::Error &e) {
		cr_assert_eq(e.code(), HMEMREG_EAGAIN);
	}
	for (auto &t : ts)
		cr_assert(a.wait(*t, 20s));
	ts.push_back(a.write(pb, {&c, 1}, b.descriptor(*rd)));
	cr_assert(a.wait(*ts.back(), 20s));
	// The writer's completion may come before the data lands (immediate
	// notification): the target's notifications say it did.
	cr_assert(eventually([&] { return inb.nnotes.load() == 9; }), "%zu of 9 notified", inb.nnotes.load());
}
