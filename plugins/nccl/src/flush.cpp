// SPDX-License-Identifier: MIT
// iflush: what NCCL asks after a receive into GPU memory (compute
// capability below 9.0, or forced) before its kernels read the data. A NIC
// may complete a write while its data is still on the way into GPU memory;
// a read of the buffer through the same NIC comes back only behind those
// writes. So each buffer a NIC wrote (MemHandle::read_back) gets a
// read-back of its last received bytes on every rail (the engine's
// read_back), completed through test(): this covers Inline and eager
// data the NIC copied in too (recv_landing.cpp). Everything else needs
// none: host memory, and device memory the engine staged (its copies ran
// on streams of its own and had finished before test() reported the
// receive). NULL request: done.
#include "plugin.hpp"

#include <algorithm>

#include "log.hpp"

namespace hmemreg::nccl {

namespace {

constexpr size_t kReadBackBytes = 4; // of the last received bytes

} // namespace

ncclResult_t Plugin::iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request)
{
	if (!request)
		return ncclInvalidArgument;
	*request = nullptr;
	std::lock_guard l(mu_);
	RecvComm *c = find_locked<RecvComm>(recv_comm, Comm::Kind::Recv);
	if (!c) {
		NWARN("iflush: %p is not a recv comm of this plugin", recv_comm);
		return ncclInternalError;
	}
	std::vector<TransferRef> reads;
	for (int i = 0; mhandles && sizes && i < n; i++) {
		auto it = mhandles_.find(mhandles[i]);
		if (it == mhandles_.end() || sizes[i] <= 0)
			continue;
		const MemHandle &h = *it->second;
		if (h.cuda_device >= 0)
			flushes_++;
		if (!h.read_back || !h.region)
			continue;
		const uintptr_t start = data && data[i] ? reinterpret_cast<uintptr_t>(data[i]) : h.addr;
		const uintptr_t base = reinterpret_cast<uintptr_t>(h.region->addr());
		const size_t got = static_cast<size_t>(sizes[i]);
		if (start < base || got > h.region->length() || start - base > h.region->length() - got) {
			NWARN("iflush: buffer %p (%zu bytes received) is outside its registration [%p, +%zu)",
			      reinterpret_cast<void *>(start), got, h.region->addr(), h.region->length());
			return ncclInternalError;
		}
		const size_t len = std::min(got, kReadBackBytes);
		try {
			reads.push_back(engine_->read_back(*h.region, start - base + got - len, len));
		} catch (const Error &e) {
			NWARN("iflush: read-back of %p (+%zu) failed: %s", reinterpret_cast<void *>(start), got, e.what());
			return ncclSystemError;
		}
	}
	if (reads.empty())
		return ncclSuccess;
	auto r = std::make_shared<Request>();
	r->comm_id = c->id;
	r->flush = true;
	r->read_backs = std::move(reads);
	r->posted = std::chrono::steady_clock::now();
	c->outstanding++;
	*request = r.get();
	requests_[r.get()] = std::move(r);
	return ncclSuccess;
}

// A flush is done once every read-back is; the first failure fails it.
void Plugin::settle_read_backs_locked(Request &r)
{
	for (const TransferRef &t : r.read_backs) {
		const int s = t->status();
		if (s == -HMEMREG_EAGAIN)
			return;
		if (s < 0 && r.state == Request::State::Pending) {
			r.state = Request::State::Failed;
			r.error = ncclSystemError;
			r.why = "read-back (flush): " + t->error();
		}
	}
	if (r.state == Request::State::Pending)
		r.state = Request::State::Done;
	r.read_backs.clear();
}

} // namespace hmemreg::nccl
