// SPDX-License-Identifier: MIT
#include "engine/notify_message.hpp"

#include <cstring>

namespace hmemreg::engine {

wire::MsgHeader done_header(wire::MsgType type, uint64_t engine_id, const TransferImpl &x)
{
	wire::MsgHeader h = wire::header(type, engine_id);
	h.tag = x.tag;
	h.bytes = x.total;
	h.chunks = x.chunks;
	return h;
}

MessageNotifier::MessageNotifier(uint64_t engine_id, const Peers &peers, Delivery &delivery, Dispatcher &d)
	: id_(engine_id), peers_(peers), delivery_(delivery)
{
	d.on(wire::MsgType::Done, [this](const Events::Msg &m) { on_done(m); });
}

void MessageNotifier::prepare(TransferImpl &x)
{
	writes_++;
	const wire::MsgHeader h = done_header(wire::MsgType::Done, id_, x);
	x.message.resize(sizeof(h));
	std::memcpy(x.message.data(), &h, sizeof(h));
}

void MessageNotifier::on_done(const Events::Msg &m)
{
	Notification n{peers_.id_of(m.hdr.sender), m.hdr.sender, m.hdr.tag, m.hdr.bytes, m.hdr.chunks};
	delivery_.notify({&n, 1});
}

} // namespace hmemreg::engine
