// SPDX-License-Identifier: MIT
// Engine internals: operation contexts handed to libfabric, peers, and the
// state of one transfer.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_rma.h>

#include "engine/facade.hpp"
#include "engine/write_plan.hpp"

namespace hmemreg::engine {

// Every posted operation passes one of these as its context; fi_context2
// first, so providers that need FI_CONTEXT/FI_CONTEXT2 scratch space get it.
struct OpContext {
	fi_context2 ctx{};
	enum class Kind : uint8_t { Write, Send, Recv, Read } kind;
	explicit OpContext(Kind k) : kind(k) {}
};

struct TransferImpl;

// One RDMA WRITE of `count` pieces (a local iovec and a remote rma_iov each)
// starting at `first` in the transfer's iovs/descs/rmas.
struct Segment : OpContext {
	Segment() : OpContext(Kind::Write) {}
	TransferImpl *xfer = nullptr;
	uint32_t first = 0;
	uint32_t count = 0;
};

struct PeerState {
	PeerId id = 0;
	uint64_t engine_id = 0;
	std::vector<fi_addr_t> addr;            // per local rail
	std::atomic<bool> removed{false};
	std::atomic<int64_t> inflight{0};       // ops posted to it, all rails
	std::atomic<int64_t> active{0};         // its transfers not yet finished
	std::atomic<int64_t> last_progress{0};  // steady_clock ns of its last completion
	std::atomic<bool> refused{false};       // its last post got -FI_EAGAIN
	// Set once by the stall watchdog (dead_reason written before the flag).
	std::atomic<bool> dead{false};
	std::string dead_reason;
	// 4-byte immediate keys: the index this peer assigned us (0: none yet,
	// or refused), and the next key's sequence.
	std::atomic<uint32_t> imm_index{0};
	std::atomic<uint32_t> imm_seq{0};
	// steady_clock ns of our last ImmJoin to it (a write without an index
	// asks again after a while: a lost or dropped ImmJoin is not final), and
	// whether it refused us (its table is full for good: never ask again).
	std::atomic<int64_t> imm_asked{0};
	std::atomic<bool> imm_refused{false};

	static int64_t now_ns()
	{
		return std::chrono::duration_cast<std::chrono::nanoseconds>(
			       std::chrono::steady_clock::now().time_since_epoch())
			.count();
	}
	void completed()
	{
		inflight--;
		last_progress.store(now_ns(), std::memory_order_relaxed);
	}
};

struct TransferImpl final : Transfer {
	enum class Kind { Write, Send } kind;
	std::shared_ptr<PeerState> peer;
	std::vector<RegionRef> regions;         // keeps local registrations alive
	std::vector<Segment> segs;              // one per plan.writes entry
	// Pieces (a chunk, or a part of one above max_write), grouped by rail and
	// segment (plan.iovs/descs/rmas: a segment's pieces are contiguous), and
	// the segment indices per rail (plan.rail_writes).
	WritePlan plan;
	std::vector<size_t> cursor;             // next of plan.rail_writes[r] to post (rail lock)
	std::atomic<uint32_t> unresolved{0};    // segments not yet completed/failed/skipped
	std::vector<uint8_t> message;           // Send: header + payload (or its head: borrowed)
	// Send: the payload's tail, in the caller's memory (HMEMREG_SEND_BORROW):
	// sent in place, valid until the callback. Empty: all in message.
	std::span<const uint8_t> borrowed;
	size_t message_bytes() const { return message.size() + borrowed.size(); }
	unsigned send_rail = 0;
	uint64_t tag = 0;
	uint64_t total = 0;
	// Tell the target when every write is in place (false: an internal piece
	// of a staged write, whose owner tells the target itself).
	bool notify = true;
	// Immediate notification: every write carries imm_key as remote CQ data
	// and is transmit-complete; `message` is the Announce, one more op to
	// resolve (see engine.hpp).
	bool immediate = false;
	uint64_t imm_key = 0;
	// The engine's own handshake message (ImmJoin, ImmIndex): not counted as
	// the peer's activity, so an idle peer is never declared dead for it.
	bool handshake = false;
	// Send: complete when the message left (the provider's transmit-
	// complete) rather than when the target has it (delivery-complete,
	// which costs shm a return of each message to its sender).
	bool transmit_complete = false;
	bool via_staging = false;
	uint32_t chunks = 0;
	TransferCallback callback;
	std::shared_ptr<TransferImpl> self;     // alive while the engine uses it
	// The caller was told (status, callback); once only. A transfer to a dead
	// peer is reported before its posted operations resolve.
	std::atomic<bool> reported{false};
	// Links in the engine's list of admitted transfers (Core::active, under
	// its active_mu): admitting and finishing allocate nothing.
	TransferImpl *active_prev = nullptr;
	TransferImpl *active_next = nullptr;
	bool active_linked = false;

