// SPDX-License-Identifier: MIT
#include "plugin.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <random>
#include <thread>

#include "cuda_driver.hpp"
#include "log.hpp"
#include "pointer_policy.hpp"

namespace hmemreg::nccl {


namespace {

ncclResult_t result_of(const Error &e)
{
	switch (e.code()) {
	case HMEMREG_EINVAL:
		return ncclInvalidArgument;
	case HMEMREG_ENOENT:
		return ncclRemoteError;
	default:
		return ncclSystemError;
	}
}

uint64_t random_u64()
{
	std::random_device rd;
	uint64_t v = (uint64_t(rd()) << 32) ^ rd();
	return v ? v : 1;
}

} // namespace

ncclResult_t Plugin::create(std::unique_ptr<Plugin> &out)
{
	Config cfg;
	std::string why;
	if (!cfg.load(why)) {
		NWARN("bad configuration: %s", why.c_str());
		return ncclInvalidUsage;
	}
	try {
		out.reset(new Plugin(cfg));
	} catch (const Error &e) {
		NWARN("cannot open the transfer engine (%s): %s", cfg.describe().c_str(), e.what());
		return ncclSystemError;
	} catch (const std::exception &e) {
		NWARN("cannot open the transfer engine: %s", e.what());
		return ncclSystemError;
	}
	NINFO(NCCL_INIT | NCCL_NET, "using %s; %s", out->dev_name_.c_str(), cfg.describe().c_str());
	return ncclSuccess;
}

Plugin::Plugin(const Config &cfg) : cfg_(cfg)
{
	// rxm sends a message eagerly up to its buffer size (16 KiB by
	// default): an Inline message of INLINE_MAX must fit, or it would take
	// rxm's rendezvous (a round trip more). Read when libfabric loads its
	// providers: before the engine's first fi_getinfo.
	if (cfg.inline_max + proto::kInlineOverhead > (16u << 10) - 64 && !std::getenv("FI_OFI_RXM_BUFFER_SIZE") &&
	    (cfg.provider.empty() || cfg.provider.find("ofi_rxm") != std::string::npos))
		setenv("FI_OFI_RXM_BUFFER_SIZE", std::to_string(cfg.inline_max + 1024).c_str(), 0);
	EngineConfig ec;
	ec.provider = cfg.provider;
	ec.node = cfg.node;
	ec.domain = cfg.domain;
	ec.rails = cfg.rails;
	ec.progress_threads = cfg.progress_threads;
	ec.max_message = std::max<size_t>(1024, cfg.inline_max + proto::kInlineOverhead);
	ec.recv_buffers = 256;
	ec.send_buffers = 256;
	ec.max_write = cfg.max_write;
	// NCCL spins on test() while it waits: the caller polls, the threads
	// only keep the network moving when NCCL is away for longer than this.
	ec.caller_backoff_us = 1000;
	// Cts, Inline and Close on rail 0: the caller polls it on every turn,
	// quiet rails seldom (HMEMREG_ENGINE_SENDS_ON_FIRST_RAIL).
	// Only with progress threads: with caller-driven progress alone
	// (PROGRESS_THREADS=0), close_with_requests_in_flight hangs now and then
	// with it (a rail polled one turn in 16; not understood yet).
	if (cfg.progress_threads > 0)
		ec.flags |= HMEMREG_ENGINE_SENDS_ON_FIRST_RAIL;
	ec.first_rail_write_max = cfg.first_rail_max; // and small writes (FIRST_RAIL_MAX)
	// The plugin's 0 is never; the engine's 0 its default.
	if (cfg.peer_timeout_ms != Config::kEngineDefault)
		ec.peer_timeout_ms = cfg.peer_timeout_ms == 0 ? EngineConfig::kPeerTimeoutNever
							      : static_cast<uint32_t>(cfg.peer_timeout_ms);
	ec.notify = cfg.notify == "immediate" ? EngineConfig::Notify::Immediate
		    : cfg.notify == "message" ? EngineConfig::Notify::Message
					      : EngineConfig::Notify::Auto;
	// No provider CUDA call (pointer_policy.hpp).
	ec.flags |= HMEMREG_ENGINE_NO_PROVIDER_CUDA;
	if (cfg.device_memory == "staged")
		ec.flags |= HMEMREG_ENGINE_NO_HMEM;
	engine_ = std::make_unique<Engine>(ec);
	regs_ = std::make_unique<Registrations>(*engine_);
	const auto &caps = engine_->caps();
	dev_name_ = "hmemreg:" + caps.provider + (caps.rail_domains.empty() ? "" : ":" + caps.rail_domains[0]);
	NINFO(NCCL_INIT | NCCL_NET, "engine: %s", engine_->describe().c_str());
	if (!caps.rail_pci_paths.empty())
		pci_path_ = caps.rail_pci_paths[0];
	choose_pointer_support(caps);
	// Callbacks run on the engine's progress context: nothing may escape them.
	engine_->on_message([this](const Message &m) {
		try {
			on_message(m);
		} catch (const std::exception &e) {
			NWARN("control message dropped: %s", e.what());
		}
	});
	if (cfg.stall_ms)
		watch_ = std::thread([this] { watch_stalls(); });
	engine_->on_notify([this](const Notification &n) {
		try {
			on_notify(n);
		} catch (const std::exception &e) {
			NWARN("notification dropped: %s", e.what());
		}
	});
}

// pointer_policy.hpp says why the provider never gets device memory.
void Plugin::choose_pointer_support(const EngineInfo &caps)
{
	const cuda::Driver &d = cuda::Driver::get();
	const PointerPolicy p = choose_pointers({cfg_.device_memory, caps.provider, d.loaded, d.why_not, caps.hmem()});
	if (p.device) {
		ptr_support_ = NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF;
		NINFO(NCCL_INIT | NCCL_NET, "ptrSupport HOST|CUDA|DMABUF: %s; %s", p.why.c_str(),
		      caps.hmem_why_not.c_str());
	} else {
		host_only_why_ = p.why;
		NINFO(NCCL_INIT | NCCL_NET, "ptrSupport HOST only: %s", p.why.c_str());
	}
}

Plugin::~Plugin()
{
	if (watch_.joinable()) {
		{
			std::lock_guard l(watch_mu_);
			watch_stop_ = true;
		}
		watch_cv_.notify_all();
		watch_.join();
	}
	// The engine goes first (its threads stop, transfers still pending fail
	// through our callbacks, which need the state below).
	regs_.reset();
	engine_.reset();
	retired_eager_.clear(); // nothing can land in them now
}

// Once a second: a request waiting longer than STALL_MS gets the state
// logged, once; so does a plugin lock that stayed held that long (a call
// stuck inside the provider or CUDA: the lock is tried, never waited for).
void Plugin::watch_stalls()
{
	using clock = std::chrono::steady_clock;
	const auto stall = std::chrono::milliseconds(cfg_.stall_ms);
	clock::time_point held_since{}; // the epoch: not held at the last look
	bool held_told = false;
	std::unique_lock wl(watch_mu_);
	while (!watch_cv_.wait_for(wl, std::chrono::seconds(1), [this] { return watch_stop_; })) {
		const auto now = clock::now();
		std::unique_lock l(mu_, std::try_to_lock);
		if (!l.owns_lock()) {
			if (held_since == clock::time_point{})
				held_since = now;
			if (!held_told && now - held_since > stall) {
				NWARN("stall: the plugin's lock has been held for over %u ms by a call that has not returned "
				      "(a provider or CUDA call that blocks?)",
				      cfg_.stall_ms);
				held_told = true;
			}
			continue;
		}
		held_since = {};
		tell_stalls_locked(now);
	}
}

void Plugin::tell_stalls_locked(std::chrono::steady_clock::time_point now)
{
	const auto stall = std::chrono::milliseconds(cfg_.stall_ms);
	std::vector<Request *> late;
	for (auto &[key, r] : requests_)
		if (r->state == Request::State::Pending && !r->stall_told && now - r->posted > stall)
			late.push_back(r.get());
	if (late.empty())
		return;
	const auto ms = [&](const Request &r) {
		return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(now - r.posted).count());
	};
	NWARN("stall: %zu request(s) waited over %u ms; %zu pending in all, %zu send and %zu recv comms", late.size(),
	      cfg_.stall_ms, requests_.size(), sends_.size(), recvs_.size());
	for (const auto &[id, c] : sends_)
		NWARN("stall:  send comm %u -> recv comm %u: next seq %u, %zu outstanding, %zu advertised%s", id,
		      c->remote_id, c->next_seq, c->outstanding, c->cts.size(), c->peer_closed ? ", peer closed" : "");
	for (const auto &[id, c] : recvs_)
		NWARN("stall:  recv comm %u <- send comm %u: next seq %u, done up to %u, %zu outstanding, %zu early%s", id,
		      c->remote_id, c->next_seq, c->done_upto, c->outstanding,
		      c->inline_early.size() + c->eager_early.size(), c->peer_closed ? ", peer closed" : "");
	size_t shown = 0;
	for (Request *r : late) {
		r->stall_told = true;
		if (shown++ < 16)
			NWARN("stall:  %s comm %u seq %u: %zu bytes (%s), waiting %lld ms%s%s", r->send ? "send" : "recv",
			      r->comm_id, r->seq, r->size, r->device >= 0 ? "device" : "host", ms(*r),
			      r->deferred ? ", advertisement deferred" : "", r->landing ? ", copy into device memory queued" : "");
	}
	const auto ps = engine_->path_stats();
	NWARN("stall:  engine: staged writes %llu (to host %llu B, to device %llu B, landings %llu, errors %llu), "
	      "immediate transfers partly arrived %llu",
	      static_cast<unsigned long long>(ps.staged_writes), static_cast<unsigned long long>(ps.staged_to_host_bytes),
	      static_cast<unsigned long long>(ps.staged_to_device_bytes),
	      static_cast<unsigned long long>(ps.staged_landings), static_cast<unsigned long long>(ps.staged_errors),
	      static_cast<unsigned long long>(ps.immediate_pending));
}

