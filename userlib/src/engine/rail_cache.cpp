// SPDX-License-Identifier: MIT
#include "engine/rail_cache.hpp"

#include <vector>

#include "fabric/abi.hpp"
#include "fabric/info.hpp"
#include "fabric/error.hpp"
#include <linux/hmemreg.h>

#include "hmemreg/hmemreg.h"
#include "mrcache/cache.hpp"
#include "mrcache/fabric_registrar.hpp"

namespace hmemreg::engine {

RailCache::RailCache(fid_domain *domain, const std::string &provider, uint32_t api_version, bool hmem)
{
	hmemreg_cache_config cfg;
	int rc = hmemreg_cache_config_init(&cfg);
	if (rc < 0)
		throw Error(-rc, "registration cache: bad HMEMREG_MR_CACHE_* environment");
	mr::FabricRegistrar::Facts facts;
	facts.api_version = api_version;
	facts.hmem = hmem ? mr::FabricRegistrar::Facts::yes : mr::FabricRegistrar::Facts::no;
	auto reg = std::make_unique<mr::FabricRegistrar>(domain, 0, provider.c_str(), facts);
	registrar_ = reg.get();
	rc = mr::Cache::create(std::move(reg), cfg, cache_);
	if (rc < 0)
		throw Error(-rc, std::string("registration cache: ") + hmemreg_strerror(rc));
}

RailCache::~RailCache() = default;

uint64_t RailCache::device_dmabuf_regs() const
{
	return registrar_->paths().dmabuf;
}

uint64_t RailCache::device_address_regs() const
{
	return registrar_->paths().address;
}

std::string RailCache::address_path_reason() const
{
	return registrar_->paths().why_address;
}

uint64_t RailCache::device_wrapped_regs() const
{
	return registrar_->paths().wrapped;
}

std::string RailCache::not_wrapped_reason() const
{
	return registrar_->paths().why_not_wrapped;
}

void RailCache::retire()
{
	for (uint32_t i = 0; i < HMEMREG_IFACE_MAX; i++)
		cache_->invalidate(static_cast<mr::Iface>(i), 0, UINTPTR_MAX);
	cache_->flush();
}

std::string RailCache::describe() const
{
	switch (cache_->monitor_kind()) {
	case HMEMREG_MONITOR_KMOD:
		return "registration cache, monitor hmemreg.ko";
	case HMEMREG_MONITOR_UFFD:
		return "registration cache, monitor userfaultfd (caches private anonymous memory only; "
		       "shared and file-backed memory registered uncached)";
	case HMEMREG_MONITOR_NONE:
		return "registration cache, no monitor (explicit invalidation)";
	default:
		return "registration cache unavailable (no memory monitor): registrations uncached";
	}
}

namespace {

class CachedRegistration final : public LocalRegistration {
public:
	explicit CachedRegistration(std::vector<mr::Ref> refs) : refs_(std::move(refs)) {}
	void *desc(size_t rail) const override { return refs_.at(rail).desc(); }
	uint64_t key(size_t rail) const override { return refs_.at(rail).key(); }
	uintptr_t start(size_t rail) const override { return refs_.at(rail).range().start; }

private:
	std::vector<mr::Ref> refs_;
};

} // namespace

bool provider_registers_cuda(fid_domain *domain, std::string *why)
{
	return mr::FabricRegistrar::registers_cuda(domain, why);
}

std::unique_ptr<LocalRegistration> register_local(std::span<RailCache *const> rails, const void *addr, size_t len,
						  MemoryKind kind)
{
	std::vector<mr::Ref> refs(rails.size());
	mr::Request rq;
	rq.addr = addr;
	rq.len = len;
	rq.iface = static_cast<mr::Iface>(kind.iface);
	rq.device = kind.device;
	rq.dmabuf_fd = kind.dmabuf_fd;
	rq.dmabuf_offset = kind.dmabuf_offset;
	for (size_t r = 0; r < rails.size(); r++) {
		int rc = rails[r]->cache().get(rq, refs[r]);
		if (rc < 0)
			throw Error(-rc, "registering " + std::to_string(len) + " bytes on rail " + std::to_string(r) +
						 ": " + hmemreg_strerror(rc));
	}
	return std::make_unique<CachedRegistration>(std::move(refs));
}

std::string export_path(const std::string &provider, uint32_t api_version)
{
	std::string where;
	hmemreg_kmod_info info{};
	int rc = hmemreg_kmod_query(&info);
	if (rc == -HMEMREG_ENODEV)
		where = " (hmemreg.ko is not loaded here: hmemreg_export_* fail with HMEMREG_ENODEV)";
	else if (rc == 0 && !(info.caps & HMEMREG_CAP_EXPORT_DEVMEM))
		where = " (hmemreg.ko has no device memory pool: devmem_mb=0)";
	if (api_version < fabric::kApi1_20)
		return "registered by their CPU address (FI_MR_DMABUF needs libfabric API 1.20; this is " +
		       fabric::api_version_text(api_version) + "): the NIC does not import the DMA-BUF" + where;
	// In libfabric 2.6 verbs (ibv_reg_dmabuf_mr), efa, cxi, opx and ucx
	// import DMA-BUFs; the util MR map of tcp, shm, udp... turns
	// FI_MR_DMABUF back into base_addr + offset and uses the address.
	const std::string core = provider.substr(0, provider.find(';'));
	static const char *const importers[] = {"verbs", "efa", "cxi", "opx", "ucx"};
	for (const char *p : importers)
		if (core == p)
			return "FI_MR_DMABUF with FI_HMEM_SYSTEM: " + core + " imports the DMA-BUF (the module's ledger "
			       "shows the NIC as importer)" + where;
	return "FI_MR_DMABUF accepted, but provider " + core + " cannot import DMA-BUFs: it turns the "
	       "registration back into the export's CPU address (no importer in the ledger)" + where;
}

void name_rail_cache(RailCache &rc, const std::string &name)
{
	rc.cache().set_name(name);
}

} // namespace hmemreg::engine
