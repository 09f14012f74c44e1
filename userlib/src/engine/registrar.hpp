// SPDX-License-Identifier: MIT
// How the engine registers local memory: through libhmemreg's registration
// cache (mrcache/), one cache per rail domain over a FabricRegistrar. This
// file and registrar.cpp are the only engine code that knows about it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <rdma/fi_domain.h>

namespace hmemreg::mr {
class Cache;
}

namespace hmemreg::engine {

class RailCache;
// The name its stats slot shows (mr_cache_stat): "rail0 tcp;ofi_rxm lo".
void name_rail_cache(RailCache &rc, const std::string &name);

// The registration cache of one rail's domain. Must be destroyed before the
// domain is closed (DomainHolder declares it after the domain).
class RailCache {
public:
	RailCache(fid_domain *domain, const std::string &provider);
	~RailCache();
	mr::Cache &cache() const { return *cache_; }
	std::string describe() const; // monitor in use

private:
	std::unique_ptr<mr::Cache> cache_;
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

// Throws hmemreg::Error.
std::unique_ptr<LocalRegistration> register_local(std::span<RailCache *const> rails, const void *addr, size_t len);

} // namespace hmemreg::engine
