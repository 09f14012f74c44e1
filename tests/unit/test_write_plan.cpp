// SPDX-License-Identifier: MIT
// The engine's write planner with no fabric: chunks + a decoded descriptor +
// limits -> the writes of each rail (engine/write_plan.hpp).
#include <criterion/criterion.h>

#include <map>
#include <random>
#include <vector>

#include "engine/rail_cache.hpp"
#include "engine/write_plan.hpp"
#include "fabric/error.hpp"

using namespace hmemreg::engine;

namespace {

// A registration whose descriptor on rail r is tag + r (as a pointer).
struct FakeReg final : LocalRegistration {
	explicit FakeReg(uintptr_t t) : tag(t) {}
	void *desc(size_t rail) const override { return reinterpret_cast<void *>(tag + rail); }
	uint64_t key(size_t rail) const override { return tag + rail; }
	uintptr_t start(size_t) const override { return 0; }
	uintptr_t tag;
};

// A target region of `rails` rails: rail r at base 0x10000000 * (r + 1), key 100 + r.
wire::RegionDescriptor remote(size_t rails, uint64_t length = 1ull << 32)
{
	wire::RegionDescriptor d;
	d.engine_id = 0x1234'5678'9abc;
	d.length = length;
	for (size_t r = 0; r < rails; r++)
		d.rails.push_back({0x10000000ull * (r + 1), 100 + r});
	return d;
}

uint8_t *at(uintptr_t a) { return reinterpret_cast<uint8_t *>(a); }

// Every write keeps to the limits; pieces cover the chunks' bytes exactly
// once with the right local <-> remote pairing, rail by rail.
void check_invariants(const WritePlan &p, std::span<const PlanChunk> chunks, const wire::RegionDescriptor &d,
		      const PlanLimits &lim)
{
	cr_assert_eq(p.rail_writes.size(), lim.rails);
	cr_assert_eq(p.iovs.size(), p.descs.size());
	cr_assert_eq(p.iovs.size(), p.rmas.size());
	std::map<uint64_t, std::pair<uint8_t *, uint64_t>> want; // remote offset -> local, len
	for (const auto &c : chunks)
		want[c.remote_offset] = {c.local, c.len};
	uint64_t bytes = 0;
	size_t seen_writes = 0;
	for (size_t r = 0; r < lim.rails; r++) {
		for (uint32_t wi : p.rail_writes[r]) {
			seen_writes++;
			const auto &w = p.writes.at(wi);
			cr_assert(w.count >= 1 && w.count <= lim.write_iov, "write of %u pieces", w.count);
			uint64_t wb = 0;
			for (uint32_t k = w.first; k < w.first + w.count; k++) {
				const auto &rail = d.rails[r % d.rails.size()];
				cr_assert_eq(p.rmas[k].key, rail.key, "rail %zu writes with another rail's key", r);
				cr_assert_eq(p.rmas[k].len, p.iovs[k].iov_len);
				cr_assert_eq(p.descs[k], reinterpret_cast<void *>(0x1000 + r) , "rail %zu's descriptor", r);
				const uint64_t off = p.rmas[k].addr - rail.base;
				// Each chunk the piece crosses maps its bytes at the same
				// distance on both sides (a piece may span joined chunks).
				auto it = want.upper_bound(off);
				cr_assert(it != want.begin());
				--it;
				for (uint64_t pos = off; pos < off + p.rmas[k].len; ++it) {
					cr_assert(it != want.end() && it->first <= pos &&
						  pos < it->first + it->second.second, "piece beyond the chunks");
					cr_assert_eq(static_cast<uint8_t *>(p.iovs[k].iov_base) + (pos - off),
						     it->second.first + (pos - it->first));
					pos = it->first + it->second.second;
				}
				wb += p.iovs[k].iov_len;
			}
			cr_assert(wb <= lim.max_write, "write of %llu bytes over max_write", (unsigned long long)wb);
			bytes += wb;
		}
	}
	cr_assert_eq(seen_writes, p.writes.size(), "a write on no rail");
	uint64_t total = 0;
	for (const auto &c : chunks)
		total += c.len;
	cr_assert_eq(bytes, total);
	cr_assert_eq(p.bytes, total);
}

} // namespace

