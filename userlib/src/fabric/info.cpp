// SPDX-License-Identifier: MIT
#include "fabric/info.hpp"

#include "fabric/error.hpp"

namespace hmemreg::fabric {

InfoPtr alloc_hints()
{
	InfoPtr p(fi_allocinfo());
	if (!p)
		throw Error(HMEMREG_ENOMEM, "fi_allocinfo failed");
	return p;
}

InfoPtr dup_info(const fi_info *info)
{
	InfoPtr p(fi_dupinfo(info));
	if (!p)
		throw Error(HMEMREG_ENOMEM, "fi_dupinfo failed");
	return p;
}

InfoPtr get_info(const fi_info *hints, const char *node, uint64_t flags)
{
	fi_info *out = nullptr;
	int rc = fi_getinfo(kApiVersion, node, nullptr, flags, const_cast<fi_info *>(hints), &out);
	if (rc == -FI_ENODATA)
		return InfoPtr();
	check(rc, "fi_getinfo");
	return InfoPtr(out);
}

std::vector<const fi_info *> entries(const fi_info *list)
{
	std::vector<const fi_info *> v;
	for (const fi_info *i = list; i; i = i->next)
		v.push_back(i);
	return v;
}

std::string describe(const fi_info *info)
{
	std::string s = info->fabric_attr && info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "?";
	s += " fabric=";
	s += info->fabric_attr && info->fabric_attr->name ? info->fabric_attr->name : "?";
	s += " domain=";
	s += info->domain_attr && info->domain_attr->name ? info->domain_attr->name : "?";
	s += info->ep_attr && info->ep_attr->type == FI_EP_RDM ? " ep=rdm" : " ep=other";
	return s;
}

} // namespace hmemreg::fabric
