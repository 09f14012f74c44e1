// SPDX-License-Identifier: MIT
// A memory registration on one domain (fi_mr_regattr), enabled when the
// provider asks for FI_MR_ENDPOINT. Used by the engine's registrar until the
// registration cache supplies registrations.
#pragma once

#include <cstddef>
#include <cstdint>

#include <rdma/fi_domain.h>

#include "fabric/fid.hpp"

namespace hmemreg::fabric {

class MemoryRegion {
public:
	MemoryRegion() = default;
	// access: FI_WRITE | FI_REMOTE_WRITE | ...; requested_key is used unless
	// the provider assigns keys (FI_MR_PROV_KEY).
	MemoryRegion(fid_domain *domain, const void *addr, size_t len, uint64_t access, uint64_t requested_key);

	void *desc() const { return fi_mr_desc(mr_.get()); }
	uint64_t key() const { return fi_mr_key(mr_.get()); }
	fid_mr *get() const { return mr_.get(); }

private:
	Fid<fid_mr> mr_;
};

} // namespace hmemreg::fabric