Test(write_plan, one_small_chunk_is_one_write)
{
	FakeReg reg(0x1000);
	auto d = remote(1);
	PlanChunk c{at(0x5000), &reg, 4096, 64};
	PlanLimits lim{1, 512 << 10, 4};
	WritePlan p = plan_write({&c, 1}, d, lim, 0);
	cr_assert_eq(p.writes.size(), 1u);
	cr_assert_eq(p.iovs[0].iov_base, at(0x5000));
	cr_assert_eq(p.iovs[0].iov_len, 4096u);
	cr_assert_eq(p.rmas[0].addr, d.rails[0].base + 64);
	cr_assert_eq(p.rmas[0].key, 100u);
	cr_assert_eq(p.first_busy_rail(), 0u);
	check_invariants(p, {&c, 1}, d, lim);
}

// 64 chunks of 16 KiB contiguous on both sides: one run, cut at max_write.
Test(write_plan, contiguous_chunks_join)
{
	FakeReg reg(0x1000);
	auto d = remote(2);
	std::vector<PlanChunk> cs;
	for (size_t i = 0; i < 64; i++)
		cs.push_back({at(0x100000 + i * 16384), &reg, 16384, i * 16384});
	PlanLimits lim{2, 512 << 10, 4};
	WritePlan p = plan_write(cs, d, lim, 0);
	cr_assert_eq(p.writes.size(), 2u, "1 MiB in %zu writes", p.writes.size());
	cr_assert_eq(p.rail_writes[0].size(), 1u);
	cr_assert_eq(p.rail_writes[1].size(), 1u);
	cr_assert_eq(p.iovs[0].iov_len, 512u << 10);
	check_invariants(p, cs, d, lim);
}

// Chunks with gaps stay apart and share writes, write_iov at a time.
Test(write_plan, scattered_chunks_share_writes)
{
	FakeReg reg(0x1000);
	auto d = remote(1);
	std::vector<PlanChunk> cs;
	for (size_t i = 0; i < 64; i++)
		cs.push_back({at(0x100000 + i * 32768), &reg, 16384, i * 16384});
	PlanLimits lim{1, 512 << 10, 4};
	WritePlan p = plan_write(cs, d, lim, 0);
	cr_assert_eq(p.iovs.size(), 64u);
	cr_assert_eq(p.writes.size(), 16u);
	for (const auto &w : p.writes)
		cr_assert_eq(w.count, 4u);
	check_invariants(p, cs, d, lim);
	// One write per chunk with write_iov 1.
	lim.write_iov = 1;
	cr_assert_eq(plan_write(cs, d, lim, 0).writes.size(), 64u);
}

// Pieces sharing a write stay within max_write bytes together.
Test(write_plan, shared_writes_keep_max_write)
{
	FakeReg reg(0x1000);
	auto d = remote(1);
	std::vector<PlanChunk> cs;
	for (size_t i = 0; i < 8; i++)
		cs.push_back({at(0x100000 + i * 8192), &reg, 3000, i * 4000});
	PlanLimits lim{1, 8192, 4};
	WritePlan p = plan_write(cs, d, lim, 0);
	cr_assert_eq(p.writes.size(), 4u, "%zu writes", p.writes.size()); // two of 3000 B per 8 KiB write
	check_invariants(p, cs, d, lim);
}

// Contiguous addresses of two registrations never join.
Test(write_plan, registrations_never_join)
{
	FakeReg a(0x1000), b(0x1000);
	auto d = remote(1);
	PlanChunk cs[2] = {{at(0x100000), &a, 4096, 0}, {at(0x101000), &b, 4096, 4096}};
	PlanLimits lim{1, 1 << 20, 1};
	WritePlan p = plan_write(cs, d, lim, 0);
	cr_assert_eq(p.writes.size(), 2u);
	check_invariants(p, cs, d, lim);
}

