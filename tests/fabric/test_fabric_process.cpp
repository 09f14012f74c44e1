// SPDX-License-Identifier: MIT
// Peers in other processes: data verified by the peer's own hash, and a peer
// killed mid-transfer fails only its own transfers.
#include <dirent.h>

#include <thread>

#include "peer_process.hpp"

using namespace fx;

static std::vector<std::string> peer_cmd(const std::string &prov, size_t size)
{
	return {FABRIC_PEER, prov, prov.find("tcp") != std::string::npos ? "127.0.0.1" : "-", std::to_string(size),
		notify_name()};
}

static size_t open_fds()
{
	size_t n = 0;
	DIR *d = opendir("/proc/self/fd");
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

NOTIFY_TEST(process, write_to_other_process)
{
	PeerProcess peer(peer_cmd(prov, 8 << 20));
	Facade a(loopback(prov));
	PeerId p = a.add_peer(peer.address, true);
	if (a.caps().imm_key_bytes == 4) {
		// The peer assigns our writer index once it has added us.
		peer.send("PEER " + hex(a.address()));
		cr_assert_eq(peer.line(), "PEERED");
		cr_assert(eventually([&] { return a.immediate_to(p); }, 10s), "no writer index from the peer");
	}
	Buffer src(8 << 20);
	fill(src.data(), src.len, 11);
	auto rs = a.register_region(src.data(), src.len);
	std::vector<Chunk> ch;
	for (size_t k = 0; k < 128; k++) // reversed order on purpose
		ch.push_back({rs.get(), (127 - k) << 16, 1 << 16, (127 - k) << 16});
	auto t = a.write(p, ch, peer.descriptor, 42);
	cr_assert(a.wait(*t, 30s));
	cr_assert_eq(t->status(), 0, "%s", t->error().c_str());
	char want[128];
	std::snprintf(want, sizeof(want), "NOTE 42 %zu %016llx", src.len,
		      static_cast<unsigned long long>(fnv1a(src.data(), src.len)));
	std::string got = peer.line();
	cr_assert_eq(got, std::string(want), "peer saw '%s', want '%s'", got.c_str(), want);
	auto ps = a.path_stats();
	cr_assert_eq(ps.immediate_writes, notify_mode() == Config::Notify::Immediate ? 1u : 0u);
	cr_assert_eq(ps.message_writes, notify_mode() == Config::Notify::Immediate ? 0u : 1u);
}

PROVIDER_TEST(process, peer_killed_mid_transfer)
{
	size_t fds = open_fds();
	{
		// shm: the peer dies between two of its progress calls, not holding
		// its region's spin lock (a kill -9 inside it makes libfabric 1.17's
		// shm spin forever in our next post to it; see fabric_peer.cpp).
		const bool shm = prov == "shm";
		PeerProcess peer(peer_cmd(prov, 4 << 20),
				 shm ? std::vector<std::string>{"FABRIC_PEER_CALLER_PROGRESS=1"} : std::vector<std::string>{});
		Config ca = loopback(prov);
		ca.peer_timeout_ms = 2000;
		Buffer src(4 << 20), dc(4 << 20); // outlive the engines
		Facade a(ca), c(loopback(prov));
		Inbox inc;
		inc.attach(c);
		fill(src.data(), src.len, 21);
		auto rs = a.register_region(src.data(), src.len);
		auto rc = c.register_region(dc.data(), dc.len);
		PeerId pp = a.add_peer(peer.address, true), pc = a.add_peer(c.address());
		std::vector<Chunk> ch;
		for (size_t k = 0; k < 64; k++)
			ch.push_back({rs.get(), k << 16, 1 << 16, k << 16});
		// First transfer completes; then the peer dies with many queued.
		auto first = a.write(pp, ch, peer.descriptor, 1);
		cr_assert(a.wait(*first, 30s) && first->status() == 0, "%s", first->error().c_str());
		cr_assert(peer.line().rfind("NOTE 1 ", 0) == 0);
		std::vector<TransferRef> dead, alive;
		for (int i = 0; i < 40; i++) {
			try {
				dead.push_back(a.write(pp, ch, peer.descriptor, 100 + i));
			} catch (const hmemreg::Error &e) {
				cr_assert_eq(e.code(), HMEMREG_EFABRIC, "%s", e.what()); // already declared dead
			}
			alive.push_back(a.write(pc, ch, c.descriptor(*rc), 100 + i));
			if (i == 2) {
				if (shm)
					peer.die();
				else
					peer.kill9();
			}
		}
		size_t failed = 0;
		for (auto &t : dead) {
			if (!a.wait(*t, 20s)) {
				auto st = a.stats()[0];
				cr_assert_fail("a transfer to the dead peer never completed: inflight %llu queued %llu errors %llu posted %llu",
					       (unsigned long long)st.inflight, (unsigned long long)st.queued,
					       (unsigned long long)st.errors, (unsigned long long)st.writes_posted);
			}
			if (t->status() != 0) {
				failed++;
				cr_assert(!t->error().empty());
			}
		}
		cr_log_info("%s: %zu of %zu transfers to the killed peer failed; first error: %s", prov.c_str(), failed,
			    dead.size(), failed ? dead.back()->error().c_str() : "-");
		cr_assert(failed > 0, "no transfer to the killed peer failed");
		// shm in libfabric 1.17 completes an endpoint's operations strictly in
		// order (smr_progress_resp stops at the first unanswered one), so a
		// dead peer's posted write blocks later completions of every peer on
		// that endpoint: those fail after peer_timeout with a clear error
		// instead of completing. tcp;ofi_rxm has no such coupling.
		size_t alive_failed = 0;
		for (auto &t : alive) {
			cr_assert(a.wait(*t, 30s), "a transfer to the live peer never completed");
			if (t->status() != 0) {
				alive_failed++;
				cr_assert(shm, "the live peer's transfer failed: %s", t->error().c_str());
				cr_assert(t->error().find("no progress") != std::string::npos, "%s", t->error().c_str());
			}
		}
		cr_log_info("%s: %zu of %zu transfers to the live peer failed", prov.c_str(), alive_failed, alive.size());
		if (!alive_failed) {
			cr_assert(eventually([&] { return inc.nnotes.load() == alive.size(); }),
				  "live peer notified of %zu of %zu", inc.nnotes.load(), alive.size());
			cr_assert(check_bytes(dc.data(), 21, dc.len));
		}
		a.remove_peer(pp);
		cr_assert(eventually([&] { return a.stats()[0].queued == 0; }));
		try {
			a.write(pp, ch, peer.descriptor);
			cr_assert_fail("write to a removed peer accepted");
		} catch (const hmemreg::Error &e) {
			cr_assert_eq(e.code(), HMEMREG_ENOENT);
		}
	}
	cr_assert_eq(open_fds(), fds, "file descriptors leaked");
}

// The writer is killed while hundreds of its transfers are in flight into
// this process: the target is notified only of transfers whose every byte
// is in place, and partial arrivals are dropped after peer_timeout.
NOTIFY_TEST(process, writer_killed_never_notifies_falsely)
{
	const size_t n = 256, slot = 256 << 10;
	Config cb = loopback(prov);
	cb.peer_timeout_ms = 1000;
	Buffer dst(n * slot); // outlives the engine
	Facade b(cb);
	Inbox in;
	in.attach(b);
	auto rd = b.register_region(dst.data(), dst.len);
	const bool shm = prov == "shm"; // dies outside provider locks, as above
	PeerProcess w(peer_cmd(prov, n * slot),
		      shm ? std::vector<std::string>{"FABRIC_PEER_CALLER_PROGRESS=1"} : std::vector<std::string>{});
	if (imm_bytes_mode() == 4)
		b.add_peer(w.address); // so the writer gets its index (it waits for it)
	w.send("WRITE " + hex(b.address()) + " " + hex(b.descriptor(*rd)) + " " + std::to_string(n) + " 1024");
	std::string l = w.line();
	cr_assert_eq(l, "POSTED " + std::to_string(n), "writer said '%s'", l.c_str());
	cr_assert(eventually([&] { return in.nnotes.load() >= 1; }, 30s), "nothing arrived from the writer");
	if (shm)
		w.die();
	else
		w.kill9();
	const size_t at_kill = in.nnotes.load();
	// Whatever was still in flight lands or not; then arrivals expire.
	std::this_thread::sleep_for(300ms);
	if (notify_mode() == Config::Notify::Immediate)
		cr_assert(eventually([&] { return b.path_stats().immediate_pending == 0; }, 10s),
			  "%llu partial arrivals never expired", (unsigned long long)b.path_stats().immediate_pending);
	std::lock_guard lk(in.mu);
	std::vector<int> seen(n, 0);
	for (const Notification &note : in.notes) {
		cr_assert(note.tag < n, "tag %llu", (unsigned long long)note.tag);
		cr_assert_eq(seen[note.tag]++, 0, "transfer %llu notified twice", (unsigned long long)note.tag);
		cr_assert_eq(note.bytes, slot);
		cr_assert(check_bytes(dst.data() + note.tag * slot, note.tag + 1, slot),
			  "transfer %llu notified with bytes missing", (unsigned long long)note.tag);
	}
	auto ps = b.path_stats();
	if (imm_bytes_mode() == 4)
		cr_assert(ps.immediate_notices > 0 && ps.immediate_writers == 1,
			  "the writer did not use 4-byte keys: %llu immediate notices, %llu writers",
			  (unsigned long long)ps.immediate_notices, (unsigned long long)ps.immediate_writers);
	cr_log_info("%s/%s: %zu notified when killed, %zu of %zu in the end, %llu partial arrivals dropped",
		    prov.c_str(), notify_name(), at_kill, in.notes.size(), n,
		    (unsigned long long)ps.immediate_abandoned);
}

// The writer freezes mid-transfer (SIGSTOP: its tcp connection stays open
// with a write half sent, as a partition leaves it); once its partial
// arrivals expired, the target engine is destroyed. Closing such a
// connection crashes libfabric's ofi_rxm (a cancelled remote write with no
// context), so the engine must keep its endpoints open instead: this test
// passes by not crashing (the harness runs it in its own process).
Test(process, target_destroyed_with_its_writer_frozen_mid_write, .timeout = 120)
{
	notify_mode() = Config::Notify::Immediate;
	imm_bytes_mode() = 0;
	const std::string prov = "tcp;ofi_rxm";
	// 2 MiB transfers: 4 writes each (512 KiB at most), so the freeze leaves
	// some partly arrived.
	const size_t n = 32, slot = 2 << 20;
	Config cb = loopback(prov);
	cb.peer_timeout_ms = 300;
	Buffer dst(n * slot); // outlives the engine
	auto b = std::make_unique<Facade>(cb);
	Inbox in;
	in.attach(*b);
	auto rd = b->register_region(dst.data(), dst.len);
	PeerProcess w(peer_cmd(prov, n * slot));
	w.send("WRITE " + hex(b->address()) + " " + hex(b->descriptor(*rd)) + " " + std::to_string(n) + " 1024");
	std::string l = w.line();
	cr_assert_eq(l, "POSTED " + std::to_string(n), "writer said '%s'", l.c_str());
	cr_assert(eventually([&] { return in.nnotes.load() >= 1; }, 30s), "nothing arrived from the writer");
	w.stop();
	const size_t at_stop = in.nnotes.load();
	std::this_thread::sleep_for(100ms);
	const uint64_t partial = b->path_stats().immediate_pending;
	cr_assert(eventually([&] { return b->path_stats().immediate_pending == 0; }, 10s),
		  "%llu partial arrivals never expired", (unsigned long long)b->path_stats().immediate_pending);
	const auto ps = b->path_stats();
	rd.reset();
	b.reset(); // with the writer still frozen
	cr_log_info("%zu of %zu notified when frozen, %llu partly arrived, %llu partial arrivals dropped", at_stop, n,
		    (unsigned long long)partial, (unsigned long long)ps.immediate_abandoned);
	w.kill9();
}
