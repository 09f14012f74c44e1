// SPDX-License-Identifier: MIT
// How the engine registers local memory: through libhmemreg's registration
// cache (mrcache/), one cache per rail domain over a FabricRegistrar. This
// file and rail_cache.cpp are the only engine code that knows about it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <rdma/fi_domain.h>

namespace hmemreg::mr {
class Cache;
class FabricRegistrar;
}

namespace hmemreg::engine {

class RailCache;
// The name its stats slot shows (mr_cache_stat): "rail0 tcp;ofi_rxm lo".
void name_rail_cache(RailCache &rc, const std::string &name);

// The registration cache of one rail's domain. Must be destroyed before the
// domain is closed (DomainHolder declares it after the domain).
class RailCache {
public:
	// api_version: what the domain's fabric was opened with (DMA-BUF
	// registration of device memory needs 1.20); hmem: opened with FI_HMEM.
	RailCache(fid_domain *domain, const std::string &provider, uint32_t api_version, bool hmem);
	~RailCache();
	mr::Cache &cache() const { return *cache_; }
	std::string describe() const; // monitor in use
	// Device-memory registrations made through FI_MR_DMABUF / by address.
	uint64_t device_dmabuf_regs() const;
	uint64_t device_address_regs() const;
	// Why device memory registered by address although FI_MR_DMABUF was
	// usable (the provider refused it, an export failed); empty otherwise.
	std::string address_path_reason() const;
	// Of the DMA-BUF ones, those wrapped by hmemreg.ko, and why the last
	// one was not ("" when none was refused).
	uint64_t device_wrapped_regs() const;
	std::string not_wrapped_reason() const;
	// Unlink every registration (Rail::abandon): the unused ones are
	// deregistered now, the held ones at their last put.
	void retire();

private:
	std::unique_ptr<mr::Cache> cache_;
	const mr::FabricRegistrar *registrar_ = nullptr; // owned by cache_
};

// Registrations of one address range on every rail (cache references, put
// back on destruction).
class LocalRegistration {
public:
	virtual ~LocalRegistration() = default;
	virtual void *desc(size_t rail) const = 0;
	virtual uint64_t key(size_t rail) const = 0;
	// Start of the registered range on that rail (it covers the request).
	virtual uintptr_t start(size_t rail) const = 0;
};

// What a region is, for registration: host memory (iface 0), or device
// memory of a kind (mr::Iface values) and device ordinal.
struct MemoryKind {
	uint32_t iface = 0;
	uint64_t device = 0;
	int dmabuf_fd = -1;         // an hmemreg.ko export's DMA-BUF (iface KMOD_EXPORT)
	uint64_t dmabuf_offset = 0; // where addr sits in it
};

// Whether the domain's provider registers CUDA memory (one probe
// registration; see mr::FabricRegistrar::registers_cuda).
bool provider_registers_cuda(fid_domain *domain, std::string *why);

// How hmemreg.ko exports register with this provider at this API version,
// as a line of describe(): imported through FI_MR_DMABUF, FI_MR_DMABUF
// turned back into the address by a util provider, or by address.
std::string export_path(const std::string &provider, uint32_t api_version);

// Throws hmemreg::Error.
std::unique_ptr<LocalRegistration> register_local(std::span<RailCache *const> rails, const void *addr, size_t len,
						  MemoryKind kind = {});

} // namespace hmemreg::engine
