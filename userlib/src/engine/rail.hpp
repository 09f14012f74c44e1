// SPDX-License-Identifier: MIT
// One rail: a NIC's fabric, domain, CQ, AV and RDM endpoint, its control
// message buffers, and its queue of operations waiting to be posted.
//
// Everything here runs under the rail's mutex (the provider is opened with
// FI_THREAD_DOMAIN, so this lock is what serializes calls into it).
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/facade.hpp"
#include "engine/rail_cache.hpp"
#include "engine/read_back.hpp"
#include "engine/topology.hpp"
#include "engine/transfer.hpp"
#include "engine/wire.hpp"
#include "fabric/av.hpp"
#include "fabric/cq.hpp"
#include "fabric/ep.hpp"
#include "fabric/fabric.hpp"
#include "fabric/info.hpp"
#include "fabric/mr.hpp"

namespace hmemreg::engine {

// The fabric and domain outlive the engine while registered regions exist
// (a region holds a reference), so closing never finds an open MR.
struct DomainHolder {
	fabric::Fabric fabric;
	fabric::Domain domain;
	std::unique_ptr<RailCache> cache; // destroyed first: deregisters before the domain closes
};

// What a progress turn produced; handled by the engine outside rail locks.
struct Events {
	struct Msg {
		wire::MsgHeader hdr;
		// In the rail's receive buffer, not copied: valid until the rail
		// gets the buffer back (Rail::release, after dispatch).
		std::span<const uint8_t> data;
	};
	std::vector<std::shared_ptr<TransferImpl>> finished;
	std::vector<Msg> messages;
	std::vector<OpContext *> held; // the receive buffers messages point into
	std::vector<uint64_t> imm; // remote CQ data of writes that landed here
	size_t handled = 0;
	bool empty() const { return finished.empty() && messages.empty() && imm.empty(); }
	// For the next rail's turn, keeping the lists' capacity (held must
	// have gone back to its rail: Rail::release).
	void clear()
	{
		finished.clear();
		messages.clear();
		held.clear();
		imm.clear();
		handled = 0;
	}
};

struct RailOptions {
	size_t queue_depth;
	int64_t peer_cap; // in-flight ops to one peer, all rails together
	size_t max_message;
	size_t recv_buffers;
	size_t send_buffers;
	size_t post_batch;
	bool delivery_complete;
	bool post_more; // FI_MORE on all but the last write of a batch
	bool bundle;	// messages queued together for one peer share one send
	bool forbid_cuda; // FI_OPT_CUDA_API_PERMITTED = false (Config::provider_cuda_calls)
	// Bumped by the engine when a peer is removed or declared dead: the next
	// turn drains that peer's queued items even if the queue depth is used up.
	const std::atomic<uint64_t> *doom_epoch;
};

class Rail {
public:
	Rail(unsigned index, const fi_info *info, const RailOptions &opt, const Topology &topo);
	~Rail();

	unsigned index() const { return index_; }
	const fi_info *info() const { return info_.get(); }
	fid_domain *domain() const { return dom_->domain.get(); }
	RailCache *cache() const { return dom_->cache.get(); }
	std::shared_ptr<DomainHolder> domain_holder() const { return dom_; }
	std::vector<uint8_t> name() const { return name_; }
	// 0: the provider promised no CUDA calls; < 0: it refused (fi_errno).
	int cuda_forbidden_rc() const { return ep_.cuda_forbidden_rc(); }
	size_t queue_depth() const { return opt_.queue_depth; }

	fi_addr_t insert_peer(const std::vector<uint8_t> &name);
	void remove_peer(fi_addr_t addr);

	// Queue the transfer's writes for this rail (with_announce: its
	// Announce first, in the same hand-over), or its control message.
	void enqueue_writes(std::shared_ptr<TransferImpl> x, bool with_announce = false);
	void enqueue_send(std::shared_ptr<TransferImpl> x);
	// An RDMA READ of len (<= kReadBackMax) bytes at remote_addr of this
	// rail's own registration `key`, into the rail's read-back word, from
	// its own endpoint; rb is told when it completed (read_back.hpp).
	static constexpr size_t kReadBackMax = 64;
	void enqueue_read(std::shared_ptr<ReadBack> rb, uint64_t remote_addr, uint64_t key, size_t len);
	// The same READ into [local, +len) of a registration of this rail
	// (local_desc) instead of the word: a copy the NIC makes (nic_copy).
	void enqueue_read_into(std::shared_ptr<ReadBack> rb, uint64_t remote_addr, uint64_t key, size_t len,
			       void *local, void *local_desc);

	// Post what was newly queued, poll the CQ, then post what is queued (up
	// to post_batch, within depth). False, doing nothing, while another
	// thread's turn is on this rail.
	bool progress(Events &ev);
	// The receive buffers ev's messages were in go back to the provider.
	void release(Events &ev);
	RailStats stats() const;
	// Something of ours is queued or in flight here (a hint, read without the lock).
	bool busy() const
	{
		return any_submitted_.load(std::memory_order_acquire) || busy_.load(std::memory_order_relaxed);
	}