// NCCL's calls drive progress themselves, progress threads or not: a write
// is posted by the isend that made it, a completion is seen by the test()
// that waits for it, without waiting for a thread to be scheduled (on a busy
// host with few cores that wait was most of a small message's latency).
// While they do, the engine's threads sleep (Config::caller_backoff_us).
void Plugin::progress_now()
{
	engine_->progress();
}

void Plugin::idle()
{
	engine_->progress();
}

template <typename T> T *Plugin::find_locked(void *comm, Comm::Kind kind)
{
	auto it = comms_.find(comm);
	if (it == comms_.end() || it->second->kind != kind)
		return nullptr;
	return static_cast<T *>(it->second.get());
}

PeerId Plugin::peer_for_locked(uint64_t engine_id, std::span<const uint8_t> address)
{
	auto it = peers_.find(engine_id);
	if (it != peers_.end())
		return it->second;
	PeerId p = engine_->add_peer(address);
	peers_[engine_id] = p;
	return p;
}

// No callback and no handle (the C++ wrapper's send() makes a handle to
// wait on: two allocations nobody used).
void Plugin::send_control_locked(PeerId peer, std::span<const uint8_t> msg)
{
	engine_detail::check(hmemreg_engine_send(engine_->handle(), peer, msg.data(), msg.size(), nullptr, nullptr,
						 nullptr));
}

void Plugin::settle_send_locked(Request &r, int status, const char *why)
{
	if (r.state != Request::State::Pending)
		return;
	if (status == 0) {
		r.state = Request::State::Done;
		r.bytes = r.size;
		bytes_sent_ += r.size;
	} else {
		r.state = Request::State::Failed;
		r.error = ncclRemoteError;
		r.why = why && *why ? why : "transfer failed";
	}
}

void Plugin::send_done(void *arg, int status)
{
	auto *raw = static_cast<Request *>(arg);
	Plugin &p = *raw->plugin;
	// Why it failed: the engine's per-thread message, read before anything
	// else can overwrite it.
	const std::string why = status < 0 ? hmemreg_engine_last_error() : "";
	std::lock_guard l(p.mu_);
	std::shared_ptr<Request> r = std::move(raw->engine_hold); // the last reference, if NCCL is done with it
	p.settle_send_locked(*r, status, why.c_str());
}

ncclResult_t Plugin::properties(int dev, ncclNetProperties_v11_t *props)
{
	if (dev != 0 || !props) {
		NWARN("getProperties: no device %d (this plugin has 1)", dev);
		return ncclInvalidArgument;
	}
	std::memset(props, 0, sizeof(*props));
	props->name = const_cast<char *>(dev_name_.c_str());
	// Rail 0's NIC: NCCL's topology places it by this path and turns GDR on
	// where it is close to the GPU. None (shm, tcp, Soft-RoCE): NCCL puts
	// the NIC at the CPU, and GDR needs NCCL_NET_GDR_LEVEL.
	props->pciPath = pci_path_.empty() ? nullptr : const_cast<char *>(pci_path_.c_str());
	props->guid = 0;
	props->ptrSupport = ptr_support_;
	props->regIsGlobal = 1; // registrations belong to the engine, usable on any comm
	props->forceFlush = 0;
	props->speed = cfg_.speed_mbps;
	props->port = 1;
	props->latency = static_cast<float>(cfg_.latency_us);
	props->maxComms = 1 << 20;
	props->maxRecvs = 1;
	props->netDeviceType = NCCL_NET_DEVICE_HOST;
	props->netDeviceVersion = 0;
	props->vProps.ndevs = 1;
	props->vProps.devs[0] = 0;
	props->maxP2pBytes = INT_MAX; // test() reports sizes as int
	props->maxCollBytes = INT_MAX;
	props->maxMultiRequestSize = 1;
	return ncclSuccess;
}

ncclResult_t Plugin::listen(int dev, void *handle, void **listen_comm)
{
	if (dev != 0 || !handle || !listen_comm) {
		NWARN("listen: bad arguments (dev %d, handle %p, listenComm %p)", dev, handle, static_cast<void *>(listen_comm));
		return ncclInvalidArgument;
	}
	proto::Handle h;
	h.address = engine_->address();
	std::lock_guard l(mu_);
	do
		h.listen_id = random_u64();
	while (listens_.count(h.listen_id));
	if (!proto::encode_handle(h, handle, NCCL_NET_HANDLE_MAXSIZE)) {
		NWARN("listen: the engine address (%zu bytes, %u rails) does not fit NCCL's %d-byte handle",
		      h.address.size(), cfg_.rails, NCCL_NET_HANDLE_MAXSIZE);
		return ncclInternalError;
	}
	auto c = std::make_unique<ListenComm>(next_comm_id_++, h.listen_id);
	listens_[h.listen_id] = c.get();
	*listen_comm = c.get();
	comms_[c.get()] = std::move(c);
	return ncclSuccess;
}

