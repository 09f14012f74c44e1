// SPDX-License-Identifier: MIT
// The engine's facade: checks what the caller passed and routes it to the
// rooms (engine_impl.hpp); the progress turn that runs them all.
#include "engine/facade.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <thread>

#include "engine/engine_impl.hpp"
#include "engine/thread_scratch.hpp"
#include "fabric/abi.hpp"
#include "hmem/cuda_memory.hpp"
#include "hmemreg/cache.h"
#include "export/export_table.hpp"

namespace hmemreg::engine {

namespace {

// The engine whose progress turn this thread is in (callbacks run there):
// drain() from such a callback would wait for itself.
thread_local const Facade::Impl *in_turn = nullptr;

// A turn's event lists, per thread and nesting depth (a callback may drive
// progress itself): they keep their capacity from turn to turn, where a
// fresh Events cost a heap allocation for each kind of event it saw.
struct TurnEvents {
	std::vector<std::unique_ptr<Events>> by_depth;
	size_t depth = 0;
};

std::string addr_text(const void *addr)
{
	char b[32];
	std::snprintf(b, sizeof(b), "%p", addr);
	return b;
}

} // namespace

Facade::Impl::Impl(const Config &c)
	: core(c, random_id()), peers(core.cfg.peer_timeout_ms), message(core.id, peers, delivery, dispatcher),
	  immediate(core, peers, delivery, dispatcher), staging(core, peers, delivery, dispatcher)
{
	dispatcher.on(wire::MsgType::User, [this](const Events::Msg &m) {
		delivery.message(Message{peers.id_of(m.hdr.sender), m.hdr.sender, m.data});
	});
}

size_t Facade::Impl::turn(std::span<const unsigned> rail_ids)
{
	TurnEvents *te = thread_scratch<TurnEvents>();
	Events own; // only once this thread's scratch is gone (at exit)
	if (te && te->by_depth.size() <= te->depth)
		te->by_depth.push_back(std::make_unique<Events>()); // may throw: nothing to undo yet
	Events &ev = te ? *te->by_depth[te->depth++] : own;
	// Set only here, where restore (which nothing can stop being made)
	// takes it back however the turn ends.
	const Impl *outer = in_turn;
	in_turn = this;
	struct Restore {
		const Impl *outer;
		Events &ev;
		TurnEvents *te;
		~Restore()
		{
			ev.clear(); // no transfer stays referenced from here
			if (te)
				te->depth--;
			in_turn = outer;
		}
	} restore{outer, ev, te};
	size_t n = 0;
	for (unsigned r : rail_ids) {
		ev.clear();
		n += core.progress_rail(r, ev);
		if (ev.empty())
			continue;
		{
			// Messages are read in place: their buffers go back to the
			// rail once dispatched (a handler that throws included).
			struct Release {
				Rail &rail;
				Events &ev;
				~Release() { rail.release(ev); }
			} release{*core.rails[r], ev};
			dispatcher.dispatch(ev);
		}
		for (auto &x : ev.finished)
			core.finish(x);
	}
	n += staging.poll();
	if (peers.retiring())
		peers.retire(core.rails);
	// The timers (each checks at most every 50 ms) read the clock only one
	// turn in kTimerTurns: a caller spinning on an idle rail turns every
	// microsecond or so, and clock reads were a tenth of its time.
	constexpr uint32_t kTimerTurns = 16;
	if (timer_turns.fetch_add(1, std::memory_order_relaxed) % kTimerTurns == 0) {
		if (core.cfg.peer_timeout_ms)
			core.fail_dead(peers.watchdog());
		immediate.expire();
	}
	return n;
}

size_t Facade::Impl::caller_turn()
{
	// Writes on their way here (announced, not all in place): the core's
	// choice and every rail they take, since a quiet rail, polled only now
	// and then, may be the one whose data must be read for them to land
	// (tcp); all rails where their Announce did not say (or is still to come).
	const uint32_t expected = immediate.expecting_rails();
	if (expected == ImmediateNotifier::kAnyRail)
		return turn(core.all_rails);
	unsigned ids[Core::kMaxCallerRails];
	return turn(core.caller_rails(ids, expected));
}

void Facade::Impl::settle()
{
	const auto start = std::chrono::steady_clock::now();
	int quiet = 0;
	while (quiet < 5 && std::chrono::steady_clock::now() - start < std::chrono::milliseconds(200)) {
		quiet = turn(core.all_rails) ? 0 : quiet + 1;
		std::this_thread::sleep_for(std::chrono::microseconds(500));
	}
}

TransferRef Facade::Impl::write_direct(const std::shared_ptr<PeerState> &p, std::span<const Chunk> chunks,
				       const wire::RegionDescriptor &d, uint64_t tag, TransferCallback done)
{
	direct_writes++;
	auto x = core.plan(p, chunks, d, tag, std::move(done), false);
	if (!immediate.prepare(*x))
		message.prepare(*x);
	core.submit(x, false);
	// x is on its way and its callback will come: nothing may throw now.
	// (A failed retry of the index handshake is tried again later.)
	try {
		immediate.submitted(p);
	} catch (const std::exception &) {
	}
	return x;
}

// ---- public interface

Facade::Facade(const Config &config) : impl_(std::make_unique<Impl>(config))
{
	Impl *im = impl_.get();
	Core &core = im->core;
	if (config.progress_threads == 0) {
		core.caps.progress = "caller-driven (progress()/wait())";
		return;
	}
	std::vector<const fi_info *> infos;
	for (auto &r : core.rails)
		infos.push_back(r->info());
	core.threads = std::make_unique<ProgressThreads>(
		config.progress_threads, infos, core.topo, config.idle_spin, config.idle_sleep_us, config.caller_backoff_us,
		[im](std::span<const unsigned> ids) { return im->turn(ids); },
		[im](std::span<const unsigned> ids) {
			// Writes on their way on rails other than 0: those keep their
			// poller (bulk data is read on several cores).
			const uint32_t expected = im->immediate.expecting_rails();
			for (unsigned r : ids)
				if (r != 0 && (r >= 32 ? expected != 0 : (expected >> r) & 1))
					return false;
			return im->core.caller_covers(ids);
		});
	core.caps.progress = core.threads->describe();
}

Facade::~Facade()
{
	Impl *im = impl_.get();
	Core &core = im->core;
	core.threads.reset();
	core.closing = true;
	im->staging.drain(); // no copy into or out of a mirror outlives this
	// ofi_rxm (libfabric 1.17 to 2.6 at least) crashes while closing an
	// endpoint if a tcp connection under it still holds a remote write half
	// received, as a writer killed mid-write or cut off by a partition
	// leaves: tcp reports it cancelled with no operation context, and
	// rxm_handle_comp_error dereferences that NULL (flags FI_REMOTE_WRITE,
	// err FI_ECANCELED). A connection whose end tcp has read drops such a
	// write quietly, so first a few progress turns let it read the ends
	// that arrived. A writer that broke with nothing arriving (partition)
	// leaves the write half received forever: then the endpoints are kept
	// open, unprogressed, until the process ends (Rail::abandon).
	im->settle();
	const bool keep_open = core.caps.provider.find("ofi_rxm") != std::string::npos && im->immediate.writer_broke();
	std::vector<std::shared_ptr<TransferImpl>> left;
	{
		std::lock_guard l(core.active_mu);
		core.active.for_each([&](TransferImpl *x) { left.push_back(x->self); });
	}
	if (keep_open)
		for (auto &r : core.rails)
			r->abandon();
	core.rails.clear(); // closes endpoints: nothing references a transfer any more
	for (auto &x : left) {
		x->fail(HMEMREG_EBUSY, "engine destroyed before the transfer completed");
		core.finish(x);
	}
}

const Capabilities &Facade::caps() const { return impl_->core.caps; }
uint64_t Facade::id() const { return impl_->core.id; }

Bytes Facade::address() const
{
	wire::PeerAddress a;
	a.engine_id = impl_->core.id;
	a.provider = impl_->core.caps.provider;
	for (auto &r : impl_->core.rails)
		a.rails.push_back(r->name());
	return wire::encode(a);
}

uint64_t peer_engine_id(std::span<const uint8_t> address)
{
	return wire::decode_address(address).engine_id;
}

PeerId Facade::add_peer(std::span<const uint8_t> address, bool warmup, std::chrono::milliseconds timeout)
{
	Impl *im = impl_.get();
	Core &core = im->core;
	wire::PeerAddress a = wire::decode_address(address);
	if (a.provider != core.caps.provider)
		throw Error(HMEMREG_EINVAL, "peer address is for provider '" + a.provider + "', this engine uses '" +
						    core.caps.provider + "'");
	if (a.engine_id == core.id)
		throw Error(HMEMREG_EINVAL, "peer address is this engine's own");
	auto p = im->peers.add(a, core.rails, [im](PeerState &s) { im->immediate.setup_peer(s); });
	im->immediate.peer_added(p);
	if (!warmup)
		return p->id;
	// One hello per rail: rxm and friends connect on first use.
	std::vector<TransferRef> hellos;
	for (unsigned r = 0; r < core.rails.size(); r++)
		hellos.push_back(core.send(p, wire::MsgType::Hello, {}, r, {}));
	for (auto &h : hellos) {
		if (!wait(*h, timeout) || h->status() != 0) {
			std::string why = h->status() == -HMEMREG_EAGAIN ? "timed out" : h->error();
			remove_peer(p->id);
			throw Error(h->status() == -HMEMREG_EAGAIN ? HMEMREG_EAGAIN : -h->status(),
				    "warm-up of peer " + engine_hex(a.engine_id) + " failed: " + why);
		}
	}
	return p->id;
}

void Facade::remove_peer(PeerId peer)
{
	Impl *im = impl_.get();
	auto p = im->peers.remove(peer);
	im->immediate.peer_removed(*p);
	im->core.doom_epoch++;
}

bool Facade::immediate_to(PeerId peer) const
{
	return impl_->immediate.immediate_to(*impl_->peers.find(peer));
}

bool Facade::drain(PeerId peer, std::chrono::milliseconds timeout)
{
	Impl *im = impl_.get();
	if (in_turn == im)
		throw Error(HMEMREG_EBUSY, "drain: called from a callback of this engine, which would wait for itself");
	std::shared_ptr<PeerState> p = im->peers.find(peer);
	const auto deadline = std::chrono::steady_clock::now() + timeout;
	// A transfer's callback returns before its peer's count drops (report()).
	while (p->active.load() > 0) {
		if (std::chrono::steady_clock::now() >= deadline)
			return false;
		if (im->core.threads)
			std::this_thread::sleep_for(std::chrono::microseconds(100));
		else if (progress() == 0)
			std::this_thread::yield();
	}
	return true;
}

size_t Facade::peer_count() const { return impl_->peers.count(); }

RegionRef Facade::register_region(void *addr, size_t len)
{
	Impl *im = impl_.get();
	Core &core = im->core;
	if (!addr || len == 0)
		throw Error(HMEMREG_EINVAL, "register_region: null address or zero length");
	std::vector<std::shared_ptr<DomainHolder>> holders;
	for (auto &r : core.rails)
		holders.push_back(r->domain_holder());
	cuda::PointerInfo info;
	std::string why;
	int rc = cuda::classify(addr, len, info, &why);
	if (rc == -HMEMREG_EINVAL)
		throw Error(HMEMREG_EINVAL, "register_region: " + why);
	if (rc == 0 && info.kind == cuda::MemKind::device && !core.caps.hmem)
		return im->staging.register_region(addr, len, info);
	// Device memory the provider reaches (FI_HMEM): registered directly, as
	// CUDA memory of its device (FI_MR_DMABUF or by address: the registrar's
	// choice), cached under the buffer-ID check of every hit.
	MemoryKind kind;
	if (rc == 0 && info.kind == cuda::MemKind::device) {
		kind = {HMEMREG_IFACE_CUDA, static_cast<uint64_t>(info.device)};
		// The provider's own copies (cudaMemcpy) are waited for before a
		// notification; a provider that promised no CUDA call made none.
		if (core.cfg.provider_cuda_calls)
			im->delivery.direct_device(info.device);
	}
	auto reg = register_local(core.caches, addr, len, kind);
	return std::make_shared<RegionImpl>(core.id, addr, len, std::move(holders), std::move(reg));
}

RegionRef Facade::register_export(const ::hmemreg_export_handle *exp, size_t offset, size_t len)
{
	Core &core = impl_->core;
	mr::Request rq;
	std::string why;
	if (int rc = mr::export_request(exp, offset, len, rq, &why))
		throw Error(-rc, "register_export: " + why);
	std::vector<std::shared_ptr<DomainHolder>> holders;
	for (auto &r : core.rails)
		holders.push_back(r->domain_holder());
	MemoryKind kind{HMEMREG_IFACE_KMOD_EXPORT, rq.device, rq.dmabuf_fd, rq.dmabuf_offset};
	void *addr = const_cast<void *>(rq.addr);
	auto reg = register_local(core.caches, addr, len, kind);
	return std::make_shared<RegionImpl>(core.id, addr, len, std::move(holders), std::move(reg));
}

RegionRef Facade::register_dmabuf(void *addr, size_t len, int fd, uint64_t offset)
{
	Impl *im = impl_.get();
	Core &core = im->core;
	if (!addr || len == 0 || fd < 0)
		throw Error(HMEMREG_EINVAL, "register_dmabuf: null address, zero length or no fd");
	cuda::PointerInfo info;
	std::string why;
	int rc = cuda::classify(addr, len, info, &why);
	if (rc == -HMEMREG_EINVAL)
		throw Error(HMEMREG_EINVAL, "register_dmabuf: " + why);
	if (rc == 0 && info.kind == cuda::MemKind::device) {
		if (!core.caps.hmem) // staged: the NIC never sees the device memory, nor its fd
			return register_region(addr, len);
		std::vector<std::shared_ptr<DomainHolder>> holders;
		for (auto &r : core.rails)
			holders.push_back(r->domain_holder());
		// The caller's DMA-BUF as given (its mapping type included) on a
		// cache miss; a hit is the registration of the same memory.
		MemoryKind kind{HMEMREG_IFACE_CUDA, static_cast<uint64_t>(info.device), fd, offset};
		if (core.cfg.provider_cuda_calls)
			im->delivery.direct_device(info.device);
		auto reg = register_local(core.caches, addr, len, kind);
		return std::make_shared<RegionImpl>(core.id, addr, len, std::move(holders), std::move(reg));
	}
	// Not CUDA memory: one of this process's hmemreg.ko exports (emulated
	// device memory), handed over by its fd.
	mr::Request rq;
	if (int erc = mr::export_request_of_fd(fd, offset, len, rq, &why))
		throw Error(-erc, "register_dmabuf: " + why + " (and " + addr_text(addr) + " is not CUDA device memory)");
	if (rq.addr != addr)
		throw Error(HMEMREG_EINVAL, "register_dmabuf: offset " + std::to_string(offset) + " of fd " +
						    std::to_string(fd) + " is not " + addr_text(addr));
	std::vector<std::shared_ptr<DomainHolder>> holders;
	for (auto &r : core.rails)
		holders.push_back(r->domain_holder());
	MemoryKind kind{HMEMREG_IFACE_KMOD_EXPORT, rq.device, rq.dmabuf_fd, rq.dmabuf_offset};
	auto reg = register_local(core.caches, addr, len, kind);
	return std::make_shared<RegionImpl>(core.id, addr, len, std::move(holders), std::move(reg));
}

TransferRef Facade::read_back(const Region &region, size_t offset, size_t len)
{
	Core &core = impl_->core;
	auto *r = dynamic_cast<const RegionImpl *>(&region);
	if (!r || r->engine_id != core.id)
		throw Error(HMEMREG_EINVAL, "read_back: region was registered with another engine");
	if (len == 0 || len > Rail::kReadBackMax || offset > r->length() || len > r->length() - offset)
		throw Error(HMEMREG_EINVAL, "read_back: [" + std::to_string(offset) + ", +" + std::to_string(len) +
						    ") is not 1 to " + std::to_string(Rail::kReadBackMax) +
						    " bytes inside the region of " + std::to_string(r->length()));
	RegionRef keep = std::const_pointer_cast<RegionImpl>(r->shared_from_this());
	if (!core.caps.read_back && !r->staged())
		throw Error(HMEMREG_ENOTSUP, "read_back: provider " + core.caps.provider + " has no FI_READ");
	if (r->staged()) { // the NIC wrote the host mirror; the engine's copies landed it
		auto rb = std::make_shared<ReadBack>(std::move(keep), len, 1);
		rb->rail_done(0, {});
		return rb;
	}
	auto rb = std::make_shared<ReadBack>(keep, len, static_cast<uint32_t>(core.rails.size()));
	const uintptr_t a = reinterpret_cast<uintptr_t>(r->io_addr()) + offset;
	for (size_t i = 0; i < core.rails.size(); i++)
		core.rails[i]->enqueue_read(rb, core.virt_addr ? a : a - r->reg->start(i), r->reg->key(i), len);
	return rb;
}

TransferRef Facade::nic_copy(const Region &dst, size_t dst_offset, const Region &src, size_t src_offset, size_t len)
{
	Core &core = impl_->core;
	auto *d = dynamic_cast<const RegionImpl *>(&dst);
	auto *s = dynamic_cast<const RegionImpl *>(&src);
	if (!d || !s || d->engine_id != core.id || s->engine_id != core.id)
		throw Error(HMEMREG_EINVAL, "nic_copy: a region was registered with another engine");
	auto inside = [len](const RegionImpl &r, size_t off) { return off <= r.length() && len <= r.length() - off; };
	if (len == 0 || !inside(*d, dst_offset) || !inside(*s, src_offset))
		throw Error(HMEMREG_EINVAL, "nic_copy: " + std::to_string(len) + " bytes from offset " +
						    std::to_string(src_offset) + " to offset " + std::to_string(dst_offset) +
						    " do not fit the regions (" + std::to_string(s->length()) + " and " +
						    std::to_string(d->length()) + " bytes), or are none");
	if (d->staged() || s->staged())
		throw Error(HMEMREG_EINVAL, "nic_copy: a staged region (the NIC reaches its host mirror, not the memory)");
	if (!core.caps.read_back)
		throw Error(HMEMREG_ENOTSUP, "nic_copy: provider " + core.caps.provider + " has no FI_READ");
	auto keep = std::const_pointer_cast<RegionImpl>(d->shared_from_this());
	auto x = std::make_shared<ReadBack>(keep, len, 1, std::const_pointer_cast<RegionImpl>(s->shared_from_this()));
	const uintptr_t from = reinterpret_cast<uintptr_t>(s->io_addr()) + src_offset;
	core.rails[0]->enqueue_read_into(x, core.virt_addr ? from : from - s->reg->start(0), s->reg->key(0), len,
					 d->io_addr() + dst_offset, d->reg->desc(0));
	return x;
}

Bytes Facade::descriptor(const Region &region) const
{
	const Core &core = impl_->core;
	auto *r = dynamic_cast<const RegionImpl *>(&region);
	if (!r || r->engine_id != core.id)
		throw Error(HMEMREG_EINVAL, "descriptor: region was registered with another engine");
	wire::RegionDescriptor d;
	d.engine_id = core.id;
	d.length = r->length();
	const uintptr_t a = reinterpret_cast<uintptr_t>(r->io_addr());
	d.staged_id = r->staging() ? r->staging()->id : 0;
	for (size_t i = 0; i < core.rails.size(); i++) {
		// Virtual addressing: the address itself; else the offset into the
		// (possibly larger, cached) registration.
		uint64_t base = core.virt_addr ? a : a - r->reg->start(i);
		d.rails.push_back({base, r->reg->key(i)});
	}
	return wire::encode(d);
}

TransferRef Facade::write(PeerId peer, std::span<const Chunk> chunks, std::span<const uint8_t> remote, uint64_t tag,
			  TransferCallback done)
{
	Impl *im = impl_.get();
	auto p = im->peers.find(peer);
	if (chunks.empty())
		throw Error(HMEMREG_EINVAL, "write: no chunks");
	const std::shared_ptr<const wire::RegionDescriptor> dp = im->remotes.import(remote);
	const wire::RegionDescriptor &d = *dp;
	if (d.engine_id != p->engine_id)
		throw Error(HMEMREG_EINVAL, "write: the remote descriptor belongs to engine " + engine_hex(d.engine_id) +
						    ", not to peer " + std::to_string(peer) + " (engine " +
						    engine_hex(p->engine_id) + ")");
	for (size_t i = 0; i < chunks.size(); i++) {
		const Chunk &c = chunks[i];
		auto *r = dynamic_cast<const RegionImpl *>(c.local);
		if (!r)
			throw Error(HMEMREG_EINVAL, "write: chunk " + std::to_string(i) + " has no local region");
		if (r->engine_id != im->core.id)
			throw Error(HMEMREG_EINVAL, "write: chunk " + std::to_string(i) +
							    "'s local region was registered with another engine");
		if (c.len == 0)
			throw Error(HMEMREG_EINVAL, "write: chunk " + std::to_string(i) + " has zero length");
		if (c.local_offset > r->length() || c.len > r->length() - c.local_offset)
			throw Error(HMEMREG_EINVAL, "write: chunk " + std::to_string(i) + " [" +
							    std::to_string(c.local_offset) + ", +" + std::to_string(c.len) +
							    ") is outside its local region of " +
							    std::to_string(r->length()) + " bytes");
		if (c.remote_offset > d.length || c.len > d.length - c.remote_offset)
			throw Error(HMEMREG_EINVAL, "write: chunk " + std::to_string(i) + " [" +
							    std::to_string(c.remote_offset) + ", +" + std::to_string(c.len) +
							    ") does not fit the remote region of " +
							    std::to_string(d.length) + " bytes");
	}
	// Overlap at the target, checked on the chunks in remote order (a
	// single chunk needs no order, nor its allocation).
	std::vector<size_t> order(chunks.size() > 1 ? chunks.size() : 0);
	std::iota(order.begin(), order.end(), 0);
	std::sort(order.begin(), order.end(),
		  [&](size_t a, size_t b) { return chunks[a].remote_offset < chunks[b].remote_offset; });
	for (size_t k = 1; k < order.size(); k++) {
		const Chunk &a = chunks[order[k - 1]], &b = chunks[order[k]];
		if (a.remote_offset + a.len > b.remote_offset)
			throw Error(HMEMREG_EINVAL, "write: chunks " + std::to_string(order[k - 1]) + " and " +
							    std::to_string(order[k]) + " overlap at the target (remote offset " +
							    std::to_string(b.remote_offset) + ")");
	}

	bool staged = d.staged_id != 0;
	for (const Chunk &c : chunks)
		staged = staged || c.local->staged();
	if (staged)
		return im->staging.write(p, chunks, d, tag, std::move(done));
	return im->write_direct(p, chunks, d, tag, std::move(done));
}

TransferRef Facade::send(PeerId peer, std::span<const uint8_t> data, TransferCallback done)
{
	return send(peer, data, {}, std::move(done));
}

TransferRef Facade::send(PeerId peer, std::span<const uint8_t> data, std::span<const uint8_t> body,
			 TransferCallback done, SendCompletion completion, SendBody how)
{
	Core &core = impl_->core;
	auto p = impl_->peers.find(peer);
	if (data.size() + body.size() > core.cfg.max_message)
		throw Error(HMEMREG_EINVAL, "send: " + std::to_string(data.size() + body.size()) +
						    " bytes exceed max_message " + std::to_string(core.cfg.max_message));
	const unsigned rail = core.message_rail();
	auto x = core.make_send(p, wire::MsgType::User, data, rail, std::move(done), body, how == SendBody::Borrowed);
	x->transmit_complete = completion == SendCompletion::Transmitted;
	core.admit(x);
	try {
		core.send_message(x); // one push: queued or not
	} catch (const std::bad_alloc &) {
		if (core.take_back(x))
			throw; // not queued: no callback comes
	}
	return x;
}

void Facade::on_message(std::function<void(const Message &)> fn) { impl_->delivery.set_on_message(std::move(fn)); }

void Facade::on_notify(std::function<void(const Notification &)> fn) { impl_->delivery.set_on_notify(std::move(fn)); }

size_t Facade::progress()
{
	Core &core = impl_->core;
	if (core.threads && core.threads->backs_off())
		core.threads->caller_turn();
	return impl_->caller_turn();
}

bool Facade::wait(const Transfer &t, std::chrono::milliseconds timeout)
{
	if (dynamic_cast<const ReadBack *>(&t)) { // no waiter to wake: polled
		const auto deadline = std::chrono::steady_clock::now() + timeout;
		while (t.status() == -HMEMREG_EAGAIN) {
			if (std::chrono::steady_clock::now() > deadline)
				return false;
			if (impl_->core.threads)
				std::this_thread::sleep_for(std::chrono::microseconds(20));
			else if (progress() == 0)
				std::this_thread::yield();
		}
		return true;
	}
	auto &x = static_cast<const TransferImpl &>(t);
	if (impl_->core.threads)
		return x.wait_for(timeout);
	auto deadline = std::chrono::steady_clock::now() + timeout;
	while (!x.done()) {
		if (progress() == 0) {
			if (std::chrono::steady_clock::now() > deadline)
				return false;
			std::this_thread::yield();
		}
	}
	return true;
}

PathStats Facade::path_stats() const
{
	PathStats s = impl_->staging.path_stats();
	s.direct_writes = impl_->direct_writes.load(std::memory_order_relaxed);
	impl_->immediate.stats(s);
	s.message_writes = impl_->message.writes();
	for (RailCache *c : impl_->core.caches) {
		s.device_regs_dmabuf += c->device_dmabuf_regs();
		s.device_regs_address += c->device_address_regs();
		if (s.device_address_why.empty())
			s.device_address_why = c->address_path_reason();
		s.device_regs_wrapped += c->device_wrapped_regs();
		if (s.device_wrap_why.empty())
			s.device_wrap_why = c->not_wrapped_reason();
	}
	return s;
}

std::vector<RailStats> Facade::stats() const
{
	std::vector<RailStats> v;
	for (auto &r : impl_->core.rails)
		v.push_back(r->stats());
	return v;
}

std::string Capabilities::describe() const
{
	std::ostringstream o;
	o << "provider " << provider << ", fabric " << fabric << ", " << rail_domains.size() << " rail(s):";
	for (size_t i = 0; i < rail_domains.size(); i++)
		o << (i ? ", " : " ") << rail_domains[i];
	o << "\n  libfabric API " << fabric::api_version_text(api_version) << " (runtime "
	  << fabric::api_version_text(fi_version()) << "), FI_RMA " << (rma ? "yes" : "NO") << ", FI_HMEM "
	  << (hmem ? "yes" : "no" + (hmem_why_not.empty() ? std::string() : " (" + hmem_why_not + ")"))
	  << ", FI_MR_DMABUF "
	  << (dmabuf ? "yes" : !hmem ? "no (no FI_HMEM)" : "no (API < 1.20)") << ", remote CQ data "
	  << (remote_cq_data ? std::to_string(cq_data_size) + " B" : std::string("no"))
	  << "\n  target notified by " << notify;
	o << "\n  queue depth " << queue_depth << "/rail (" << peer_queue_depth << " per peer), max write " << max_write
	  << " B, up to " << write_iov << " chunk(s) per write, inject " << inject_size << " B";
	o << "\n  progress: " << progress;
	o << "\n  peer timeout (no progress): " << peer_timeout;
	o << "\n  device memory: " << device_memory;
	for (const auto &n : notes)
		o << "\n  note: " << n;
	return o.str();
}

} // namespace hmemreg::engine
