// SPDX-License-Identifier: MIT
// FabricRegistrar: registrations with fi_mr_regattr() on a libfabric domain.
//
//   auto r = std::make_unique<hmemreg::mr::FabricRegistrar>(domain);
//
// Registers with every access bit the cache may need (FI_SEND | FI_RECV |
// FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, narrowed with the
// constructor's argument), so access is not part of the cache key. Sets
// fi_mr_attr.iface/device for device memory kinds. A request carrying a
// DMA-BUF fd registers through FI_MR_DMABUF where libfabric has it at build
// time (>= 1.20 headers) and at run time (fi_version() >= 1.20) and the
// provider accepts it; after the provider refuses once (-FI_EOPNOTSUPP /
// -FI_ENOSYS) the registrar uses the address path for that domain.
// Requested keys are unique per registrar for providers without
// FI_MR_PROV_KEY. Not for domains with FI_MR_ENDPOINT (their MRs need an
// endpoint bind and enable, which a shared cache cannot do per endpoint).
//
// Registrations are the provider's, uncached: libhmemreg sets
// FI_MR_CACHE_MAX_COUNT=0 when it is loaded (see hmemreg/cache.h) so that
// e.g. verbs does not keep its own cache underneath this one.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "mrcache/registrar.hpp"

struct fid_domain;

namespace hmemreg::mr {

class FabricRegistrar final : public Registrar {
public:
	// domain must stay open while the registrar (its cache) lives.
	// access 0 = all access bits listed above.
	explicit FabricRegistrar(fid_domain *domain, uint64_t access = 0, const char *provider = nullptr);
	const char *name() const override { return name_.c_str(); }
	int reg(const Request &req, Range range, Registration &out) override;
	void dereg(Registration &r) noexcept override;

	// Last libfabric error (negative FI_ code) of reg(), for diagnostics.
	int last_fi_error() const { return last_fi_error_.load(std::memory_order_relaxed); }
	// Whether the DMA-BUF path is compiled in and not yet refused.
	bool dmabuf_usable() const;
	static bool dmabuf_compiled();

	// A libfabric domain fid (fclass FI_CLASS_DOMAIN)?
	static bool is_domain(const fid_domain *domain);

private:
	fid_domain *domain_;
	uint64_t access_;
	std::string name_;
	std::atomic<uint64_t> next_key_{1};
	std::atomic<bool> dmabuf_refused_{false};
	std::atomic<int> last_fi_error_{0};
};

} // namespace hmemreg::mr
