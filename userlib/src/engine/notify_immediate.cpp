// SPDX-License-Identifier: MIT
// Immediate notification (see notify_immediate.hpp).
#include "engine/notify_immediate.hpp"

#include <algorithm>
#include <cstring>

namespace hmemreg::engine {

namespace {

// A writer with 4-byte keys and no index yet asks its target again after this.
constexpr int64_t kImmJoinRetryNs = 1'000'000'000;
// A target added again continues its 4-byte key sequence this far ahead of
// where the old incarnation stopped (see seq_kept_)...
constexpr uint32_t kImm4ReaddGap = 1u << 16;
// ...when removed within this long; older entries are pruned once there are
// many (a target's partial arrivals live at most peer_timeout, 60 s unset).
constexpr int64_t kImm4SeqKeptNs = 10LL * 60 * 1'000'000'000;
constexpr size_t kImm4SeqKeptMax = 4096;

} // namespace

ImmediateNotifier::ImmediateNotifier(Core &core, Peers &peers, Delivery &delivery, Dispatcher &d)
	: core_(core), peers_(peers), delivery_(delivery), next_seq_(static_cast<uint32_t>(random_id() >> 16))
{
	d.on_remote_data([this](std::span<const uint64_t> keys) { on_data(keys); });
	d.on(wire::MsgType::Announce, [this](const Events::Msg &m) { on_announce(m); });
	d.on(wire::MsgType::ImmJoin, [this](const Events::Msg &m) { on_join(m.hdr.sender); });
	d.on(wire::MsgType::ImmIndex, [this](const Events::Msg &m) { on_index(m); });
}

bool ImmediateNotifier::prepare(TransferImpl &x)
{
	const Capabilities &caps = core_.caps;
	// 4-byte keys: only once the peer assigned us an index.
	const uint32_t index4 = x.peer->imm_index.load(std::memory_order_acquire);
	if (!caps.notify_immediate || (caps.imm_key_bytes != wire::kImmDataSize && index4 == 0))
		return false;
	writes_++;
	// The Announce goes out first, beside the writes; it and every write
	// carry the key.
	x.immediate = true;
	x.imm_key = caps.imm_key_bytes == wire::kImmDataSize
			    ? wire::imm_key(core_.id, next_seq_.fetch_add(1, std::memory_order_relaxed))
			    : wire::imm4_key(index4, x.peer->imm_seq.fetch_add(1, std::memory_order_relaxed));
	const size_t nsegs = x.segs.size();
	wire::MsgHeader h = wire::header(wire::MsgType::Announce, core_.id);
	h.tag = x.tag;
	h.bytes = x.total;
	h.chunks = x.chunks;
	// Which rails the writes take, so that the target polls those (0 where
	// the mask cannot say: any rail).
	uint32_t rails = 0;
	for (size_t r = 0; r < x.plan.rail_writes.size(); r++)
		if (!x.plan.rail_writes[r].empty())
			rails |= r < 32 ? 1u << r : 0;
	if (x.plan.rail_writes.size() > 32)
		rails = 0;
	wire::Announce an{x.imm_key, static_cast<uint32_t>(nsegs), rails};
	h.length = sizeof(an);
	x.message.resize(sizeof(h) + sizeof(an));
	std::memcpy(x.message.data(), &h, sizeof(h));
	std::memcpy(x.message.data() + sizeof(h), &an, sizeof(an));
	x.unresolved++;
	x.send_rail = x.segs.empty() ? 0 : static_cast<unsigned>(
		std::find_if(x.plan.rail_writes.begin(), x.plan.rail_writes.end(), [](const auto &v) { return !v.empty(); }) -
		x.plan.rail_writes.begin());
	return true;
}

void ImmediateNotifier::submitted(const std::shared_ptr<PeerState> &p)
{
	if (core_.caps.imm_key_bytes != wire::kImm4DataSize || p->imm_index.load(std::memory_order_acquire) != 0 ||
	    p->imm_refused.load())
		return;
	// Still no index: our ImmJoin may have been dropped (the target had
	// not added us yet and forgot us); ask again now and then.
	int64_t asked = p->imm_asked.load(std::memory_order_relaxed);
	const int64_t now = PeerState::now_ns();
	if (now - asked > kImmJoinRetryNs && p->imm_asked.compare_exchange_strong(asked, now))
		send_join(p);
}

bool ImmediateNotifier::immediate_to(const PeerState &p) const
{
	return core_.caps.imm_key_bytes == wire::kImmDataSize ||
	       (core_.caps.imm_key_bytes == wire::kImm4DataSize && p.imm_index.load() != 0);
}

void ImmediateNotifier::setup_peer(PeerState &p)
{
	std::lock_guard l(kept_mu_);
	auto kept = seq_kept_.find(p.engine_id);
	if (kept != seq_kept_.end()) {
		// Ahead of every key the old incarnation may still have taken
		// while it was being removed; well inside the target's window.
		p.imm_seq = kept->second.next + kImm4ReaddGap;
		seq_kept_.erase(kept);
	} else {
		p.imm_seq = static_cast<uint32_t>(random_id());
	}
}

// 4-byte keys: ask the peer for our writer index (its answer comes once it
// has added us too); and answer it if it asked us before.
void ImmediateNotifier::peer_added(const std::shared_ptr<PeerState> &p)
{
	send_index(p);
	if (core_.caps.imm_key_bytes == wire::kImm4DataSize)
		send_join(p);
}

void ImmediateNotifier::peer_removed(const PeerState &p)
{
	if (core_.caps.imm_key_bytes != wire::kImm4DataSize)
		return;
	const int64_t now = PeerState::now_ns();
	std::lock_guard l(kept_mu_);
	if (seq_kept_.size() >= kImm4SeqKeptMax)
		std::erase_if(seq_kept_, [&](const auto &kv) { return now - kv.second.removed_ns > kImm4SeqKeptNs; });
	seq_kept_[p.engine_id] = {p.imm_seq.load(), now};
}

void ImmediateNotifier::stats(PathStats &s)
{
	s.immediate_notices = notices_.load(std::memory_order_relaxed);
	s.immediate_abandoned = abandoned_.load(std::memory_order_relaxed);
	s.immediate_writes = writes_.load(std::memory_order_relaxed);
	std::lock_guard l(mu);
	s.immediate_pending = arrivals.size();
	s.immediate_writers = imm4_index_of.size();
}

// Writes carrying remote CQ data landed (one key per write).
void ImmediateNotifier::on_data(std::span<const uint64_t> keys)
{
	std::vector<Notification> ready;
	const int64_t now = PeerState::now_ns();
	{
		std::lock_guard l(mu);
		Expecting e{*this};
		for (uint64_t k : keys) {
			Arrival &a = arrivals[k];
			a.seen++;
			a.touched = now;
			if (a.announced && a.seen == a.expected) {
				ready.push_back(a.note);
				arrivals.erase(k);
			}
		}
	}
	notices_ += ready.size();
	delivery_.notify(ready);
}

// The Announce of an immediate-notify write: how many writes carry its key.
void ImmediateNotifier::on_announce(const Events::Msg &m)
{
	wire::Announce an;
	if (m.data.size() != sizeof(an)) {
		abandoned_++;
		return;
	}
	std::memcpy(&an, m.data.data(), sizeof(an));
	const bool key4 = wire::imm_is4(an.key);
	if ((!key4 && !wire::imm_key_from(an.key, m.hdr.sender)) || an.writes == 0) {
		abandoned_++; // not this sender's key: never count it
		return;
	}
	Notification note{peers_.id_of(m.hdr.sender), m.hdr.sender, m.hdr.tag, m.hdr.bytes, m.hdr.chunks};
	bool ready = false;
	{
		std::lock_guard l(mu);
		Expecting e{*this};
		if (key4) {
			// Only the writer we gave the key's index may announce it.
			const uint32_t idx = wire::imm4_index(an.key);
			if (idx == 0 || idx >= imm4_writer.size() || imm4_writer[idx] != m.hdr.sender) {
				abandoned_++;
				return;
			}
			imm4_advance(idx, static_cast<uint32_t>(an.key) & wire::kImm4SeqMask);
		}
		Arrival &a = arrivals[an.key];
		if (a.announced || a.seen > an.writes) {
			// A second Announce for a live key, or more writes than announced
			// (a stale key): the count cannot be trusted, drop it.
			arrivals.erase(an.key);
			abandoned_++;
			return;
		}
		a.announced = true;
		a.expected = an.writes;
		a.rails = an.rails ? an.rails : kAnyRail;
		a.note = note;
		a.touched = PeerState::now_ns();
		if (a.seen == a.expected) {
			arrivals.erase(an.key);
			ready = true;
		}
	}
	if (!ready)
		return;
	notices_++;
	delivery_.notify({&note, 1});
}

// 4-byte keys reuse a writer's sequence after 2^20 transfers. A partial
// arrival left behind (its writer's connection broke, writes or Announce
// lost) must be gone before its key returns, or its count would mix with the
// new transfer's: each time the writer's announced sequence enters a new
// quarter of the sequence space, its arrivals a quarter to three quarters
// behind are dropped. Live transfers are assumed within a quarter (2^18
// transfers) of the latest announced. Called with mu held.
void ImmediateNotifier::imm4_advance(uint32_t idx, uint32_t seq)
{
	constexpr uint32_t quarter = (wire::kImm4SeqMask + 1) / 4;
	uint32_t &last = imm4_latest[idx];
	if (last != kNoSeq && ((seq - last) & wire::kImm4SeqMask) >= 2 * quarter)
		return; // behind the latest (Announces overtaking each other)
	const bool crossed = last == kNoSeq || seq / quarter != last / quarter;
	last = seq;
	if (!crossed)
		return;
	abandoned_ += std::erase_if(arrivals, [&](const auto &kv) {
		if (!wire::imm_is4(kv.first) || wire::imm4_index(kv.first) != idx)
			return false;
		const uint32_t behind = (seq - static_cast<uint32_t>(kv.first)) & wire::kImm4SeqMask;
		return behind >= quarter && behind <= 3 * quarter;
	});
}

// A writer with 4-byte keys asks for its index. Answered once the writer is
// our peer (we need its address): now, or by add_peer.
void ImmediateNotifier::on_join(uint64_t writer)
{
	{
		std::lock_guard l(mu);
		// Writers never added here pile up: forget them all (a writer asks
		// again while it has no index, see send_join).
		if (imm4_waiting.size() >= wire::kImm4Writers)
			imm4_waiting.clear();
		imm4_waiting.insert(writer);
	}
	if (auto p = peers_.of_engine(writer))
		send_index(p);
}

// Answers the peer's ImmJoin if it asked: its index (assigned now if new), or 0.
void ImmediateNotifier::send_index(const std::shared_ptr<PeerState> &p)
{
	wire::ImmIndex ans{p->engine_id, 0, 0};
	{
		std::lock_guard l(mu);
		if (!imm4_waiting.erase(p->engine_id))
			return; // did not ask, or answered already
		auto it = imm4_index_of.find(p->engine_id);
		if (it != imm4_index_of.end()) {
			ans.index = it->second;
		} else if (imm4_writer.size() < wire::kImm4Writers) {
			// Indices are never reused: a key's index names one writer for
			// good, so a late write or Announce cannot meet another writer's.
			if (imm4_writer.empty()) {
				imm4_writer.push_back(0); // index 0 is never assigned
				imm4_latest.push_back(kNoSeq);
			}
			ans.index = static_cast<uint32_t>(imm4_writer.size());
			imm4_writer.push_back(p->engine_id);
			imm4_latest.push_back(kNoSeq);
			imm4_index_of[p->engine_id] = ans.index;
		} // else: full, refused (index 0)
	}
	// From progress context: never refused for max_transfers.
	core_.send(p, wire::MsgType::ImmIndex, {reinterpret_cast<const uint8_t *>(&ans), sizeof(ans)}, 0, {}, true,
		   true);
}

// Asks the peer for our writer index (4-byte keys).
void ImmediateNotifier::send_join(const std::shared_ptr<PeerState> &p)
{
	p->imm_asked.store(PeerState::now_ns(), std::memory_order_relaxed);
	core_.send(p, wire::MsgType::ImmJoin, {}, 0, {}, true, true);
}

// A target's answer to our ImmJoin.
void ImmediateNotifier::on_index(const Events::Msg &m)
{
	wire::ImmIndex ans;
	if (m.data.size() != sizeof(ans))
		return;
	std::memcpy(&ans, m.data.data(), sizeof(ans));
	if (ans.writer != core_.id || ans.index >= wire::kImm4Writers ||
	    core_.caps.imm_key_bytes != wire::kImm4DataSize)
		return; // not for us, or we never asked
	auto p = peers_.of_engine(m.hdr.sender);
	if (!p)
		return;
	if (ans.index == 0)
		p->imm_refused.store(true, std::memory_order_relaxed);
	else
		p->imm_index.store(ans.index, std::memory_order_release);
}

// Partial arrivals idle for peer_timeout (60 s without one): their writer
// died or gave up (a write lost with a broken connection never arrives).
// Dropped, never notified; also keeps a stale count from meeting a reused key.
void ImmediateNotifier::expire()
{
	int64_t now = PeerState::now_ns();
	int64_t last = last_expiry_.load(std::memory_order_relaxed);
	if (now - last < 50'000'000 || !last_expiry_.compare_exchange_strong(last, now))
		return;
	const int64_t limit = static_cast<int64_t>(core_.cfg.peer_timeout_ms ? core_.cfg.peer_timeout_ms : 60'000) * 1'000'000;
	std::lock_guard l(mu);
	const size_t n = std::erase_if(arrivals, [&](const auto &kv) { return now - kv.second.touched > limit; });
	abandoned_ += n;
	expired_ += n;
	// Every rail is polled only while some arrival still moves: one idle
	// for kLiveNs (its writer broke, most likely) waits out its expiry
	// without that (quiet rails are still polled now and then); its next
	// write or Announce makes it live again (Expecting).
	set_expecting([&](const Arrival &a) { return now - a.touched <= kLiveNs; });
}

// Under mu: the rails where the arrivals that count (live) still have
// writes to come. Past kMaxMaskArrivals, every rail (no walk of them all).
template <class Counts> void ImmediateNotifier::set_expecting(Counts counts)
{
	uint32_t rails = 0;
	if (arrivals.size() > kMaxMaskArrivals) {
		rails = kAnyRail;
	} else {
		for (const auto &kv : arrivals)
			if (counts(kv.second))
				rails |= kv.second.rails;
	}
	expecting_.store(rails, std::memory_order_relaxed);
}

void ImmediateNotifier::Expecting::update()
{
	n.set_expecting([](const Arrival &) { return true; });
}

bool ImmediateNotifier::writer_broke()
{
	if (expired_.load() > 0)
		return true;
	std::lock_guard l(mu);
	return !arrivals.empty();
}

} // namespace hmemreg::engine
