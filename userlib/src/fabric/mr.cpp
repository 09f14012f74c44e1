// SPDX-License-Identifier: MIT
#include "fabric/mr.hpp"

#include <sys/uio.h>

#include "fabric/abi.hpp"
#include "fabric/error.hpp"

namespace hmemreg::fabric {

MemoryRegion::MemoryRegion(fid_domain *domain, const void *addr, size_t len, uint64_t access, uint64_t requested_key)
{
	iovec iov{const_cast<void *>(addr), len};
	MrAttr storage; // room for the fields newer API versions read
	fi_mr_attr &attr = storage.attr;
	attr.mr_iov = &iov;
	attr.iov_count = 1;
	attr.access = access;
	attr.requested_key = requested_key;
	attr.iface = FI_HMEM_SYSTEM;
	fid_mr *mr = nullptr;
	check(fi_mr_regattr(domain, &attr, 0, &mr), "fi_mr_regattr");
	mr_ = Fid<fid_mr>(mr);
}

} // namespace hmemreg::fabric
