// SPDX-License-Identifier: MIT
// Inline and eager data copied into the receive buffer (host memory at once,
// device memory queued on our stream and settled by test()).
#include "plugin.hpp"

#include <cstring>

#include "log.hpp"

namespace hmemreg::nccl {

// Eager data for r in its slot: copied out (host memory: at once, without
// the lock; device memory: queued on our stream, settled by test()), then r
// is settled. The slot is not reused before r is marked done, and a closed
// comm's slots stay allocated.
void Plugin::land_eager(const std::shared_ptr<Request> &r, const uint8_t *slot, size_t bytes)
{
	const bool fits = bytes <= r->size;
	std::string why;
	DeviceCopies::Event ev;
	if (fits && r->device >= 0)
		ev = copies_.start(r->data, r->device, slot, bytes, why);
	else if (fits)
		std::memcpy(r->data, slot, bytes);
	std::lock_guard l(mu_);
	if (fits && r->device >= 0 && !ev) {
		r->state = Request::State::Failed;
		r->error = ncclSystemError;
		r->why = "send #" + std::to_string(r->seq) + " (eager): " + why;
	} else if (ev) {
		r->landing = std::move(ev);
		r->landing_bytes = bytes;
		r->landing_eager = true;
		return; // settle_landing_locked
	} else if (fits) {
		r->state = Request::State::Done;
		r->bytes = bytes;
		bytes_received_ += bytes;
	} else {
		// The sender could not check (it had no Cts): only this side fails.
		r->state = Request::State::Failed;
		r->error = ncclInvalidUsage;
		r->why = "send #" + std::to_string(r->seq) + " of " + std::to_string(bytes) +
			 " bytes (eager) exceeds the posted receive of " + std::to_string(r->size) + " bytes";
	}
	finish_landing_locked(*r, true);
}

// Inline data for r (no longer in c.pending): copied under the lock (at
// most INLINE_MAX bytes; into device memory queued on our stream and
// settled by test()), then r is settled.
void Plugin::land_inline_locked(RecvComm &c, Request &r, int32_t tag, std::span<const uint8_t> data)
{
	if (tag != r.tag) {
		r.state = Request::State::Failed;
		r.error = ncclInvalidUsage;
		r.why = "send #" + std::to_string(r.seq) + " (inline) has tag " + std::to_string(tag) +
			", the matching receive tag " + std::to_string(r.tag);
	} else if (data.size() > r.size) {
		// The sender may have had no Cts to check against: only this side fails.
		r.state = Request::State::Failed;
		r.error = ncclInvalidUsage;
		r.why = "send #" + std::to_string(r.seq) + " of " + std::to_string(data.size()) +
			" bytes (inline) exceeds the posted receive of " + std::to_string(r.size) + " bytes";
	} else if (r.device >= 0 && !data.empty()) {
		r.landing_src.assign(data.begin(), data.end());
		std::string why;
		r.landing = copies_.start(r.data, r.device, r.landing_src.data(), data.size(), why);
		if (r.landing) {
			r.landing_bytes = data.size();
			return; // settle_landing_locked
		}
		r.state = Request::State::Failed;
		r.error = ncclSystemError;
		r.why = "send #" + std::to_string(r.seq) + " (inline): " + why;
	} else {
		if (!data.empty())
			std::memcpy(r.data, data.data(), data.size());
		r.state = Request::State::Done;
		r.bytes = data.size();
		bytes_received_ += data.size();
	}
	mark_done_locked(c, r.seq);
}

// Receive r's data has landed (or failed to): its slot or sequence number
// is free for the sender.
void Plugin::finish_landing_locked(Request &r, bool eager)
{
	auto it = recvs_.find(r.comm_id);
	if (eager)
		eager_receives_++;
	if (it == recvs_.end())
		return;
	if (eager)
		it->second->eager_uncredited++;
	mark_done_locked(*it->second, r.seq);
}

void Plugin::settle_landing_locked(Request &r)
{
	std::string why;
	const int rc = DeviceCopies::poll(r.landing, why);
	if (rc == 0)
		return;
	if (rc > 0) {
		r.state = Request::State::Done;
		r.bytes = r.landing_bytes;
		bytes_received_ += r.landing_bytes;
	} else {
		r.state = Request::State::Failed;
		r.error = ncclSystemError;
		r.why = "send #" + std::to_string(r.seq) + (r.landing_eager ? " (eager): " : " (inline): ") + why;
	}
	r.landing.reset();
	r.landing_src = {};
	finish_landing_locked(r, r.landing_eager);
}

} // namespace hmemreg::nccl
