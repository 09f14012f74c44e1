// SPDX-License-Identifier: MIT
// Where a rail's NIC sits: the sysfs path of the PCI device behind an
// fi_info (its fid_nic's bus address), "" where the provider names none
// (shm, tcp, Soft-RoCE) or the device is not in sysfs. NCCL's topology
// places the NIC by it (getProperties' pciPath) and turns GPUDirect RDMA on
// by itself where the GPU is close; without one it puts the NIC at the CPU.
#pragma once

#include <string>

#include <rdma/fabric.h>

namespace hmemreg::engine {

std::string nic_pci_path(const fi_info *info);

} // namespace hmemreg::engine
