// SPDX-License-Identifier: MIT
// Immediate notification with 4-byte keys (target-assigned writer index), on
// tcp;ofi_rxm forced to use them: two writers into one target never have
// their transfers confused, a writer without an index still gets its target
// notified (Done message), and a key announced by anyone but the writer the
// index belongs to is never counted.
#include <thread>

#include "engine/engine_impl.hpp"
#include "harness.hpp"

using namespace fx;

static Config imm4(unsigned peer_timeout_ms = 10000)
{
	Config c = loopback("tcp;ofi_rxm");
	c.notify = Config::Notify::Immediate;
	c.imm_data_bytes = 4;
	c.peer_timeout_ms = peer_timeout_ms;
	return c;
}

// The writer-side state of `peer` inside engine `e`.
static std::shared_ptr<PeerState> peer_state(Facade &e, PeerId peer)
{
	return TestAccess::impl(e).find_peer(peer);
}

Test(notify, config_checked)
{
	Config c = imm4();
	c.imm_data_bytes = 3;
	try {
		Facade e(c);
		cr_assert_fail("imm_data_bytes 3 accepted");
	} catch (const hmemreg::Error &e) {
		cr_assert_eq(e.code(), HMEMREG_EINVAL);
		cr_assert(std::string(e.what()).find("imm_data_bytes") != std::string::npos, "%s", e.what());
	}
	Config m = imm4();
	m.notify = Config::Notify::Message;
	Facade e(m);
	cr_assert(!e.caps().notify_immediate);
	cr_assert_eq(e.caps().imm_key_bytes, 0u);
	cr_assert(e.caps().describe().find("Config::notify is Message") != std::string::npos, "%s",
		  e.caps().describe().c_str());
}

// Two writers with the same key sequence (forced) write into one target at
// once: keys differ only by the writer index, and every notification names
// the right writer, tag, byte and chunk count.
Test(notify, two_writers_never_confused, .timeout = 120)
{
	Facade a(imm4()), c(imm4()), b(imm4());
	Inbox in;
	in.attach(b);
	const PeerId b_at_a = a.add_peer(b.address()), b_at_c = c.add_peer(b.address());
	const PeerId a_at_b = b.add_peer(a.address()), c_at_b = b.add_peer(c.address());
	cr_assert(eventually([&] { return a.immediate_to(b_at_a) && c.immediate_to(b_at_c); }, 10s),
		  "no writer indices");
	const uint32_t ia = peer_state(a, b_at_a)->imm_index, ic = peer_state(c, b_at_c)->imm_index;
	cr_assert(ia != 0 && ic != 0 && ia != ic, "indices %u and %u", ia, ic);
	peer_state(a, b_at_a)->imm_seq = 77;
	peer_state(c, b_at_c)->imm_seq = 77;

	// a: 3 chunks of 4 KiB per transfer, c: 5 of 1 KiB; disjoint halves of b.
	const size_t n = 200, slot = 16 << 10;
	Buffer sa(n * slot), sc(n * slot), dst(2 * n * slot);
	fill(sa.data(), sa.len, 1);
	fill(sc.data(), sc.len, 2);
	auto ra = a.register_region(sa.data(), sa.len);
	auto rc = c.register_region(sc.data(), sc.len);
	auto rd = b.register_region(dst.data(), dst.len);
	const Bytes desc = b.descriptor(*rd);
	auto writer = [&](Facade &e, PeerId to, const RegionRef &r, size_t nch, size_t len, size_t base,
			  uint64_t tag0, std::vector<TransferRef> &out) {
		for (size_t t = 0; t < n; t++) {
			std::vector<Chunk> ch;
			for (size_t k = 0; k < nch; k++)
				ch.push_back({r.get(), t * slot + k * len, len, base + t * slot + k * len});
			out.push_back(e.write(to, ch, desc, tag0 + t));
		}
	};
	std::vector<TransferRef> ta, tc;
	std::thread wa([&] { writer(a, b_at_a, ra, 3, 4096, 0, 1000, ta); });
	std::thread wc([&] { writer(c, b_at_c, rc, 5, 1024, n * slot, 5000, tc); });
	wa.join();
	wc.join();
	for (auto [e, v] : {std::pair{&a, &ta}, std::pair{&c, &tc}})
		for (auto &t : *v) {
			cr_assert(e->wait(*t, 30s));
			cr_assert_eq(t->status(), 0, "%s", t->error().c_str());
		}
	cr_assert(eventually([&] { return in.nnotes.load() >= 2 * n; }), "%zu of %zu notified", in.nnotes.load(),
		  2 * n);
	std::this_thread::sleep_for(50ms); // a duplicate would show up now
	std::lock_guard l(in.mu);
	cr_assert_eq(in.notes.size(), 2 * n);
	std::vector<int> seen(2 * n, 0);
	for (const Notification &note : in.notes) {
		const bool from_a = note.tag >= 1000 && note.tag < 1000 + n;
		const bool from_c = note.tag >= 5000 && note.tag < 5000 + n;
		cr_assert(from_a || from_c, "tag %llu", (unsigned long long)note.tag);
		cr_assert_eq(note.from, from_a ? a_at_b : c_at_b, "tag %llu from the wrong peer",
			     (unsigned long long)note.tag);
		cr_assert_eq(note.sender, from_a ? a.id() : c.id());
		cr_assert_eq(note.bytes, from_a ? 3 * 4096u : 5 * 1024u);
		cr_assert_eq(note.chunks, from_a ? 3u : 5u);
		const size_t t = from_a ? note.tag - 1000 : n + note.tag - 5000;
		cr_assert_eq(seen[t]++, 0, "tag %llu notified twice", (unsigned long long)note.tag);
	}
	for (size_t t = 0; t < n; t++) {
		cr_assert(check_bytes(dst.data() + t * slot, 1, 3 * 4096, t * slot), "a's transfer %zu", t);
		cr_assert(check_bytes(dst.data() + (n + t) * slot, 2, 5 * 1024, t * slot), "c's transfer %zu", t);
	}
	auto ps = b.path_stats();
	cr_assert_eq(ps.immediate_notices, 2 * n);
	cr_assert_eq(ps.immediate_abandoned, 0u);
	cr_assert_eq(ps.immediate_pending, 0u);
	cr_assert_eq(ps.immediate_writers, 2u);
	cr_assert_eq(a.path_stats().immediate_writes, n);
	cr_assert_eq(a.path_stats().message_writes, 0u);
}