ncclResult_t Plugin::connect(int dev, void *handle, void **send_comm)
{
	if (dev != 0 || !handle || !send_comm) {
		NWARN("connect: bad arguments (dev %d)", dev);
		return ncclInvalidArgument;
	}
	*send_comm = nullptr;
	auto h = proto::decode_handle(handle, NCCL_NET_HANDLE_MAXSIZE);
	if (!h) {
		NWARN("connect: the handle was not made by this plugin's listen()");
		return ncclInvalidArgument;
	}
	try {
		uint64_t peer_engine = Engine::peer_engine_id(h->address);
		if (peer_engine == engine_->id()) {
			NWARN("connect: a connection within one process is not supported (same engine)");
			return ncclInvalidUsage;
		}
		std::lock_guard l(mu_);
		PeerId peer = peer_for_locked(peer_engine, h->address);
		auto c = std::make_unique<SendComm>(next_comm_id_++, peer, peer_engine);
		proto::Connect m;
		m.listen_id = h->listen_id;
		m.send_id = c->id;
		m.address = engine_->address();
		send_control_locked(peer, proto::encode(m));
		sends_[c->id] = c.get();
		*send_comm = c.get();
		comms_[c.get()] = std::move(c);
	} catch (const Error &e) {
		NWARN("connect: %s", e.what());
		return result_of(e);
	}
	progress_now(); // get the request on the wire
	return ncclSuccess;
}

ncclResult_t Plugin::accept(void *listen_comm, void **recv_comm)
{
	if (!recv_comm)
		return ncclInvalidArgument;
	*recv_comm = nullptr;
	for (int attempt = 0; attempt < 2; attempt++) {
		{
			std::lock_guard l(mu_);
			auto *lc = find_locked<ListenComm>(listen_comm, Comm::Kind::Listen);
			if (!lc) {
				NWARN("accept: %p is not a listen comm of this plugin", listen_comm);
				return ncclInternalError;
			}
			if (!lc->pending.empty()) {
				PendingConnect pc = std::move(lc->pending.front());
				lc->pending.pop_front();
				try {
					PeerId peer = peer_for_locked(pc.engine_id, pc.address);
					auto c = std::make_unique<RecvComm>(next_comm_id_++, peer, pc.engine_id, pc.send_id);
					offer_eager_locked(*c);
					recvs_[c->id] = c.get();
					*recv_comm = c.get();
					comms_[c.get()] = std::move(c);
				} catch (const Error &e) {
					NWARN("accept: %s", e.what());
					return result_of(e);
				}
			}
		}
		if (*recv_comm) {
			progress_now(); // the eager slots' offer goes out now
			return ncclSuccess;
		}
		if (attempt == 0)
			idle();
	}
	return ncclSuccess; // not yet: NCCL calls again
}

ncclResult_t Plugin::reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	if (!mhandle)
		return ncclInvalidArgument;
	*mhandle = nullptr;
	{
		std::lock_guard l(mu_);
		if (!find_locked<SendComm>(comm, Comm::Kind::Send) && !find_locked<RecvComm>(comm, Comm::Kind::Recv)) {
			NWARN("regMr: %p is not a send or recv comm of this plugin", comm);
			return ncclInternalError;
		}
	}
	const bool device = type == NCCL_PTR_CUDA || type == NCCL_PTR_DMABUF;
	if (type != NCCL_PTR_HOST && !(device && (ptr_support_ & NCCL_PTR_CUDA))) {
		NWARN("regMr: memory type %d is not supported (ptrSupport is HOST only: %s)", type, host_only_why_.c_str());
		return ncclInvalidUsage;
	}
	if (!data && size) {
		NWARN("regMr: null buffer of %zu bytes", size);
		return ncclInvalidArgument;
	}
	auto h = std::make_unique<MemHandle>();
	h->addr = reinterpret_cast<uintptr_t>(data);
	h->size = size;
	if (size) {
		try {
			// Device memory: exactly the buffer (rounding could leave its
			// allocation), registered each time; the engine's cache makes a
			// repeat a hit after checking the allocation's buffer ID, which
			// the page-range sharing of Registrations would skip.
			h->region = device ? engine_->register_region(data, size) : regs_->get(data, size);
			h->descriptor = engine_->descriptor(*h->region);
		} catch (const Error &e) {
			NWARN("regMr of %p (%zu bytes)%s: %s", data, size, device ? " as CUDA memory" : "", e.what());
			return e.code() == HMEMREG_EINVAL && device ? ncclInvalidArgument : ncclSystemError;
		}
		if (device) {
			// What the engine found the memory to be (one driver query).
			hmemreg_region_info info{};
			try {
				info = h->region->info();
			} catch (const Error &e) {
				NWARN("regMr of %p (%zu bytes): %s", data, size, e.what());
				return ncclSystemError;
			}
			if (info.iface != HMEMREG_IFACE_CUDA) {
				NWARN("regMr: %p (%zu bytes) was passed as CUDA memory but is host memory", data, size);
				return ncclInvalidArgument;
			}
			h->cuda_device = info.device;
			device_regs_++;
		}
	}
	std::lock_guard l(mu_);
	*mhandle = h.get();
	mhandles_[h.get()] = std::move(h);
	return ncclSuccess;
}

ncclResult_t Plugin::reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
				   void **mhandle)
{
	if (type == NCCL_PTR_HOST && fd < 0) // no DMA-BUF at all: plain host registration
		return reg_mr(comm, data, size, type, mhandle);
	if ((type == NCCL_PTR_CUDA || type == NCCL_PTR_DMABUF) && (ptr_support_ & NCCL_PTR_DMABUF)) {
		// NCCL's fd describes [data, data + size) of a CUDA allocation. The
		// engine registers that range as CUDA memory and, where the provider
		// takes FI_MR_DMABUF, through its own export of the whole allocation
		// (one export per cached registration, shared by every buffer in it);
		// NCCL closes its fd after this call, and nothing here keeps it.
		return reg_mr(comm, data, size, NCCL_PTR_CUDA, mhandle);
	}
	if (mhandle)
		*mhandle = nullptr;
	NWARN("regMrDmaBuf: DMA-BUF registration is not supported (fd %d, offset %llu, type %d): %s", fd,
	      static_cast<unsigned long long>(offset), type, host_only_why_.c_str());
	return ncclInvalidUsage;
}

ncclResult_t Plugin::dereg_mr(void *comm, void *mhandle)
{
	std::unique_ptr<MemHandle> h;
	{
		std::lock_guard l(mu_);
		auto it = mhandles_.find(mhandle);
		if (it == mhandles_.end()) {
			NWARN("deregMr: %p is not a memory handle of this plugin", mhandle);
			return ncclInternalError;
		}
		h = std::move(it->second);
		mhandles_.erase(it);
	}
	(void)comm; // registrations are global (regIsGlobal): any comm, even a closed one
	h.reset();  // outside the lock: may deregister
	return ncclSuccess;
}

namespace {

// Sequence numbers wrap: a is before b.
bool seq_before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

} // namespace

// The send comm `id` if it is talking to engine `sender`, else null (closed,
// or a message from someone else).
SendComm *Plugin::send_comm_of_locked(uint32_t id, uint64_t sender)
{
	auto it = sends_.find(id);
	return it != sends_.end() && it->second->peer_engine == sender ? it->second : nullptr;
}

