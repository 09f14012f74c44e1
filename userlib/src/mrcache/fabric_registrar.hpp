// SPDX-License-Identifier: MIT
// FabricRegistrar: registrations with fi_mr_regattr() on a libfabric domain.
//
//   auto r = std::make_unique<hmemreg::mr::FabricRegistrar>(domain);
//
// Registers with every access bit the cache may need (FI_SEND | FI_RECV |
// FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, narrowed with the
// constructor's argument), so access is not part of the cache key. Sets
// fi_mr_attr.iface/device for device memory kinds. Device memory registers
// through FI_MR_DMABUF where the domain's fabric was opened at API >= 1.20
// (api_version; the headers need not know it, see fabric/abi.hpp) and the
// provider accepts it: with the request's DMA-BUF fd, or for CUDA memory
// without one, the allocation's own export (cuMemGetHandleForAddressRange,
// made on a miss). Otherwise, and after the provider refuses once
// (-FI_EOPNOTSUPP / -FI_ENOSYS) on that domain, by address with iface and
// device ordinal. paths() counts which path registered device memory.
// Requested keys are unique per registrar for providers without
// FI_MR_PROV_KEY. Not for domains with FI_MR_ENDPOINT (their MRs need an
// endpoint bind and enable, which a shared cache cannot do per endpoint).
//
// Registrations are the provider's, uncached: libhmemreg turns off the
// monitors of providers' registration caches when it is loaded (see
// hmemreg/cache.h and fabric_registrar.cpp) so that e.g. verbs does not keep
// its own cache underneath this one.
#pragma once

#include <atomic>
#include <mutex>
#include <cstdint>
#include <string>

#include "mrcache/registrar.hpp"

struct fid_domain;

namespace hmemreg::mr {

// What is known of a domain: the API version its fabric was opened with
// (fi_getinfo's; 0 = unknown, taken as < 1.20: no FI_MR_DMABUF) and whether
// it was opened with FI_HMEM (no: device memory is refused by the
// registrar, -HMEMREG_ENOTSUP, rather than handed to a provider that may
// take the pointer for host memory; unknown: the provider decides).
struct DomainFacts {
	enum Hmem { unknown, no, yes };
	uint32_t api_version = 0;
	Hmem hmem = unknown;
};

class FabricRegistrar final : public Registrar {
public:
	// domain must stay open while the registrar (its cache) lives.
	// access 0 = all access bits listed above.
	using Facts = DomainFacts;
	explicit FabricRegistrar(fid_domain *domain, uint64_t access = 0, const char *provider = nullptr,
				 DomainFacts facts = DomainFacts());
	const char *name() const override { return name_.c_str(); }
	int reg(const Request &req, Range range, Registration &out) override;
	void dereg(Registration &r) noexcept override;

	// Last libfabric error (negative FI_ code) of reg(), for diagnostics.
	int last_fi_error() const { return last_fi_error_.load(std::memory_order_relaxed); }
	// Whether device memory may register through FI_MR_DMABUF here.
	bool dmabuf_usable() const;
	// Whether hmemreg.ko exports (FI_HMEM_SYSTEM pages behind a DMA-BUF)
	// may: API >= 1.20 and not refused, FI_HMEM or not.
	bool dmabuf_usable_for_exports() const;
	uint32_t api_version() const { return facts_.api_version; }

	// Device-memory registrations by path, and why the address path was
	// taken where DMA-BUF was usable (empty when it never was).
	struct Paths {
		uint64_t dmabuf = 0;
		uint64_t address = 0;
		bool dmabuf_refused = false;
		std::string why_address;
		// ... of the DMA-BUF ones, wrapped by hmemreg.ko (the pin ledger
		// sees them), and why the last one was not (empty when all were).
		uint64_t wrapped = 0;
		std::string why_not_wrapped;
	};
	Paths paths() const;

	// A libfabric domain fid (fclass FI_CLASS_DOMAIN)?
	static bool is_domain(const fid_domain *domain);

	// Whether the provider behind `domain` registers CUDA memory: FI_HMEM
	// in its caps says it handles some device memory kinds, not that its
	// libfabric has CUDA (1.17's shm offers FI_HMEM and refuses
	// FI_HMEM_CUDA with -FI_ENOSYS). One registration of a small allocation
	// on CUDA device 0 tells (about a millisecond; once per domain). False
	// with the reason where there is no CUDA driver, too.
	static bool registers_cuda(fid_domain *domain, std::string *why);

private:
	fid_domain *domain_;
	uint64_t access_;
	std::string name_;
	std::atomic<uint64_t> next_key_{1};
	Facts facts_;
	std::atomic<bool> dmabuf_refused_{false};
	std::atomic<int> last_fi_error_{0};
	std::atomic<uint64_t> dmabuf_regs_{0};
	std::atomic<uint64_t> address_regs_{0};
	mutable std::mutex why_mu_;
	std::string why_address_;
	std::atomic<uint64_t> wrapped_regs_{0};
	std::string why_not_wrapped_;

	void note_address_path(const std::string &why);
	void note_not_wrapped(const std::string &why);
};

} // namespace hmemreg::mr