// Until the target assigns the writer an index (it does once it added the
// writer), writes notify it with a Done message; then with immediate data.
// Asking again (the writer re-adds the target) gets the same index.
Test(notify, message_until_index_then_immediate, .timeout = 120)
{
	Facade a(imm4()), b(imm4());
	Inbox in;
	in.attach(b);
	PeerId b_at_a = a.add_peer(b.address());
	Buffer src(1 << 20), dst(1 << 20);
	fill(src.data(), src.len, 9);
	auto rs = a.register_region(src.data(), src.len);
	auto rd = b.register_region(dst.data(), dst.len);
	Chunk ch{rs.get(), 0, src.len, 0};
	std::this_thread::sleep_for(100ms); // the ImmJoin is at b, unanswered
	cr_assert(!a.immediate_to(b_at_a), "an index without the target knowing the writer");
	auto t = a.write(b_at_a, {&ch, 1}, b.descriptor(*rd), 1);
	cr_assert(a.wait(*t, 30s) && t->status() == 0, "%s", t->error().c_str());
	// Message mode: the writer's completion came after the Done was delivered.
	cr_assert(eventually([&] { return in.nnotes.load() == 1; }));
	{
		std::lock_guard l(in.mu);
		cr_assert_eq(in.notes[0].from, kUnknownPeer);
		cr_assert_eq(in.notes[0].sender, a.id());
		cr_assert_eq(in.notes[0].tag, 1u);
		cr_assert_eq(in.notes[0].bytes, src.len);
	}
	cr_assert(check_bytes(dst.data(), 9, dst.len));
	cr_assert_eq(a.path_stats().message_writes, 1u);
	cr_assert_eq(b.path_stats().immediate_notices, 0u);

	PeerId a_at_b = b.add_peer(a.address());
	cr_assert(eventually([&] { return a.immediate_to(b_at_a); }, 10s), "no index after the target added us");
	const uint32_t index = peer_state(a, b_at_a)->imm_index;
	std::memset(dst.data(), 0, dst.len);
	t = a.write(b_at_a, {&ch, 1}, b.descriptor(*rd), 2);
	cr_assert(a.wait(*t, 30s) && t->status() == 0, "%s", t->error().c_str());
	cr_assert(eventually([&] { return in.nnotes.load() == 2; }));
	{
		std::lock_guard l(in.mu);
		cr_assert_eq(in.notes[1].from, a_at_b);
		cr_assert_eq(in.notes[1].tag, 2u);
	}
	cr_assert(check_bytes(dst.data(), 9, dst.len));
	cr_assert_eq(b.path_stats().immediate_notices, 1u);
	cr_assert_eq(a.path_stats().immediate_writes, 1u);

	const uint32_t seq_then = peer_state(a, b_at_a)->imm_seq;
	a.remove_peer(b_at_a);
	b_at_a = a.add_peer(b.address());
	// The keys go on ahead of the old incarnation's, inside the target's
	// window: a fresh random start could meet a key whose partial count the
	// target still holds (a write lost as the peer was removed).
	const uint32_t ahead = (peer_state(a, b_at_a)->imm_seq - seq_then) & wire::kImm4SeqMask;
	cr_assert(ahead > 0 && ahead < (wire::kImm4SeqMask + 1) / 4, "sequence %u ahead", ahead);
	cr_assert(eventually([&] { return a.immediate_to(b_at_a); }, 10s), "no index after re-adding");
	cr_assert_eq(peer_state(a, b_at_a)->imm_index.load(), index, "asking again gave another index");
	cr_assert_eq(b.path_stats().immediate_writers, 1u);
	std::memset(dst.data(), 0, dst.len);
	t = a.write(b_at_a, {&ch, 1}, b.descriptor(*rd), 3);
	cr_assert(a.wait(*t, 30s) && t->status() == 0, "%s", t->error().c_str());
	cr_assert(eventually([&] { return in.nnotes.load() == 3; }));
	cr_assert(check_bytes(dst.data(), 9, dst.len));
	cr_assert_eq(b.path_stats().immediate_notices, 2u);
}

