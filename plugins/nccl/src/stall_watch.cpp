// SPDX-License-Identifier: MIT
// The stall watch (Config::stall_ms): a thread that logs requests and a
// plugin lock that stay stuck too long.
#include "plugin.hpp"

#include "cuda_driver.hpp"
#include "log.hpp"

namespace hmemreg::nccl {

// Once a second: a request waiting longer than STALL_MS gets the state
// logged, once; so does a plugin lock that stayed held that long (a call
// stuck inside the provider or CUDA: the lock is tried, never waited for).
void Plugin::watch_stalls()
{
	using clock = std::chrono::steady_clock;
	const auto stall = std::chrono::milliseconds(cfg_.stall_ms);
	clock::time_point held_since{}; // the epoch: not held at the last look
	bool held_told = false;
	std::unique_lock wl(watch_mu_);
	while (!watch_cv_.wait_for(wl, std::chrono::seconds(1), [this] { return watch_stop_; })) {
		const auto now = clock::now();
		std::unique_lock l(mu_, std::try_to_lock);
		if (!l.owns_lock()) {
			if (held_since == clock::time_point{})
				held_since = now;
			if (!held_told && now - held_since > stall) {
				NWARN("stall: the plugin's lock has been held for over %u ms by a call that has not returned "
				      "(a provider or CUDA call that blocks?)",
				      cfg_.stall_ms);
				held_told = true;
			}
			continue;
		}
		held_since = {};
		tell_stalls_locked(now);
	}
}

void Plugin::tell_stalls_locked(std::chrono::steady_clock::time_point now)
{
	const auto stall = std::chrono::milliseconds(cfg_.stall_ms);
	std::vector<Request *> late;
	for (auto &[key, r] : requests_)
		if (r->state == Request::State::Pending && !r->stall_told && now - r->posted > stall)
			late.push_back(r.get());
	if (late.empty())
		return;
	const auto ms = [&](const Request &r) {
		return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(now - r.posted).count());
	};
	NWARN("stall: %zu request(s) waited over %u ms; %zu pending in all, %zu send and %zu recv comms", late.size(),
	      cfg_.stall_ms, requests_.size(), sends_.size(), recvs_.size());
	for (const auto &[id, c] : sends_)
		NWARN("stall:  send comm %u -> recv comm %u: next seq %u, %zu outstanding, %zu advertised%s", id,
		      c->remote_id, c->next_seq, c->outstanding, c->cts.size(), c->peer_closed ? ", peer closed" : "");
	for (const auto &[id, c] : recvs_)
		NWARN("stall:  recv comm %u <- send comm %u: next seq %u, done up to %u, %zu outstanding, %zu early%s", id,
		      c->remote_id, c->next_seq, c->done_upto, c->outstanding,
		      c->inline_early.size() + c->eager_early.size(), c->peer_closed ? ", peer closed" : "");
	// Whether NCCL still tests a request, and whether its copy into device
	// memory ran: which side of the plugin a hang is on.
	const auto tested = [&](const Request &r) {
		if (!r.tests)
			return std::string(", never tested");
		const auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(now - r.last_test).count();
		return ", tested " + std::to_string(r.tests) + " times (last " + std::to_string(ago) + " ms ago)";
	};
	const auto copy = [](const Request &r) {
		if (!r.landing)
			return std::string();
		if (!r.landing.cuda)
			return std::string(", NIC copy into device memory queued");
		std::string why = "no CUDA context for device " + std::to_string(r.device);
		const int rc = cuda::use_device(r.device) < 0 ? -1 : DeviceCopies::poll(r.landing.cuda, why);
		return std::string(", copy into device memory queued: ") +
		       (rc > 0 ? "ran, not yet settled" : rc == 0 ? "not run yet" : "failed (" + why + ")");
	};
	size_t shown = 0;
	for (Request *r : late) {
		r->stall_told = true;
		if (shown++ < 16)
			NWARN("stall:  %s comm %u seq %u: %zu bytes (%s), waiting %lld ms%s%s%s", r->send ? "send" : "recv",
			      r->comm_id, r->seq, r->size, r->route != Landing::Cpu ? "device" : "host", ms(*r),
			      r->deferred ? ", advertisement deferred" : "", tested(*r).c_str(), copy(*r).c_str());
	}
	const auto ps = engine_->path_stats();
	NWARN("stall:  engine: staged writes %llu (to host %llu B, to device %llu B, landings %llu, errors %llu), "
	      "immediate transfers partly arrived %llu",
	      static_cast<unsigned long long>(ps.staged_writes), static_cast<unsigned long long>(ps.staged_to_host_bytes),
	      static_cast<unsigned long long>(ps.staged_to_device_bytes),
	      static_cast<unsigned long long>(ps.staged_landings), static_cast<unsigned long long>(ps.staged_errors),
	      static_cast<unsigned long long>(ps.immediate_pending));
}

} // namespace hmemreg::nccl
