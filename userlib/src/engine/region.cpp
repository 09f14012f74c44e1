// SPDX-License-Identifier: MIT
#include "engine/region.hpp"

namespace hmemreg::engine {

RegionImpl::RegionImpl(uint64_t engine, void *addr, size_t len, std::vector<std::shared_ptr<DomainHolder>> domains,
		       std::unique_ptr<LocalRegistration> reg, std::unique_ptr<StagedMemory> staged)
	: engine_id(engine), addr_(addr), len_(len), staged_(std::move(staged)), domains_(std::move(domains)),
	  reg(std::move(reg))
{
}

RegionImpl::~RegionImpl() = default;

} // namespace hmemreg::engine