// Writer c uses writer a's index (forged): its writes carry a's keys and its
// Announce names one, but the index is not c's, so the target never counts
// it; a's own transfers are still notified, named a's.
Test(notify, foreign_index_never_counted, .timeout = 120)
{
	Facade a(imm4()), c(imm4()), b(imm4(500));
	Inbox in;
	in.attach(b);
	const PeerId b_at_a = a.add_peer(b.address()), b_at_c = c.add_peer(b.address());
	const PeerId a_at_b = b.add_peer(a.address());
	b.add_peer(c.address());
	cr_assert(eventually([&] { return a.immediate_to(b_at_a) && c.immediate_to(b_at_c); }, 10s));
	auto pa = peer_state(a, b_at_a), pc = peer_state(c, b_at_c);
	pc->imm_index = pa->imm_index.load();
	pa->imm_seq = 1000;
	pc->imm_seq = 5000; // keys a never uses here

	Buffer src(64 << 10), dst(128 << 10);
	fill(src.data(), src.len, 4);
	auto ra = a.register_region(src.data(), src.len);
	auto rc = c.register_region(src.data(), src.len);
	auto rd = b.register_region(dst.data(), dst.len);
	const Bytes desc = b.descriptor(*rd);
	Chunk cc{rc.get(), 0, src.len, 64 << 10};
	auto forged = c.write(b_at_c, {&cc, 1}, desc, 666);
	cr_assert(c.wait(*forged, 30s) && forged->status() == 0, "%s", forged->error().c_str());
	cr_assert(eventually([&] { return b.path_stats().immediate_abandoned >= 1; }, 10s),
		  "the forged Announce was not refused");
	Chunk ca{ra.get(), 0, src.len, 0};
	auto t = a.write(b_at_a, {&ca, 1}, desc, 7);
	cr_assert(a.wait(*t, 30s) && t->status() == 0, "%s", t->error().c_str());
	cr_assert(eventually([&] { return in.nnotes.load() == 1; }));
	std::this_thread::sleep_for(100ms);
	{
		std::lock_guard l(in.mu);
		cr_assert_eq(in.notes.size(), 1u, "the forged transfer was notified");
		cr_assert_eq(in.notes[0].tag, 7u);
		cr_assert_eq(in.notes[0].from, a_at_b);
		cr_assert_eq(in.notes[0].bytes, src.len);
	}
	cr_assert(check_bytes(dst.data(), 4, src.len));
	// The forged writes' count is dropped once idle for b's peer_timeout.
	cr_assert(eventually([&] { return b.path_stats().immediate_pending == 0; }, 10s));
	cr_assert_eq(b.path_stats().immediate_notices, 1u);
}

