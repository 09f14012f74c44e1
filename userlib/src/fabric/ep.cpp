// SPDX-License-Identifier: MIT
#include "fabric/ep.hpp"

#include "fabric/error.hpp"

namespace hmemreg::fabric {

Endpoint::Endpoint(fid_domain *domain, fi_info *info, CompletionQueue &cq, AddressVector &av)
{
	fid_ep *ep = nullptr;
	check(fi_endpoint(domain, info, &ep, nullptr), "fi_endpoint");
	ep_ = Fid<fid_ep>(ep);
	check(fi_ep_bind(ep, &cq.get()->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
	check(fi_ep_bind(ep, &av.get()->fid, 0), "fi_ep_bind(av)");
	check(fi_enable(ep), "fi_enable");
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
