// SPDX-License-Identifier: MIT
#include "engine/remote_regions.hpp"

namespace hmemreg::engine {

std::shared_ptr<const wire::RegionDescriptor> RemoteRegions::import(std::span<const uint8_t> bytes)
{
	const std::string_view key(reinterpret_cast<const char *>(bytes.data()), bytes.size());
	{
		std::lock_guard l(mu_);
		auto it = by_bytes_.find(key);
		if (it != by_bytes_.end())
			return it->second;
	}
	auto d = std::make_shared<const wire::RegionDescriptor>(wire::decode_descriptor(bytes));
	std::lock_guard l(mu_);
	if (by_bytes_.size() >= kMaxEntries)
		by_bytes_.clear();
	by_bytes_.emplace(std::string(key), d);
	return d;
}

} // namespace hmemreg::engine
