// SPDX-License-Identifier: MIT
#include "engine/rail.hpp"

#include <algorithm>
#include <cstring>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>

#include "fabric/error.hpp"

namespace hmemreg::engine {

namespace {

constexpr size_t kCqReadBatch = 16;
constexpr int kCqReadsPerTurn = 8;
// Requested key of the read-back word's MR (local access only; clear of the
// control buffers' 0 and of the caches' keys, counted up from 1).
constexpr uint64_t kReadWordKey = 0xfffffff0u;

std::string peer_text(const TransferImpl *x)
{
	return "peer " + std::to_string(x->peer->id);
}

} // namespace

Rail::Rail(unsigned index, const fi_info *info, const RailOptions &opt, const Topology &topo)
	: index_(index), opt_(opt), info_(fabric::dup_info(info)),
	  slot_size_(sizeof(wire::MsgHeader) + std::max(opt.max_message, wire::kEnginePayloadMax)),
	  local_mr_(info->domain_attr && (info->domain_attr->mr_mode & FI_MR_LOCAL)),
	  send_iov_limit_(info->tx_attr ? std::max<size_t>(1, info->tx_attr->iov_limit) : 1)
{
	dom_ = std::make_shared<DomainHolder>();
	dom_->fabric = fabric::open_fabric(info_.get());
	dom_->domain = fabric::open_domain(dom_->fabric, info_.get());
	// fi_getinfo() stamps fabric_attr with the API version it was asked for,
	// and fi_fabric() opens the fabric at that version.
	dom_->cache = std::make_unique<RailCache>(domain(), info_->fabric_attr->prov_name,
						  info_->fabric_attr->api_version, (info_->caps & FI_HMEM) != 0);
	// Room for our own ops plus peers' writes landing with remote CQ data.
	size_t cq_size = 2 * opt_.queue_depth + opt_.recv_buffers + opt_.send_buffers;
	cq_ = fabric::CompletionQueue(domain(), cq_size);
	av_ = fabric::AddressVector(domain(), 64);

	size_t nslots = opt_.recv_buffers + opt_.send_buffers;
	ctrl_mem_ = topo.alloc_near(info_.get(), nslots * slot_size_);
	ctrl_mr_ = fabric::MemoryRegion(domain(), ctrl_mem_.get(), nslots * slot_size_, FI_SEND | FI_RECV, 0);
	// Read-backs land in read_word_: registered where sends need it too.
	if (local_mr_)
		read_mr_ = fabric::MemoryRegion(domain(), read_word_, sizeof(read_word_), FI_READ, kReadWordKey);
	ep_ = fabric::Endpoint(domain(), info_.get(), cq_, av_, opt_.forbid_cuda);
	name_ = ep_.name();
	// mr_cache_stat tells a process's caches apart by this name (and their id).
	name_rail_cache(*dom_->cache, "rail" + std::to_string(index_) + " " + info_->fabric_attr->prov_name + " " +
					       (info_->domain_attr && info_->domain_attr->name ? info_->domain_attr->name : "?"));

	recv_slots_.resize(opt_.recv_buffers);
	for (size_t i = 0; i < recv_slots_.size(); i++) {
		recv_slots_[i].buf = ctrl_mem_.get() + i * slot_size_;
		fabric::check(post_recv(recv_slots_[i]), "fi_recv (pre-posting control buffers)");
	}
	send_slots_.resize(opt_.send_buffers);
	for (size_t i = 0; i < send_slots_.size(); i++) {
		send_slots_[i].buf = ctrl_mem_.get() + (opt_.recv_buffers + i) * slot_size_;
		send_slots_[i].followers.reserve(slot_size_ / sizeof(wire::MsgHeader)); // no allocation when posting
		free_send_.push_back(&send_slots_[i]);
	}
}

Rail::~Rail() = default;

void Rail::abandon()
{
	// What the endpoint references, posted receives' contexts included.
	struct Kept {
		std::shared_ptr<DomainHolder> dom;
		fabric::CompletionQueue cq;
		fabric::AddressVector av;
		Topology::Buffer mem;
		fabric::MemoryRegion mr;
		fabric::Endpoint ep;
		std::vector<RecvSlot> recv;
		std::vector<SendSlot> send;
	};
	// Never destroyed, not even at exit: destroying these is what crashes.
	static auto *kept = new std::vector<std::unique_ptr<Kept>>();
	static std::mutex kept_mu;
	std::lock_guard l(mu_);
	if (!ep_.get())
		return;
	// The domain stays open, but what the registration cache keeps
	// registered for reuse must not: a remote peer could still write into
	// memory the application frees after the engine is gone, and nobody
	// would ever deregister it (LeakSanitizer reports each such MR: the
	// cache's entries live in mmap'd pools it does not scan). Closing an MR
	// never touches the endpoint. With no region left on this domain the
	// cache goes, its monitor with it; otherwise every entry leaves it: the
	// unused ones are deregistered now, those the surviving regions hold at
	// their last put (nothing would ever flush this cache again).
	if (dom_.use_count() == 1)
		dom_->cache.reset();
	else
		dom_->cache->retire();
	auto k = std::make_unique<Kept>(Kept{dom_, std::move(cq_), std::move(av_), std::move(ctrl_mem_),
					     std::move(ctrl_mr_), std::move(ep_), std::move(recv_slots_),
					     std::move(send_slots_)});
	recv_repost_.clear();
	free_send_.clear();
	std::lock_guard kl(kept_mu);
	kept->push_back(std::move(k));
}

fi_addr_t Rail::insert_peer(const std::vector<uint8_t> &name)
{
	std::lock_guard l(mu_);
	return av_.insert(name.data());
}

void Rail::remove_peer(fi_addr_t addr)
{
	std::lock_guard l(mu_);
	av_.remove(addr);
}

void Rail::enqueue_writes(std::shared_ptr<TransferImpl> x, bool with_announce)
{
	std::lock_guard l(submit_mu_);
	if (with_announce)
		submitted_.push_back({x, false});
	submitted_.push_back({std::move(x), true});
	any_submitted_.store(true, std::memory_order_release);
}

void Rail::enqueue_send(std::shared_ptr<TransferImpl> x)
{
	std::lock_guard l(submit_mu_);
	submitted_.push_back({std::move(x), false});
	any_submitted_.store(true, std::memory_order_release);
}

void Rail::enqueue_read(std::shared_ptr<ReadBack> rb, uint64_t remote_addr, uint64_t key, size_t len)
{
	std::lock_guard l(submit_mu_);
	ReadOp &op = reads_submitted_.emplace_back();
	op.rb = std::move(rb);
	op.addr = remote_addr;
	op.key = key;
	op.len = std::min(len, kReadBackMax);
	any_submitted_.store(true, std::memory_order_release);
}

void Rail::enqueue_read_into(std::shared_ptr<ReadBack> rb, uint64_t remote_addr, uint64_t key, size_t len,
			     void *local, void *local_desc)
{
	std::lock_guard l(submit_mu_);
	ReadOp &op = reads_submitted_.emplace_back();
	op.rb = std::move(rb);
	op.addr = remote_addr;
	op.key = key;
	op.len = len;
	op.local = local;
	op.local_desc = local_desc;
	any_submitted_.store(true, std::memory_order_release);
}

// Under mu_: reads are posted in the order they came; one the provider
// refuses for now (-FI_EAGAIN) waits for the next turn with those behind it.
void Rail::post_reads()
{
	if (!reads_waiting_)
		return;
	if (self_addr_ == FI_ADDR_NOTAVAIL) {
		try {
			self_addr_ = av_.insert(name_.data());
		} catch (const Error &e) {
			for (auto it = reads_.begin(); it != reads_.end();) {
				auto next = std::next(it);
				if (!it->posted) {
					it->rb->rail_done(FI_EADDRNOTAVAIL, std::string("read-back on rail ") +
											std::to_string(index_) + ": " + e.what());
					reads_.erase(it);
				}
				it = next;
			}
			reads_waiting_ = 0;
			return;
		}
	}
	for (ReadOp &op : reads_) {
		if (op.posted)
			continue;
		if (inflight_ >= opt_.queue_depth)
			break;
		void *into = op.local ? op.local : read_word_;
		void *desc = op.local ? op.local_desc : read_mr_.get() ? read_mr_.desc() : nullptr;
		ssize_t rc = fi_read(ep_.get(), into, op.len, desc, self_addr_, op.addr, op.key, &op.ctx);
		if (rc == -FI_EAGAIN) {
			stats_.eagain++;
			break;
		}
		reads_waiting_--;
		if (rc) {
			// Refused: told now, dropped below.
			op.rb->rail_done(static_cast<int>(-rc), std::string("fi_read from its own endpoint on rail ") +
									 std::to_string(index_) + ": " + fi_strerror(static_cast<int>(-rc)));
			op.rb.reset();
			op.posted = true;
			continue;
		}
		op.posted = true;
		inflight_++;
	}
	std::erase_if(reads_, [](const ReadOp &op) { return op.posted && !op.rb; });
}

// Under mu_: what was submitted since the last turn joins the queue, in
// order. False when nothing was.
bool Rail::take_submitted()
{
	if (!any_submitted_.load(std::memory_order_acquire))
		return false;
	{
		std::lock_guard l(submit_mu_);
		any_submitted_.store(false, std::memory_order_relaxed);
		taking_.swap(submitted_);
		for (ReadOp &op : reads_submitted_)
			reads_waiting_ += op.posted ? 0 : 1;
		reads_.splice(reads_.end(), reads_submitted_);
	}
	for (Item &it : taking_)
		queue_push(std::move(it));
	const bool any = !taking_.empty();
	taking_.clear();
	return any;
}

void Rail::queue_push(Item it)
{
	if (spare_.empty()) {
		queue_.push_back(std::move(it));
		return;
	}
	queue_.splice(queue_.end(), spare_, spare_.begin());
	queue_.back() = std::move(it);
}

std::list<Rail::Item>::iterator Rail::queue_erase(std::list<Item>::iterator it)
{
	auto next = std::next(it);
	it->xfer.reset(); // the node keeps no transfer alive
	spare_.splice(spare_.begin(), queue_, it);
	return next;
}

int Rail::post_recv(RecvSlot &slot)
{
	return static_cast<int>(fi_recv(ep_.get(), slot.buf, slot_size_, ctrl_mr_.desc(), FI_ADDR_UNSPEC, &slot.ctx));
}

bool Rail::progress(Events &ev)
{
	// Another thread's turn is on this rail (a caller and a progress thread
	// both polling a busy rail): it does the work, and waiting out its
	// socket I/O would put this thread to sleep on the lock and cost the
	// other a wakeup, per message.
	std::unique_lock l(mu_, std::try_to_lock);
	if (!l.owns_lock())
		return false;
	// New work goes out before the poll: on tcp a poll is a system call or
	// more, and a small message's latency is mostly such calls in line.
	// What completions made room for goes after it, within the same
	// turn's budget, and so does what was handed over meanwhile (its
	// submitter may have found the rail taken).
	size_t budget = opt_.post_batch;
	if (take_submitted() && inflight_ < opt_.queue_depth)
		post(ev, budget);
	poll(ev);
	take_submitted();
	post(ev, budget);
	post_reads();
	busy_.store(inflight_ || !queue_.empty() || !recv_repost_.empty() || reads_waiting_, std::memory_order_relaxed);
	return true;
}

void Rail::release(Events &ev)
{
	if (ev.held.empty())
		return;
	std::lock_guard l(mu_);
	for (OpContext *op : ev.held) {
		auto *s = static_cast<RecvSlot *>(op);
		if (post_recv(*s) < 0)
			recv_repost_.push_back(s);
	}
	ev.held.clear();
}

void Rail::poll(Events &ev)
{
	fi_cq_data_entry e[kCqReadBatch];
	for (int turn = 0; turn < kCqReadsPerTurn; turn++) {
		ssize_t n = cq_.read(e, kCqReadBatch);
		if (n == -FI_EAVAIL) {
			std::string text;
			fi_cq_err_entry err = cq_.read_error(text);
			stats_.errors++;
			handle(static_cast<OpContext *>(err.op_context), err.err ? err.err : FI_EIO, text, 0, ev);
			ev.handled++;
			continue;
		}
		for (ssize_t i = 0; i < n; i++) {
			if ((e[i].flags & FI_REMOTE_CQ_DATA) && (e[i].flags & (FI_RMA | FI_REMOTE_WRITE))) {
				ev.imm.push_back(e[i].data); // a peer's write landed here
				continue;
			}
			handle(static_cast<OpContext *>(e[i].op_context), 0, {}, e[i].len, ev);
		}
		ev.handled += static_cast<size_t>(n);
		stats_.completions += static_cast<uint64_t>(n);
		if (static_cast<size_t>(n) < kCqReadBatch)
			break;
	}
}

void Rail::handle(OpContext *op, int err, const std::string &text, size_t len, Events &ev)
{
	if (!op)
		return;
	switch (op->kind) {
	case OpContext::Kind::Write: {
		auto *s = static_cast<Segment *>(op);
		TransferImpl *x = s->xfer;
		inflight_--;
		x->peer->completed();
		if (err)
			x->fail(fabric::to_hmemreg_code(-err),
				"RDMA write to " + peer_text(x) + " on rail " + std::to_string(index_) + " failed: " + text);
		resolve(x, 1, ev);
		break;
	}
	case OpContext::Kind::Send: {
		auto *s = static_cast<SendSlot *>(op);
		TransferImpl *x = std::exchange(s->xfer, nullptr);
		free_send_.push_back(s);
		inflight_--;
		x->peer->completed();
		// The first message, then those bundled behind it, in order.
		for (size_t i = 0; i <= s->followers.size(); i++) {
			TransferImpl *m = i == 0 ? x : s->followers[i - 1];
			if (err)
				m->fail(fabric::to_hmemreg_code(-err),
					"control message to " + peer_text(m) + " on rail " + std::to_string(index_) +
						" failed: " + text);
			send_over(m->self, ev);
		}
		s->followers.clear();
		break;
	}
	case OpContext::Kind::Read: {
		auto *r = static_cast<ReadOp *>(op);
		inflight_--;
		std::shared_ptr<ReadBack> rb = std::move(r->rb);
		// Found by address: the list node is the context.
		reads_.remove_if([r](const ReadOp &o) { return &o == r; });
		rb->rail_done(err, err ? "RDMA READ from its own endpoint on rail " + std::to_string(index_) + " failed: " + text : std::string());
		break;
	}
	case OpContext::Kind::Recv: {
		auto *s = static_cast<RecvSlot *>(op);
		if (err == FI_ECANCELED)
			return; // endpoint closing
		// One message, or a bundle of them back to back (post_send). A
		// malformed one ends the buffer: what came before it still counts.
		size_t off = 0, got = 0;
		while (!err && off < len && len - off >= sizeof(wire::MsgHeader)) {
			Events::Msg m;
			std::memcpy(&m.hdr, s->buf + off, sizeof(m.hdr));
			if (m.hdr.magic != wire::kMsgMagic || m.hdr.version != wire::kVersion ||
			    m.hdr.length > len - off - sizeof(m.hdr))
				break;
			// Handed up in place; the buffer is posted again once its
			// messages were dispatched (release()).
			m.data = {s->buf + off + sizeof(m.hdr), m.hdr.length};
			ev.messages.push_back(m);
			got++;
			off = wire::bundle_offset(off + sizeof(m.hdr) + m.hdr.length);
		}
		if (got) {
			ev.held.push_back(s);
			stats_.recvs += got;
			break;
		}
		if (post_recv(*s) < 0)
			recv_repost_.push_back(s);
		break;
	}
	}
}

// n segments of x are done (completed, failed or skipped) on this rail.
void Rail::resolve(TransferImpl *x, size_t n, Events &ev)
{
	if (x->unresolved.fetch_sub(static_cast<uint32_t>(n)) != n)
		return;
	if (x->failed.load(std::memory_order_acquire) || !x->notify || x->immediate) {
		// Immediate: the Announce was one of the n; the target counts writes.
		ev.finished.push_back(x->self);
		return;
	}
	// Every write is in place at the target (delivery complete): send the
	// message its notifier prepared (a Done).
	queue_push({x->self, false});
}

void Rail::send_over(const std::shared_ptr<TransferImpl> &x, Events &ev)
{
	if (x->kind == TransferImpl::Kind::Write && x->immediate)
		resolve(x.get(), 1, ev); // the Announce, counted with the writes
	else
		ev.finished.push_back(x);
}

void Rail::post(Events &ev, size_t &budget)
{
	while (!recv_repost_.empty()) {
		if (post_recv(*recv_repost_.back()) < 0)
			break;
		recv_repost_.pop_back();
	}
	uint64_t epoch = opt_.doom_epoch->load(std::memory_order_acquire);
	if (epoch != seen_doom_epoch_) {
		seen_doom_epoch_ = epoch;
		for (auto it = queue_.begin(); it != queue_.end();) {
			const PeerState &p = *it->xfer->peer;
			if (!p.removed.load() && !p.dead.load()) {
				++it;
				continue;
			}
			size_t no_budget = 0; // a doomed item posts nothing: it only fails
			if (it->writes)
				post_writes(*it, no_budget, ev);
			else
				post_send(it, ev);
			it = queue_erase(it);
		}
	}
	// Items of one peer stay in order; a peer whose item could not finish
	// (provider -FI_EAGAIN, e.g. a dead or reconnecting peer) is skipped for
	// the rest of the turn so the other peers' work still goes out.
	blocked_.clear();
	for (auto it = queue_.begin(); it != queue_.end() && budget > 0 && inflight_ < opt_.queue_depth;) {
		const PeerState *peer = it->xfer->peer.get();
		if (std::find(blocked_.begin(), blocked_.end(), peer) != blocked_.end()) {
			++it;
			continue;
		}
		bool finished = it->writes ? post_writes(*it, budget, ev) : post_send(it, ev);
		if (finished) {
			if (!it->writes)
				budget--;
			it = queue_erase(it);
		} else {
			blocked_.push_back(peer);
			++it;
		}
	}
	if (!queue_.empty())
		stats_.deferred++; // left for the next turn: provider EAGAIN, depth, buffers or batch
}

// Posts this rail's remaining writes of one transfer. False when posting must
// stop for this turn (provider -FI_EAGAIN, depth or budget reached): the item
// stays at the head and resumes where it stopped.
bool Rail::post_writes(Item &it, size_t &budget, Events &ev)
{
	TransferImpl *x = it.xfer.get();
	const auto &list = x->plan.rail_writes[index_];
	size_t &cur = x->cursor[index_];
	// Immediate: transmit-complete writes carrying the transfer's key (the
	// target counts them); else delivery-complete, a Done message follows.
	const uint64_t flags = FI_COMPLETION | (x->immediate ? FI_REMOTE_CQ_DATA
					       : opt_.delivery_complete ? FI_DELIVERY_COMPLETE : 0);
	fi_addr_t dest = x->peer->addr[index_];
	while (cur < list.size()) {
		if (x->peer->removed.load(std::memory_order_acquire))
			x->fail(HMEMREG_ENOENT, peer_text(x) + " was removed before the transfer completed");
		if (x->peer->dead.load(std::memory_order_acquire))
			x->fail(HMEMREG_EFABRIC, x->peer->dead_reason);
		if (x->failed.load(std::memory_order_acquire)) {
			size_t left = list.size() - cur;
			cur = list.size();
			resolve(x, left, ev); // nothing more is posted for a failed transfer
			return true;
		}
		if (budget == 0 || inflight_ >= opt_.queue_depth || x->peer->inflight.load() >= opt_.peer_cap)
			return false;
		Segment &s = x->segs[list[cur]];
		// FI_MORE when the next write of this batch is posted right after
		// this one (the provider may then batch them); never on the last.
		const bool more = opt_.post_more && cur + 1 < list.size() && budget > 1 &&
				  inflight_ + 1 < opt_.queue_depth && x->peer->inflight.load() + 1 < opt_.peer_cap;
		fi_msg_rma msg{};
		msg.msg_iov = &x->plan.iovs[s.first];
		msg.desc = &x->plan.descs[s.first];
		msg.iov_count = s.count;
		msg.addr = dest;
		msg.rma_iov = &x->plan.rmas[s.first];
		msg.rma_iov_count = s.count;
		msg.context = &s.ctx;
		msg.data = x->imm_key;
		ssize_t rc = fi_writemsg(ep_.get(), &msg, flags | (more ? FI_MORE : 0));
		if (rc == -FI_EAGAIN) {
			stats_.eagain++;
			x->peer->refused.store(true, std::memory_order_relaxed);
			return false;
		}
		x->peer->refused.store(false, std::memory_order_relaxed);
		cur++;
		if (rc < 0) {
			x->fail(fabric::to_hmemreg_code(static_cast<int>(rc)),
				"fi_writemsg to " + peer_text(x) + ": " + fi_strerror(static_cast<int>(-rc)));
			resolve(x, 1, ev);
			continue;
		}
		inflight_++;
		x->peer->inflight++;
		stats_.writes_posted++;
		budget--;
	}
	return true;
}

// Whether queued item f can go in the same receive buffer as the message of
// x, which `used` bytes of the slot already hold: a message of the same
// peer, nothing written between them (order), that fits.
bool Rail::joins(const Item &f, const TransferImpl &x, size_t used) const
{
	const TransferImpl &y = *f.xfer;
	if (f.writes || y.peer != x.peer)
		return false;
	if (y.kind == TransferImpl::Kind::Write && y.immediate && y.failed.load(std::memory_order_acquire))
		return false; // an Announce with nothing to announce: its own turn fails it
	return wire::bundle_offset(used) + y.message_bytes() <= slot_size_;
}

// Posts the transfer's control message, and after it in the same buffer
// the messages queued right behind it for the same peer (a bundle: one
// provider operation, one receive at the target, instead of one each).
// False to stop posting this turn.
bool Rail::post_send(std::list<Item>::iterator it, Events &ev)
{
	TransferImpl *x = it->xfer.get();
	if (x->peer->removed.load(std::memory_order_acquire) || x->peer->dead.load(std::memory_order_acquire)) {
		if (x->peer->dead.load(std::memory_order_acquire))
			x->fail(HMEMREG_EFABRIC, x->peer->dead_reason);
		else
			x->fail(HMEMREG_ENOENT, peer_text(x) + " was removed before the message was sent");
		send_over(it->xfer, ev);
		return true;
	}
	const bool announce = x->kind == TransferImpl::Kind::Write && x->immediate;
	if (announce && x->failed.load(std::memory_order_acquire)) {
		send_over(it->xfer, ev); // a write failed already: announce nothing
		return true;
	}
	if (free_send_.empty() || x->peer->inflight.load() >= opt_.peer_cap)
		return false; // all control buffers in flight; completions free them
	SendSlot *s = free_send_.back();
	// Delivery-complete: the caller's completion means the target has the
	// message and, ordered before it or delivery-complete themselves, the
	// transfer's writes. An Announce needs no more than transmit-complete:
	// the target waits for the writes themselves; nor does a send whose
	// caller asked for no more (SendCompletion::Transmitted). A bundle is
	// delivery-complete if one of its messages asks it.
	bool delivered = !announce && !x->transmit_complete;
	// Followers: whatever comes right behind it for the same peer, while it fits.
	size_t used = x->message_bytes();
	auto last = it; // the last item of the bundle
	for (auto nx = std::next(it); opt_.bundle && nx != queue_.end() && joins(*nx, *x, used); ++nx) {
		const TransferImpl &y = *nx->xfer;
		used = wire::bundle_offset(used) + y.message_bytes();
		delivered = delivered || (!(y.kind == TransferImpl::Kind::Write && y.immediate) && !y.transmit_complete);
		last = nx;
	}
	// Where local buffers need no registration, a lone message goes straight
	// from the transfer's bytes and its borrowed tail (both live until the
	// send completes); else, and for a bundle, through the registered slot.
	iovec iov[2] = {{x->message.data(), x->message.size()},
			{const_cast<uint8_t *>(x->borrowed.data()), x->borrowed.size()}};
	size_t niov = x->borrowed.empty() ? 1 : 2;
	void *desc[2] = {nullptr, nullptr};
	if (local_mr_ || last != it || niov > send_iov_limit_) {
		size_t off = 0;
		for (auto m = it;; ++m) {
			const TransferImpl &y = *m->xfer;
			off = wire::bundle_offset(off);
			std::memcpy(s->buf + off, y.message.data(), y.message.size());
			if (!y.borrowed.empty())
				std::memcpy(s->buf + off + y.message.size(), y.borrowed.data(), y.borrowed.size());
			off += y.message_bytes();
			if (m == last)
				break;
		}
		iov[0] = {s->buf, off};
		niov = 1;
		desc[0] = ctrl_mr_.desc();
	}
	fi_msg msg{};
	msg.msg_iov = iov;
	msg.desc = local_mr_ ? desc : nullptr;
	msg.iov_count = niov;
	msg.addr = x->peer->addr[index_];
	msg.context = &s->ctx;
	ssize_t rc = fi_sendmsg(ep_.get(), &msg, FI_COMPLETION | (delivered ? FI_DELIVERY_COMPLETE : 0));
	if (rc == -FI_EAGAIN) {
		stats_.eagain++;
		x->peer->refused.store(true, std::memory_order_relaxed);
		return false;
	}
	x->peer->refused.store(false, std::memory_order_relaxed);
	if (rc < 0) {
		// Only the first fails: the followers stay queued for the next turn.
		x->fail(fabric::to_hmemreg_code(static_cast<int>(rc)),
			"fi_send to " + peer_text(x) + ": " + fi_strerror(static_cast<int>(-rc)));
		send_over(it->xfer, ev);
		return true;
	}
	free_send_.pop_back();
	s->xfer = x;
	s->followers.clear();
	for (auto nx = std::next(it); last != it;) {
		const bool end = nx == last;
		s->followers.push_back(nx->xfer.get());
		nx = queue_erase(nx);
		if (end)
			break;
	}
	inflight_++;
	x->peer->inflight++;
	stats_.sends_posted += 1 + s->followers.size();
	stats_.sends_bundled += s->followers.size();
	return true;
}

RailStats Rail::stats() const
{
	std::lock_guard l(mu_);
	RailStats s = stats_;
	s.queued = queue_.size();
	{
		std::lock_guard ls(submit_mu_);
		s.queued += submitted_.size();
	}
	s.inflight = inflight_;
	return s;
}

} // namespace hmemreg::engine
