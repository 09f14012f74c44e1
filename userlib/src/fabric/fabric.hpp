// SPDX-License-Identifier: MIT
// fid_fabric and fid_domain: the provider instance and one NIC (a rail).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "fabric/fid.hpp"

namespace hmemreg::fabric {

using Fabric = Fid<fid_fabric>;
using Domain = Fid<fid_domain>;

Fabric open_fabric(const fi_info *info);
Domain open_domain(const Fabric &fabric, fi_info *info);

} // namespace hmemreg::fabric
