// SPDX-License-Identifier: MIT
// test(): NCCL's one call to learn whether a send or a receive is done.
#include "plugin.hpp"

#include "log.hpp"

namespace hmemreg::nccl {

ncclResult_t Plugin::test(void *request, int *done, int *sizes)
{
	if (!done)
		return ncclInvalidArgument;
	*done = 0;
	for (int attempt = 0; attempt < 2; attempt++) {
		{
			std::lock_guard l(mu_);
			auto it = requests_.find(request);
			if (it == requests_.end()) {
				NWARN("test: %p is not a pending request of this plugin", request);
				return ncclInternalError;
			}
			Request &r = *it->second;
			if (r.landing)
				settle_landing_locked(r);
			if (!r.read_backs.empty())
				settle_read_backs_locked(r);
			if (r.state == Request::State::Pending && !r.send && !r.flush && peer_closes_)
				expire_after_close_locked(r); // only once some sender closed
			// The clock only now and then: NCCL spins on test().
			if (++r.tests % 64 == 1) {
				r.last_test = std::chrono::steady_clock::now();
				if (r.state == Request::State::Pending && r.deferred && r.last_test > r.deferred_until)
					send_deferred_cts_locked(r);
			}
			if (r.state != Request::State::Pending) {
				auto *c = r.send ? static_cast<Comm *>(sends_.count(r.comm_id) ? sends_[r.comm_id] : nullptr)
						 : static_cast<Comm *>(recvs_.count(r.comm_id) ? recvs_[r.comm_id] : nullptr);
				if (c && r.send) {
					mark_send(HMEMREG_STEP_SEND_DONE, *static_cast<SendComm *>(c), r.seq, r.bytes);
					static_cast<SendComm *>(c)->outstanding--;
				} else if (c) {
					mark_recv(HMEMREG_STEP_RECV_DONE, *static_cast<RecvComm *>(c), r.seq, r.bytes);
					static_cast<RecvComm *>(c)->outstanding--;
				}
				ncclResult_t res = ncclSuccess;
				if (r.state == Request::State::Done) {
					*done = 1;
					if (sizes)
						sizes[0] = static_cast<int>(r.bytes);
				} else {
					NWARN("%s #%u failed: %s", r.send ? "send" : "receive", r.seq, r.why.c_str());
					res = r.error;
				}
				requests_.erase(it);
				return res;
			}
		}
		if (attempt == 0)
			idle();
	}
	return ncclSuccess;
}

} // namespace hmemreg::nccl
