// SPDX-License-Identifier: MIT
#include "engine/registrar.hpp"

#include <vector>

#include "fabric/mr.hpp"

namespace hmemreg::engine {
namespace {

class DirectRegistration final : public LocalRegistration {
public:
	DirectRegistration(std::span<fid_domain *const> domains, const void *addr, size_t len, uint64_t access,
			   uint64_t key)
	{
		mrs_.reserve(domains.size());
		for (fid_domain *d : domains)
			mrs_.emplace_back(d, addr, len, access, key);
	}
	void *desc(size_t rail) const override { return mrs_.at(rail).desc(); }
	uint64_t key(size_t rail) const override { return mrs_.at(rail).key(); }

private:
	std::vector<fabric::MemoryRegion> mrs_;
};

} // namespace

std::unique_ptr<LocalRegistration> register_local(std::span<fid_domain *const> domains, const void *addr,
						  size_t len, uint64_t access, uint64_t requested_key)
{
	return std::make_unique<DirectRegistration>(domains, addr, len, access, requested_key);
}

} // namespace hmemreg::engine
