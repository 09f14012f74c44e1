// SPDX-License-Identifier: MIT
#include "engine/topology.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <hwloc.h>

#include "fabric/error.hpp"

namespace hmemreg::engine {

struct Topology::Impl {
	hwloc_topology_t topo = nullptr;
	bool ok = false;

	// The CPU set of the NIC's nearest non-I/O ancestor, or nullptr.
	hwloc_const_cpuset_t cpuset(const fi_info *info, std::string &where) const
	{
		if (!ok || !info->nic || !info->nic->bus_attr || info->nic->bus_attr->bus_type != FI_BUS_PCI)
			return nullptr;
		const fi_pci_attr &pci = info->nic->bus_attr->attr.pci;
		hwloc_obj_t dev = hwloc_get_pcidev_by_busid(topo, pci.domain_id, pci.bus_id, pci.device_id,
							     pci.function_id);
		if (!dev)
			return nullptr;
		char b[32];
		std::snprintf(b, sizeof(b), "%04x:%02x:%02x.%x", pci.domain_id, pci.bus_id, pci.device_id,
			      pci.function_id);
		where = b;
		hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, dev);
		return anc ? anc->cpuset : nullptr;
	}
};

Topology::Topology() : impl_(std::make_unique<Impl>())
{
	if (hwloc_topology_init(&impl_->topo) < 0)
		return;
	hwloc_topology_set_io_types_filter(impl_->topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	impl_->ok = hwloc_topology_load(impl_->topo) == 0;
}

Topology::~Topology()
{
	if (impl_->topo)
		hwloc_topology_destroy(impl_->topo);
}

bool Topology::has_locality(const fi_info *info) const
{
	std::string where;
	return impl_->cpuset(info, where) != nullptr;
}

std::string Topology::pin_thread_near(const fi_info *info) const
{
	std::string where;
	hwloc_const_cpuset_t set = impl_->cpuset(info, where);
	if (!set)
		return "not pinned (no PCI locality for this NIC)";
	if (hwloc_set_cpubind(impl_->topo, set, HWLOC_CPUBIND_THREAD) < 0)
		return std::string("not pinned (hwloc_set_cpubind: ") + std::strerror(errno) + ")";
	char *s = nullptr;
	hwloc_bitmap_list_asprintf(&s, set);
	std::string r = std::string("pinned to cpus ") + (s ? s : "?") + " near " + where;
	std::free(s);
	return r;
}

void Topology::Free::operator()(uint8_t *p) const
{
	if (topo && topo->impl_->ok)
		hwloc_free(topo->impl_->topo, p, len);
	else
		std::free(p);
}

Topology::Buffer Topology::alloc_near(const fi_info *info, size_t len) const
{
	std::string where;
	hwloc_const_cpuset_t set = impl_->cpuset(info, where);
	void *p = nullptr;
	if (impl_->ok) {
		p = set ? hwloc_alloc_membind(impl_->topo, len, set, HWLOC_MEMBIND_BIND, 0)
			: hwloc_alloc(impl_->topo, len);
		if (!p && set)
			p = hwloc_alloc(impl_->topo, len);
	} else {
		p = std::aligned_alloc(4096, (len + 4095) & ~size_t(4095));
	}
	if (!p)
		throw Error(HMEMREG_ENOMEM, "cannot allocate " + std::to_string(len) + " bytes of control buffers");
	std::memset(p, 0, len);
	return Buffer(static_cast<uint8_t *>(p), Free{this, len});
}

} // namespace hmemreg::engine
