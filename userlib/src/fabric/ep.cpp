// SPDX-License-Identifier: MIT
#include "fabric/ep.hpp"

#include <cstring>
#include <random>
#include <string>
#include <unistd.h>

#include "fabric/error.hpp"
#include "shm/shm_gc.hpp"

namespace hmemreg::fabric {

namespace {

// FI_OPT_CUDA_API_PERMITTED: libfabric's ABI value since 1.18 (Debian's
// 1.17 headers lack the name; the runtime decides).
constexpr int kOptCudaApiPermitted = 10;

// shm names an endpoint's region after the pid ("<pid>:<domain>:<ep>" in
// /dev/shm), and a process killed before closing leaves its region behind:
// a later process that gets the same pid then fails fi_enable with EBUSY.
// A random name cannot meet a stale one. Best effort: on failure the
// provider keeps its own name. The pid in the name lets hmemreg_shm_gc
// (shm/shm_gc.cpp) tell the regions of dead processes; the first one made
// in a process removes those first.
std::string name_shm_endpoint(fid_ep *ep, const fi_info *info)
{
	if (!info->fabric_attr || !info->fabric_attr->prov_name || std::strcmp(info->fabric_attr->prov_name, "shm") != 0)
		return {};
	shm::gc_once();
	std::random_device rd;
	uint64_t r = (static_cast<uint64_t>(rd()) << 32) | rd();
	std::string name = "hmemreg_" + std::to_string(::getpid()) + "_" + std::to_string(r);
	if (fi_setname(&ep->fid, name.data(), name.size() + 1) != 0)
		return {};
	return name;
}

} // namespace

Endpoint::Endpoint(fid_domain *domain, fi_info *info, CompletionQueue &cq, AddressVector &av, bool forbid_cuda)
{
	fid_ep *ep = nullptr;
	check(fi_endpoint(domain, info, &ep, nullptr), "fi_endpoint");
	ep_ = Fid<fid_ep>(ep);
	check(fi_ep_bind(ep, &cq.get()->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
	check(fi_ep_bind(ep, &av.get()->fid, 0), "fi_ep_bind(av)");
	if (forbid_cuda) {
		// Before fi_enable (fi_endpoint(3)); a runtime older than 1.18
		// answers -FI_ENOPROTOOPT, as for any option it does not know.
		bool permitted = false;
		cuda_forbidden_rc_ = fi_setopt(&ep->fid, FI_OPT_ENDPOINT, kOptCudaApiPermitted, &permitted, sizeof(permitted));
	}
	std::string region = name_shm_endpoint(ep, info);
	check(fi_enable(ep), "fi_enable");
	if (!region.empty())
		region_lock_ = shm::hold(region); // fi_enable made the region
}

std::vector<uint8_t> Endpoint::name() const
{
	size_t len = 0;
	int rc = fi_getname(&ep_.get()->fid, nullptr, &len);
	if (rc != -FI_ETOOSMALL)
		check(rc < 0 ? rc : -FI_EINVAL, "fi_getname(size)");
	std::vector<uint8_t> v(len);
	check(fi_getname(&ep_.get()->fid, v.data(), &len), "fi_getname");
	v.resize(len);
	return v;
}

} // namespace hmemreg::fabric
