// SPDX-License-Identifier: MIT
// A local region: memory registered on every rail of one engine, and, for
// device memory the provider cannot reach, its pinned host mirror.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/facade.hpp"
#include "engine/rail.hpp"
#include "engine/rail_cache.hpp"
#include "hmem/cuda_copy.hpp"

namespace hmemreg::engine {

// Device memory staged through a pinned host mirror that the NIC reads and
// writes (staging.hpp).
struct StagedMemory {
	int device = -1;
	uint64_t id = 0; // names the region in Landed notices (unique per engine)
	cuda::PinnedBuffer mirror;
};

class RegionImpl final : public Region, public std::enable_shared_from_this<RegionImpl> {
public:
	RegionImpl(uint64_t engine, void *addr, size_t len, std::vector<std::shared_ptr<DomainHolder>> domains,
		   std::unique_ptr<LocalRegistration> reg, std::unique_ptr<StagedMemory> staged = nullptr);
	~RegionImpl() override;
	void *addr() const override { return addr_; }
	size_t length() const override { return len_; }
	bool staged() const override { return staged_ != nullptr; }
	// What the NIC reads and writes: the memory itself, or its host mirror.
	uint8_t *io_addr() const { return staged_ ? staged_->mirror.data() : static_cast<uint8_t *>(addr_); }
	StagedMemory *staging() const { return staged_.get(); }

	const uint64_t engine_id;

private:
	void *addr_;
	size_t len_;
	std::unique_ptr<StagedMemory> staged_; // freed last, after the MR of its mirror (reg)
	std::vector<std::shared_ptr<DomainHolder>> domains_; // outlive the registration

public:
	std::unique_ptr<LocalRegistration> reg;
};

} // namespace hmemreg::engine
