// SPDX-License-Identifier: MIT
// An enabled FI_EP_RDM endpoint bound to one CQ (send and recv) and one AV.
#pragma once

#include <cstdint>
#include <vector>

#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>

#include "fabric/av.hpp"
#include "fabric/cq.hpp"
#include "fabric/fid.hpp"
#include "unique_fd.hpp"

namespace hmemreg::fabric {

class Endpoint {
public:
	Endpoint() = default;
	// forbid_cuda: ask for FI_OPT_CUDA_API_PERMITTED = false before enabling.
	Endpoint(fid_domain *domain, fi_info *info, CompletionQueue &cq, AddressVector &av, bool forbid_cuda = false);

	// The endpoint's raw address, to be inserted into a peer's AV.
	std::vector<uint8_t> name() const;
	fid_ep *get() const { return ep_.get(); }
	// fi_setopt's answer to forbid_cuda: 0 (the provider makes no CUDA
	// call), a negative fi_errno (it needs them), 1 (not asked).
	int cuda_forbidden_rc() const { return cuda_forbidden_rc_; }

private:
	UniqueFd region_lock_; // shm provider: held on our region until ep_ closed (and removed) it
	Fid<fid_ep> ep_;
	int cuda_forbidden_rc_ = 1;
};

} // namespace hmemreg::fabric