// The receiver says its receives before done_upto are complete (Cts or
// Credit; they may arrive out of order): their eager slots are free.
void Plugin::credit_locked(SendComm &c, uint32_t done_upto)
{
	if (seq_before(c.eager.done_upto, done_upto))
		c.eager.done_upto = done_upto;
}

// Give the new recv comm eager slots and tell its sender. Without them (off,
// or no memory) sends just wait for each Cts.
void Plugin::offer_eager_locked(RecvComm &c)
{
	if (!cfg_.eager_max || !cfg_.eager_slots)
		return;
	EagerSlots &e = c.eager;
	try {
		e.slot_size = cfg_.eager_max;
		e.mem.reset(new uint8_t[e.slot_size * cfg_.eager_slots]);
		e.region = engine_->register_region(e.mem.get(), e.slot_size * cfg_.eager_slots);
		proto::EagerRing m;
		m.send_id = c.remote_id;
		m.recv_id = c.id;
		m.slots = static_cast<uint32_t>(cfg_.eager_slots);
		m.slot_size = e.slot_size;
		m.descriptor = engine_->descriptor(*e.region);
		send_control_locked(c.peer, proto::encode(m));
		e.slots = m.slots;
		c.told_id = true;
	} catch (const std::exception &x) {
		NWARN("recv comm %u: no eager slots (%s): sends will wait for each receive", c.id, x.what());
		e = EagerSlots{};
	}
}

// Receive seq of c is complete: its eager slot may be reused once every
// receive before it is complete too.
void Plugin::mark_done_locked(RecvComm &c, uint32_t seq)
{
	if (seq != c.done_upto) {
		c.done_ahead.insert(seq);
		return;
	}
	c.done_upto++;
	while (c.done_ahead.erase(c.done_upto))
		c.done_upto++;
	// Receives served from eager slots send no Cts: tell the sender its
	// slots are free again, every half ring and whenever no receive is
	// posted (no Cts will come to carry it).
	// Only slots taken need it: other receives cost the sender nothing.
	if (c.eager.slots && !c.peer_closed && c.eager_uncredited && c.done_upto != c.credit_sent &&
	    (c.done_upto - c.credit_sent >= (c.eager.slots + 1) / 2 || c.pending.empty())) {
		try {
			send_control_locked(c.peer, proto::encode(proto::Credit{c.remote_id, c.done_upto}));
			c.credit_sent = c.done_upto;
			c.eager_uncredited = 0;
		} catch (const Error &) {
			// engine full: the next Cts carries it
		}
	}
}

ncclResult_t Plugin::try_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request,
			       bool &missing_cts, bool &behind)
{
	missing_cts = false;
	behind = false;
	std::lock_guard l(mu_);
	auto *c = find_locked<SendComm>(send_comm, Comm::Kind::Send);
	if (!c) {
		NWARN("isend: %p is not a send comm of this plugin", send_comm);
		return ncclInternalError;
	}
	if (c->peer_closed) {
		NWARN("isend: the receiver closed this connection");
		return ncclRemoteError;
	}
	MemHandle *mh = nullptr;
	if (size) {
		auto it = mhandles_.find(mhandle);
		if (it == mhandles_.end()) {
			NWARN("isend: buffer %p (%zu bytes) has no valid memory handle (%p)", data, size, mhandle);
			return ncclInternalError;
		}
		mh = it->second.get();
		uintptr_t a = reinterpret_cast<uintptr_t>(data);
		if (a < mh->addr || size > mh->size || a - mh->addr > mh->size - size) {
			NWARN("isend: buffer %p (%zu bytes) is outside its registration [%p, +%zu)", data, size,
			      reinterpret_cast<void *>(mh->addr), mh->size);
			return ncclInternalError;
		}
	}
	if (c->outstanding >= cfg_.max_requests)
		return ncclSuccess; // *request stays NULL: NCCL retries
	auto ct = c->cts.find(c->next_seq);
	const uint32_t seq = c->next_seq;
	// Small: the data goes in a control message, Cts or not (one message
	// instead of a write, its Announce and the wait for a Cts).
	// Device memory never goes inline or eager: both read the data on the CPU.
	const bool host = !mh || mh->cuda_device < 0;
	const bool inl = host && cfg_.inline_max && size <= cfg_.inline_max && c->remote_id;
	// No Cts yet (the receiver is behind): into an eager slot if one is
	// free, as NCCL's socket transport lets the kernel buffer it.
	// While earlier sends are outstanding, only small ones (Config::
	// eager_busy_max): a larger one's advertisement comes while they flow,
	// and an eager receive costs the receiver one more copy.
	const bool eager = host && !inl && ct == c->cts.end() && size && size <= c->eager.slot_size && c->eager.slots &&
			   (c->outstanding == 0 || size <= cfg_.eager_busy_max) &&
			   seq_before(seq, c->eager.done_upto + c->eager.slots);
	if (ct == c->cts.end() && !eager && !inl) {
		missing_cts = true;
		if (c->waiting_since == std::chrono::steady_clock::time_point{})
			c->waiting_since = std::chrono::steady_clock::now();
		return ncclSuccess;
	}
	// Stays in c->cts (under mu_) until the write is posted: no copy.
	const proto::Cts *cts = ct == c->cts.end() ? nullptr : &ct->second;
	if (cts && (cts->tag != tag || size > cts->size)) {
		// The matching receive cannot take this send: fail both ends of it.
		proto::Fail f;
		f.recv_id = cts->recv_id;
		f.seq = seq;
		f.result = ncclInvalidUsage;
		char why[160];
		if (cts->tag != tag)
			std::snprintf(why, sizeof(why), "send #%u has tag %d, the matching receive tag %d", seq, tag, cts->tag);
		else
			std::snprintf(why, sizeof(why), "send #%u of %zu bytes exceeds the posted receive of %llu bytes",
				      seq, size, static_cast<unsigned long long>(cts->size));
		f.why = why;
		c->cts.erase(ct);
		c->next_seq++;
		try {
			send_control_locked(c->peer, proto::encode(f));
		} catch (const Error &e) {
			NWARN("isend: telling the receiver failed too: %s", e.what());
			if (!c->fail_lost)
				c->fail_lost = seq;
		}
		NWARN("isend: %s", why);
		return ncclInvalidUsage;
	}
	auto rq = std::make_shared<Request>();
	if (cfg_.stall_ms)
		rq->posted = std::chrono::steady_clock::now();
	rq->send = true;
	rq->comm_id = c->id;
	rq->seq = seq;
	rq->size = size;
	rq->plugin = this;
	// Its slot in requests_ first: once the engine took the request (its
	// callback will come), nothing here may throw. The engine throws only
	// when it did not take it.
	struct Slot {
		std::unordered_map<void *, std::shared_ptr<Request>> &map;
		std::unordered_map<void *, std::shared_ptr<Request>>::iterator it;
		bool keep = false;
		~Slot()
		{
			if (!keep)
				map.erase(it);
		}
	} slot{requests_, requests_.emplace(rq.get(), nullptr).first};
	// The engine holds the request until its callback (send_done) ran.
	rq->engine_hold = rq;
	try {
		hmemreg_engine_t *eh = engine_->handle();
		int rc;
		if (inl) {
			proto::Inline m;
			m.recv_id = c->remote_id;
			m.seq = seq;
			m.tag = tag;
			m.data = std::span(static_cast<const uint8_t *>(size ? data : nullptr), size);
			proto::encode_head_into(m, wire_);
			// The data goes from NCCL's buffer (borrowed: NCCL keeps it
			// until test() says done, which waits for send_done), copied
			// only into a bundle. Done when it left, as NCCL asks of a
			// send (its buffer is free): delivery-complete costs shm a
			// round trip per message.
			const hmemreg_iov iov[2] = {{wire_.data(), wire_.size()}, {m.data.data(), m.data.size()}};
			rc = hmemreg_engine_sendv_flags(eh, c->peer, iov, size ? 2 : 1,
							HMEMREG_SEND_TRANSMIT_COMPLETE | (size ? HMEMREG_SEND_BORROW : 0),
							&Plugin::send_done, rq.get(), nullptr);
		} else if (size == 0) {
			proto::Empty e;
			e.recv_id = cts->recv_id;
			e.seq = seq;
			const auto msg = proto::encode(e);
			rc = hmemreg_engine_send(eh, c->peer, msg.data(), msg.size(), &Plugin::send_done, rq.get(), nullptr);
		} else {
			Chunk ch;
			ch.local = mh->region->handle();
			ch.local_offset = reinterpret_cast<uintptr_t>(data) - reinterpret_cast<uintptr_t>(mh->region->addr());
			ch.len = size;
			const std::vector<uint8_t> &desc = eager ? c->eager.descriptor : cts->descriptor;
			const uint64_t ntag = eager ? proto::kEagerTag | proto::notify_tag(c->remote_id, seq)
						    : proto::notify_tag(cts->recv_id, seq);
			ch.remote_offset = eager ? static_cast<size_t>(seq % c->eager.slots) * c->eager.slot_size : cts->offset;
			rc = hmemreg_engine_write(eh, c->peer, &ch, 1, desc.data(), desc.size(), ntag, &Plugin::send_done,
						  rq.get(), nullptr);
		}
		if (rc < 0)
			rq->engine_hold.reset(); // not taken: no callback comes
		engine_detail::check(rc);
	} catch (const Error &e) {
		rq->engine_hold.reset(); // (the engine says so only when it did not take it)
		if (e.code() == HMEMREG_EAGAIN)
			return ncclSuccess; // engine full: NCCL retries, the Cts stays
		NWARN("isend #%u (%zu bytes): %s", seq, size, e.what());
		return result_of(e);
	} catch (const std::bad_alloc &) {
		rq->engine_hold.reset(); // thrown before the engine call: not taken
		NWARN("isend #%u (%zu bytes): out of memory", seq, size);
		return ncclSystemError;
	}
	if (cts)
		c->cts.erase(ct);
	c->next_seq++;
	behind = inl && c->outstanding > 0; // (a write gains nothing by waiting: writes are not bundled)
	c->outstanding++;
	c->sends++;
	c->bytes += size;
	c->eager_sends += eager;
	c->inline_sends += inl;
	if (c->waiting_since != std::chrono::steady_clock::time_point{}) {
		c->waited++;
		c->wait_ns += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
								    std::chrono::steady_clock::now() - c->waiting_since)
								    .count());
		c->waiting_since = {};
	}
	*request = rq.get();
	slot.it->second = std::move(rq);
	slot.keep = true;
	return ncclSuccess;
}

