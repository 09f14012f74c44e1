// SPDX-License-Identifier: MIT
// Address vector (FI_AV_TABLE or MAP, whichever the provider prefers): raw
// endpoint names in, fi_addr_t out; entries removable for dynamic peers.
#pragma once

#include <cstddef>

#include <rdma/fi_domain.h>

#include "fabric/fid.hpp"

namespace hmemreg::fabric {

class AddressVector {
public:
	AddressVector() = default;
	AddressVector(fid_domain *domain, size_t count_hint);

	// Inserts one raw address (as fi_getname produced it); throws on failure.
	fi_addr_t insert(const void *name);
	void remove(fi_addr_t addr);

	fid_av *get() const { return av_.get(); }

private:
	Fid<fid_av> av_;
};

} // namespace hmemreg::fabric
