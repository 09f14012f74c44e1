// SPDX-License-Identifier: MIT
// The engine: provider selection, rails, peers, regions, transfers, progress.
#include "engine/engine.hpp"
#include "settings/settings.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <unistd.h>

#include <rdma/fi_domain.h>

#include "engine/engine_impl.hpp"
#include "engine/staging.hpp"
#include "engine/universe.hpp"
#include "fabric/abi.hpp"
#include "fabric/info.hpp"
#include "hmem/cuda_copy.hpp"
#include "hmem/cuda_memory.hpp"
#include "hmemreg/cache.h"

namespace hmemreg::engine {

namespace {

// A writer with 4-byte keys and no index yet asks its target again after this.
constexpr int64_t kImmJoinRetryNs = 1'000'000'000;
// A target added again continues its 4-byte key sequence this far ahead of
// where the old incarnation stopped (see imm4_seq_kept)...
constexpr uint32_t kImm4ReaddGap = 1u << 16;
// ...when removed within this long; older entries are pruned once there are
// many (a target's partial arrivals live at most peer_timeout, 60 s unset).
constexpr int64_t kImm4SeqKeptNs = 10LL * 60 * 1'000'000'000;
constexpr size_t kImm4SeqKeptMax = 4096;

uint64_t random_id()
{
	std::random_device rd;
	uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
	v ^= static_cast<uint64_t>(getpid()) << 17;
	v ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
	// Nonzero low 32 bits: 8-byte immediate keys (stamped with them) stay
	// >= 2^32, apart from 4-byte keys (see wire::kVersion).
	return (v & 0xffffffffu) ? v : v | 1;
}

// The engine whose progress turn this thread is in (callbacks run there):
// drain() from such a callback would wait for itself.
thread_local const Engine::Impl *in_turn = nullptr;

// Config::peer_timeout_ms as given, or from HMEMREG_PEER_TIMEOUT_MS, or the
// default; `from` says which.
unsigned resolve_peer_timeout(unsigned given, std::string &from)
{
	if (given != Config::kPeerTimeoutDefault) {
		if (given > Config::kPeerTimeoutMaxMs)
			throw Error(HMEMREG_EINVAL, "engine: peer_timeout_ms " + std::to_string(given) + " is over " +
							    std::to_string(Config::kPeerTimeoutMaxMs) + " (a day)");
		from = "config";
		return given;
	}
	const char *v = settings::raw("HMEMREG_PEER_TIMEOUT_MS");
	if (!v) {
		from = "default";
		return Config::kPeerTimeoutDefaultMs;
	}
	char *end = nullptr;
	errno = 0;
	const unsigned long long x = std::strtoull(v, &end, 10);
	if (errno || end == v || *end || *v == '-' || x > Config::kPeerTimeoutMaxMs)
		throw Error(HMEMREG_EINVAL, std::string("engine: HMEMREG_PEER_TIMEOUT_MS='") + v +
						    "' is not a number of milliseconds in [0, " +
						    std::to_string(Config::kPeerTimeoutMaxMs) + "] (0: never)");
	from = "HMEMREG_PEER_TIMEOUT_MS";
	return static_cast<unsigned>(x);
}

std::string hex(uint64_t v)
{
	char b[20];
	std::snprintf(b, sizeof(b), "%016llx", static_cast<unsigned long long>(v));
	return b;
}

// Hints for an RDM endpoint with messages and RMA writes, with FI_HMEM when
// asked; mr_mode bits we handle (we always register and pass descriptors,
// device memory included (FI_MR_HMEM), keys are carried in the descriptor,
// addresses are virtual or offsets).
fabric::InfoPtr make_hints(const Config &cfg, bool hmem, const std::string &provider)
{
	fabric::InfoPtr h = fabric::alloc_hints();
	h->caps = FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_SEND | FI_RECV;
	if (hmem)
		h->caps |= FI_HMEM;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_HMEM;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	if (!provider.empty())
		h->fabric_attr->prov_name = strdup(provider.c_str());
	if (!cfg.domain.empty())
		h->domain_attr->name = strdup(cfg.domain.c_str());
	return h;
}

} // namespace

RegionImpl::RegionImpl(uint64_t engine, void *addr, size_t len, std::vector<std::shared_ptr<DomainHolder>> domains,
		       std::unique_ptr<LocalRegistration> reg, std::unique_ptr<StagedMemory> staged)
	: engine_id(engine), addr_(addr), len_(len), staged_(std::move(staged)), domains_(std::move(domains)),
	  reg(std::move(reg))
{
}

RegionImpl::~RegionImpl() = default;

uint8_t *RegionImpl::io_addr() const
{
	return staged_ ? staged_->mirror.data() : static_cast<uint8_t *>(addr_);
}

Engine::Impl::Impl(const Config &c) : cfg(c), id(random_id())
{
	next_imm_seq = static_cast<uint32_t>(random_id() >> 16);
	std::string from;
	cfg.peer_timeout_ms = resolve_peer_timeout(cfg.peer_timeout_ms, from);
	caps.peer_timeout_ms = cfg.peer_timeout_ms;
	caps.peer_timeout = (cfg.peer_timeout_ms ? std::to_string(cfg.peer_timeout_ms) + " ms" : std::string("never")) +
			    " (" + from + ")";
	if (cfg.rails == 0)
		throw Error(HMEMREG_EINVAL, "engine: rails must be at least 1");
	if (cfg.recv_buffers == 0 || cfg.send_buffers == 0 || cfg.post_batch == 0 || cfg.max_transfers == 0)
		throw Error(HMEMREG_EINVAL, "engine: recv_buffers, send_buffers, post_batch and max_transfers must be > 0");
	if (cfg.max_message == 0 || cfg.max_message > (1u << 20))
		throw Error(HMEMREG_EINVAL, "engine: max_message must be 1 B..1 MiB");
	if (cfg.staging_piece < 4096)
		throw Error(HMEMREG_EINVAL, "engine: staging_piece must be at least 4 KiB");
	if (cfg.stage_device_memory && cfg.max_message < sizeof(wire::LandedHeader) + sizeof(wire::LandedRange))
		throw Error(HMEMREG_EINVAL, "engine: max_message must be at least 32 B to stage device memory "
					    "(Landed notices), or set stage_device_memory = false");
	open_rails();
	all_rails.resize(rails.size());
	std::iota(all_rails.begin(), all_rails.end(), 0u);
	rail_quiet = std::make_unique<std::atomic<uint32_t>[]>(rails.size());
	describe_device_memory();
}

Engine::Impl::~Impl() = default;

void Engine::Impl::kick()
{
	if (threads)
		threads->kick();
}

PeerId Engine::Impl::peer_of(uint64_t engine_id) const
{
	std::lock_guard l(peers_mu);
	auto it = by_engine.find(engine_id);
	return it == by_engine.end() ? kUnknownPeer : it->second;
}

void Engine::Impl::open_rails()
{
	std::string universe = fit_rxm_universe(cfg.provider);
	if (!universe.empty())
		caps.notes.push_back(universe);
	fabric::InfoPtr hints = make_hints(cfg, cfg.require_hmem, cfg.provider);
	const char *node = cfg.node.empty() ? nullptr : cfg.node.c_str();
	fabric::InfoPtr list = fabric::get_info(hints.get(), node, node ? FI_SOURCE : 0);
	note_fabric_initialized();
	caps.api_version = fabric::api_version();
	// FI_HMEM by default where there is device memory to move: asked of the
	// provider chosen without it (so asking never changes which provider and
	// fabric are used), kept when that provider offers it on that fabric.
	if (list && !cfg.require_hmem && cfg.ask_hmem && cuda::available()) {
		const fi_info *plain = list.get();
		fabric::InfoPtr h = make_hints(cfg, true, plain->fabric_attr->prov_name);
		fabric::InfoPtr with = fabric::get_info(h.get(), node, node ? FI_SOURCE : 0);
		if (with && std::strcmp(with->fabric_attr->prov_name, plain->fabric_attr->prov_name) == 0 &&
		    std::strcmp(with->fabric_attr->name, plain->fabric_attr->name) == 0)
			list = std::move(with);
		else
			caps.hmem_why_not = std::string("provider ") + plain->fabric_attr->prov_name +
					    " offers no FI_HMEM with libfabric " + fabric::api_version_text(fi_version());
	} else if (list && !cfg.require_hmem) {
		caps.hmem_why_not = !cfg.ask_hmem ? "not asked (Config::ask_hmem off)" : "no CUDA driver here";
	}
	if (!list) {
		std::string want = cfg.provider.empty() ? "any provider" : "provider '" + cfg.provider + "'";
		throw Error(HMEMREG_ENOTSUP, "engine: " + want + " offers no RDM endpoint with FI_MSG|FI_RMA" +
						     (cfg.require_hmem ? "|FI_HMEM" : "") +
						     (cfg.domain.empty() ? "" : " on domain '" + cfg.domain + "'") +
						     (node ? std::string(" at node ") + node : "") +
						     " (see fi_info -p PROVIDER -t FI_EP_RDM)");
	}
	// First entry decides provider and fabric; rails take distinct domains of it.
	auto all = fabric::entries(list.get());
	const fi_info *first = all.front();
	std::string prov = first->fabric_attr->prov_name;
	std::string fabname = first->fabric_attr->name;
	std::vector<const fi_info *> distinct;
	for (const fi_info *i : all) {
		if (prov != i->fabric_attr->prov_name || fabname != i->fabric_attr->name)
			continue;
		bool seen = std::any_of(distinct.begin(), distinct.end(), [&](const fi_info *d) {
			return std::strcmp(d->domain_attr->name, i->domain_attr->name) == 0;
		});
		if (!seen)
			distinct.push_back(i);
	}
	caps.provider = prov;
	caps.fabric = fabname;
	if (distinct.size() < cfg.rails)
		caps.notes.push_back(std::to_string(cfg.rails) + " rails requested, " + std::to_string(distinct.size()) +
				     " NIC(s) found: rails share NICs round-robin");

	caps.rma = (first->caps & FI_RMA) != 0;
	caps.hmem = (first->caps & FI_HMEM) != 0;
	caps.dmabuf = caps.hmem && caps.api_version >= fabric::kApi1_20;
	caps.cq_data_size = first->domain_attr->cq_data_size;
	caps.remote_cq_data = caps.cq_data_size > 0;
	caps.inject_size = first->tx_attr->inject_size;
	if (cfg.require_remote_cq_data && !caps.remote_cq_data)
		throw Error(HMEMREG_ENOTSUP, "engine: provider " + prov + " has no remote CQ data (cq_data_size 0)");
	// mr_mode bits (API >= 1.5) never carry FI_MR_BASIC (deprecated in 2.x).
	virt_addr = (first->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;

	// Completion semantics: the target is told (a control message sent once
	// every write completed locally) only when the data is in place, so
	// writes ask for FI_DELIVERY_COMPLETE. Transmit-complete writes ordered
	// before the notice (FI_ORDER_SAW) are not enough: rxm reconnects
	// silently, and writes lost with a broken connection would be followed
	// by a notice delivered on the new one.
	caps.delivery_complete = true;
	// Message-mode writes (and staged pieces) keep delivery-complete.
	choose_notify(caps.cq_data_size, prov);

	size_t tx_size = first->tx_attr->size ? first->tx_attr->size : 1024;
	size_t depth = cfg.queue_depth ? cfg.queue_depth : tx_size;
	if (depth > tx_size) {
		caps.notes.push_back("queue depth " + std::to_string(depth) + " capped to the provider's tx size " +
				     std::to_string(tx_size));
		depth = tx_size;
	}
	size_t rx_size = first->rx_attr->size ? first->rx_attr->size : 1024;
	size_t recvs = cfg.recv_buffers;
	if (recvs > rx_size) {
		caps.notes.push_back("receive buffers " + std::to_string(recvs) + " capped to the provider's rx size " +
				     std::to_string(rx_size));
		recvs = rx_size;
	}
	size_t max_msg = first->ep_attr->max_msg_size;
	// tcp moves one RMA write as one stream on one socket, delivery-complete
	// acked at its end: writes of 512 KiB keep the pipe full (measured on 16
	// cores over loopback: a 64 MiB transfer went from 57% to 90% of iperf3).
	// So does net, libfabric's native RDM over TCP (64 MiB: 28 -> 46 Gbps on
	// 32 cores). shm copies each write in one go: splitting only adds work.
	const bool streams = prov.find("tcp") != std::string::npos || prov.rfind("net", 0) == 0;
	size_t def_write = streams ? std::min<size_t>(512u << 10, max_msg) : max_msg;
	caps.max_write = cfg.max_write ? std::min(cfg.max_write, max_msg) : def_write;
	if (!cfg.max_write && def_write < max_msg)
		caps.notes.push_back("writes split at " + std::to_string(def_write >> 10) + " KiB (" + prov +
				     " streams each write on one connection)");
	caps.queue_depth = depth;
	// Chunks per write: what both the local and the remote iov limits allow.
	size_t iov_limit = std::max<size_t>(1, std::min(first->tx_attr->iov_limit, first->tx_attr->rma_iov_limit));
	caps.write_iov = cfg.write_iov ? std::min(cfg.write_iov, iov_limit) : iov_limit;
	if (cfg.max_message + sizeof(wire::MsgHeader) > max_msg)
		throw Error(HMEMREG_EINVAL, "engine: max_message exceeds the provider's max_msg_size");

	size_t peer_depth = cfg.peer_queue_depth ? std::min(cfg.peer_queue_depth, depth) : std::max<size_t>(1, depth / 2);
	caps.peer_queue_depth = peer_depth;
	RailOptions ro{depth, static_cast<int64_t>(peer_depth * cfg.rails),
		       cfg.max_message, recvs,
		       cfg.send_buffers, cfg.post_batch,
		       caps.delivery_complete, cfg.post_more, id,
		       &doom_epoch};
	for (unsigned r = 0; r < cfg.rails; r++) {
		const fi_info *info = distinct[r % distinct.size()];
		rails.push_back(std::make_unique<Rail>(r, info, ro, topo));
		caches.push_back(rails.back()->cache());
		caps.rail_domains.push_back(info->domain_attr->name);
	}
	caps.notes.push_back("local memory: " + rails.front()->cache()->describe());
	// FI_HMEM is no promise of CUDA (1.17's shm offers it without): one
	// probe registration decides between the direct and the staged path.
	if (caps.hmem && cuda::available()) {
		std::string why;
		if (!provider_registers_cuda(rails.front()->domain(), &why)) {
			caps.hmem = false;
			caps.dmabuf = false;
			caps.hmem_why_not = "provider " + prov + " offers FI_HMEM but does not register CUDA memory: " + why;
			if (cfg.require_hmem)
				throw Error(HMEMREG_ENOTSUP, "engine: " + caps.hmem_why_not);
		}
	}
}

// Immediate keys of 8 bytes where the provider carries them, else of 4
// (target-assigned writer index), else message mode (see engine.hpp).
void Engine::Impl::choose_notify(size_t cq, const std::string &prov)
{
	const size_t want = cfg.imm_data_bytes;
	if (want != 0 && want != wire::kImm4DataSize && want != wire::kImmDataSize)
		throw Error(HMEMREG_EINVAL, "engine: imm_data_bytes must be 0 (auto), 4 or 8, not " + std::to_string(want));
	const std::string has = prov + " has " + std::to_string(cq) + " B of remote CQ data";
	if (want && cq < want && cfg.notify != Config::Notify::Message)
		throw Error(HMEMREG_ENOTSUP, "engine: imm_data_bytes " + std::to_string(want) + " but " + has);
	const size_t bytes = want ? want : cq >= wire::kImmDataSize ? wire::kImmDataSize
					 : cq >= wire::kImm4DataSize ? wire::kImm4DataSize : 0;
	if (cfg.notify == Config::Notify::Immediate && bytes == 0)
		throw Error(HMEMREG_ENOTSUP, "engine: immediate notification needs at least " +
						     std::to_string(wire::kImm4DataSize) + " B of remote CQ data, " + has +
						     " (use Notify::Message or Auto)");
	const std::string msg = "a Done message after delivery-complete writes";
	if (cfg.notify == Config::Notify::Message) {
		caps.notify = msg + " (Config::notify is Message)";
	} else if (bytes == 0) {
		caps.notify = msg + " (" + has + ", immediate keys need at least " +
			      std::to_string(wire::kImm4DataSize) + ")";
	} else {
		caps.notify_immediate = true;
		caps.imm_key_bytes = bytes;
		const std::string why = want ? "Config::imm_data_bytes " + std::to_string(want) + "; " + has : has;
		if (bytes == wire::kImmDataSize)
			caps.notify = "counting writes with immediate data (8-byte keys: writer's engine id stamp and "
				      "sequence; transmit-complete writes): " + why;
		else
			caps.notify = "counting writes with immediate data (4-byte keys: writer index assigned by each "
				      "target and a 20-bit sequence; transmit-complete writes; to a peer that has not "
				      "assigned one yet, a Done message after delivery-complete writes): " + why;
	}
}

std::shared_ptr<PeerState> Engine::Impl::find_peer(PeerId p) const
{
	std::lock_guard l(peers_mu);
	auto it = peers.find(p);
	if (it == peers.end())
		throw Error(HMEMREG_ENOENT, "unknown peer " + std::to_string(p));
	return it->second;
}

void Engine::Impl::admit(const std::shared_ptr<TransferImpl> &x, bool internal)
{
	PeerState &p = *x->peer;
	if (p.dead.load(std::memory_order_acquire) && !internal)
		throw Error(HMEMREG_EFABRIC, p.dead_reason);
	std::lock_guard l(active_mu);
	if (active.size() >= cfg.max_transfers && !internal)
		throw Error(HMEMREG_EAGAIN, "engine: " + std::to_string(active.size()) +
						    " transfers active (max_transfers); progress and retry");
	active.insert(x.get());
	x->self = x;
	if (!x->handshake && (p.active.fetch_add(1) == 0 || p.inflight.load() == 0))
		p.last_progress.store(PeerState::now_ns(), std::memory_order_relaxed);
}

// Tells the caller (status, callback, waiters), once.
void Engine::Impl::report(TransferImpl &x)
{
	if (x.reported.exchange(true))
		return;
	int code = x.first_error();
	x.set_status(code ? -code : 0);
	if (x.callback)
		x.callback(x);
	x.callback = nullptr;
	if (!x.handshake)
		x.peer->active--;
	x.mark_done();
}

// The transfer's operations are all resolved: report it (unless done
// already) and release it.
void Engine::Impl::finish(const std::shared_ptr<TransferImpl> &x)
{
	report(*x);
	{
		std::lock_guard l(active_mu);
		active.erase(x.get());
	}
	x->regions.clear();
	x->self.reset();
}

// Peers with unfinished transfers and no completion for peer_timeout are
// declared dead: their queued operations fail, and their transfers are
// reported failed now even if operations stay posted (a dead shm peer never
// completes them; those are released when the endpoint closes).
void Engine::Impl::watchdog()
{
	int64_t now = PeerState::now_ns();
	int64_t last = last_watchdog.load(std::memory_order_relaxed);
	if (now - last < 50'000'000 || !last_watchdog.compare_exchange_strong(last, now))
		return;
	const int64_t limit = static_cast<int64_t>(cfg.peer_timeout_ms) * 1'000'000;
	std::vector<std::shared_ptr<PeerState>> dead;
	{
		std::lock_guard l(peers_mu);
		for (auto &[id, p] : peers) {
			// Only a peer with operations posted and none completing, or whose
			// posts the provider keeps refusing, is blamed (one merely waiting
			// behind other peers' work is not).
			bool stuck = p->inflight.load() > 0 || p->refused.load();
			if (p->dead || !stuck || p->active.load() == 0 || now - p->last_progress.load() < limit)
				continue;
			p->dead_reason = "peer " + std::to_string(id) + " (engine " + hex(p->engine_id) +
					 ") made no progress for " + std::to_string(cfg.peer_timeout_ms) +
					 " ms: dead or unreachable";
			p->dead.store(true, std::memory_order_release);
			dead.push_back(p);
		}
	}
	if (dead.empty())
		return;
	doom_epoch++;
	std::vector<std::shared_ptr<TransferImpl>> victims;
	{
		std::lock_guard l(active_mu);
		for (TransferImpl *x : active)
			if (x->peer->dead.load() && !x->reported.load())
				victims.push_back(x->self);
	}
	for (auto &x : victims) {
		x->fail(HMEMREG_EFABRIC, x->peer->dead_reason);
		report(*x);
	}
}

// Hands notifications to the application's handler (copied under the lock,
// called outside it: a handler may call back into the engine).
void Engine::Impl::notify_app(std::span<const Notification> notes)
{
	if (notes.empty())
		return;
	if (uint64_t devs = direct_devices.load(std::memory_order_relaxed))
		for (int d = 0; d < 64; d++)
			if (devs & (1ULL << d))
				cuda::finish_legacy_copies(d); // errors: the copy's own failure shows elsewhere
	std::function<void(const Notification &)> fn;
	{
		std::lock_guard l(handlers_mu);
		fn = on_notify;
	}
	if (fn)
		for (const auto &n : notes)
			fn(n);
}

// Writes carrying remote CQ data landed (one key per write).
void Engine::Impl::on_immediate(std::span<const uint64_t> keys)
{
	std::vector<Notification> ready;
	const int64_t now = PeerState::now_ns();
	{
		std::lock_guard l(arrivals_mu);
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
	imm_notices += ready.size();
	notify_app(ready);
}

// The Announce of an immediate-notify write: how many writes carry its key.
void Engine::Impl::on_announce(const Events::Msg &m)
{
	wire::Announce an;
	if (m.data.size() != sizeof(an)) {
		imm_abandoned++;
		return;
	}
	std::memcpy(&an, m.data.data(), sizeof(an));
	const bool key4 = wire::imm_is4(an.key);
	if ((!key4 && !wire::imm_key_from(an.key, m.hdr.sender)) || an.writes == 0) {
		imm_abandoned++; // not this sender's key: never count it
		return;
	}
	Notification note{peer_of(m.hdr.sender), m.hdr.sender, m.hdr.tag, m.hdr.bytes, m.hdr.chunks};
	bool ready = false;
	{
		std::lock_guard l(arrivals_mu);
		if (key4) {
			// Only the writer we gave the key's index may announce it.
			const uint32_t idx = wire::imm4_index(an.key);
			if (idx == 0 || idx >= imm4_writer.size() || imm4_writer[idx] != m.hdr.sender) {
				imm_abandoned++;
				return;
			}
			imm4_advance(idx, static_cast<uint32_t>(an.key) & wire::kImm4SeqMask);
		}
		Arrival &a = arrivals[an.key];
		if (a.announced || a.seen > an.writes) {
			// A second Announce for a live key, or more writes than announced
			// (a stale key): the count cannot be trusted, drop it.
			arrivals.erase(an.key);
			imm_abandoned++;
			return;
		}
		a.announced = true;
		a.expected = an.writes;
		a.note = note;
		a.touched = PeerState::now_ns();
		if (a.seen == a.expected) {
			arrivals.erase(an.key);
			ready = true;
		}
	}
	if (!ready)
		return;
	imm_notices++;
	notify_app({&note, 1});
}

// 4-byte keys reuse a writer's sequence after 2^20 transfers. A partial
// arrival left behind (its writer's connection broke, writes or Announce
// lost) must be gone before its key returns, or its count would mix with the
// new transfer's: each time the writer's announced sequence enters a new
// quarter of the sequence space, its arrivals a quarter to three quarters
// behind are dropped. Live transfers are assumed within a quarter (2^18
// transfers) of the latest announced. Called with arrivals_mu held.
void Engine::Impl::imm4_advance(uint32_t idx, uint32_t seq)
{
	constexpr uint32_t quarter = (wire::kImm4SeqMask + 1) / 4;
	uint32_t &last = imm4_latest[idx];
	if (last != kNoSeq && ((seq - last) & wire::kImm4SeqMask) >= 2 * quarter)
		return; // behind the latest (Announces overtaking each other)
	const bool crossed = last == kNoSeq || seq / quarter != last / quarter;
	last = seq;
	if (!crossed)
		return;
	imm_abandoned += std::erase_if(arrivals, [&](const auto &kv) {
		if (!wire::imm_is4(kv.first) || wire::imm4_index(kv.first) != idx)
			return false;
		const uint32_t behind = (seq - static_cast<uint32_t>(kv.first)) & wire::kImm4SeqMask;
		return behind >= quarter && behind <= 3 * quarter;
	});
}

// A writer with 4-byte keys asks for its index. Answered once the writer is
// our peer (we need its address): now, or by add_peer.
void Engine::Impl::on_imm_join(uint64_t writer)
{
	{
		std::lock_guard l(arrivals_mu);
		// Writers never added here pile up: forget them all (a writer asks
		// again while it has no index, see send_imm_join).
		if (imm4_waiting.size() >= wire::kImm4Writers)
			imm4_waiting.clear();
		imm4_waiting.insert(writer);
	}
	std::shared_ptr<PeerState> p;
	{
		std::lock_guard l(peers_mu);
		auto it = by_engine.find(writer);
		if (it != by_engine.end())
			p = peers.at(it->second);
	}
	if (p)
		send_imm_index(p);
}

// Answers the peer's ImmJoin if it asked: its index (assigned now if new), or 0.
void Engine::Impl::send_imm_index(const std::shared_ptr<PeerState> &p)
{
	wire::ImmIndex ans{p->engine_id, 0, 0};
	{
		std::lock_guard l(arrivals_mu);
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
	auto x = make_send(p, wire::MsgType::ImmIndex, {reinterpret_cast<const uint8_t *>(&ans), sizeof(ans)}, 0, {});
	x->handshake = true;
	admit(x, true); // from progress context: never refused for max_transfers
	rails[0]->enqueue_send(x);
	kick();
}

// Asks the peer for our writer index (4-byte keys).
void Engine::Impl::send_imm_join(const std::shared_ptr<PeerState> &p)
{
	p->imm_asked.store(PeerState::now_ns(), std::memory_order_relaxed);
	auto x = make_send(p, wire::MsgType::ImmJoin, {}, 0, {});
	x->handshake = true;
	admit(x, true);
	rails[0]->enqueue_send(x);
	kick();
}

// A target's answer to our ImmJoin.
void Engine::Impl::on_imm_index(const Events::Msg &m)
{
	wire::ImmIndex ans;
	if (m.data.size() != sizeof(ans))
		return;
	std::memcpy(&ans, m.data.data(), sizeof(ans));
	if (ans.writer != id || ans.index >= wire::kImm4Writers || caps.imm_key_bytes != wire::kImm4DataSize)
		return; // not for us, or we never asked
	std::lock_guard l(peers_mu);
	auto it = by_engine.find(m.hdr.sender);
	if (it == by_engine.end())
		return;
	PeerState &p = *peers.at(it->second);
	if (ans.index == 0)
		p.imm_refused.store(true, std::memory_order_relaxed);
	else
		p.imm_index.store(ans.index, std::memory_order_release);
}

// Partial arrivals idle for peer_timeout (60 s without one): their writer
// died or gave up (a write lost with a broken connection never arrives).
// Dropped, never notified; also keeps a stale count from meeting a reused key.
void Engine::Impl::expire_arrivals()
{
	int64_t now = PeerState::now_ns();
	int64_t last = last_expiry.load(std::memory_order_relaxed);
	if (now - last < 50'000'000 || !last_expiry.compare_exchange_strong(last, now))
		return;
	const int64_t limit = static_cast<int64_t>(cfg.peer_timeout_ms ? cfg.peer_timeout_ms : 60'000) * 1'000'000;
	std::lock_guard l(arrivals_mu);
	const size_t n = std::erase_if(arrivals, [&](const auto &kv) { return now - kv.second.touched > limit; });
	imm_abandoned += n;
	imm_expired += n;
}

void Engine::Impl::settle()
{
	std::vector<unsigned> ids(rails.size());
	std::iota(ids.begin(), ids.end(), 0u);
	const auto start = std::chrono::steady_clock::now();
	int quiet = 0;
	while (quiet < 5 && std::chrono::steady_clock::now() - start < std::chrono::milliseconds(200)) {
		quiet = turn(ids) ? 0 : quiet + 1;
		std::this_thread::sleep_for(std::chrono::microseconds(500));
	}
}

bool Engine::Impl::writer_broke()
{
	if (imm_expired.load() > 0)
		return true;
	std::lock_guard l(arrivals_mu);
	return !arrivals.empty();
}

void Engine::Impl::dispatch(Events &ev)
{
	if (!ev.imm.empty())
		on_immediate(ev.imm);
	for (auto &m : ev.messages) {
		switch (static_cast<wire::MsgType>(m.hdr.type)) {
		case wire::MsgType::User: {
			std::function<void(const Message &)> fn;
			{
				std::lock_guard l(handlers_mu);
				fn = on_message;
			}
			if (fn)
				fn(Message{peer_of(m.hdr.sender), m.hdr.sender, m.data});
			break;
		}
		case wire::MsgType::Done: {
			Notification n{peer_of(m.hdr.sender), m.hdr.sender, m.hdr.tag, m.hdr.bytes, m.hdr.chunks};
			notify_app({&n, 1});
			break;
		}
		case wire::MsgType::Landed:
			on_landed(m);
			break;
		case wire::MsgType::StagedDone:
			on_staged_done(m, peer_of(m.hdr.sender));
			break;
		case wire::MsgType::Announce:
			on_announce(m);
			break;
		case wire::MsgType::ImmJoin:
			on_imm_join(m.hdr.sender);
			break;
		case wire::MsgType::ImmIndex:
			on_imm_index(m);
			break;
		case wire::MsgType::Hello:
			break;
		}
	}
	for (auto &x : ev.finished)
		finish(x);
}

size_t Engine::Impl::turn(std::span<const unsigned> rail_ids)
{
	const Impl *outer = in_turn;
	in_turn = this;
	struct Restore {
		const Impl *outer;
		~Restore() { in_turn = outer; }
	} restore{outer};
	size_t n = 0;
	for (unsigned r : rail_ids) {
		Events ev;
		rails[r]->progress(ev);
		const size_t got = ev.handled + ev.messages.size() + ev.finished.size();
		n += got;
		if (got)
			rail_quiet[r].store(0, std::memory_order_relaxed);
		else if (rail_quiet[r].load(std::memory_order_relaxed) < UINT32_MAX)
			rail_quiet[r].fetch_add(1, std::memory_order_relaxed);
		if (!ev.empty())
			dispatch(ev);
	}
	if (staging)
		n += poll_staging();
	if (has_retiring.load(std::memory_order_relaxed))
		retire_peers();
	if (cfg.peer_timeout_ms)
		watchdog();
	expire_arrivals();
	return n;
}

// With sends_on_first_rail a caller polls rail 0 on every turn, other rails
// fully only while they carry traffic: a thread leaves its rails to the
// caller unless one of them (other than 0) does, so bulk transfers striped
// over the rails keep a poller per rail.
bool Engine::Impl::caller_covers(std::span<const unsigned> ids) const
{
	if (!cfg.sends_on_first_rail)
		return true;
	for (unsigned r : ids)
		if (r != 0 && (rails[r]->busy() || rail_quiet[r].load(std::memory_order_relaxed) < kActiveTurns))
			return false;
	return true;
}

// A caller's turn. With sends_on_first_rail: rail 0 (control messages),
// rails with work of ours, rails where something arrived within the last
// kActiveTurns turns, and the others one turn in kSparseTurn.
size_t Engine::Impl::caller_turn()
{
	constexpr uint32_t kSparseTurn = 16;
	constexpr size_t kMaxRails = 64;
	if (!cfg.sends_on_first_rail || rails.size() == 1 || rails.size() > kMaxRails)
		return turn(all_rails);
	const uint32_t t = caller_turns.fetch_add(1, std::memory_order_relaxed);
	unsigned ids[kMaxRails];
	size_t n = 0;
	for (unsigned r = 0; r < rails.size(); r++)
		if (r == 0 || t % kSparseTurn == 0 || rails[r]->busy() ||
		    rail_quiet[r].load(std::memory_order_relaxed) < kActiveTurns)
			ids[n++] = r;
	return turn(std::span<const unsigned>(ids, n));
}

// Drops the addresses of removed peers once nothing is in flight to them.
void Engine::Impl::retire_peers()
{
	std::vector<std::shared_ptr<PeerState>> done;
	{
		std::unique_lock l(peers_mu, std::try_to_lock);
		if (!l)
			return;
		auto keep = std::partition(retiring.begin(), retiring.end(),
					   [](const auto &p) { return p->inflight.load() != 0; });
		done.assign(keep, retiring.end());
		retiring.erase(keep, retiring.end());
		has_retiring = !retiring.empty();
	}
	for (auto &p : done)
		for (size_t r = 0; r < rails.size(); r++) {
			try {
				rails[r]->remove_peer(p->addr[r]);
			} catch (const Error &) {
				// Another peer may share the address entry; nothing to undo.
			}
		}
}

std::shared_ptr<TransferImpl> Engine::Impl::make_send(const std::shared_ptr<PeerState> &peer, wire::MsgType type,
						      std::span<const uint8_t> data, unsigned rail,
						      TransferCallback cb, std::span<const uint8_t> body)
{
	auto x = std::make_shared<TransferImpl>();
	x->kind = TransferImpl::Kind::Send;
	x->peer = peer;
	x->send_rail = rail;
	x->total = data.size() + body.size();
	x->callback = std::move(cb);
	wire::MsgHeader h = wire::header(type, id);
	h.length = static_cast<uint32_t>(x->total);
	x->message.resize(sizeof(h) + x->total);
	std::memcpy(x->message.data(), &h, sizeof(h));
	if (!data.empty())
		std::memcpy(x->message.data() + sizeof(h), data.data(), data.size());
	if (!body.empty())
		std::memcpy(x->message.data() + sizeof(h) + data.size(), body.data(), body.size());
	return x;
}

// ---- public interface

Engine::Engine(const Config &config) : impl_(std::make_unique<Impl>(config))
{
	Impl *im = impl_.get();
	if (config.progress_threads == 0) {
		im->caps.progress = "caller-driven (progress()/wait())";
		return;
	}
	std::vector<const fi_info *> infos;
	for (auto &r : im->rails)
		infos.push_back(r->info());
	im->threads = std::make_unique<ProgressThreads>(
		config.progress_threads, infos, im->topo, config.idle_spin, config.idle_sleep_us, config.caller_backoff_us,
		[im](std::span<const unsigned> ids) { return im->turn(ids); },
		[im](std::span<const unsigned> ids) { return im->caller_covers(ids); });
	im->caps.progress = im->threads->describe();
}

Engine::~Engine()
{
	Impl *im = impl_.get();
	im->threads.reset();
	im->closing = true;
	im->drain_staging(); // no copy into or out of a mirror outlives this
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
	const bool keep_open = im->caps.provider.find("ofi_rxm") != std::string::npos && im->writer_broke();
	std::vector<std::shared_ptr<TransferImpl>> left;
	{
		std::lock_guard l(im->active_mu);
		for (TransferImpl *x : im->active)
			left.push_back(x->self);
	}
	if (keep_open)
		for (auto &r : im->rails)
			r->abandon();
	im->rails.clear(); // closes endpoints: nothing references a transfer any more
	for (auto &x : left) {
		x->fail(HMEMREG_EBUSY, "engine destroyed before the transfer completed");
		im->finish(x);
	}
}

const Capabilities &Engine::caps() const { return impl_->caps; }
uint64_t Engine::id() const { return impl_->id; }

Bytes Engine::address() const
{
	wire::PeerAddress a;
	a.engine_id = impl_->id;
	a.provider = impl_->caps.provider;
	for (auto &r : impl_->rails)
		a.rails.push_back(r->name());
	return wire::encode(a);
}

uint64_t peer_engine_id(std::span<const uint8_t> address)
{
	return wire::decode_address(address).engine_id;
}

PeerId Engine::add_peer(std::span<const uint8_t> address, bool warmup, std::chrono::milliseconds timeout)
{
	Impl *im = impl_.get();
	wire::PeerAddress a = wire::decode_address(address);
	if (a.provider != im->caps.provider)
		throw Error(HMEMREG_EINVAL, "peer address is for provider '" + a.provider + "', this engine uses '" +
						    im->caps.provider + "'");
	if (a.engine_id == im->id)
		throw Error(HMEMREG_EINVAL, "peer address is this engine's own");
	{
		// Added again while its old incarnation is retiring: the AV may hand
		// back the same entry, which must then not be removed.
		std::lock_guard l(im->peers_mu);
		std::erase_if(im->retiring, [&](const auto &old) { return old->engine_id == a.engine_id; });
	}
	auto p = std::make_shared<PeerState>();
	p->engine_id = a.engine_id;
	for (size_t r = 0; r < im->rails.size(); r++) {
		try {
			p->addr.push_back(im->rails[r]->insert_peer(a.rails[r % a.rails.size()]));
		} catch (...) {
			for (size_t k = 0; k < p->addr.size(); k++)
				im->rails[k]->remove_peer(p->addr[k]);
			throw;
		}
	}
	{
		std::lock_guard l(im->peers_mu);
		if (im->by_engine.count(a.engine_id)) {
			PeerId old = im->by_engine[a.engine_id];
			for (size_t r = 0; r < im->rails.size(); r++)
				im->rails[r]->remove_peer(p->addr[r]);
			throw Error(HMEMREG_EBUSY, "engine " + hex(a.engine_id) + " is already peer " + std::to_string(old));
		}
		p->id = im->next_peer++;
		auto kept = im->imm4_seq_kept.find(a.engine_id);
		if (kept != im->imm4_seq_kept.end()) {
			// Ahead of every key the old incarnation may still have taken
			// while it was being removed; well inside the target's window.
			p->imm_seq = kept->second.next + kImm4ReaddGap;
			im->imm4_seq_kept.erase(kept);
		} else {
			p->imm_seq = static_cast<uint32_t>(random_id());
		}
		im->peers[p->id] = p;
		im->by_engine[a.engine_id] = p->id;
	}
	// 4-byte keys: ask the peer for our writer index (its answer comes once
	// it has added us too); and answer it if it asked us before.
	im->send_imm_index(p);
	if (im->caps.imm_key_bytes == wire::kImm4DataSize)
		im->send_imm_join(p);
	if (!warmup)
		return p->id;
	// One hello per rail: rxm and friends connect on first use.
	std::vector<TransferRef> hellos;
	for (unsigned r = 0; r < im->rails.size(); r++) {
		auto x = im->make_send(p, wire::MsgType::Hello, {}, r, {});
		im->admit(x);
		im->rails[r]->enqueue_send(x);
		hellos.push_back(x);
	}
	for (auto &h : hellos) {
		if (!wait(*h, timeout) || h->status() != 0) {
			std::string why = h->status() == -HMEMREG_EAGAIN ? "timed out" : h->error();
			remove_peer(p->id);
			throw Error(h->status() == -HMEMREG_EAGAIN ? HMEMREG_EAGAIN : -h->status(),
				    "warm-up of peer " + hex(a.engine_id) + " failed: " + why);
		}
	}
	return p->id;
}

void Engine::remove_peer(PeerId peer)
{
	Impl *im = impl_.get();
	std::lock_guard l(im->peers_mu);
	auto it = im->peers.find(peer);
	if (it == im->peers.end())
		throw Error(HMEMREG_ENOENT, "remove_peer: unknown peer " + std::to_string(peer));
	auto p = it->second;
	p->removed = true;
	im->peers.erase(it);
	im->by_engine.erase(p->engine_id);
	if (im->caps.imm_key_bytes == wire::kImm4DataSize) {
		const int64_t now = PeerState::now_ns();
		if (im->imm4_seq_kept.size() >= kImm4SeqKeptMax)
			std::erase_if(im->imm4_seq_kept,
				      [&](const auto &kv) { return now - kv.second.removed_ns > kImm4SeqKeptNs; });
		im->imm4_seq_kept[p->engine_id] = {p->imm_seq.load(), now};
	}
	im->retiring.push_back(p);
	im->has_retiring = true;
	im->doom_epoch++;
}

bool Engine::immediate_to(PeerId peer) const
{
	auto p = impl_->find_peer(peer);
	return impl_->caps.imm_key_bytes == wire::kImmDataSize ||
	       (impl_->caps.imm_key_bytes == wire::kImm4DataSize && p->imm_index.load() != 0);
}

bool Engine::drain(PeerId peer, std::chrono::milliseconds timeout)
{
	Impl *im = impl_.get();
	if (in_turn == im)
		throw Error(HMEMREG_EBUSY, "drain: called from a callback of this engine, which would wait for itself");
	std::shared_ptr<PeerState> p = im->find_peer(peer);
	const auto deadline = std::chrono::steady_clock::now() + timeout;
	// A transfer's callback returns before its peer's count drops (report()).
	while (p->active.load() > 0) {
		if (std::chrono::steady_clock::now() >= deadline)
			return false;
		if (im->threads)
			std::this_thread::sleep_for(std::chrono::microseconds(100));
		else if (progress() == 0)
			std::this_thread::yield();
	}
	return true;
}

size_t Engine::peer_count() const
{
	std::lock_guard l(impl_->peers_mu);
	return impl_->peers.size();
}

RegionRef Engine::register_region(void *addr, size_t len)
{
	Impl *im = impl_.get();
	if (!addr || len == 0)
		throw Error(HMEMREG_EINVAL, "register_region: null address or zero length");
	std::vector<std::shared_ptr<DomainHolder>> holders;
	for (auto &r : im->rails)
		holders.push_back(r->domain_holder());
	cuda::PointerInfo info;
	std::string why;
	int rc = cuda::classify(addr, len, info, &why);
	if (rc == -HMEMREG_EINVAL)
		throw Error(HMEMREG_EINVAL, "register_region: " + why);
	if (rc == 0 && info.kind == cuda::MemKind::device && !im->caps.hmem)
		return im->register_staged(addr, len, info);
	// Device memory the provider reaches (FI_HMEM): registered directly, as
	// CUDA memory of its device (FI_MR_DMABUF or by address: the registrar's
	// choice), cached under the buffer-ID check of every hit.
	MemoryKind kind;
	if (rc == 0 && info.kind == cuda::MemKind::device) {
		kind = {HMEMREG_IFACE_CUDA, static_cast<uint64_t>(info.device)};
		if (info.device >= 0 && info.device < 64)
			im->direct_devices.fetch_or(1ULL << info.device);
	}
	auto reg = register_local(im->caches, addr, len, kind);
	return std::make_shared<RegionImpl>(im->id, addr, len, std::move(holders), std::move(reg));
}

Bytes Engine::descriptor(const Region &region) const
{
	auto *r = dynamic_cast<const RegionImpl *>(&region);
	if (!r || r->engine_id != impl_->id)
		throw Error(HMEMREG_EINVAL, "descriptor: region was registered with another engine");
	wire::RegionDescriptor d;
	d.engine_id = impl_->id;
	d.length = r->length();
	const uintptr_t a = reinterpret_cast<uintptr_t>(r->io_addr());
	d.staged_id = r->staging() ? r->staging()->id : 0;
	for (size_t i = 0; i < impl_->rails.size(); i++) {
		// Virtual addressing: the address itself; else the offset into the
		// (possibly larger, cached) registration.
		uint64_t base = impl_->virt_addr ? a : a - r->reg->start(i);
		d.rails.push_back({base, r->reg->key(i)});
	}
	return wire::encode(d);
}

TransferRef Engine::write(PeerId peer, std::span<const Chunk> chunks, std::span<const uint8_t> remote, uint64_t tag,
			  TransferCallback done)
{
	Impl *im = impl_.get();
	auto p = im->find_peer(peer);
	if (chunks.empty())
		throw Error(HMEMREG_EINVAL, "write: no chunks");
	wire::RegionDescriptor d = wire::decode_descriptor(remote);
	if (d.engine_id != p->engine_id)
		throw Error(HMEMREG_EINVAL, "write: the remote descriptor belongs to engine " + hex(d.engine_id) +
						    ", not to peer " + std::to_string(peer) + " (engine " +
						    hex(p->engine_id) + ")");
	std::vector<size_t> order(chunks.size());
	std::iota(order.begin(), order.end(), 0);
	for (size_t i = 0; i < chunks.size(); i++) {
		const Chunk &c = chunks[i];
		auto *r = dynamic_cast<const RegionImpl *>(c.local);
		if (!r)
			throw Error(HMEMREG_EINVAL, "write: chunk " + std::to_string(i) + " has no local region");
		if (r->engine_id != im->id)
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
		return im->write_staged(p, chunks, d, tag, std::move(done));
	im->direct_writes++;
	return im->post_write(p, chunks, d, tag, std::move(done), false);
}

std::shared_ptr<TransferImpl> Engine::Impl::post_write(const std::shared_ptr<PeerState> &p,
						       std::span<const Chunk> chunks, const wire::RegionDescriptor &d,
						       uint64_t tag, TransferCallback done, bool internal)
{
	Impl *im = this;
	const size_t peer_rails = d.rails.size();
	const size_t nrails = im->rails.size();
	auto x = TransferImpl::make_write(p, tag, chunks.size(), std::move(done));
	x->notify = !internal;

	// A chunk that continues the previous one on both sides (same region,
	// next local byte, next remote byte) joins it: a page list of contiguous
	// memory goes out as a few large writes, not one per page.
	std::vector<Chunk> runs;
	runs.reserve(chunks.size());
	for (const Chunk &c : chunks) {
		Chunk *b = runs.empty() ? nullptr : &runs.back();
		if (b && b->local == c.local && b->local_offset + b->len == c.local_offset &&
		    b->remote_offset + b->len == c.remote_offset)
			b->len += c.len;
		else
			runs.push_back(c);
	}
	// Pieces: each run, split above max_write, round-robin over rails.
	const size_t mw = im->caps.max_write;
	size_t npieces = 0;
	for (const Chunk &c : runs)
		npieces += c.len / mw + (c.len % mw != 0);
	if (npieces >= UINT32_MAX)
		throw Error(HMEMREG_EINVAL, "write: too many chunks");
	struct Piece {
		iovec iov;
		void *desc;
		fi_rma_iov rma;
	};
	std::vector<std::vector<Piece>> by_rail(nrails);
	size_t total = 0;
	for (const Chunk &c : runs)
		total += c.len;
	unsigned rail = im->cfg.sends_on_first_rail && total <= im->cfg.first_rail_write_max
				? 0
				: im->next_rail.fetch_add(1) % nrails;
	for (const Chunk &c : runs) {
		auto *r = static_cast<const RegionImpl *>(c.local);
		// Hold a reference to every distinct region for the transfer's lifetime.
		if (std::none_of(x->regions.begin(), x->regions.end(), [&](const RegionRef &h) { return h.get() == r; }))
			x->regions.push_back(std::const_pointer_cast<RegionImpl>(r->shared_from_this()));
		for (size_t off = 0; off < c.len;) {
			const size_t len = std::min(mw, c.len - off);
			const auto &pr = d.rails[rail % peer_rails]; // the peer rail local rail `rail` talks to
			by_rail[rail].push_back({{r->io_addr() + c.local_offset + off, len},
						 r->reg->desc(rail),
						 {pr.base + c.remote_offset + off, len, pr.key}});
			x->total += len;
			off += len;
			rail = (rail + 1) % nrails;
		}
	}
	// One write per group of up to write_iov consecutive pieces of a rail
	// (at most max_write bytes together): fewer operations for small chunks.
	x->iovs.reserve(npieces);
	x->descs.reserve(npieces);
	x->rmas.reserve(npieces);
	x->rail_segs.resize(nrails);
	x->cursor.assign(nrails, 0);
	for (unsigned r = 0; r < nrails; r++) {
		const auto &ps = by_rail[r];
		for (size_t i = 0; i < ps.size();) {
			Segment g;
			g.xfer = x.get();
			g.first = static_cast<uint32_t>(x->iovs.size());
			size_t bytes = 0;
			do {
				x->iovs.push_back(ps[i].iov);
				x->descs.push_back(ps[i].desc);
				x->rmas.push_back(ps[i].rma);
				bytes += ps[i].iov.iov_len;
				g.count++;
				i++;
			} while (i < ps.size() && g.count < im->caps.write_iov && bytes + ps[i].iov.iov_len <= mw);
			x->rail_segs[r].push_back(static_cast<uint32_t>(x->segs.size()));
			x->segs.push_back(g);
		}
	}
	const size_t nsegs = x->segs.size();
	x->unresolved = static_cast<uint32_t>(nsegs);
	unsigned announce_rail = nrails;
	// 4-byte keys: only once the peer assigned us an index.
	const uint32_t index4 = p->imm_index.load(std::memory_order_acquire);
	const bool immediate = !internal && im->caps.notify_immediate &&
			       (im->caps.imm_key_bytes == wire::kImmDataSize || index4 != 0);
	if (!internal)
		(immediate ? imm_writes : msg_writes)++;
	if (immediate) {
		// The Announce goes out first, beside the writes; it and every write
		// carry the key.
		x->immediate = true;
		x->imm_key = im->caps.imm_key_bytes == wire::kImmDataSize
				     ? wire::imm_key(id, next_imm_seq.fetch_add(1, std::memory_order_relaxed))
				     : wire::imm4_key(index4, p->imm_seq.fetch_add(1, std::memory_order_relaxed));
		wire::MsgHeader h = wire::header(wire::MsgType::Announce, id);
		h.tag = tag;
		h.bytes = x->total;
		h.chunks = x->chunks;
		wire::Announce an{x->imm_key, static_cast<uint32_t>(nsegs), 0};
		h.length = sizeof(an);
		x->message.resize(sizeof(h) + sizeof(an));
		std::memcpy(x->message.data(), &h, sizeof(h));
		std::memcpy(x->message.data() + sizeof(h), &an, sizeof(an));
		x->unresolved++;
		announce_rail = x->segs.empty() ? 0 : static_cast<unsigned>(
			std::find_if(x->rail_segs.begin(), x->rail_segs.end(), [](const auto &v) { return !v.empty(); }) -
			x->rail_segs.begin());
	}
	im->admit(x, internal);
	if (!internal && im->caps.imm_key_bytes == wire::kImm4DataSize && index4 == 0 && !p->imm_refused.load()) {
		// Still no index: our ImmJoin may have been dropped (the target had
		// not added us yet and forgot us); ask again now and then.
		int64_t asked = p->imm_asked.load(std::memory_order_relaxed);
		const int64_t now = PeerState::now_ns();
		if (now - asked > kImmJoinRetryNs && p->imm_asked.compare_exchange_strong(asked, now))
			send_imm_join(p);
	}
	if (announce_rail < nrails)
		im->rails[announce_rail]->enqueue_send(x);
	for (unsigned r = 0; r < nrails; r++)
		if (!x->rail_segs[r].empty())
			im->rails[r]->enqueue_writes(x);
	im->kick();
	return x;
}

TransferRef Engine::send(PeerId peer, std::span<const uint8_t> data, TransferCallback done)
{
	return send(peer, data, {}, std::move(done));
}

TransferRef Engine::send(PeerId peer, std::span<const uint8_t> data, std::span<const uint8_t> body,
			 TransferCallback done)
{
	Impl *im = impl_.get();
	auto p = im->find_peer(peer);
	if (data.size() + body.size() > im->cfg.max_message)
		throw Error(HMEMREG_EINVAL, "send: " + std::to_string(data.size() + body.size()) +
						    " bytes exceed max_message " + std::to_string(im->cfg.max_message));
	unsigned rail = im->cfg.sends_on_first_rail ? 0 : im->next_rail.fetch_add(1) % im->rails.size();
	auto x = im->make_send(p, wire::MsgType::User, data, rail, std::move(done), body);
	im->admit(x);
	im->rails[rail]->enqueue_send(x);
	if (im->threads)
		im->threads->kick();
	return x;
}

void Engine::on_message(std::function<void(const Message &)> fn)
{
	std::lock_guard l(impl_->handlers_mu);
	impl_->on_message = std::move(fn);
}

void Engine::on_notify(std::function<void(const Notification &)> fn)
{
	std::lock_guard l(impl_->handlers_mu);
	impl_->on_notify = std::move(fn);
}

size_t Engine::progress()
{
	if (impl_->threads && impl_->threads->backs_off())
		impl_->threads->caller_turn(ProgressThreads::now_ns());
	return impl_->caller_turn();
}

bool Engine::wait(const Transfer &t, std::chrono::milliseconds timeout)
{
	auto &x = static_cast<const TransferImpl &>(t);
	if (impl_->threads)
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

PathStats Engine::path_stats() const
{
	PathStats s = impl_->staging ? staging_stats(*impl_->staging) : PathStats{};
	s.direct_writes = impl_->direct_writes.load(std::memory_order_relaxed);
	s.immediate_notices = impl_->imm_notices.load(std::memory_order_relaxed);
	s.immediate_abandoned = impl_->imm_abandoned.load(std::memory_order_relaxed);
	{
		std::lock_guard l(impl_->arrivals_mu);
		s.immediate_pending = impl_->arrivals.size();
		s.immediate_writers = impl_->imm4_index_of.size();
	}
	s.immediate_writes = impl_->imm_writes.load(std::memory_order_relaxed);
	s.message_writes = impl_->msg_writes.load(std::memory_order_relaxed);
	for (RailCache *c : impl_->caches) {
		s.device_regs_dmabuf += c->device_dmabuf_regs();
		s.device_regs_address += c->device_address_regs();
		if (s.device_address_why.empty())
			s.device_address_why = c->address_path_reason();
	}
	return s;
}

std::vector<RailStats> Engine::stats() const
{
	std::vector<RailStats> v;
	for (auto &r : impl_->rails)
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
