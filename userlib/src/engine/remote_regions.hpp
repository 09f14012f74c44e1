// SPDX-License-Identifier: MIT
// Remote region descriptors, decoded once. write() takes the target's
// descriptor as the bytes the target shipped (C and C++ API alike, so the
// API stays as it is): the first write with given bytes decodes and checks
// them, later ones find the decoded form here by those bytes. Decoding is a
// pure function of the bytes, so an entry never goes stale; the table is
// bounded (emptied when full).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "engine/wire.hpp"

namespace hmemreg::engine {

class RemoteRegions {
public:
	// Throws Error(HMEMREG_EINVAL) on a malformed descriptor (never kept).
	std::shared_ptr<const wire::RegionDescriptor> import(std::span<const uint8_t> bytes);

	static constexpr size_t kMaxEntries = 1024;

private:
	struct Hash {
		using is_transparent = void;
		size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
	};
	std::mutex mu_;
	std::unordered_map<std::string, std::shared_ptr<const wire::RegionDescriptor>, Hash, std::equal_to<>> by_bytes_;
};

} // namespace hmemreg::engine
