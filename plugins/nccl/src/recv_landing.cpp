// SPDX-License-Identifier: MIT
// Inline and eager data copied into the receive buffer, the way its
// Landing says: host memory by the CPU at once; staged device memory by
// CUDA on our stream, device memory the NIC registered by the NIC (an
// eager slot, or an InlineEntries entry, read into it): both settled by
// test().
#include "plugin.hpp"

#include <chrono>
#include <cstring>

#include "log.hpp"

namespace hmemreg::nccl {

namespace {

void fail(Request &r, ncclResult_t error, const char *how, const std::string &why)
{
	r.state = Request::State::Failed;
	r.error = error;
	r.why = "send #" + std::to_string(r.seq) + " (" + how + "): " + why;
}

} // namespace

// Eager data for r in its slot: copied out (host memory: at once, without
// the lock; device memory: queued, settled by test()), then r is settled.
// The slot is not reused before r is marked done, and a closed comm's
// slots stay allocated.
void Plugin::land_eager(const std::shared_ptr<Request> &r, const uint8_t *slot, size_t bytes)
{
	const bool fits = bytes <= r->size;
	std::string why;
	DeviceCopies::Event ev;
	if (fits && r->route == Landing::Cuda)
		ev = copies_.start(r->data, r->device, slot, bytes, why);
	uint64_t copy_ns = 0;
	if (fits && r->route == Landing::Cpu) {
		const auto t0 = std::chrono::steady_clock::now();
		std::memcpy(r->data, slot, bytes);
		copy_ns = static_cast<uint64_t>(
			std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
				.count());
	}
	std::lock_guard l(mu_);
	if (!fits) {
		// The sender could not check (it had no Cts): only this side fails.
		fail(*r, ncclInvalidUsage, "eager",
		     std::to_string(bytes) + " bytes exceed the posted receive of " + std::to_string(r->size) + " bytes");
	} else if (r->route == Landing::Cuda && !ev) {
		fail(*r, ncclSystemError, "eager", why);
	} else if (ev) {
		r->landing.cuda = std::move(ev);
	} else if (r->route == Landing::Nic) {
		auto it = recvs_.find(r->comm_id);
		if (it == recvs_.end())
			return; // closed: nobody waits for r
		const EagerSlots &e = it->second->eager;
		try {
			r->landing.nic = engine_->nic_copy(*r->region, r->offset, *e.region,
							   static_cast<uint64_t>(slot - e.mem.get()), bytes);
		} catch (const Error &x) {
			fail(*r, ncclSystemError, "eager", std::string("NIC copy into device memory: ") + x.what());
		}
	}
	if (r->landing) {
		r->landing.bytes = bytes;
		r->landing.eager = true;
		return; // settle_landing_locked
	}
	if (r->state == Request::State::Pending) {
		r->state = Request::State::Done;
		r->bytes = bytes;
		bytes_received_ += bytes;
	}
	finish_landing_locked(*r, true, copy_ns);
}

// Inline data for r (no longer in c.pending): copied under the lock (at
// most INLINE_MAX bytes; into device memory queued and settled by test()),
// then r is settled.
void Plugin::land_inline_locked(RecvComm &c, Request &r, int32_t tag, std::span<const uint8_t> data)
{
	if (tag != r.tag) {
		fail(r, ncclInvalidUsage, "inline",
		     "tag " + std::to_string(tag) + ", the matching receive tag " + std::to_string(r.tag));
	} else if (data.size() > r.size) {
		// The sender may have had no Cts to check against: only this side fails.
		fail(r, ncclInvalidUsage, "inline",
		     std::to_string(data.size()) + " bytes exceed the posted receive of " + std::to_string(r.size) +
			     " bytes");
	} else if (data.empty() || r.route == Landing::Cpu) {
		if (!data.empty())
			std::memcpy(r.data, data.data(), data.size());
		r.state = Request::State::Done;
		r.bytes = data.size();
		bytes_received_ += data.size();
	} else if (start_device_landing_locked(c, r, data)) {
		r.landing.bytes = data.size();
		return; // settle_landing_locked
	}
	mark_done_locked(c, r.seq);
}

// Inline data on its way into r's device buffer; false (r failed) when it
// could not start.
bool Plugin::start_device_landing_locked(RecvComm &c, Request &r, std::span<const uint8_t> data)
{
	std::string why;
	if (r.route == Landing::Cuda) {
		r.landing.src.assign(data.begin(), data.end());
		r.landing.cuda = copies_.start(r.data, r.device, r.landing.src.data(), data.size(), why);
		if (!r.landing.cuda)
			fail(r, ncclSystemError, "inline", why);
		return static_cast<bool>(r.landing);
	}
	InlineEntries &e = c.inline_entries;
	try {
		if (!e.mem) {
			e.entry_size = std::max<size_t>(cfg_.inline_max, 1024);
			const size_t n = cfg_.max_requests;
			e.mem.reset(new uint8_t[e.entry_size * n]);
			e.region = engine_->register_region(e.mem.get(), e.entry_size * n);
			for (size_t i = n; i-- > 0;)
				e.free.push_back(static_cast<uint32_t>(i));
		}
		// One entry per outstanding receive (MAX_REQUESTS): none free is a bug.
		if (e.free.empty() || data.size() > e.entry_size)
			throw Error(HMEMREG_EINVAL, e.free.empty() ? std::string("no free Inline entry")
								   : std::to_string(data.size()) +
									     " bytes exceed HMEMREG_NCCL_INLINE_MAX here");
		const uint32_t i = e.free.back();
		const size_t at = static_cast<size_t>(i) * e.entry_size;
		std::memcpy(e.mem.get() + at, data.data(), data.size());
		r.landing.nic = engine_->nic_copy(*r.region, r.offset, *e.region, at, data.size());
		e.free.pop_back();
		r.landing.inline_entry = i;
		return true;
	} catch (const Error &x) {
		fail(r, ncclSystemError, "inline", std::string("NIC copy into device memory: ") + x.what());
		return false;
	}
}

// Receive r's data has landed (or failed to): its slot or sequence number
// is free for the sender. copy_ns: the CPU's copy out of an eager slot.
void Plugin::finish_landing_locked(Request &r, bool eager, uint64_t copy_ns)
{
	auto it = recvs_.find(r.comm_id);
	if (eager)
		eager_receives_++;
	if (it == recvs_.end())
		return;
	if (eager) {
		it->second->eager_uncredited++;
		it->second->eager_landed++;
		it->second->eager_copy_ns += copy_ns;
	}
	mark_done_locked(*it->second, r.seq);
}

void Plugin::settle_landing_locked(Request &r)
{
	Request::PendingLanding &l = r.landing;
	std::string why;
	int rc = 0;
	if (l.cuda) {
		rc = DeviceCopies::poll(l.cuda, why);
	} else {
		const int s = l.nic->status();
		rc = s == -HMEMREG_EAGAIN ? 0 : s == 0 ? 1 : -1;
		if (rc < 0)
			why = "NIC copy into device memory: " + l.nic->error();
	}
	if (rc == 0)
		return;
	if (rc > 0) {
		r.state = Request::State::Done;
		r.bytes = l.bytes;
		bytes_received_ += l.bytes;
	} else {
		fail(r, ncclSystemError, l.eager ? "eager" : "inline", why);
	}
	const bool eager = l.eager;
	if (auto it = recvs_.find(r.comm_id); it != recvs_.end()) {
		if (l.inline_entry >= 0)
			it->second->inline_entries.free.push_back(static_cast<uint32_t>(l.inline_entry));
		it->second->nic_landings += rc > 0 && l.nic;
		nic_landings_ += rc > 0 && l.nic;
	}
	l = {};
	finish_landing_locked(r, eager, 0);
}

} // namespace hmemreg::nccl
