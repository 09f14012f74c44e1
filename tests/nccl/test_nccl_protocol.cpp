// SPDX-License-Identifier: MIT
// The plugin's control messages (plugins/nccl/src/protocol.cpp): every type
// survives encode/decode, and what is malformed, truncated, of another
// version or makes no sense decodes to nothing rather than to a message.
#include <algorithm>
#include <vector>

#include <criterion/criterion.h>

#include "protocol.hpp"

using namespace hmemreg::nccl::proto;

Test(nccl_protocol, cts_carries_its_credit)
{
	Cts c;
	c.send_id = 3;
	c.recv_id = 4;
	c.seq = 0xfffffffe; // sequence numbers wrap
	c.tag = -7;
	c.size = 512 << 10;
	c.offset = 4096;
	c.done_upto = 0xfffffff0;
	c.descriptor = {1, 2, 3};
	auto m = decode(encode(c));
	cr_assert(m && m->type == Type::Cts);
	cr_assert_eq(m->cts.seq, c.seq);
	cr_assert_eq(m->cts.tag, c.tag);
	cr_assert_eq(m->cts.size, c.size);
	cr_assert_eq(m->cts.offset, c.offset);
	cr_assert_eq(m->cts.done_upto, c.done_upto);
	cr_assert(m->cts.descriptor == c.descriptor);
}

Test(nccl_protocol, eager_ring_and_credit_round_trip)
{
	EagerRing r;
	r.send_id = 5;
	r.recv_id = 6;
	r.slots = 16;
	r.slot_size = 512 << 10;
	r.descriptor = {9, 8, 7, 6};
	auto m = decode(encode(r));
	cr_assert(m && m->type == Type::EagerRing);
	cr_assert_eq(m->eager.send_id, 5u);
	cr_assert_eq(m->eager.recv_id, 6u);
	cr_assert_eq(m->eager.slots, 16u);
	cr_assert_eq(m->eager.slot_size, 512u << 10);
	cr_assert(m->eager.descriptor == r.descriptor);

	auto k = decode(encode(Credit{5, 42}));
	cr_assert(k && k->type == Type::Credit);
	cr_assert_eq(k->credit.send_id, 5u);
	cr_assert_eq(k->credit.done_upto, 42u);
}

Test(nccl_protocol, a_senders_close_says_how_many_sends_it_made)
{
	auto m = decode(encode(Close{12, 1, 0xffffffff}));
	cr_assert(m && m->type == Type::Close);
	cr_assert_eq(m->close.comm_id, 12u);
	cr_assert_eq(m->close.to_recv, 1);
	cr_assert_eq(m->close.sent, 0xffffffffu);
	auto full = encode(Close{12, 1, 7});
	full.pop_back();
	cr_assert(!decode(full)); // a Close without its count is not a Close
}

// With eager slots off the ring carries the recv comm's id alone (both
// counts 0); slots without a size, or a size without slots, make no sense.
Test(nccl_protocol, a_ring_without_slots_is_an_introduction)
{
	EagerRing r;
	r.send_id = 5;
	r.recv_id = 6;
	auto m = decode(encode(r));
	cr_assert(m && m->type == Type::EagerRing);
	cr_assert_eq(m->eager.recv_id, 6u);
	cr_assert_eq(m->eager.slots, 0u);
	r.slot_size = 4096;
	cr_assert(!decode(encode(r)));
	r.slots = 4;
	r.slot_size = 0;
	cr_assert(!decode(encode(r)));
}

Test(nccl_protocol, truncated_padded_and_foreign_messages_are_nothing)
{
	auto b = encode(Credit{1, 2});
	for (size_t n = 0; n < b.size(); n++)
		cr_assert(!decode(std::span(b.data(), n)), "a %zu-byte prefix decoded", n);
	auto longer = b;
	longer.push_back(0);
	cr_assert(!decode(longer), "trailing bytes accepted");
	auto other = b;
	other[4] ^= 1; // version
	cr_assert(!decode(other), "another protocol version accepted");
	auto unknown = b;
	unknown[6] = 99; // type
	cr_assert(!decode(unknown), "an unknown type accepted");
}

Test(nccl_protocol, inline_data_round_trips)
{
	std::vector<uint8_t> data(8 << 10);
	for (size_t i = 0; i < data.size(); i++)
		data[i] = static_cast<uint8_t>(i * 7);
	Inline in;
	in.recv_id = 11;
	in.seq = 0xffffffff;
	in.tag = -3;
	in.data = data;
	auto bytes = encode(in);
	cr_assert_eq(bytes.size(), data.size() + kInlineOverhead, "kInlineOverhead is what the engine must add");
	auto m = decode(bytes);
	cr_assert(m && m->type == Type::Inline);
	cr_assert_eq(m->inl.recv_id, 11u);
	cr_assert_eq(m->inl.seq, in.seq);
	cr_assert_eq(m->inl.tag, -3);
	cr_assert(std::equal(m->inl.data.begin(), m->inl.data.end(), data.begin(), data.end()));
	bytes.pop_back(); // truncated
	cr_assert(!decode(bytes));
	in.data = {};
	m = decode(encode(in));
	cr_assert(m && m->type == Type::Inline && m->inl.data.empty(), "a 0-byte send goes inline too");
}
