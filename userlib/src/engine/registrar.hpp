// SPDX-License-Identifier: MIT
// How the engine registers local memory on its rails' domains: the one seam
// between the engine and the registration layer. Today each region is
// registered directly (fabric::MemoryRegion, one per domain); switching to the
// registration cache means changing registrar.cpp only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include <rdma/fi_domain.h>

namespace hmemreg::engine {

// Registrations of one address range on several domains; deregistered when
// destroyed.
class LocalRegistration {
public:
	virtual ~LocalRegistration() = default;
	virtual void *desc(size_t rail) const = 0;
	virtual uint64_t key(size_t rail) const = 0;
};

// access: FI_* access bits; requested_key is used where the provider does not
// assign keys itself. Throws hmemreg::Error.
std::unique_ptr<LocalRegistration> register_local(std::span<fid_domain *const> domains, const void *addr,
						  size_t len, uint64_t access, uint64_t requested_key);

} // namespace hmemreg::engine
