// SPDX-License-Identifier: MIT
#include <cstdlib>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <sys/uio.h>

#include "settings/settings.hpp"
#include "hmemreg/hmemreg.h"
#include "mrcache/fabric_registrar.hpp"

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

// Tell providers not to cache under us (HMEMREG_KEEP_PROVIDER_MR_CACHE=1
// opts out). Runs when the library is loaded, before the application's
// first fi_getinfo() in the usual case; setenv never overrides a value the
// user chose.
__attribute__((constructor)) void disable_provider_mr_cache()
{
	bool keep = false;
	settings::boolean("HMEMREG_KEEP_PROVIDER_MR_CACHE", keep);
	if (keep)
		return;
	::setenv("FI_MR_CACHE_MAX_COUNT", "0", 0);
}

} // namespace

bool FabricRegistrar::is_domain(const fid_domain *domain)
{
	return domain && domain->fid.fclass == FI_CLASS_DOMAIN && domain->mr && domain->mr->regattr;
}

FabricRegistrar::FabricRegistrar(fid_domain *domain, uint64_t access, const char *provider)
	: domain_(domain), access_(access ? access : kAllAccess)
{
	name_ = "libfabric";
	if (provider && *provider)
		name_ += std::string(":") + provider;
}

bool FabricRegistrar::dmabuf_compiled()
{
#ifdef FI_MR_DMABUF
	return true;
#else
	return false;
#endif
}

bool FabricRegistrar::dmabuf_usable() const
{
	return dmabuf_compiled() && fi_version() >= FI_VERSION(1, 20) && !dmabuf_refused_.load();
}

int FabricRegistrar::reg(const Request &req, Range range, Registration &out)
{
	iovec iov{reinterpret_cast<void *>(range.start), range.size()};
	fi_mr_attr attr{};
	attr.iov_count = 1;
	attr.access = access_;
	attr.requested_key = next_key_.fetch_add(1, std::memory_order_relaxed);
	attr.iface = static_cast<fi_hmem_iface>(req.iface);
	switch (req.iface) {
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
	uint64_t flags = 0;
#ifdef FI_MR_DMABUF
	fi_mr_dmabuf dmabuf{};
	if (req.dmabuf_fd >= 0 && dmabuf_usable()) {
		// The DMA-BUF covers the allocation; register the range at its offset.
		dmabuf.fd = req.dmabuf_fd;
		dmabuf.offset = req.dmabuf_offset - (reinterpret_cast<uintptr_t>(req.addr) - range.start);
		dmabuf.len = range.size();
		dmabuf.base_addr = reinterpret_cast<void *>(range.start - dmabuf.offset);
		attr.dmabuf = &dmabuf;
		flags |= FI_MR_DMABUF;
	} else
#endif
	{
		attr.mr_iov = &iov;
	}
	fid_mr *mr = nullptr;
	int rc = fi_mr_regattr(domain_, &attr, flags, &mr);
#ifdef FI_MR_DMABUF
	if ((rc == -FI_EOPNOTSUPP || rc == -FI_ENOSYS) && (flags & FI_MR_DMABUF)) {
		dmabuf_refused_.store(true);
		attr.dmabuf = nullptr;
		attr.mr_iov = &iov;
		rc = fi_mr_regattr(domain_, &attr, 0, &mr);
	}
#endif
	if (rc) {
		last_fi_error_.store(rc, std::memory_order_relaxed);
		return to_hmemreg(rc);
	}
	out.handle = mr;
	out.desc = fi_mr_desc(mr);
	out.key = fi_mr_key(mr);
	return 0;
}

void FabricRegistrar::dereg(Registration &r) noexcept
{
	if (r.handle)
		fi_close(&static_cast<fid_mr *>(r.handle)->fid);
	r.handle = nullptr;
}

} // namespace hmemreg::mr