ncclResult_t Plugin::isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request)
{
	if (!request)
		return ncclInvalidArgument;
	*request = nullptr;
	bool missing = false, behind = false;
	ncclResult_t r = try_isend(send_comm, data, size, tag, mhandle, request, missing, behind);
	if (r == ncclSuccess && missing) {
		idle(); // the receive may be advertised by now
		r = try_isend(send_comm, data, size, tag, mhandle, request, missing, behind);
	}
	// The first send of a quiet comm goes out now. An Inline send behind
	// others waits for the turn of NCCL's next test(), which comes right
	// after and posts every message queued since in one go (a bundle): on
	// tcp each send costs a sendmsg and the provider's wake-up signal (a
	// write and a read), once per bundle instead of once per message.
	if (r == ncclSuccess && *request && !behind)
		progress_now();
	return r;
}

ncclResult_t Plugin::irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
			   void **request)
{
	// The advertisement goes out at the next turn: NCCL tests right after
	// (a turn here too would cost each small message a poll more).
	return post_recv(recv_comm, n, data, sizes, tags, mhandles, request);
}

ncclResult_t Plugin::post_recv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
			       void **request)
{
	if (!request)
		return ncclInvalidArgument;
	*request = nullptr;
	std::unique_lock l(mu_);
	auto *c = find_locked<RecvComm>(recv_comm, Comm::Kind::Recv);
	if (!c) {
		NWARN("irecv: %p is not a recv comm of this plugin", recv_comm);
		return ncclInternalError;
	}
	if (n != 1 || !data || !sizes || !tags || !mhandles) {
		NWARN("irecv: %d buffers asked, this plugin groups at most 1 (maxRecvs)", n);
		return ncclInternalError;
	}
	if (c->peer_closed && !seq_before(c->next_seq, c->peer_sent)) {
		NWARN("irecv: the sender closed this connection after %u sends", c->peer_sent);
		return ncclRemoteError;
	}
	const size_t size = sizes[0];
	int device = -1; // the receive buffer's CUDA device, -1: host memory
	MemHandle *mh = nullptr;
	uint64_t offset = 0; // of the buffer in its region
	const uint32_t seq = c->next_seq;
	if (size) {
		auto it = mhandles_.find(mhandles[0]);
		if (it == mhandles_.end()) {
			NWARN("irecv: buffer %p (%zu bytes) has no valid memory handle (%p)", data[0], size, mhandles[0]);
			return ncclInternalError;
		}
		mh = it->second.get();
		uintptr_t a = reinterpret_cast<uintptr_t>(data[0]);
		if (a < mh->addr || size > mh->size || a - mh->addr > mh->size - size) {
			NWARN("irecv: buffer %p (%zu bytes) is outside its registration [%p, +%zu)", data[0], size,
			      reinterpret_cast<void *>(mh->addr), mh->size);
			return ncclInternalError;
		}
		offset = a - reinterpret_cast<uintptr_t>(mh->region->addr());
		device = mh->cuda_device;
	}
	if (c->outstanding >= cfg_.max_requests)
		return ncclSuccess;
	auto rq = std::make_shared<Request>();
	if (cfg_.stall_ms)
		rq->posted = std::chrono::steady_clock::now();
	rq->comm_id = c->id;
	rq->seq = seq;
	rq->size = size;
	rq->data = static_cast<uint8_t *>(size ? data[0] : nullptr);
	rq->tag = tags[0];
	rq->device = device;
	rq->mhandle = size ? mhandles[0] : nullptr;
	rq->offset = offset;
	if (auto early = c->inline_early.find(seq); early != c->inline_early.end()) {
		// Its data came first, in an Inline message: no Cts, done now.
		RecvComm::Early e = std::move(early->second);
		c->inline_early.erase(early);
		c->next_seq++;
		c->outstanding++;
		*request = rq.get();
		requests_[rq.get()] = rq;
		land_inline_locked(*c, *rq, e.tag, e.data);
		return ncclSuccess;
	}
	if (auto early = c->eager_early.find(seq); early != c->eager_early.end()) {
		// Its data came first, into an eager slot: no Cts, done after the copy.
		const size_t bytes = early->second;
		c->eager_early.erase(early);
		c->next_seq++;
		c->outstanding++;
		*request = rq.get();
		requests_[rq.get()] = rq;
		const uint8_t *slot = c->eager.slot(seq);
		l.unlock();
		land_eager(rq, slot, bytes);
		return ncclSuccess;
	}
	// A closed sender made this send before closing: its data comes by an
	// eager write, nobody reads a Cts.
	// (A device buffer's sender, in device memory too, will not go inline.)
	if (!c->peer_closed && device < 0 && cfg_.inline_max && size <= cfg_.inline_max && c->told_id) {
		// Every send that fits comes inline: no Cts unless it waits long
		// (made then: nothing to build or copy on a small message's path).
		rq->deferred = true;
		rq->deferred_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
	} else if (!c->peer_closed) {
		const proto::Cts m = cts_of_locked(*c, *rq, nullptr);
		try {
			proto::encode_into(m, mh ? std::span<const uint8_t>(mh->descriptor) : std::span<const uint8_t>(),
					   wire_);
			send_control_locked(c->peer, wire_);
		} catch (const Error &e) {
			if (e.code() == HMEMREG_EAGAIN)
				return ncclSuccess;
			NWARN("irecv: advertising the buffer failed: %s", e.what());
			return result_of(e);
		}
		c->credit_sent = m.done_upto; // the Cts carried it
		c->eager_uncredited = 0;
		c->told_id = true;
	}
	c->pending[seq] = rq;
	c->next_seq++;
	c->outstanding++;
	*request = rq.get();
	requests_[rq.get()] = std::move(rq);
	return ncclSuccess;
}

