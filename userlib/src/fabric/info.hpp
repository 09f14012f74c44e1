// SPDX-License-Identifier: MIT
// fi_info lists: hints built with fi_allocinfo, query results from fi_getinfo,
// both freed with fi_freeinfo.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <rdma/fabric.h>

namespace hmemreg::fabric {

// The libfabric API version every fi_getinfo() of this library asks for:
// the newest of 2.0, 1.20 and 1.17 that the runtime accepts (fi_version();
// headers of 1.17 or 2.x alike, see fabric/abi.hpp), capped by
// HMEMREG_FABRIC_API=MAJOR.MINOR (e.g. 1.17, to run the pre-DMA-BUF path on
// a 2.x runtime). Decided once per process.
uint32_t api_version();
// "1.20" etc.
std::string api_version_text(uint32_t v);

struct InfoDeleter {
	void operator()(fi_info *i) const { fi_freeinfo(i); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

// An empty fi_info to fill in as hints (fi_allocinfo). Throws on ENOMEM.
InfoPtr alloc_hints();

// fi_dupinfo of one entry (its `next` is not followed).
InfoPtr dup_info(const fi_info *info);

// fi_getinfo(api_version(), node, nullptr, flags, hints). An empty list when the
// provider has nothing that matches (-FI_ENODATA); throws on other errors.
InfoPtr get_info(const fi_info *hints, const char *node = nullptr, uint64_t flags = 0);

// Entries of a list, in order (non-owning pointers into it).
std::vector<const fi_info *> entries(const fi_info *list);

// One line: provider, fabric, domain, endpoint type, caps that matter here.
std::string describe(const fi_info *info);

} // namespace hmemreg::fabric
