// SPDX-License-Identifier: MIT
// The write planner (see write_plan.hpp).
#include "engine/write_plan.hpp"

#include <algorithm>

#include "engine/rail_cache.hpp"
#include "engine/thread_scratch.hpp"
#include "fabric/error.hpp"

namespace hmemreg::engine {

unsigned WritePlan::first_busy_rail() const
{
	return static_cast<unsigned>(
		std::find_if(rail_writes.begin(), rail_writes.end(), [](const auto &v) { return !v.empty(); }) -
		rail_writes.begin());
}

namespace {

struct Piece {
	iovec iov;
	void *desc;
	fi_rma_iov rma;
};

// The planner's scratch, per thread (thread_scratch.hpp): cleared, kept.
struct Scratch {
	std::vector<PlanChunk> runs;
	std::vector<std::vector<Piece>> by_rail;
};

} // namespace

WritePlan plan_write(std::span<const PlanChunk> chunks, const wire::RegionDescriptor &remote, const PlanLimits &lim,
		     unsigned first_rail)
{
	WritePlan plan;
	plan_write(chunks, remote, lim, first_rail, plan);
	return plan;
}

void plan_write(std::span<const PlanChunk> chunks, const wire::RegionDescriptor &remote, const PlanLimits &lim,
		unsigned first_rail, WritePlan &plan)
{
	const size_t nrails = lim.rails;
	const size_t peer_rails = remote.rails.size();
	const size_t mw = lim.max_write;
	plan.iovs.clear();
	plan.descs.clear();
	plan.rmas.clear();
	plan.writes.clear();
	plan.bytes = 0;
	Scratch own;
	Scratch *sp = thread_scratch<Scratch>();
	Scratch &scratch = sp ? *sp : own;

	// A page list of contiguous memory goes out as a few large writes, not
	// one per page.
	std::vector<PlanChunk> &runs = scratch.runs;
	runs.clear();
	for (const PlanChunk &c : chunks) {
		PlanChunk *b = runs.empty() ? nullptr : &runs.back();
		if (b && b->reg == c.reg && b->local + b->len == c.local && b->remote_offset + b->len == c.remote_offset)
			b->len += c.len;
		else
			runs.push_back(c);
	}
	size_t npieces = 0;
	for (const PlanChunk &c : runs)
		npieces += c.len / mw + (c.len % mw != 0);
	if (npieces >= UINT32_MAX)
		throw Error(HMEMREG_EINVAL, "write: too many chunks");

	std::vector<std::vector<Piece>> &by_rail = scratch.by_rail;
	if (by_rail.size() < nrails)
		by_rail.resize(nrails);
	for (size_t r = 0; r < nrails; r++)
		by_rail[r].clear();
	unsigned rail = static_cast<unsigned>(first_rail % nrails);
	for (const PlanChunk &c : runs) {
		for (size_t off = 0; off < c.len;) {
			const size_t len = std::min(mw, c.len - off);
			const auto &pr = remote.rails[rail % peer_rails]; // the target rail local rail `rail` talks to
			by_rail[rail].push_back(
				{{c.local + off, len}, c.reg->desc(rail), {pr.base + c.remote_offset + off, len, pr.key}});
			plan.bytes += len;
			off += len;
			rail = static_cast<unsigned>((rail + 1) % nrails);
		}
	}
	plan.iovs.reserve(npieces);
	plan.descs.reserve(npieces);
	plan.rmas.reserve(npieces);
	plan.rail_writes.resize(nrails);
	for (auto &v : plan.rail_writes)
		v.clear();
	for (unsigned r = 0; r < nrails; r++) {
		const auto &ps = by_rail[r];
		for (size_t i = 0; i < ps.size();) {
			WritePlan::Write w;
			w.first = static_cast<uint32_t>(plan.iovs.size());
			size_t bytes = 0;
			do {
				plan.iovs.push_back(ps[i].iov);
				plan.descs.push_back(ps[i].desc);
				plan.rmas.push_back(ps[i].rma);
				bytes += ps[i].iov.iov_len;
				w.count++;
				i++;
			} while (i < ps.size() && w.count < lim.write_iov && bytes + ps[i].iov.iov_len <= mw);
			plan.rail_writes[r].push_back(static_cast<uint32_t>(plan.writes.size()));
			plan.writes.push_back(w);
		}
	}
}

} // namespace hmemreg::engine