// The advertisement of receive r of c (mh: its buffer's handle, null for 0 bytes).
proto::Cts Plugin::cts_of_locked(const RecvComm &c, const Request &r, const MemHandle *mh) const
{
	proto::Cts m;
	m.send_id = c.remote_id;
	m.recv_id = c.id;
	m.seq = r.seq;
	m.tag = r.tag;
	m.size = r.size;
	m.offset = r.offset;
	m.done_upto = c.done_upto;
	if (mh)
		m.descriptor = mh->descriptor;
	return m;
}

ncclResult_t Plugin::iflush(void *recv_comm, int n, void **, int *, void **mhandles, void **request)
{
	// Nothing to wait for: no provider writes device memory here (see
	// choose_pointer_support), and every copy into it (the engine's staged
	// landings, our Inline and eager landings) ran on a stream of ours and
	// had finished before test() reported the receive. NULL request = done.
	uint64_t device_buffers = 0;
	{
		std::lock_guard l(mu_);
		if (!find_locked<RecvComm>(recv_comm, Comm::Kind::Recv)) {
			NWARN("iflush: %p is not a recv comm of this plugin", recv_comm);
			return ncclInternalError;
		}
		for (int i = 0; mhandles && i < n; i++)
			if (auto it = mhandles_.find(mhandles[i]); it != mhandles_.end() && it->second->cuda_device >= 0)
				device_buffers++;
	}
	flushes_ += device_buffers;
	if (request)
		*request = nullptr;
	return ncclSuccess;
}

ncclResult_t Plugin::test(void *request, int *done, int *sizes)
{
	if (!done)
		return ncclInvalidArgument;
	*done = 0;
	for (int attempt = 0; attempt < 2; attempt++) {
		{
			std::lock_guard l(mu_);
			auto it = requests_.find(request);
			if (it == requests_.end()) {
				NWARN("test: %p is not a pending request of this plugin", request);
				return ncclInternalError;
			}
			Request &r = *it->second;
			if (r.landing)
				settle_landing_locked(r);
			if (r.state == Request::State::Pending && !r.send && peer_closes_)
				expire_after_close_locked(r); // only once some sender closed
			// The clock only now and then: NCCL spins on test().
			if (r.state == Request::State::Pending && r.deferred && ++r.tests % 64 == 0 &&
			    std::chrono::steady_clock::now() > r.deferred_until)
				send_deferred_cts_locked(r);
			if (r.state != Request::State::Pending) {
				auto *c = r.send ? static_cast<Comm *>(sends_.count(r.comm_id) ? sends_[r.comm_id] : nullptr)
						 : static_cast<Comm *>(recvs_.count(r.comm_id) ? recvs_[r.comm_id] : nullptr);
				if (c && r.send)
					static_cast<SendComm *>(c)->outstanding--;
				else if (c)
					static_cast<RecvComm *>(c)->outstanding--;
				ncclResult_t res = ncclSuccess;
				if (r.state == Request::State::Done) {
					*done = 1;
					if (sizes)
						sizes[0] = static_cast<int>(r.bytes);
				} else {
					NWARN("%s #%u failed: %s", r.send ? "send" : "receive", r.seq, r.why.c_str());
					res = r.error;
				}
				requests_.erase(it);
				return res;
			}
		}
		if (attempt == 0)
			idle();
	}
	return ncclSuccess;
}

// A small receive still waiting after 100 ms: its sender may hold a send too
// large for inline (an error) that waits for a Cts; send it, so both fail.
void Plugin::send_deferred_cts_locked(Request &r)
{
	auto it = recvs_.find(r.comm_id);
	const auto mh = r.size ? mhandles_.find(r.mhandle) : mhandles_.end();
	if (it == recvs_.end() || it->second->peer_closed || (r.size && mh == mhandles_.end())) {
		r.deferred = false; // closed, or its buffer deregistered under it: nothing to advertise
		return;
	}
	try {
		send_control_locked(it->second->peer,
				    proto::encode(cts_of_locked(*it->second, r, r.size ? mh->second.get() : nullptr)));
		r.deferred = false;
	} catch (const Error &) {
		// engine full: the next test() tries again
	}
}

// After its sender closed, a receive before the sender's count still waits
// for its data (an eager write on the way); if it has not come long after
// (the sender died with it in flight), the receive fails instead of hanging.
void Plugin::expire_after_close_locked(Request &r)
{
	constexpr auto kDataAfterClose = std::chrono::seconds(30);
	auto it = recvs_.find(r.comm_id);
	if (it == recvs_.end() || !it->second->peer_closed ||
	    std::chrono::steady_clock::now() - it->second->closed_at < kDataAfterClose)
		return;
	it->second->pending.erase(r.seq);
	r.state = Request::State::Failed;
	r.error = ncclRemoteError;
	r.why = "the sender closed, and this receive's data did not come within 30 s";
}

ncclResult_t Plugin::close_send(void *send_comm)
{
	std::unique_ptr<Comm> owned;
	{
		std::lock_guard l(mu_);
		auto *c = find_locked<SendComm>(send_comm, Comm::Kind::Send);
		if (!c) {
			NWARN("closeSend: %p is not a send comm of this plugin", send_comm);
			return ncclInternalError;
		}
		NINFO(NCCL_NET,
		      "send comm %u: %llu sends (%.0f KiB on average), %llu inline, %llu into eager slots, %llu waited for the "
		      "receiver's buffer (%.1f us each on average)",
		      c->id, static_cast<unsigned long long>(c->sends),
		      c->sends ? static_cast<double>(c->bytes) / 1024.0 / static_cast<double>(c->sends) : 0.0,
		      static_cast<unsigned long long>(c->inline_sends), static_cast<unsigned long long>(c->eager_sends),
		      static_cast<unsigned long long>(c->waited),
		      c->waited ? static_cast<double>(c->wait_ns) / 1e3 / static_cast<double>(c->waited) : 0.0);
		if (!c->peer_closed && c->remote_id) {
			try {
				const uint32_t sent = c->fail_lost ? *c->fail_lost : c->next_seq;
				send_control_locked(c->peer, proto::encode(proto::Close{c->remote_id, 1, sent}));
			} catch (const Error &) {
				// the peer is gone already: nothing to tell
			}
		}
		std::erase_if(requests_, [&](const auto &kv) { return kv.second->send && kv.second->comm_id == c->id; });
		sends_.erase(c->id);
		auto it = comms_.find(send_comm);
		owned = std::move(it->second);
		comms_.erase(it);
	}
	progress_now(); // send the close now
	return ncclSuccess;
}

