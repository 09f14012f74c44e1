// SPDX-License-Identifier: MIT
// One binary, either libfabric: built against Debian's 1.17 headers, run on
// 1.17 or on 2.x (LD_LIBRARY_PATH), or built against 2.x headers. What the
// newer API versions add that this code uses, defined here when the headers
// predate it (values and layouts are the public ABI: fi_domain.h of 1.20+),
// and storage for the structures a provider fills or reads by the API
// version the fabric was opened with rather than by our sizeof:
//  - fi_mr_attr: 1.19 added hmem_data, 1.22 page_size, 2.0 base_mr and
//    sub_mr_cnt; a provider reads them at those API versions.
//  - fi_cq_err_entry: 1.20 added src_addr; fi_cq_readerr writes it.
// Zeroed tails read as "not set" (NULL, 0) for every one of those fields.
#pragma once

#include <cstddef>
#include <cstdint>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>

namespace hmemreg::fabric {

#ifdef FI_MR_DMABUF
constexpr uint64_t kMrDmabuf = FI_MR_DMABUF;
using DmabufRange = fi_mr_dmabuf;
#else
constexpr uint64_t kMrDmabuf = 1ULL << 40;
// struct fi_mr_dmabuf of 1.20: the region is [base_addr + offset, +len).
struct DmabufRange {
	int fd;
	uint64_t offset;
	size_t len;
	void *base_addr;
};
#endif

// API versions this code knows how to speak.
constexpr uint32_t kApi1_17 = FI_VERSION(1, 17);
constexpr uint32_t kApi1_20 = FI_VERSION(1, 20); // FI_MR_DMABUF, fi_cq_err_entry.src_addr
constexpr uint32_t kApi2_0 = FI_VERSION(2, 0);

// fi_mr_attr plus room for what newer API versions append.
struct MrAttr {
	fi_mr_attr attr{};
	uint64_t newer[8]{};
	// In 1.20+ headers mr_iov and dmabuf share the first member (a union).
	void set_dmabuf(const DmabufRange *d) { attr.mr_iov = reinterpret_cast<const iovec *>(d); }
};

// fi_cq_err_entry plus room for what newer API versions append.
struct CqErrEntry {
	fi_cq_err_entry entry{};
	uint64_t newer[4]{};
};

static_assert(offsetof(MrAttr, newer) == sizeof(fi_mr_attr));
static_assert(offsetof(CqErrEntry, newer) == sizeof(fi_cq_err_entry));

} // namespace hmemreg::fabric
