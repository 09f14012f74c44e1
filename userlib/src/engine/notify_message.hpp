// SPDX-License-Identifier: MIT
// Message notification (any provider): the writes are delivery-complete and,
// once every one completed, the writer's rail sends the Done message built
// here; the target hands the Done to the application.
#pragma once

#include <atomic>
#include <cstdint>

#include "engine/delivery.hpp"
#include "engine/dispatch.hpp"
#include "engine/peers.hpp"
#include "engine/transfer.hpp"

namespace hmemreg::engine {

class MessageNotifier {
public:
	MessageNotifier(uint64_t engine_id, const Peers &peers, Delivery &delivery, Dispatcher &d);
	// Writer: x (planned) tells its target with a Done after its writes.
	void prepare(TransferImpl &x);
	uint64_t writes() const { return writes_.load(std::memory_order_relaxed); }

private:
	void on_done(const Events::Msg &m);
	const uint64_t id_;
	const Peers &peers_;
	Delivery &delivery_;
	std::atomic<uint64_t> writes_{0};
};

// The Done (or StagedDone) header of a write x: its tag, bytes and chunks.
wire::MsgHeader done_header(wire::MsgType type, uint64_t engine_id, const TransferImpl &x);

} // namespace hmemreg::engine