// A partial arrival left behind (here: forged writes whose Announce was
// refused) is dropped once its writer's sequence has moved a quarter of the
// sequence space past it, before the key can come back; the key's next use
// is then counted afresh.
Test(notify, stale_arrival_dropped_before_its_key_returns, .timeout = 120)
{
	Facade a(imm4()), c(imm4()), b(imm4(60000)); // no expiry during the test
	Inbox in;
	in.attach(b);
	const PeerId b_at_a = a.add_peer(b.address()), b_at_c = c.add_peer(b.address());
	b.add_peer(a.address());
	b.add_peer(c.address());
	cr_assert(eventually([&] { return a.immediate_to(b_at_a) && c.immediate_to(b_at_c); }, 10s));
	auto pa = peer_state(a, b_at_a), pc = peer_state(c, b_at_c);
	const uint32_t quarter = 1u << 18, stale = 5000;
	pc->imm_index = pa->imm_index.load();
	pc->imm_seq = stale;

	Buffer src(64 << 10), dst(128 << 10);
	fill(src.data(), src.len, 5);
	auto ra = a.register_region(src.data(), src.len);
	auto rc = c.register_region(src.data(), src.len);
	auto rd = b.register_region(dst.data(), dst.len);
	const Bytes desc = b.descriptor(*rd);
	Chunk cc{rc.get(), 0, src.len, 64 << 10}, ca{ra.get(), 0, src.len, 0};
	auto t = c.write(b_at_c, {&cc, 1}, desc, 666);
	cr_assert(c.wait(*t, 30s) && t->status() == 0, "%s", t->error().c_str());
	cr_assert(eventually([&] {
		auto ps = b.path_stats();
		return ps.immediate_abandoned == 1 && ps.immediate_pending == 1;
	}, 10s), "the forged writes did not stay as a partial arrival");

	size_t notes = 0;
	auto write_at = [&](uint32_t seq, uint64_t tag) {
		pa->imm_seq = seq;
		std::memset(dst.data(), 0, src.len);
		auto x = a.write(b_at_a, {&ca, 1}, desc, tag);
		cr_assert(a.wait(*x, 30s) && x->status() == 0, "%s", x->error().c_str());
		notes++;
		cr_assert(eventually([&] { return in.nnotes.load() == notes; }), "transfer at sequence %u not notified",
			  seq);
		std::lock_guard l(in.mu);
		cr_assert_eq(in.notes.back().tag, tag);
		cr_assert(check_bytes(dst.data(), 5, src.len), "notified before its bytes were in place");
	};
	write_at(stale + 10, 1); // just ahead: the stale arrival stays
	cr_assert_eq(b.path_stats().immediate_pending, 1u);
	write_at(2 * quarter + 5, 2); // a new quarter: stale is over a quarter behind
	cr_assert_eq(b.path_stats().immediate_pending, 0u, "the stale arrival was not dropped");
	cr_assert_eq(b.path_stats().immediate_abandoned, 2u);
	write_at(stale, 3); // the stale key again: counted afresh
	auto ps = b.path_stats();
	cr_assert_eq(ps.immediate_notices, 3u);
	cr_assert_eq(ps.immediate_pending, 0u);
	cr_assert_eq(ps.immediate_abandoned, 2u);
}

// A target whose writer table is full refuses an index: the writer keeps
// notifying it with Done messages.
Test(notify, full_table_refuses_writer, .timeout = 120)
{
	Facade a(imm4()), b(imm4());
	Inbox in;
	in.attach(b);
	{
		auto &im = TestAccess::impl(b);
		std::lock_guard l(im.immediate.mu);
		im.immediate.imm4_writer.assign(hmemreg::engine::wire::kImm4Writers, 1); // all taken
		im.immediate.imm4_latest.assign(hmemreg::engine::wire::kImm4Writers, hmemreg::engine::ImmediateNotifier::kNoSeq);
	}
	const PeerId b_at_a = a.add_peer(b.address());
	const PeerId a_at_b = b.add_peer(a.address());
	// b answers at once (refusing); give the answer time to arrive.
	cr_assert(eventually([&] { return b.stats()[0].sends_posted >= 2 && a.stats()[0].recvs >= 2; }, 10s));
	std::this_thread::sleep_for(100ms);
	cr_assert(!a.immediate_to(b_at_a), "an index from a full table");
	cr_assert_eq(b.path_stats().immediate_writers, 0u);
	Buffer src(4096), dst(4096);
	fill(src.data(), src.len, 6);
	auto rs = a.register_region(src.data(), src.len);
	auto rd = b.register_region(dst.data(), dst.len);
	Chunk ch{rs.get(), 0, src.len, 0};
	auto t = a.write(b_at_a, {&ch, 1}, b.descriptor(*rd), 8);
	cr_assert(a.wait(*t, 30s) && t->status() == 0, "%s", t->error().c_str());
	cr_assert(eventually([&] { return in.nnotes.load() == 1; }));
	std::lock_guard l(in.mu);
	cr_assert_eq(in.notes[0].from, a_at_b);
	cr_assert_eq(in.notes[0].tag, 8u);
	cr_assert(check_bytes(dst.data(), 6, src.len));
	cr_assert_eq(a.path_stats().message_writes, 1u);
	cr_assert_eq(b.path_stats().immediate_notices, 0u);
}

