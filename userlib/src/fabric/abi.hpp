// SPDX-License-Identifier: MIT
// One binary, either libfabric: built against Debian's 1.17 headers, run on
// 1.17 or on 2.x (LD_LIBRARY_PATH), or built against 2.x headers. What the
// newer API versions add that this code uses, defined when the headers
// predate it (values and layouts are the public ABI: fi_domain.h of 1.20+;
// FI_MR_DMABUF and fi_mr_attr's room come from the installed
// hmemreg/fabric_compat.h, which the tools and outside users share), and
// storage for the structures a provider fills or reads by the API version
// the fabric was opened with rather than by our sizeof:
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

#include "hmemreg/fabric_compat.h" // FI_MR_DMABUF and fi_mr_attr's room: public, for outside users too

namespace hmemreg::fabric {

constexpr uint64_t kMrDmabuf = HMEMREG_FI_MR_DMABUF;
using DmabufRange = hmemreg_fi_mr_dmabuf_t;

// API versions this code knows how to speak.
constexpr uint32_t kApi1_17 = FI_VERSION(1, 17);
constexpr uint32_t kApi1_20 = HMEMREG_FI_API_DMABUF; // FI_MR_DMABUF, fi_cq_err_entry.src_addr
constexpr uint32_t kApi2_0 = FI_VERSION(2, 0);

// fi_mr_attr plus room for what newer API versions append; zeroed.
struct MrAttr : hmemreg_fi_mr_attr {
	MrAttr() : hmemreg_fi_mr_attr{} {}
	void set_dmabuf(const DmabufRange *d) { hmemreg_fi_mr_attr_set_dmabuf(this, d); }
};

// fi_cq_err_entry plus room for what newer API versions append.
struct CqErrEntry {
	fi_cq_err_entry entry{};
	uint64_t newer[4]{};
};

static_assert(offsetof(hmemreg_fi_mr_attr, newer) == sizeof(fi_mr_attr));
static_assert(offsetof(CqErrEntry, newer) == sizeof(fi_cq_err_entry));

} // namespace hmemreg::fabric