// Pieces go round-robin from first_rail; local rail r writes to the
// target's rail r % (its rails), with that rail's base and key.
Test(write_plan, pieces_stripe_over_rails)
{
	FakeReg reg(0x1000);
	auto d = remote(2);
	PlanChunk c{at(0x100000), &reg, 5 * 1000, 0};
	PlanLimits lim{3, 1000, 1};
	WritePlan p = plan_write({&c, 1}, d, lim, 2);
	cr_assert_eq(p.writes.size(), 5u);
	// Pieces 0..4 on rails 2, 0, 1, 2, 0.
	cr_assert_eq(p.rail_writes[2].size(), 2u);
	cr_assert_eq(p.rail_writes[0].size(), 2u);
	cr_assert_eq(p.rail_writes[1].size(), 1u);
	cr_assert_eq(p.first_busy_rail(), 0u);
	const auto &first = p.writes[p.rail_writes[2][0]];
	cr_assert_eq(p.rmas[first.first].addr, d.rails[0].base + 0, "rail 2 talks to the target's rail 0");
	const auto &second = p.writes[p.rail_writes[0][0]];
	cr_assert_eq(p.rmas[second.first].addr, d.rails[0].base + 1000);
	const auto &third = p.writes[p.rail_writes[1][0]];
	cr_assert_eq(p.rmas[third.first].addr, d.rails[1].base + 2000);
	cr_assert_eq(p.rmas[third.first].key, d.rails[1].key);
	check_invariants(p, {&c, 1}, d, lim);
	// A small write on one rail of several: the others stay empty.
	PlanChunk s{at(0x100000), &reg, 10, 0};
	WritePlan q = plan_write({&s, 1}, d, lim, 1);
	cr_assert_eq(q.first_busy_rail(), 1u);
	cr_assert(q.rail_writes[0].empty() && q.rail_writes[2].empty());
}

// Random scatter lists against every invariant.
Test(write_plan, random_lists_keep_invariants)
{
	std::mt19937_64 rng(18);
	FakeReg regs[3] = {FakeReg(0x1000), FakeReg(0x1000), FakeReg(0x1000)};
	for (int round = 0; round < 300; round++) {
		const size_t rails = 1 + rng() % 4, peer_rails = 1 + rng() % 4;
		PlanLimits lim{rails, 1 + rng() % 70000, 1 + rng() % 6};
		auto d = remote(peer_rails);
		std::vector<PlanChunk> cs;
		uint64_t roff = rng() % 100;
		uintptr_t loff = 0x100000;
		const size_t n = 1 + rng() % 40;
		for (size_t i = 0; i < n; i++) {
			const size_t len = 1 + rng() % 200000;
			cs.push_back({at(loff), &regs[rng() % 3], len, roff});
			// Often contiguous on both sides, sometimes a gap on either.
			loff += len + (rng() % 3 == 0 ? rng() % 5000 : 0);
			roff += len + (rng() % 3 == 0 ? rng() % 5000 : 0);
		}
		WritePlan p = plan_write(cs, d, lim, static_cast<unsigned>(rng() % 7));
		check_invariants(p, cs, d, lim);
	}
}

// Planning into a recycled plan gives what a fresh plan gives, whatever it
// held before, and keeps its vectors' storage (no allocation once warm).
Test(write_plan, into_a_reused_plan)
{
	FakeReg reg(0x1000);
	const auto d = remote(3);
	const PlanLimits lim{3, 64 << 10, 4};
	std::vector<PlanChunk> big;
	for (size_t i = 0; i < 40; i++)
		big.push_back({at(0x100000 + i * 0x20000), &reg, 48 << 10, i * 0x20000});
	const PlanChunk small{at(0x900000), &reg, 100 << 10, 0x40};
	WritePlan reused;
	plan_write(big, d, lim, 1, reused);
	const auto *iov_storage = reused.iovs.data();
	plan_write({&small, 1}, d, lim, 2, reused);
	const WritePlan fresh = plan_write({&small, 1}, d, lim, 2);
	cr_assert_eq(reused.bytes, fresh.bytes);
	cr_assert_eq(reused.iovs.size(), fresh.iovs.size());
	for (size_t i = 0; i < fresh.iovs.size(); i++) {
		cr_assert_eq(reused.iovs[i].iov_base, fresh.iovs[i].iov_base);
		cr_assert_eq(reused.iovs[i].iov_len, fresh.iovs[i].iov_len);
		cr_assert_eq(reused.descs[i], fresh.descs[i]);
		cr_assert_eq(reused.rmas[i].addr, fresh.rmas[i].addr);
		cr_assert_eq(reused.rmas[i].key, fresh.rmas[i].key);
	}
	cr_assert_eq(reused.writes.size(), fresh.writes.size());
	cr_assert_eq(reused.rail_writes.size(), fresh.rail_writes.size());
	for (size_t r = 0; r < fresh.rail_writes.size(); r++)
		cr_assert(reused.rail_writes[r] == fresh.rail_writes[r]);
	cr_assert_eq(reused.iovs.data(), iov_storage, "the larger plan's storage is reused");
}