// A writer whose ImmJoin the target dropped (it had not added the writer and
// forgot it) asks again on a later write, and then gets its index.
Test(notify, dropped_join_asked_again, .timeout = 120)
{
	Facade a(imm4()), b(imm4());
	Inbox in;
	in.attach(b);
	const PeerId b_at_a = a.add_peer(b.address());
	auto &ib = TestAccess::impl(b);
	cr_assert(eventually([&] {
		std::lock_guard l(ib.immediate.mu);
		return ib.immediate.imm4_waiting.count(a.id()) == 1;
	}, 10s), "the ImmJoin did not arrive");
	{
		std::lock_guard l(ib.immediate.mu);
		ib.immediate.imm4_waiting.clear(); // as when too many strangers asked
	}
	b.add_peer(a.address());
	std::this_thread::sleep_for(100ms);
	cr_assert(!a.immediate_to(b_at_a), "an index for a forgotten ImmJoin");
	Buffer src(4096), dst(4096);
	fill(src.data(), src.len, 7);
	auto rs = a.register_region(src.data(), src.len);
	auto rd = b.register_region(dst.data(), dst.len);
	Chunk ch{rs.get(), 0, src.len, 0};
	// Writes go as messages; once a second passed since the first ImmJoin,
	// the next one asks again.
	size_t n = 0;
	cr_assert(eventually([&] {
		auto t = a.write(b_at_a, {&ch, 1}, b.descriptor(*rd), ++n);
		a.wait(*t, 10s);
		std::this_thread::sleep_for(50ms);
		return a.immediate_to(b_at_a);
	}, 10s), "the writer never asked again");
	cr_assert(n >= 2, "an index after %zu write(s)", n);
	cr_assert(eventually([&] { return in.nnotes.load() == n; }));
	auto t = a.write(b_at_a, {&ch, 1}, b.descriptor(*rd), 100);
	cr_assert(a.wait(*t, 10s) && t->status() == 0, "%s", t->error().c_str());
	cr_assert(eventually([&] { return in.nnotes.load() == n + 1; }));
	// The index may land between a check and the next write: that write is
	// then immediate too. Every write is one or the other, and notified once.
	const auto ws = a.path_stats();
	cr_assert(ws.message_writes >= n - 1 && ws.message_writes + ws.immediate_writes == n + 1);
	cr_assert_eq(b.path_stats().immediate_notices, ws.immediate_writes);
}

// With a max_message of a few bytes, the engine's own Announce (16 B) still
// fits the control buffers on both sides: the write is notified.
Test(notify, tiny_max_message_still_announces, .timeout = 120)
{
	Config c = loopback("tcp;ofi_rxm");
	c.notify = Config::Notify::Immediate;
	c.max_message = 4;
	c.stage_device_memory = false;
	Facade a(c), b(c);
	Inbox in;
	in.attach(b);
	const PeerId b_at_a = a.add_peer(b.address());
	Buffer src(8192), dst(8192);
	fill(src.data(), src.len, 5);
	auto rs = a.register_region(src.data(), src.len);
	auto rd = b.register_region(dst.data(), dst.len);
	Chunk ch{rs.get(), 0, src.len, 0};
	auto t = a.write(b_at_a, {&ch, 1}, b.descriptor(*rd), 11);
	cr_assert(a.wait(*t, 30s) && t->status() == 0, "%s", t->error().c_str());
	cr_assert(eventually([&] { return in.nnotes.load() == 1; }), "the Announce never arrived");
	cr_assert(check_bytes(dst.data(), 5, dst.len));
	cr_assert_eq(b.path_stats().immediate_notices, 1u);
}
