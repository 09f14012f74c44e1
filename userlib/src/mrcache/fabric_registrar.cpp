// SPDX-License-Identifier: MIT
#include <cstdlib>
#include <memory>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <sys/uio.h>

#include "fabric/abi.hpp"
#include "hmem/cuda_memory.hpp"
#include "settings/settings.hpp"
#include "hmemreg/hmemreg.h"
#include "mrcache/fabric_registrar.hpp"
#include "mrcache/dmabuf_wrap.hpp"

namespace hmemreg::mr {

namespace {

constexpr uint64_t kAllAccess = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

int to_hmemreg(int fi_rc)
{
	switch (fi_rc) {
	case -FI_ENOMEM:
	case -FI_ENOSPC:
		return -HMEMREG_ENOMEM;
	case -FI_EOPNOTSUPP:
	case -FI_ENOSYS:
		return -HMEMREG_ENOTSUP;
	case -FI_EINVAL:
		return -HMEMREG_EINVAL;
	case -FI_EAGAIN:
		return -HMEMREG_EAGAIN;
	default:
		return -HMEMREG_EFABRIC;
	}
}

// Tell providers not to cache registrations under us
// (HMEMREG_KEEP_PROVIDER_MR_CACHE=1 opts out). Runs when the library is
// loaded, before the application's first fi_getinfo() in the usual case
// (libfabric reads these once, at its initialisation); setenv never
// overrides a value the user chose.
//
// Scoped to the memory-registration caches: a provider's MR cache (verbs,
// efa, ...) only caches memory kinds that have a monitor, and these turn off
// the default monitor (host memory: userfaultfd/memhooks/kdreg2) and the
// CUDA, ROCr and Level Zero ones, so ofi_mr_cache_init() finds none and the
// provider registers uncached. FI_MR_CACHE_MAX_COUNT is left alone: every
// ofi_mr_cache_init() refuses a zero count (-FI_ENOSPC), including the IPC
// handle caches of shm (CUDA/ROCr/ZE IPC) and xpmem that use their own
// monitors, and shm then fails fi_domain() for FI_HMEM.
__attribute__((constructor)) void disable_provider_mr_cache()
{
	bool keep = false;
	settings::boolean("HMEMREG_KEEP_PROVIDER_MR_CACHE", keep);
	if (keep)
		return;
	::setenv("FI_MR_CACHE_MONITOR", "disabled", 0);
	::setenv("FI_MR_CUDA_CACHE_MONITOR_ENABLED", "0", 0);
	::setenv("FI_MR_ROCR_CACHE_MONITOR_ENABLED", "0", 0);
	::setenv("FI_MR_ZE_CACHE_MONITOR_ENABLED", "0", 0);
}

} // namespace

bool FabricRegistrar::is_domain(const fid_domain *domain)
{
	return domain && domain->fid.fclass == FI_CLASS_DOMAIN && domain->mr && domain->mr->regattr;
}

bool FabricRegistrar::registers_cuda(fid_domain *domain, std::string *why)
{
	cuda::ProbeAllocation probe;
	std::string w;
	if (probe.alloc(0, 2u << 20, &w) < 0) {
		if (why)
			*why = "no CUDA memory to probe with: " + w;
		return false;
	}
	iovec iov{probe.ptr(), probe.size()};
	fabric::MrAttr storage;
	storage.attr.mr_iov = &iov;
	storage.attr.iov_count = 1;
	storage.attr.access = FI_REMOTE_WRITE | FI_WRITE | FI_SEND | FI_RECV;
	storage.attr.requested_key = 0x7ffffff0; // a key no cache registration asks for
	storage.attr.iface = FI_HMEM_CUDA;
	storage.attr.device.cuda = 0;
	fid_mr *mr = nullptr;
	int rc = fi_mr_regattr(domain, &storage.attr, 0, &mr);
	if (rc) {
		if (why)
			*why = std::string("fi_mr_regattr(FI_HMEM_CUDA): ") + fi_strerror(-rc) +
			       (rc == -FI_ENOSYS ? " (this libfabric was built without CUDA)" : "");
		return false;
	}
	fi_close(&mr->fid);
	return true;
}

FabricRegistrar::FabricRegistrar(fid_domain *domain, uint64_t access, const char *provider, Facts facts)
	: domain_(domain), access_(access ? access : kAllAccess), facts_(facts)
{
	name_ = "libfabric";
	if (provider && *provider)
		name_ += std::string(":") + provider;
}

bool FabricRegistrar::dmabuf_usable() const
{
	return facts_.api_version >= fabric::kApi1_20 && facts_.hmem != Facts::no && !dmabuf_refused_.load();
}

bool FabricRegistrar::dmabuf_usable_for_exports() const
{
	return facts_.api_version >= fabric::kApi1_20 && !dmabuf_refused_.load();
}

FabricRegistrar::Paths FabricRegistrar::paths() const
{
	Paths p;
	p.dmabuf = dmabuf_regs_.load(std::memory_order_relaxed);
	p.address = address_regs_.load(std::memory_order_relaxed);
	p.dmabuf_refused = dmabuf_refused_.load();
	std::lock_guard l(why_mu_);
	p.why_address = why_address_;
	p.wrapped = wrapped_regs_.load(std::memory_order_relaxed);
	p.why_not_wrapped = why_not_wrapped_;
	return p;
}

void FabricRegistrar::note_not_wrapped(const std::string &why)
{
	std::lock_guard l(why_mu_);
	why_not_wrapped_ = why;
}

void FabricRegistrar::note_address_path(const std::string &why)
{
	std::lock_guard l(why_mu_);
	why_address_ = why;
}

int FabricRegistrar::reg(const Request &req, Range range, Registration &out)
{
	// hmemreg.ko exports are system RAM behind a DMA-BUF: no FI_HMEM needed.
	const bool kexport = req.iface == Iface::kmod_export;
	if (req.iface != Iface::host && !kexport && facts_.hmem == Facts::no) {
		last_fi_error_.store(-FI_EOPNOTSUPP, std::memory_order_relaxed);
		return -HMEMREG_ENOTSUP; // the domain was opened without FI_HMEM
	}
	iovec iov{reinterpret_cast<void *>(range.start), range.size()};
	fabric::MrAttr storage; // zeroed room for what newer API versions read
	fi_mr_attr &attr = storage.attr;
	attr.iov_count = 1;
	attr.access = access_;
	attr.requested_key = next_key_.fetch_add(1, std::memory_order_relaxed);
	attr.iface = kexport ? FI_HMEM_SYSTEM : static_cast<fi_hmem_iface>(req.iface);
	switch (req.iface) {
	case Iface::kmod_export:
		break;
	case Iface::cuda:
		attr.device.cuda = static_cast<int>(req.device);
		break;
	case Iface::ze:
		attr.device.ze = static_cast<int>(req.device);
		break;
	case Iface::neuron:
		attr.device.neuron = static_cast<int>(req.device);
		break;
	case Iface::synapseai:
		attr.device.synapseai = static_cast<int>(req.device);
		break;
	default:
		attr.device.reserved = req.device;
		break;
	}
	// CUDA memory without a caller's DMA-BUF: the allocation's own export,
	// made on a miss (tens of microseconds); the provider holds its own
	// reference once registered. Where hmemreg.ko wraps it, the wrapper of
	// the allocation is shared (dmabuf_wrap.hpp): a live one is reused
	// without exporting again.
	int fd = req.dmabuf_fd;
	uint64_t fd_offset = req.dmabuf_offset; // of req.addr within the DMA-BUF
	UniqueFd exported;
	WrapperRef wrapper;
	cuda::PointerInfo info;
	const bool own_export = fd < 0 && req.iface == Iface::cuda && dmabuf_usable();
	auto export_allocation = [&info](UniqueFd &out, std::string &why) {
		return cuda::export_dmabuf(info, out, &why);
	};
	if (own_export) {
		std::string why;
		int rc = cuda::classify(reinterpret_cast<const void *>(range.start), range.size(), info, &why);
		if (rc == 0 && info.kind != cuda::MemKind::device) {
			rc = -HMEMREG_EINVAL;
			why = "not CUDA device memory";
		}
		if (rc == 0) {
			std::string why_not;
			WrapKey key{WrapKey::cuda_allocation, static_cast<uint64_t>(info.device), info.base, info.buffer_id};
			if (shared_wrapper(key, export_allocation, wrapper, why_not) != 0) {
				note_not_wrapped(why_not);
				rc = export_allocation(exported, why);
			}
		}
		if (rc == 0) {
			fd = wrapper ? wrapper->fd() : exported.get();
			fd_offset = reinterpret_cast<uintptr_t>(req.addr) - info.base;
		} else {
			note_address_path("DMA-BUF export failed: " + why);
		}
	}
	// Device allocations (not host or managed memory) are device-only
	// memory: shm picks its CUDA IPC protocol for such regions only (else it
	// copies through bounce buffers); efa accepts the flag.
	uint64_t flags = req.iface != Iface::host && !kexport ? FI_HMEM_DEVICE_ONLY : 0;
	fabric::DmabufRange dmabuf{};
	// The caller's DMA-BUF of device memory goes through hmemreg.ko's
	// DMABUF provider when it is there, so the NIC's pins of it are in the
	// pin ledger. A wrapper is all of its buffer: offsets stay the same.
	if (fd >= 0 && !own_export && !kexport && dmabuf_usable()) {
		std::string why;
		if (shared_wrapper(fd, wrapper, why) == 0)
			fd = wrapper->fd();
		else
			note_not_wrapped(why);
	}
	if (fd >= 0 && (kexport ? dmabuf_usable_for_exports() : dmabuf_usable())) {
		// The DMA-BUF starts at base_addr; the range sits at its offset.
		dmabuf.fd = fd;
		dmabuf.offset = fd_offset - (reinterpret_cast<uintptr_t>(req.addr) - range.start);
		dmabuf.len = range.size();
		dmabuf.base_addr = reinterpret_cast<void *>(range.start - dmabuf.offset);
		storage.set_dmabuf(&dmabuf);
		flags |= fabric::kMrDmabuf;
	} else {
		if (kexport)
			note_address_path(facts_.api_version < fabric::kApi1_20
						  ? "libfabric API < 1.20 (no FI_MR_DMABUF): exports registered by address"
						  : "the provider refused FI_MR_DMABUF before");
		attr.mr_iov = &iov;
	}
	fid_mr *mr = nullptr;
	int rc = fi_mr_regattr(domain_, &attr, flags, &mr);
	if (rc == -FI_EBADFLAGS && (flags & FI_HMEM_DEVICE_ONLY)) { // a provider that does not know it
		flags &= ~FI_HMEM_DEVICE_ONLY;
		rc = fi_mr_regattr(domain_, &attr, flags, &mr);
	}
	if (rc && wrapper && rc != -FI_EOPNOTSUPP && rc != -FI_ENOSYS) {
		// The NIC refused the wrapper (an importer the module cannot
		// forward for): register the buffer itself, as without the module.
		note_not_wrapped(std::string("the provider refused the wrapped DMA-BUF (") + fi_strerror(-rc) + ")");
		wrapper.reset();
		int inner = req.dmabuf_fd;
		if (own_export) {
			std::string why;
			inner = export_allocation(exported, why) == 0 ? exported.get() : -1;
		}
		if (inner >= 0) {
			dmabuf.fd = inner;
			rc = fi_mr_regattr(domain_, &attr, flags, &mr);
		}
	}
	if ((rc == -FI_EOPNOTSUPP || rc == -FI_ENOSYS) && (flags & fabric::kMrDmabuf)) {
		dmabuf_refused_.store(true);
		note_address_path(std::string("the provider refused FI_MR_DMABUF (") + fi_strerror(-rc) + ")");
		attr.mr_iov = &iov;
		flags &= ~fabric::kMrDmabuf;
		rc = fi_mr_regattr(domain_, &attr, flags, &mr);
	}
	if (rc) {
		last_fi_error_.store(rc, std::memory_order_relaxed);
		return to_hmemreg(rc);
	}
	if (req.iface != Iface::host)
		((flags & fabric::kMrDmabuf) ? dmabuf_regs_ : address_regs_).fetch_add(1, std::memory_order_relaxed);
	if (wrapper && (flags & fabric::kMrDmabuf))
		wrapped_regs_.fetch_add(1, std::memory_order_relaxed);
	out.handle = mr;
	out.desc = fi_mr_desc(mr);
	out.key = fi_mr_key(mr);
	// The registration holds its wrapper until dereg().
	out.cookie = wrapper && (flags & fabric::kMrDmabuf) ? reinterpret_cast<uintptr_t>(new WrapperRef(std::move(wrapper))) : 0;
	return 0;
}

void FabricRegistrar::dereg(Registration &r) noexcept
{
	if (r.handle)
		fi_close(&static_cast<fid_mr *>(r.handle)->fid);
	r.handle = nullptr;
	std::unique_ptr<WrapperRef> held(reinterpret_cast<WrapperRef *>(r.cookie));
	r.cookie = 0;
}

} // namespace hmemreg::mr
