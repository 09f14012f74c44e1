// SPDX-License-Identifier: MIT
// What the registration benches share: one libfabric domain (with a
// registration cache over it), and a timer.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "hmemreg/hmemreg.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

namespace hmemreg::bench {

// A domain of provider `prov` (FI_MR_LOCAL-style memory registration).
struct Domain {
	fi_info *info = nullptr;
	fid_fabric *fabric = nullptr;
	fid_domain *domain = nullptr;
	const char *failed = nullptr; // the call open() failed in

	// At the API version libhmemreg negotiates with this runtime; hmem: ask
	// for FI_HMEM (device memory registered directly). Returns 0 or the
	// negative FI_E* code of the call named by `failed`.
	int open(const std::string &prov, fi_ep_type ep = FI_EP_MSG, bool hmem = false)
	{
		fi_info *hints = fi_allocinfo();
		hints->fabric_attr->prov_name = strdup(prov.c_str());
		hints->ep_attr->type = ep;
		hints->caps = FI_MSG | FI_RMA | (hmem ? FI_HMEM : 0);
		hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_HMEM;
		int rc = fi_getinfo(hmemreg_fabric_api_version(), nullptr, nullptr, 0, hints, &info);
		fi_freeinfo(hints);
		if (rc)
			failed = "fi_getinfo";
		else if ((rc = fi_fabric(info->fabric_attr, &fabric, nullptr)))
			failed = "fi_fabric";
		else if ((rc = fi_domain(fabric, info, &domain, nullptr)))
			failed = "fi_domain";
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

// A domain of one provider and a registration cache over it (created with
// the domain's fi_info, so FI_MR_DMABUF is used at API 1.20+): what the
// registration benches measure against each other. The cache goes first.
struct CachedDomain {
	Domain dom;
	hmemreg_cache *cache = nullptr;

	// Opens both. On failure says on stderr, after `who`, the provider, what
	// failed and why with its code, and returns that (negative) code: FI_E*
	// from the domain's calls, HMEMREG_E* from the cache.
	int open(const char *who, const std::string &prov, const char *cache_name)
	{
		int rc = dom.open(prov);
		if (rc) {
			std::fprintf(stderr, "%s: provider %s: %s: %s (%d)\n", who, prov.c_str(), dom.failed,
				     fi_strerror(-rc), rc);
			return rc;
		}
		hmemreg_cache_config cfg;
		hmemreg_cache_config_init(&cfg);
		std::snprintf(cfg.name, sizeof(cfg.name), "%s", cache_name);
		if ((rc = hmemreg_cache_create_fabric_info(dom.domain, dom.info, &cfg, &cache)))
			std::fprintf(stderr, "%s: provider %s: registration cache: %s (%d)\n", who, prov.c_str(),
				     hmemreg_strerror(rc), rc);
		return rc;
	}
	CachedDomain() = default;
	CachedDomain(const CachedDomain &) = delete;
	CachedDomain &operator=(const CachedDomain &) = delete;
	~CachedDomain() { hmemreg_cache_destroy(cache); }
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
