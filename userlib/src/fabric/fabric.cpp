// SPDX-License-Identifier: MIT
#include "fabric/fabric.hpp"

#include "fabric/error.hpp"

namespace hmemreg::fabric {

Fabric open_fabric(const fi_info *info)
{
	fid_fabric *f = nullptr;
	check(fi_fabric(info->fabric_attr, &f, nullptr), "fi_fabric");
	return Fabric(f);
}

Domain open_domain(const Fabric &fabric, fi_info *info)
{
	fid_domain *d = nullptr;
	check(fi_domain(fabric.get(), info, &d, nullptr), "fi_domain");
	return Domain(d);
}

} // namespace hmemreg::fabric
