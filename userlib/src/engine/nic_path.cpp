// SPDX-License-Identifier: MIT
#include "engine/nic_path.hpp"

#include <climits>
#include <cstdio>
#include <cstdlib>

namespace hmemreg::engine {

std::string nic_pci_path(const fi_info *info)
{
	if (!info || !info->nic || !info->nic->bus_attr || info->nic->bus_attr->bus_type != FI_BUS_PCI)
		return {};
	const fi_pci_attr &p = info->nic->bus_attr->attr.pci;
	char dev[64];
	std::snprintf(dev, sizeof(dev), "/sys/bus/pci/devices/%04x:%02x:%02x.%x", p.domain_id, p.bus_id, p.device_id,
		      p.function_id);
	char real[PATH_MAX];
	return ::realpath(dev, real) ? std::string(real) : std::string();
}

} // namespace hmemreg::engine