ncclResult_t Plugin::close_recv(void *recv_comm)
{
	std::unique_ptr<Comm> owned;
	{
		std::lock_guard l(mu_);
		auto *c = find_locked<RecvComm>(recv_comm, Comm::Kind::Recv);
		if (!c) {
			NWARN("closeRecv: %p is not a recv comm of this plugin", recv_comm);
			return ncclInternalError;
		}
		if (!c->peer_closed) {
			try {
				send_control_locked(c->peer, proto::encode(proto::Close{c->remote_id, 0}));
			} catch (const Error &) {
			}
		}
		std::erase_if(requests_, [&](const auto &kv) { return !kv.second->send && kv.second->comm_id == c->id; });
		// Its sender may still have eager writes on the way: the slots'
		// memory stays until the engine is gone (the registration goes now).
		if (c->eager.mem)
			retired_eager_.push_back(std::move(c->eager.mem));
		recvs_.erase(c->id);
		auto it = comms_.find(recv_comm);
		owned = std::move(it->second);
		comms_.erase(it);
	}
	progress_now(); // send the close now
	return ncclSuccess;
}

ncclResult_t Plugin::close_listen(void *listen_comm)
{
	std::lock_guard l(mu_);
	auto *c = find_locked<ListenComm>(listen_comm, Comm::Kind::Listen);
	if (!c) {
		NWARN("closeListen: %p is not a listen comm of this plugin", listen_comm);
		return ncclInternalError;
	}
	// Senders that connected but were never accepted learn it now.
	for (auto &pc : c->pending) {
		try {
			PeerId p = peer_for_locked(pc.engine_id, pc.address);
			send_control_locked(p, proto::encode(proto::Close{pc.send_id, 0}));
		} catch (const Error &) {
		}
	}
	listens_.erase(c->listen_id);
	comms_.erase(listen_comm);
	return ncclSuccess;
}

void Plugin::complete_recv_locked(uint32_t recv_id, uint32_t seq, size_t bytes, ncclResult_t err,
				  const std::string &why)
{
	auto it = recvs_.find(recv_id);
	if (it == recvs_.end()) {
		NINFO(NCCL_NET, "completion of receive #%u on closed comm %u dropped", seq, recv_id);
		return;
	}
	RecvComm *c = it->second;
	auto p = c->pending.find(seq);
	if (p == c->pending.end()) {
		NWARN("completion of receive #%u on comm %u that is not pending", seq, recv_id);
		return;
	}
	Request &r = *p->second;
	if (err == ncclSuccess && bytes > r.size) {
		err = ncclInternalError;
		r.why = "peer wrote " + std::to_string(bytes) + " bytes into a " + std::to_string(r.size) + "-byte receive";
	} else {
		r.why = why;
	}
	if (err == ncclSuccess) {
		r.state = Request::State::Done;
		r.bytes = bytes;
		bytes_received_ += bytes;
	} else {
		r.state = Request::State::Failed;
		r.error = err;
	}
	c->pending.erase(p);
	mark_done_locked(*c, seq);
}

// Eager data for r in its slot: copied out (host memory: at once, without
// the lock; device memory: queued on our stream, settled by test()), then r
// is settled. The slot is not reused before r is marked done, and a closed
// comm's slots stay allocated.
void Plugin::land_eager(const std::shared_ptr<Request> &r, const uint8_t *slot, size_t bytes)
{
	const bool fits = bytes <= r->size;
	std::string why;
	DeviceCopies::Event ev;
	if (fits && r->device >= 0)
		ev = copies_.start(r->data, r->device, slot, bytes, why);
	else if (fits)
		std::memcpy(r->data, slot, bytes);
	std::lock_guard l(mu_);
	if (fits && r->device >= 0 && !ev) {
		r->state = Request::State::Failed;
		r->error = ncclSystemError;
		r->why = "send #" + std::to_string(r->seq) + " (eager): " + why;
	} else if (ev) {
		r->landing = std::move(ev);
		r->landing_bytes = bytes;
		r->landing_eager = true;
		return; // settle_landing_locked
	} else if (fits) {
		r->state = Request::State::Done;
		r->bytes = bytes;
		bytes_received_ += bytes;
	} else {
		// The sender could not check (it had no Cts): only this side fails.
		r->state = Request::State::Failed;
		r->error = ncclInvalidUsage;
		r->why = "send #" + std::to_string(r->seq) + " of " + std::to_string(bytes) +
			 " bytes (eager) exceeds the posted receive of " + std::to_string(r->size) + " bytes";
	}
	finish_landing_locked(*r, true);
}

// Inline data for r (no longer in c.pending): copied under the lock (at
// most INLINE_MAX bytes; into device memory queued on our stream and
// settled by test()), then r is settled.
void Plugin::land_inline_locked(RecvComm &c, Request &r, int32_t tag, std::span<const uint8_t> data)
{
	if (tag != r.tag) {
		r.state = Request::State::Failed;
		r.error = ncclInvalidUsage;
		r.why = "send #" + std::to_string(r.seq) + " (inline) has tag " + std::to_string(tag) +
			", the matching receive tag " + std::to_string(r.tag);
	} else if (data.size() > r.size) {
		// The sender may have had no Cts to check against: only this side fails.
		r.state = Request::State::Failed;
		r.error = ncclInvalidUsage;
		r.why = "send #" + std::to_string(r.seq) + " of " + std::to_string(data.size()) +
			" bytes (inline) exceeds the posted receive of " + std::to_string(r.size) + " bytes";
	} else if (r.device >= 0 && !data.empty()) {
		r.landing_src.assign(data.begin(), data.end());
		std::string why;
		r.landing = copies_.start(r.data, r.device, r.landing_src.data(), data.size(), why);
		if (r.landing) {
			r.landing_bytes = data.size();
			return; // settle_landing_locked
		}
		r.state = Request::State::Failed;
		r.error = ncclSystemError;
		r.why = "send #" + std::to_string(r.seq) + " (inline): " + why;
	} else {
		if (!data.empty())
			std::memcpy(r.data, data.data(), data.size());
		r.state = Request::State::Done;
		r.bytes = data.size();
		bytes_received_ += data.size();
	}
	mark_done_locked(c, r.seq);
}

// Receive r's data has landed (or failed to): its slot or sequence number
// is free for the sender.
void Plugin::finish_landing_locked(Request &r, bool eager)
{
	auto it = recvs_.find(r.comm_id);
	if (eager)
		eager_receives_++;
	if (it == recvs_.end())
		return;
	if (eager)
		it->second->eager_uncredited++;
	mark_done_locked(*it->second, r.seq);
}

void Plugin::settle_landing_locked(Request &r)
{
	std::string why;
	const int rc = DeviceCopies::poll(r.landing, why);
	if (rc == 0)
		return;
	if (rc > 0) {
		r.state = Request::State::Done;
		r.bytes = r.landing_bytes;
		bytes_received_ += r.landing_bytes;
	} else {
		r.state = Request::State::Failed;
		r.error = ncclSystemError;
		r.why = "send #" + std::to_string(r.seq) + (r.landing_eager ? " (eager): " : " (inline): ") + why;
	}
	r.landing.reset();
	r.landing_src = {};
	finish_landing_locked(r, r.landing_eager);
}

