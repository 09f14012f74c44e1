// SPDX-License-Identifier: MIT
// What the registration benches share: one libfabric domain, and a timer.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "hmemreg/hmemreg.h"

#include <chrono>
#include <cstring>
#include <string>

namespace hmemreg::bench {

// A domain of provider `prov` (FI_MR_LOCAL-style memory registration).
struct Domain {
	fi_info *info = nullptr;
	fid_fabric *fabric = nullptr;
	fid_domain *domain = nullptr;

	// At the API version libhmemreg negotiates with this runtime; hmem: ask
	// for FI_HMEM (device memory registered directly).
	int open(const std::string &prov, fi_ep_type ep = FI_EP_MSG, bool hmem = false)
	{
		fi_info *hints = fi_allocinfo();
		hints->fabric_attr->prov_name = strdup(prov.c_str());
		hints->ep_attr->type = ep;
		hints->caps = FI_MSG | FI_RMA | (hmem ? FI_HMEM : 0);
		hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_HMEM;
		int rc = fi_getinfo(hmemreg_fabric_api_version(), nullptr, nullptr, 0, hints, &info);
		fi_freeinfo(hints);
		if (rc == 0)
			rc = fi_fabric(info->fabric_attr, &fabric, nullptr);
		if (rc == 0)
			rc = fi_domain(fabric, info, &domain, nullptr);
		return rc;
	}
	Domain() = default;
	Domain(const Domain &) = delete;
	Domain &operator=(const Domain &) = delete;
	~Domain()
	{
		if (domain)
			fi_close(&domain->fid);
		if (fabric)
			fi_close(&fabric->fid);
		if (info)
			fi_freeinfo(info);
	}
};

// Mean ns per call of fn (which returns false on failure: then -1).
template <typename F> double ns_per(long iters, F fn)
{
	auto t0 = std::chrono::steady_clock::now();
	for (long i = 0; i < iters; i++)
		if (!fn())
			return -1;
	auto t1 = std::chrono::steady_clock::now();
	return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(iters);
}

} // namespace hmemreg::bench
