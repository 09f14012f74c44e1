// SPDX-License-Identifier: MIT
// Control-message dispatch: what a rail's progress turn received goes to the
// handler registered for its type (the notifiers, staging, the facade's
// User handler), and remote CQ data of writes that landed to the immediate
// notifier. Handlers are registered while the engine is built, before any
// progress, and never change: dispatching takes no lock.
#pragma once

#include <array>
#include <functional>
#include <span>

#include "engine/rail.hpp"
#include "engine/wire.hpp"

namespace hmemreg::engine {

class Dispatcher {
public:
	using MessageHandler = std::function<void(const Events::Msg &)>;
	using DataHandler = std::function<void(std::span<const uint64_t>)>;

	void on(wire::MsgType type, MessageHandler h);
	void on_remote_data(DataHandler h);
	// Remote CQ data first, then the messages in arrival order. Types with
	// no handler are dropped (Hello: only warms up connections).
	void dispatch(const Events &ev) const;

private:
	static constexpr size_t kTypes = 16;
	std::array<MessageHandler, kTypes> handlers_;
	DataHandler data_;
};

} // namespace hmemreg::engine
