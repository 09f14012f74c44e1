// SPDX-License-Identifier: MIT
// Device memory through pinned host mirrors (see staging.hpp).
#include "engine/staging.hpp"

#include <algorithm>
#include <cstring>

#include "engine/notify_message.hpp"
#include "fabric/info.hpp"
#include "hmem/cuda_memory.hpp"

namespace hmemreg::engine {

namespace {

cuda::CopyStream &stream_for(std::map<int, std::unique_ptr<cuda::CopyStream>> &streams, int device)
{
	auto &s = streams[device];
	if (!s) {
		std::string why;
		int rc = cuda::CopyStream::create(device, s, &why);
		if (rc < 0) {
			streams.erase(device);
			throw Error(-rc, "staging: " + why);
		}
	}
	return *s;
}

std::string mib(size_t b)
{
	return b % (1u << 20) ? std::to_string(b >> 10) + " KiB" : std::to_string(b >> 20) + " MiB";
}

// Cuts the chunks into pieces of about `piece` bytes (a chunk may be split).
std::vector<StagedPiece> cut(std::span<const Chunk> chunks, size_t piece)
{
	std::vector<StagedPiece> pieces(1);
	size_t fill = 0;
	for (const Chunk &c : chunks) {
		for (size_t off = 0; off < c.len;) {
			if (fill == piece) {
				pieces.emplace_back();
				fill = 0;
			}
			size_t n = std::min(c.len - off, piece - fill);
			pieces.back().chunks.push_back({c.local, c.local_offset + off, n, c.remote_offset + off});
			fill += n;
			off += n;
		}
	}
	return pieces;
}

// Queues the device -> mirror copies of the piece's staged sources (runs of
// adjacent chunks in one copy) and a fence per device. Staging::mu held.
void copy_to_host(Staging &st, StagedPiece &pc, PathStats &stats)
{
	std::vector<int> devices;
	const RegionImpl *run = nullptr;
	size_t run_off = 0, run_len = 0;
	auto flush = [&] {
		if (!run)
			return;
		StagedMemory *m = run->staging();
		std::string why;
		int rc = stream_for(st.to_host, m->device)
				 .to_host(m->mirror.data() + run_off, static_cast<uint8_t *>(run->addr()) + run_off,
					  run_len, &why);
		if (rc < 0)
			throw Error(-rc, "staging: " + why);
		stats.staged_to_host_bytes += run_len;
		if (std::find(devices.begin(), devices.end(), m->device) == devices.end())
			devices.push_back(m->device);
		run = nullptr;
	};
	for (const Chunk &c : pc.chunks) {
		auto *r = static_cast<const RegionImpl *>(c.local);
		if (!r->staged())
			continue;
		if (run == r && run_off + run_len == c.local_offset) {
			run_len += c.len;
			continue;
		}
		flush();
		run = r;
		run_off = c.local_offset;
		run_len = c.len;
	}
	flush();
	for (int dev : devices) {
		std::string why;
		pc.copied.emplace_back();
		int rc = stream_for(st.to_host, dev).fence(pc.copied.back(), &why);
		if (rc < 0)
			throw Error(-rc, "staging: " + why);
	}
}

// The piece's target ranges, sorted and merged.
std::vector<wire::LandedRange> target_ranges(const StagedPiece &pc)
{
	std::vector<wire::LandedRange> v;
	for (const Chunk &c : pc.chunks)
		v.push_back({c.remote_offset, c.len});
	std::sort(v.begin(), v.end(), [](const auto &a, const auto &b) { return a.offset < b.offset; });
	std::vector<wire::LandedRange> merged;
	for (const auto &r : v) {
		if (!merged.empty() && merged.back().offset + merged.back().len == r.offset)
			merged.back().len += r.len;
		else
			merged.push_back(r);
	}
	return merged;
}

void finish_staged(Staging &st, const std::shared_ptr<StagedWrite> &w);

// One piece or notice of w completed (or was skipped).
void step(Staging &st, const std::shared_ptr<StagedWrite> &w)
{
	bool last;
	{
		std::lock_guard l(st.mu);
		last = --w->unfinished == 0;
	}
	if (last)
		finish_staged(st, w);
}

void notice_done(Staging &st, const std::shared_ptr<StagedWrite> &w, const Transfer &t)
{
	if (t.status() != 0)
		w->outer->fail(-t.status(), t.error());
	step(st, w);
}

// Sends the Landed notices of piece `idx` (its writes are delivered).
void send_notices(Staging &st, const std::shared_ptr<StagedWrite> &w, size_t idx)
{
	auto ranges = target_ranges(w->pieces[idx]);
	const size_t per = (st.core.cfg.max_message - sizeof(wire::LandedHeader)) / sizeof(wire::LandedRange);
	const size_t notices = (ranges.size() + per - 1) / per;
	{
		// Counted before any can complete (on another progress thread).
		std::lock_guard l(st.mu);
		w->notices += static_cast<uint32_t>(notices);
		w->unfinished += notices;
	}
	for (size_t at = 0; at < ranges.size(); at += per) {
		size_t n = std::min(per, ranges.size() - at);
		std::vector<uint8_t> payload(sizeof(wire::LandedHeader) + n * sizeof(wire::LandedRange));
		wire::LandedHeader h{w->seq, w->remote.staged_id};
		std::memcpy(payload.data(), &h, sizeof(h));
		std::memcpy(payload.data() + sizeof(h), &ranges[at], n * sizeof(wire::LandedRange));
		unsigned rail = st.core.next_rail.fetch_add(1) % st.core.rails.size();
		st.core.send(w->outer->peer, wire::MsgType::Landed, payload, rail,
			     [&st, w](const Transfer &t) { notice_done(st, w, t); }, true);
	}
}

void piece_done(Staging &st, const std::shared_ptr<StagedWrite> &w, size_t idx, const Transfer &t)
{
	if (t.status() != 0)
		w->outer->fail(-t.status(), t.error());
	else if (w->remote.staged_id && !w->outer->failed.load() && !st.core.closing.load())
		send_notices(st, w, idx);
	step(st, w);
}

// Every piece and notice completed: tell the target (the outer transfer
// completes when that message is delivered), or report the failure.
void finish_staged(Staging &st, const std::shared_ptr<StagedWrite> &w)
{
	auto &x = w->outer;
	if (x->failed.load() || st.core.closing.load()) {
		st.core.finish(x);
		return;
	}
	wire::MsgHeader h =
		done_header(w->remote.staged_id ? wire::MsgType::StagedDone : wire::MsgType::Done, st.core.id, *x);
	x->message.resize(sizeof(h));
	if (w->remote.staged_id) {
		wire::StagedDone d{w->seq, w->notices, 0};
		h.length = sizeof(d);
		x->message.resize(sizeof(h) + sizeof(d));
		std::memcpy(x->message.data() + sizeof(h), &d, sizeof(d));
	}
	std::memcpy(x->message.data(), &h, sizeof(h));
	x->send_rail = st.core.next_rail.fetch_add(1) % st.core.rails.size();
	st.core.send_message(x);
}

} // namespace

Staging::Staging(Core &c, Peers &p, Delivery &dl, Dispatcher &d) : core(c), peers(p), delivery(dl)
{
	d.on(wire::MsgType::Landed, [this](const Events::Msg &m) { on_landed(m); });
	d.on(wire::MsgType::StagedDone, [this](const Events::Msg &m) { on_staged_done(m, peers.id_of(m.hdr.sender)); });
	describe_device_memory();
}

PathStats Staging::path_stats()
{
	std::lock_guard l(mu);
	return stats;
}

void Staging::describe_device_memory()
{
	const Config &cfg = core.cfg;
	Capabilities &caps = core.caps;
	if (caps.hmem)
		caps.device_memory = "direct: registered with provider " + caps.provider + " (FI_HMEM), " +
				     (caps.dmabuf ? std::string("through FI_MR_DMABUF (each allocation's DMA-BUF export; "
							     "by address where the provider refuses it)")
						  : "by address with FI_HMEM_CUDA and the device (FI_MR_DMABUF needs API 1.20, "
						    "asked " + fabric::api_version_text(caps.api_version) + ")");
	else if (!cuda::available())
		caps.device_memory = "host memory only (" + cuda::unavailable_reason() + ")";
	else if (!cfg.stage_device_memory)
		caps.device_memory = "refused: provider " + caps.provider + " has no FI_HMEM and staging is off";
	else
		caps.device_memory = "staged through pinned host mirrors in " + mib(cfg.staging_piece) +
				     " pieces (" + (caps.hmem_why_not.empty() ? "provider " + caps.provider + " has no FI_HMEM"
									       : caps.hmem_why_not) + ")";
}

RegionRef Staging::register_region(void *addr, size_t len, const cuda::PointerInfo &info)
{
	const Config &cfg = core.cfg;
	const Capabilities &caps = core.caps;
	if (!cfg.stage_device_memory)
		throw Error(HMEMREG_ENOTSUP, "register_region: CUDA device memory, and provider " + caps.provider +
						     " has no FI_HMEM (staging is off: Config::stage_device_memory)");
	auto m = std::make_unique<StagedMemory>();
	m->device = info.device;
	std::string why;
	int rc = cuda::PinnedBuffer::alloc(info.device, len, m->mirror, &why);
	if (rc < 0)
		throw Error(-rc, "register_region: host mirror of " + std::to_string(len) + " bytes: " + why);
	m->id = next_id++;
	const uint64_t sid = m->id;
	std::vector<std::shared_ptr<DomainHolder>> holders;
	for (auto &r : core.rails)
		holders.push_back(r->domain_holder());
	auto reg = register_local(core.caches, m->mirror.data(), len);
	auto region = std::make_shared<RegionImpl>(core.id, addr, len, std::move(holders), std::move(reg), std::move(m));
	std::lock_guard l(mu);
	std::erase_if(regions, [](const auto &kv) { return kv.second.expired(); });
	regions[sid] = region;
	return region;
}

TransferRef Staging::write(const std::shared_ptr<PeerState> &p, std::span<const Chunk> chunks,
			       const wire::RegionDescriptor &d, uint64_t tag, TransferCallback done)
{
	auto w = std::make_shared<StagedWrite>();
	w->remote = d;
	w->seq = next_seq++;
	auto x = std::make_shared<TransferImpl>();
	x->start_write(p, tag, chunks.size(), std::move(done));
	x->via_staging = true;
	for (const Chunk &c : chunks) {
		auto *r = static_cast<const RegionImpl *>(c.local);
		if (std::none_of(x->regions.begin(), x->regions.end(), [&](const RegionRef &h) { return h.get() == r; }))
			x->regions.push_back(std::const_pointer_cast<RegionImpl>(r->shared_from_this()));
		x->total += c.len;
	}
	w->outer = x;
	w->pieces = cut(chunks, core.cfg.staging_piece);
	w->unfinished = w->pieces.size();

	// No copy into a mirror may outlive a call that throws (the caller may
	// release the region at once).
	auto settle = [&] {
		for (auto &pc : w->pieces)
			for (auto &f : pc.copied)
				f.wait();
	};
	{
		std::lock_guard l(mu);
		try {
			for (auto &pc : w->pieces)
				copy_to_host(*this, pc, stats);
		} catch (...) {
			settle();
			throw;
		}
	}
	try {
		core.admit(x);
	} catch (...) {
		settle();
		throw;
	}
	std::lock_guard l(mu);
	stats.staged_writes++;
	writes.push_back(w);
	pending++;
	core.kick(ProgressThreads::kAllRails); // its copies and writes go out on any rail
	return x;
}

// Posts the pieces whose copies are done; notifies finished landings.
size_t Staging::poll()
{
	Staging &st = *this;
	const Config &cfg = core.cfg;
	if (st.pending.load(std::memory_order_relaxed) == 0)
		return 0;
	std::vector<std::pair<std::shared_ptr<StagedWrite>, size_t>> ready, skipped;
	std::vector<Notification> arrived;
	{
		std::unique_lock l(st.mu, std::try_to_lock);
		if (!l)
			return 0; // another thread is at it
		for (auto it = st.writes.begin(); it != st.writes.end();) {
			StagedWrite &w = **it;
			for (; w.next < w.pieces.size(); w.next++) {
				StagedPiece &pc = w.pieces[w.next];
				bool copied = true, ok = true;
				for (auto &f : pc.copied) {
					copied = copied && f.done();
					ok = ok && f.ok();
				}
				if (!copied)
					break;
				if (!ok) {
					st.stats.staged_errors++;
					w.outer->fail(HMEMREG_EFABRIC, "staging: a device-to-host copy failed");
				}
				bool skip = w.outer->failed.load() || core.closing.load();
				(skip ? skipped : ready).push_back({*it, w.next});
			}
			if (w.next == w.pieces.size()) {
				it = st.writes.erase(it);
				st.pending--;
			} else {
				++it;
			}
		}
		const int64_t now = PeerState::now_ns();
		const int64_t limit = static_cast<int64_t>(cfg.peer_timeout_ms) * 1'000'000;
		for (auto it = st.landings.begin(); it != st.landings.end();) {
			Landing &g = it->second;
			while (!g.copies.empty() && g.copies.front().done()) {
				if (!g.copies.front().ok())
					st.stats.staged_errors++;
				g.copies.pop_front();
			}
			if (g.expected < 0 || g.received < g.expected || !g.copies.empty()) {
				if (limit && g.copies.empty() && now - g.last > limit) {
					st.stats.staged_errors++; // its writer stopped midway
					it = st.landings.erase(it);
					st.pending--;
					continue;
				}
				++it;
				continue;
			}
			arrived.push_back({g.from, g.sender, g.tag, g.bytes, g.chunks});
			st.stats.staged_landings++;
			it = st.landings.erase(it);
			st.pending--;
		}
	}
	for (auto &[w, idx] : ready) {
		std::shared_ptr<StagedWrite> sw = w;
		size_t i = idx;
		try {
			auto piece = core.plan(sw->outer->peer, sw->pieces[i].chunks, sw->remote, 0,
					       [this, sw, i](const Transfer &t) { piece_done(*this, sw, i, t); }, true);
			core.submit(piece, true);
		} catch (const Error &e) {
			sw->outer->fail(e.code(), e.what());
			step(*this, sw);
		}
	}
	for (auto &[w, idx] : skipped)
		step(*this, w);
	delivery.notify(arrived);
	return ready.size() + skipped.size() + arrived.size();
}

void Staging::on_landed(const Events::Msg &m)
{
	wire::LandedHeader h;
	const size_t n = m.data.size();
	if (n < sizeof(h) || (n - sizeof(h)) % sizeof(wire::LandedRange)) {
		std::lock_guard l(mu);
		stats.staged_errors++;
		return;
	}
	std::memcpy(&h, m.data.data(), sizeof(h));
	Staging &st = *this;
	std::lock_guard l(st.mu);
	auto [it, fresh] = st.landings.try_emplace({m.hdr.sender, h.seq});
	Landing &g = it->second;
	if (fresh)
		st.pending++;
	g.sender = m.hdr.sender;
	g.received++;
	g.last = PeerState::now_ns();
	auto rit = st.regions.find(h.staged_id);
	std::shared_ptr<RegionImpl> r = rit == st.regions.end() ? nullptr : rit->second.lock();
	if (!r) {
		st.stats.staged_errors++; // released while a write to it was under way
		return;
	}
	StagedMemory *sm = r->staging();
	try {
		cuda::CopyStream &s = stream_for(st.to_device, sm->device);
		for (size_t at = sizeof(h); at < n; at += sizeof(wire::LandedRange)) {
			wire::LandedRange rg;
			std::memcpy(&rg, m.data.data() + at, sizeof(rg));
			if (rg.offset > r->length() || rg.len > r->length() - rg.offset) {
				st.stats.staged_errors++;
				continue;
			}
			std::string why;
			if (s.to_device(static_cast<uint8_t *>(r->addr()) + rg.offset, sm->mirror.data() + rg.offset,
					rg.len, &why) < 0) {
				st.stats.staged_errors++;
				continue;
			}
			st.stats.staged_to_device_bytes += rg.len;
		}
		g.copies.emplace_back();
		if (s.fence(g.copies.back()) < 0) {
			g.copies.pop_back();
			st.stats.staged_errors++;
		}
	} catch (const Error &) {
		st.stats.staged_errors++; // no stream for the device
	}
	if (std::find(g.hold.begin(), g.hold.end(), r) == g.hold.end())
		g.hold.push_back(r);
}

void Staging::on_staged_done(const Events::Msg &m, PeerId from)
{
	wire::StagedDone d;
	Staging &st = *this;
	std::lock_guard l(st.mu);
	if (m.data.size() != sizeof(d)) {
		st.stats.staged_errors++;
		return;
	}
	std::memcpy(&d, m.data.data(), sizeof(d));
	auto [it, fresh] = st.landings.try_emplace({m.hdr.sender, d.seq});
	Landing &g = it->second;
	if (fresh)
		st.pending++;
	g.from = from;
	g.sender = m.hdr.sender;
	g.last = PeerState::now_ns();
	g.expected = d.notices;
	g.tag = m.hdr.tag;
	g.bytes = m.hdr.bytes;
	g.chunks = m.hdr.chunks;
}

void Staging::drain()
{
	std::lock_guard l(mu);
	to_host.clear(); // each synchronizes its stream first
	to_device.clear();
}

} // namespace hmemreg::engine