	// A fresh transfer becomes a write (Core::plan's pooled ones, a staged
	// write's outer one).
	void start_write(std::shared_ptr<PeerState> to, uint64_t write_tag, size_t nchunks, TransferCallback done)
	{
		kind = Kind::Write;
		peer = std::move(to);
		tag = write_tag;
		chunks = static_cast<uint32_t>(nchunks);
		callback = std::move(done);
	}

	// First failure wins.
	void fail(int code, const std::string &why)
	{
		std::lock_guard l(mu_);
		if (first_error_ == 0) {
			first_error_ = code;
			error_text_ = why;
		}
		failed.store(true, std::memory_order_release);
	}
	std::atomic<bool> failed{false};
	int first_error() const
	{
		std::lock_guard l(mu_);
		return first_error_;
	}

	// Final status first (pollers see it), then, after the callback ran,
	// done: wait() returns only once the callback is over.
	void set_status(int status) { status_.store(status, std::memory_order_release); }
	void mark_done()
	{
		{
			std::lock_guard l(mu_);
			done_ = true;
		}
		cv_.notify_all();
	}
	bool done() const
	{
		std::lock_guard l(mu_);
		return done_;
	}
	bool wait_for(std::chrono::milliseconds t) const
	{
		std::unique_lock l(mu_);
		return cv_.wait_for(l, t, [&] { return done_; });
	}

	int status() const override { return status_.load(std::memory_order_acquire); }
	std::string error() const override
	{
		std::lock_guard l(mu_);
		return status_.load() < 0 && status_.load() != -HMEMREG_EAGAIN ? error_text_ : std::string();
	}
	// Room for the control block of the shared_ptr that owns a pooled
	// transfer (TransferPool): no allocation for it, and it lives exactly as
	// long as this object's slot is in use.
	static constexpr size_t kControlBlockBytes = 96;
	alignas(std::max_align_t) std::byte control_block[kControlBlockBytes];
	size_t bytes() const override { return total; }
	bool staged() const override { return via_staging; }

	// Back to a fresh transfer's state, its vectors keeping their capacity
	// (TransferPool; nothing may reference it any more).
	void recycle()
	{
		kind = Kind::Write;
		peer.reset();
		regions.clear();
		segs.clear();
		plan.iovs.clear();
		plan.descs.clear();
		plan.rmas.clear();
		plan.writes.clear();
		for (auto &v : plan.rail_writes)
			v.clear();
		plan.bytes = 0;
		cursor.clear();
		unresolved.store(0, std::memory_order_relaxed);
		message.clear();
		borrowed = {};
		send_rail = 0;
		tag = 0;
		total = 0;
		notify = true;
		immediate = false;
		imm_key = 0;
		handshake = false;
		transmit_complete = false;
		via_staging = false;
		chunks = 0;
		callback = nullptr;
		self.reset();
		reported.store(false, std::memory_order_relaxed);
		active_prev = active_next = nullptr;
		active_linked = false;
		failed.store(false, std::memory_order_relaxed);
		status_.store(-HMEMREG_EAGAIN, std::memory_order_relaxed);
		done_ = false;
		first_error_ = 0;
		error_text_.clear();
	}

private:
	mutable std::mutex mu_;
	mutable std::condition_variable cv_;
	std::atomic<int> status_{-HMEMREG_EAGAIN};
	bool done_ = false;
	int first_error_ = 0;
	std::string error_text_;
};

} // namespace hmemreg::engine