void Plugin::on_notify(const Notification &n)
{
	std::unique_lock l(mu_);
	const uint32_t recv_id = static_cast<uint32_t>((n.tag & ~proto::kEagerTag) >> 32);
	const uint32_t seq = static_cast<uint32_t>(n.tag);
	auto it = recvs_.find(recv_id);
	if (it != recvs_.end() && it->second->peer_engine != n.sender) {
		NWARN("notification for comm %u from engine %llx, not its peer: dropped", recv_id,
		      static_cast<unsigned long long>(n.sender));
		return;
	}
	if (!(n.tag & proto::kEagerTag)) {
		complete_recv_locked(recv_id, seq, n.bytes, ncclSuccess, {});
		return;
	}
	if (it == recvs_.end()) {
		NINFO(NCCL_NET, "eager data for receive #%u on closed comm %u dropped", seq, recv_id);
		return;
	}
	RecvComm &c = *it->second;
	if (!c.eager.slots || n.bytes > c.eager.slot_size || !seq_before(seq, c.done_upto + c.eager.slots)) {
		NWARN("eager data for receive #%u on comm %u does not fit a free slot (%zu bytes): dropped", seq, c.id,
		      n.bytes);
		return;
	}
	auto p = c.pending.find(seq);
	if (p == c.pending.end()) {
		c.eager_early[seq] = n.bytes; // its irecv comes later
		return;
	}
	auto r = p->second;
	c.pending.erase(p);
	const uint8_t *slot = c.eager.slot(seq);
	l.unlock();
	land_eager(r, slot, n.bytes);
}

void Plugin::on_message(const Message &msg)
{
	auto m = proto::decode(msg.data);
	if (!m) {
		NWARN("malformed control message (%zu bytes) from engine %llx dropped", msg.data.size(),
		      static_cast<unsigned long long>(msg.sender));
		return;
	}
	std::lock_guard l(mu_);
	switch (m->type) {
	case proto::Type::Connect: {
		auto it = listens_.find(m->connect.listen_id);
		bool valid = false;
		try {
			valid = Engine::peer_engine_id(m->connect.address) == msg.sender;
		} catch (const Error &) {
		}
		if (it == listens_.end() || !valid) {
			NWARN("connection request for %s dropped", valid ? "a closed listen comm" : "a bad address");
			return;
		}
		it->second->pending.push_back({m->connect.send_id, msg.sender, std::move(m->connect.address)});
		return;
	}
	case proto::Type::Cts: {
		SendComm *c = send_comm_of_locked(m->cts.send_id, msg.sender);
		if (!c) {
			NINFO(NCCL_NET, "buffer advertisement for closed send comm %u dropped", m->cts.send_id);
			return;
		}
		c->remote_id = m->cts.recv_id;
		credit_locked(*c, m->cts.done_upto);
		if (seq_before(m->cts.seq, c->next_seq))
			return; // that send went into an eager slot before this came
		if (!c->cts.emplace(m->cts.seq, std::move(m->cts)).second)
			NWARN("duplicate buffer advertisement on send comm %u dropped", c->id);
		return;
	}
	case proto::Type::EagerRing: {
		SendComm *c = send_comm_of_locked(m->eager.send_id, msg.sender);
		if (!c) {
			NINFO(NCCL_NET, "eager slots for closed send comm %u dropped", m->eager.send_id);
			return;
		}
		c->remote_id = m->eager.recv_id;
		c->eager.slots = m->eager.slots;
		c->eager.slot_size = m->eager.slot_size;
		c->eager.descriptor = std::move(m->eager.descriptor);
		return;
	}
	case proto::Type::Credit:
		if (SendComm *c = send_comm_of_locked(m->credit.send_id, msg.sender))
			credit_locked(*c, m->credit.done_upto);
		return;
	case proto::Type::Inline: {
		auto it = recvs_.find(m->inl.recv_id);
		if (it == recvs_.end() || it->second->peer_engine != msg.sender) {
			NINFO(NCCL_NET, "inline data for receive #%u on closed comm %u dropped", m->inl.seq, m->inl.recv_id);
			return;
		}
		RecvComm &c = *it->second;
		auto p = c.pending.find(m->inl.seq);
		if (p == c.pending.end()) {
			if (!seq_before(m->inl.seq, c.next_seq)) // its irecv comes later
				c.inline_early[m->inl.seq] = {m->inl.tag, {m->inl.data.begin(), m->inl.data.end()}};
			return;
		}
		auto r = p->second;
		c.pending.erase(p);
		land_inline_locked(c, *r, m->inl.tag, m->inl.data);
		return;
	}
	case proto::Type::Empty: {
		auto it = recvs_.find(m->empty.recv_id);
		if (it != recvs_.end() && it->second->peer_engine == msg.sender)
			complete_recv_locked(m->empty.recv_id, m->empty.seq, 0, ncclSuccess, {});
		return;
	}
	case proto::Type::Fail: {
		auto it = recvs_.find(m->fail.recv_id);
		if (it != recvs_.end() && it->second->peer_engine == msg.sender)
			complete_recv_locked(m->fail.recv_id, m->fail.seq, 0,
					     static_cast<ncclResult_t>(m->fail.result ? m->fail.result : ncclRemoteError),
					     "sender: " + m->fail.why);
		return;
	}
	case proto::Type::Close: {
		if (m->close.to_recv) {
			auto it = recvs_.find(m->close.comm_id);
			if (it == recvs_.end() || it->second->peer_engine != msg.sender)
				return;
			RecvComm *c = it->second;
			c->peer_closed = true;
			c->peer_sent = m->close.sent;
			c->closed_at = std::chrono::steady_clock::now();
			peer_closes_++;
			// Receives the sender made a send for still complete: their
			// data went before the Close (eager writes may land after it).
			std::erase_if(c->pending, [&](const auto &kv) {
				if (seq_before(kv.first, c->peer_sent))
					return false;
				kv.second->state = Request::State::Failed;
				kv.second->error = ncclRemoteError;
				kv.second->why = "the sender closed the connection";
				return true;
			});
		} else {
			auto it = sends_.find(m->close.comm_id);
			if (it != sends_.end() && it->second->peer_engine == msg.sender) {
				it->second->peer_closed = true;
				peer_closes_++;
			}
		}
		return;
	}
	}
	NWARN("control message of unknown type %u dropped", static_cast<unsigned>(m->type));
}

void Plugin::stats(struct hmemreg_nccl_counters &out)
{
	std::memset(&out, 0, sizeof(out));
	out.regions_live = regs_->live();
	out.region_hits = regs_->hits();
	out.region_misses = regs_->misses();
	std::lock_guard l(mu_);
	out.mhandles_live = mhandles_.size();
	out.comms_live = comms_.size();
	out.requests_live = requests_.size();
	out.bytes_sent = bytes_sent_;
	out.bytes_received = bytes_received_;
	out.eager_receives = eager_receives_;
	out.peer_closes = peer_closes_;
	out.device_regs = device_regs_.load();
	out.device_flushes = flushes_.load();
}

size_t Plugin::live_comms()
{
	std::lock_guard l(mu_);
	return comms_.size();
}

} // namespace hmemreg::nccl
