// SPDX-License-Identifier: MIT
// What the engine asks of libfabric and what it chose: provider and fabric,
// the rails' domains, queue depths, write sizes, the notification scheme
// (Capabilities), and the rails opened on them.
#include "engine/core.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>

#include <unistd.h>

#include <rdma/fi_domain.h>

#include "engine/nic_path.hpp"
#include "engine/rxm_queues.hpp"
#include "fabric/abi.hpp"
#include "fabric/info.hpp"
#include "hmem/cuda_memory.hpp"
#include "export/export_table.hpp"
#include "settings/settings.hpp"

namespace hmemreg::engine {

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

namespace {

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

// Hints for an RDM endpoint with messages, RMA writes and reads (read-backs:
// read_back.hpp), with FI_HMEM when
// asked; mr_mode bits we handle (we always register and pass descriptors,
// device memory included (FI_MR_HMEM), keys are carried in the descriptor,
// addresses are virtual or offsets).
fabric::InfoPtr make_hints(const Config &cfg, bool hmem, const std::string &provider)
{
	fabric::InfoPtr h = fabric::alloc_hints();
	h->caps = FI_MSG | FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_READ | FI_REMOTE_READ | FI_SEND | FI_RECV;
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

// Immediate keys of 8 bytes where the provider carries them, else of 4
// (target-assigned writer index), else message mode (see engine.hpp).
void choose_notify(const Config &cfg, size_t cq, const std::string &prov, Capabilities &caps)
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

} // namespace

// Free transfers kept for reuse (a few hundred bytes each, plus the
// capacity of their vectors); beyond that, returning ones are deleted.
constexpr size_t kPooledTransfers = 1024;

Core::Core(const Config &c, uint64_t engine_id)
	: cfg(c), id(engine_id), pool(TransferPool::create(kPooledTransfers))
{
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
	rail_quiet_ = std::make_unique<std::atomic<uint32_t>[]>(rails.size());
}

void Core::open_rails()
{
	const std::string queue_note = fit_rxm_queues(cfg.provider);
	open_rails_once();
	// Device memory is staged (the provider's FI_HMEM went unused: it would
	// call CUDA, or registers no CUDA memory), yet the endpoints have
	// FI_HMEM: open them again without it, or host memory pays for it
	// (libfabric 2.x's shm turns its single-copy CMA path off for every
	// peer of an endpoint with FI_HMEM and copies through bounce buffers).
	if (hmem_endpoints_ && !caps.hmem && !cfg.require_hmem) {
		const std::string why = caps.hmem_why_not;
		caches.clear();
		rails.clear();
		Capabilities fresh;
		fresh.peer_timeout_ms = caps.peer_timeout_ms;
		fresh.peer_timeout = caps.peer_timeout;
		caps = std::move(fresh);
		cfg.ask_hmem = false;
		open_rails_once();
		caps.hmem_why_not = why + "; endpoints opened again without FI_HMEM";
	}
	if (!queue_note.empty())
		caps.notes.insert(caps.notes.begin(), queue_note);
}

void Core::open_rails_once()
{
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
	caps.read_back = (first->caps & FI_READ) != 0;
	caps.hmem = (first->caps & FI_HMEM) != 0;
	hmem_endpoints_ = caps.hmem;
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
	choose_notify(cfg, caps.cq_data_size, prov, caps);

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
	// 32 cores). shm copies each write in one go, but not a huge one well:
	// a 64 MiB write ran at 14-15 Gbps on the 16-core H200 host (libfabric
	// 1.17 and 2.6.0, target in another process), split at 4 MiB at 24-28
	// (the same run; 16 MiB and smaller rows unchanged).
	const bool streams = prov.find("tcp") != std::string::npos || prov.rfind("net", 0) == 0;
	const bool shm = prov == "shm";
	size_t def_write = streams ? std::min<size_t>(512u << 10, max_msg)
			   : shm   ? std::min<size_t>(4u << 20, max_msg)
				   : max_msg;
	caps.max_write = cfg.max_write ? std::min(cfg.max_write, max_msg) : def_write;
	if (!cfg.max_write && def_write < max_msg)
		caps.notes.push_back("writes split at " + std::to_string(def_write >> 10) + " KiB (" + prov +
				     (shm ? " copies a huge write slower than its pieces)"
					  : " streams each write on one connection)"));
	caps.queue_depth = depth;
	// Chunks per write: what both the local and the remote iov limits allow.
	size_t iov_limit = std::max<size_t>(1, std::min(first->tx_attr->iov_limit, first->tx_attr->rma_iov_limit));
	caps.write_iov = cfg.write_iov ? std::min(cfg.write_iov, iov_limit) : iov_limit;
	if (cfg.max_message + sizeof(wire::MsgHeader) > max_msg)
		throw Error(HMEMREG_EINVAL, "engine: max_message exceeds the provider's max_msg_size");

	size_t peer_depth = cfg.peer_queue_depth ? std::min(cfg.peer_queue_depth, depth) : std::max<size_t>(1, depth / 2);
	caps.peer_queue_depth = peer_depth;
	bool bundle = cfg.bundle_messages;
	settings::boolean("HMEMREG_ENGINE_BUNDLE", bundle); // a comparison run turns it off (unset: the config's)
	RailOptions ro{depth, static_cast<int64_t>(peer_depth * cfg.rails),
		       cfg.max_message, recvs,
		       cfg.send_buffers, cfg.post_batch,
		       caps.delivery_complete, cfg.post_more,
		       bundle,
		       !cfg.provider_cuda_calls,
		       &doom_epoch};
	for (unsigned r = 0; r < cfg.rails; r++) {
		const fi_info *info = distinct[r % distinct.size()];
		rails.push_back(std::make_unique<Rail>(r, info, ro, topo));
		caches.push_back(rails.back()->cache());
		caps.rail_domains.push_back(info->domain_attr->name);
		caps.rail_pci_paths.push_back(nic_pci_path(info));
		caps.rail_link_bps.push_back(info->nic && info->nic->link_attr ? info->nic->link_attr->speed : 0);
	}
	caps.notes.push_back("local memory: " + rails.front()->cache()->describe());
	caps.notes.push_back("hmemreg.ko exports: " + export_path(prov, caps.api_version));
	// A provider that would call CUDA itself (shm and tcp copy device memory
	// with cudaMemcpy, rxm through its bounce buffers) gets none where the
	// client forbids it: the engine stages device memory on its own streams.
	if (caps.hmem && !cfg.provider_cuda_calls) {
		for (const auto &r : rails) {
			const int rc = r->cuda_forbidden_rc();
			if (rc == 0)
				continue;
			caps.hmem = false;
			caps.dmabuf = false;
			caps.hmem_why_not = "provider " + prov + " refuses FI_OPT_CUDA_API_PERMITTED = false (" +
					    fi_strerror(-rc) + "): it would copy device memory with CUDA calls";
			break;
		}
	}
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

} // namespace hmemreg::engine
