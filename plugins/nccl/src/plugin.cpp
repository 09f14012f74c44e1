// SPDX-License-Identifier: MIT
// The plugin's setup: the engine it opens (and the settings it takes from
// Config), which pointers NCCL may hand over, the device's properties, the
// counters, and what the other files share (progress turns, peers, control
// sends).
#include "plugin.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "cuda_driver.hpp"
#include "log.hpp"
#include "pointer_policy.hpp"
#include "port_speed.hpp"

namespace hmemreg::nccl {

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
	// Only with progress threads: README.md, Known issues (caller-driven progress).
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
	choose_pointer_support(engine_->caps());
	// NCCL hands over host buffers only, yet the provider was opened with
	// FI_HMEM: open it again without. With FI_HMEM, libfabric 2.x's shm
	// turns its single-copy path (CMA) off for every peer and copies host
	// memory twice through its bounce buffers.
	if (!(ptr_support_ & NCCL_PTR_CUDA) && engine_->caps().hmem()) {
		engine_.reset();
		ec.flags |= HMEMREG_ENGINE_NO_HMEM;
		engine_ = std::make_unique<Engine>(ec);
		NINFO(NCCL_INIT | NCCL_NET, "engine opened again without FI_HMEM: host buffers only");
	}
	regs_ = std::make_unique<Registrations>(*engine_);
	engine_id_ = engine_->id();
	if (!cfg.timeline_dir.empty()) {
		timeline_ = std::make_unique<Timeline>(cfg.timeline_dir);
		NINFO(NCCL_INIT | NCCL_NET, "timeline of every request: %s", timeline_->path().c_str());
	}
	const auto &caps = engine_->caps();
	dev_name_ = "hmemreg:" + caps.provider + (caps.rail_domains.empty() ? "" : ":" + caps.rail_domains[0]);
	// A message a line: NCCL's logger cuts one message at 1 KiB, and the
	// description runs longer (rails, notification, threads).
	const std::string about = engine_->describe();
	for (size_t at = 0; at < about.size();) {
		const size_t end = std::min(about.find('\n', at), about.size());
		NINFO(NCCL_INIT | NCCL_NET, "engine: %.*s", static_cast<int>(end - at), about.data() + at);
		at = end + 1;
	}
	if (!caps.rail_pci_paths.empty())
		pci_path_ = caps.rail_pci_paths[0];
	const PortSpeed speed = choose_port_speed(cfg.speed_mbps, caps.rail_domains, caps.rail_link_bps);
	speed_mbps_ = speed.mbps;
	NINFO(NCCL_INIT | NCCL_NET, "port speed %d Mbps (%s)", speed.mbps, speed.why.c_str());
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

namespace {

// The lowest compute capability (major * 10 + minor) of the GPUs this
// process sees, 0 where there are none or the driver cannot say. At init,
// before NCCL launched anything: no call here can wait behind its kernels.
int lowest_compute_capability(const cuda::Driver &d)
{
	int n = 0, lowest = 0;
	if (!d.loaded || d.cuDeviceGetCount(&n) != CUDA_SUCCESS)
		return 0;
	for (int i = 0; i < n; i++) {
		CUdevice dev = 0;
		int major = 0, minor = 0;
		if (d.cuDeviceGet(&dev, i) != CUDA_SUCCESS ||
		    d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
		    d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS)
			return 0;
		const int cc = major * 10 + minor;
		lowest = lowest ? std::min(lowest, cc) : cc;
	}
	return lowest;
}

} // namespace

// pointer_policy.hpp says when the provider gets device memory.
void Plugin::choose_pointer_support(const EngineInfo &caps)
{
	const cuda::Driver &d = cuda::Driver::get();
	PointerFacts f;
	f.setting = cfg_.device_memory;
	f.provider = caps.provider;
	f.cuda = d.loaded;
	f.cuda_why_not = d.why_not;
	f.provider_direct = caps.hmem();
	f.direct_why_not = caps.hmem_why_not;
	f.dmabuf = caps.dmabuf();
	f.read_back = caps.read_back();
	f.min_compute_capability = lowest_compute_capability(d);
	CUmoduleLoadingMode mode = CU_MODULE_EAGER_LOADING;
	f.lazy_loading = d.loaded && d.cuModuleGetLoadingMode(&mode) == CUDA_SUCCESS && mode == CU_MODULE_LAZY_LOADING;
	const char *force = std::getenv("NCCL_NET_FORCE_FLUSH");
	f.force_flush = force && std::strcmp(force, "1") == 0;
	const PointerPolicy p = choose_pointers(f);
	read_back_ = p.read_back;
	if (p.device) {
		ptr_support_ = NCCL_PTR_HOST | NCCL_PTR_CUDA | (p.dmabuf ? NCCL_PTR_DMABUF : 0);
		NINFO(NCCL_INIT | NCCL_NET, "ptrSupport HOST|CUDA%s: %s", p.dmabuf ? "|DMABUF" : "", p.why.c_str());
	} else {
		host_only_why_ = p.why;
		if (f.setting == "staged") // asked for and refused: say so above INFO
			NWARN("ptrSupport HOST only: %s", p.why.c_str());
		else
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
	props->speed = speed_mbps_;
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
	out.nic_landings = nic_landings_;
}

size_t Plugin::live_comms()
{
	std::lock_guard l(mu_);
	return comms_.size();
}

} // namespace hmemreg::nccl
