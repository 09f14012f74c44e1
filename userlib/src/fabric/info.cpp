// SPDX-License-Identifier: MIT
#include "fabric/info.hpp"
#include "settings/settings.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "fabric/abi.hpp"
#include "fabric/error.hpp"

namespace hmemreg::fabric {

namespace {

uint32_t negotiate()
{
	uint32_t cap = ~0u;
	if (const char *v = settings::raw("HMEMREG_FABRIC_API")) {
		unsigned major = 0, minor = 0;
		if (std::sscanf(v, "%u.%u", &major, &minor) == 2)
			cap = FI_VERSION(major, minor);
		else
			log::write(HMEMREG_LOG_WARN, "fabric", "HMEMREG_FABRIC_API='%s' is not MAJOR.MINOR (e.g. 1.17); ignored",
				   v);
	}
	const uint32_t runtime = fi_version();
	for (uint32_t v : {kApi2_0, kApi1_20, kApi1_17})
		if (v <= runtime && v <= cap)
			return v;
	// Older than 1.17 (or capped below it): what the runtime is.
	return std::min(runtime, cap);
}

} // namespace

uint32_t api_version()
{
	static const uint32_t v = negotiate();
	return v;
}

std::string api_version_text(uint32_t v)
{
	return std::to_string(FI_MAJOR(v)) + "." + std::to_string(FI_MINOR(v));
}

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
	int rc = fi_getinfo(api_version(), node, nullptr, flags, const_cast<fi_info *>(hints), &out);
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
