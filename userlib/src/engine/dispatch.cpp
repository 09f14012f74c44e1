// SPDX-License-Identifier: MIT
#include "engine/dispatch.hpp"

namespace hmemreg::engine {

void Dispatcher::on(wire::MsgType type, MessageHandler h)
{
	handlers_.at(static_cast<size_t>(type)) = std::move(h);
}

void Dispatcher::on_remote_data(DataHandler h) { data_ = std::move(h); }

void Dispatcher::dispatch(const Events &ev) const
{
	if (!ev.imm.empty() && data_)
		data_(ev.imm);
	for (const auto &m : ev.messages) {
		if (m.hdr.type >= kTypes)
			continue;
		const MessageHandler &h = handlers_[m.hdr.type];
		if (h)
			h(m);
	}
}

} // namespace hmemreg::engine