	// Never closes this rail's endpoint, nor what it uses (CQ, AV, control
	// buffers and their MR, domain, fabric): they stay open, unprogressed,
	// until the process ends. For an engine torn down after a peer broke
	// mid-write, where closing crashes libfabric's ofi_rxm (facade.cpp,
	// Facade::~Facade). Call only once nothing drives progress any more.
	// The endpoint may still hold operations whose contexts and buffers
	// point into transfers freed (or recycled) since: writes' segments, and
	// control messages sent from the transfer's own bytes where buffers need
	// no registration (post_send). Harmless while it is never progressed
	// again, which is the point: nothing here touches it after this call.
	void abandon();

private:
	struct RecvSlot : OpContext {
		RecvSlot() : OpContext(Kind::Recv) {}
		uint8_t *buf = nullptr;
	};
	struct SendSlot : OpContext {
		SendSlot() : OpContext(Kind::Send) {}
		uint8_t *buf = nullptr;
		TransferImpl *xfer = nullptr;
		std::vector<TransferImpl *> followers; // bundled behind xfer, in order
	};
	struct ReadOp : OpContext {
		ReadOp() : OpContext(Kind::Read) {}
		std::shared_ptr<ReadBack> rb;
		uint64_t addr = 0, key = 0;
		size_t len = 0;
		void *local = nullptr, *local_desc = nullptr; // null: the read-back word
		bool posted = false;
	};
	struct Item {
		std::shared_ptr<TransferImpl> xfer;
		bool writes; // else: the transfer's control message
	};

	void poll(Events &ev);
	void handle(OpContext *op, int err, const std::string &text, size_t len, Events &ev);
	bool take_submitted();
	// Posts queued work: at most `budget` writes and messages (shared by
	// the posts of one turn: post_batch is per turn).
	void post(Events &ev, size_t &budget);
	bool post_writes(Item &it, size_t &budget, Events &ev); // false: not finished this turn
	// queue_ without a heap allocation per item once warm: nodes come from
	// and go back to spare_ (std::list::splice).
	void queue_push(Item it);
	std::list<Item>::iterator queue_erase(std::list<Item>::iterator it);
	bool post_send(std::list<Item>::iterator it, Events &ev);
	bool joins(const Item &f, const TransferImpl &x, size_t used) const;
	int post_recv(RecvSlot &slot);
	void post_reads(); // reads_ not yet posted, as far as the provider takes them
	void resolve(TransferImpl *x, size_t n, Events &ev);
	void send_over(const std::shared_ptr<TransferImpl> &x, Events &ev); // its control message is done

	unsigned index_;
	RailOptions opt_;
	fabric::InfoPtr info_;
	size_t slot_size_;
	const bool local_mr_; // the provider needs registered buffers for sends (FI_MR_LOCAL)
	const size_t send_iov_limit_; // pieces one send takes (a borrowed tail is a second)

	mutable std::mutex mu_;
	std::shared_ptr<DomainHolder> dom_;
	fabric::CompletionQueue cq_;
	fabric::AddressVector av_;
	Topology::Buffer ctrl_mem_;
	fabric::MemoryRegion ctrl_mr_;
	fabric::Endpoint ep_;
	std::vector<uint8_t> name_;

	std::vector<RecvSlot> recv_slots_;
	std::vector<RecvSlot *> recv_repost_; // reposts refused with -FI_EAGAIN
	std::vector<SendSlot> send_slots_;
	std::vector<SendSlot *> free_send_;
	std::list<Item> queue_; // FIFO per peer; a blocked peer does not block others
	std::list<Item> spare_; // emptied nodes of queue_, for reuse
	std::vector<const PeerState *> blocked_; // post(): peers skipped this turn
	// What enqueue_*() hands over, under submit_mu_ alone: a caller (often
	// another rail's progress thread, posting the next transfer from a
	// completion callback) never waits out this rail's turn, which holds mu_
	// across the provider's socket I/O. Moved into queue_ at each turn.
	mutable std::mutex submit_mu_;
	std::vector<Item> submitted_;
	std::atomic<bool> any_submitted_{false}; // a turn with nothing new skips submit_mu_
	std::vector<Item> taking_; // under mu_: swapped with submitted_, keeps both capacities
	size_t inflight_ = 0;
	// Read-backs: queued and posted (under mu_; submitted under submit_mu_),
	// this endpoint's own address in the AV, and the word they land in.
	std::list<ReadOp> reads_, reads_submitted_;
	size_t reads_waiting_ = 0; // of reads_, not yet posted
	fi_addr_t self_addr_ = FI_ADDR_NOTAVAIL;
	alignas(64) uint8_t read_word_[kReadBackMax] = {};
	fabric::MemoryRegion read_mr_;
	std::atomic<bool> busy_{false}; // after each turn: inflight_, queue_ or reposts left
	uint64_t seen_doom_epoch_ = 0;
	RailStats stats_;
};

} // namespace hmemreg::engine
