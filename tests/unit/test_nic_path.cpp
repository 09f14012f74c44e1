// SPDX-License-Identifier: MIT
// A rail's pciPath (engine/nic_path.cpp), what NCCL's topology places the
// NIC by: the sysfs path of the PCI device an fi_info's fid_nic names, and
// nothing where there is no such device (shm, tcp and Soft-RoCE name none).
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <dirent.h>

#include <criterion/criterion.h>

#include "engine/nic_path.hpp"

using hmemreg::engine::nic_pci_path;

namespace {

struct FakeNic {
	fi_info info{};
	fid_nic nic{};
	fi_bus_attr bus{};
	FakeNic(fi_bus_type type, uint16_t domain, uint8_t b, uint8_t dev, uint8_t fn)
	{
		info.nic = &nic;
		nic.bus_attr = &bus;
		bus.bus_type = type;
		bus.attr.pci.domain_id = domain;
		bus.attr.pci.bus_id = b;
		bus.attr.pci.device_id = dev;
		bus.attr.pci.function_id = fn;
	}
};

// The first PCI device of this machine, "" where there is none.
std::string first_pci_device()
{
	DIR *d = opendir("/sys/bus/pci/devices");
	if (!d)
		return {};
	std::string name;
	while (dirent *e = readdir(d))
		if (e->d_name[0] != '.') {
			name = e->d_name;
			break;
		}
	closedir(d);
	return name;
}

} // namespace

Test(nic_path, none_without_a_pci_nic)
{
	cr_assert(nic_pci_path(nullptr).empty());
	fi_info bare{};
	cr_assert(nic_pci_path(&bare).empty(), "no fid_nic (shm, tcp)");
	fid_nic no_bus{};
	bare.nic = &no_bus;
	cr_assert(nic_pci_path(&bare).empty(), "a fid_nic without bus attributes");
	FakeNic unknown(FI_BUS_UNKNOWN, 0, 0, 0, 0);
	cr_assert(nic_pci_path(&unknown.info).empty(), "a bus that is not PCI (Soft-RoCE's netdev)");
	FakeNic absent(FI_BUS_PCI, 0xfffe, 0xff, 0x1f, 7);
	cr_assert(nic_pci_path(&absent.info).empty(), "a PCI address with no device in sysfs");
}

Test(nic_path, the_real_sysfs_path_of_a_pci_nic)
{
	const std::string name = first_pci_device();
	if (name.empty())
		cr_skip_test("no PCI device in /sys/bus/pci/devices");
	unsigned dom = 0, b = 0, dev = 0, fn = 0;
	cr_assert_eq(std::sscanf(name.c_str(), "%x:%x:%x.%x", &dom, &b, &dev, &fn), 4, "%s", name.c_str());
	FakeNic n(FI_BUS_PCI, static_cast<uint16_t>(dom), static_cast<uint8_t>(b), static_cast<uint8_t>(dev),
		  static_cast<uint8_t>(fn));
	const std::string got = nic_pci_path(&n.info);
	char want[PATH_MAX];
	cr_assert(realpath(("/sys/bus/pci/devices/" + name).c_str(), want));
	cr_assert_str_eq(got.c_str(), want);
	// NCCL reads the bus ids off the path's last component.
	cr_assert(got.rfind("/sys/devices/", 0) == 0 && got.size() > name.size() &&
			  got.compare(got.size() - name.size(), name.size(), name) == 0,
		  "%s", got.c_str());
}
