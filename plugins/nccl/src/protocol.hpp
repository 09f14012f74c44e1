// SPDX-License-Identifier: MIT
// Control messages between the two sides of a plugin connection, carried as
// engine control messages. Data never travels here: the receiver advertises
// each posted buffer (Cts), the sender RDMA-writes into it and the engine's
// notification (tag = recv comm id << 32 | sequence) completes the receive.
//
//   sender                         receiver
//   connect: Connect ------------> listen comm queues it; accept() makes a recv comm
//            <------------------- EagerRing (the recv comm's id, once; its bounce slots if on)
//            <------------------- Cts (one per irecv: seq, tag, size, region descriptor,
//                                 and done_upto: receives before it are complete)
//   isend(seq): write + notify --> notification completes irecv(seq) with its size
//   isend(seq) before its Cts came (data ready, receiver late): eager write
//            into slot seq % slots -> copied into irecv(seq)'s buffer when both
//            are there. A slot is reused only once done_upto passed its last
//            seq (Cts, or a Credit when eager receives sent no Cts); a Cts
//            that comes for a seq already sent eagerly is dropped. Eager sends
//            match receives by sequence only: the tag is checked on the Cts
//            path, and a size mismatch fails only the receive.
//   irecv of at most INLINE_MAX bytes, once the sender knows the recv comm
//            (EagerRing or an earlier Cts): no Cts (every send that fits goes
//            inline); sent after all if the receive still waits 100 ms (a
//            larger send waiting for one then fails both sides)
//   isend of at most INLINE_MAX bytes (0 too): Inline (the data itself) --> copied into
//            irecv(seq)'s buffer, or kept until irecv(seq) comes: one message,
//            no write, no Cts needed (a Cts that comes later is dropped). As
//            for eager sends, a tag or size mismatch without a Cts at the
//            sender fails only the receive.
//   isend of 0 bytes: Empty -----> completes irecv(seq) with 0 bytes
//   isend too large: Fail -------> fails irecv(seq)
//   close: Close <---------------> the other side fails what it still waits for;
//            a sender's Close says how many sends it made: receives before
//            that still complete (eager data may land after the Close)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace hmemreg::nccl::proto {

enum class Type : uint16_t { Connect = 1, Cts = 2, Empty = 3, Fail = 4, Close = 5, EagerRing = 6, Credit = 7, Inline = 8 };

struct Connect {
	uint64_t listen_id = 0;
	uint32_t send_id = 0;
	std::vector<uint8_t> address; // the sender engine's peer blob
};

struct Cts {
	uint32_t send_id = 0;
	uint32_t recv_id = 0;
	uint32_t seq = 0;
	int32_t tag = 0;
	uint64_t size = 0;   // capacity of the posted buffer
	uint64_t offset = 0; // of the buffer inside the described region
	uint32_t done_upto = 0; // every receive before this seq is complete (eager slots free)
	std::vector<uint8_t> descriptor;
};

// Receives before done_upto are complete: their eager slots are free (sent
// when receives served from slots, which send no Cts, freed half the ring,
// or when no receive is posted).
struct Credit {
	uint32_t send_id = 0;
	uint32_t done_upto = 0;
};

// The recv comm's id for its sender, and its eager slots: `slots` buffers
// of slot_size bytes, one region (none: both 0).
struct EagerRing {
	uint32_t send_id = 0;
	uint32_t recv_id = 0;
	uint32_t slots = 0;
	uint64_t slot_size = 0;
	std::vector<uint8_t> descriptor;
};

// A small send's data, in the message itself.
struct Inline {
	uint32_t recv_id = 0;
	uint32_t seq = 0;
	int32_t tag = 0;
	std::span<const uint8_t> data; // decoded: points into the message's bytes
};
// Bytes an Inline message adds to its data.
constexpr size_t kInlineOverhead = 24;

struct Empty {
	uint32_t recv_id = 0;
	uint32_t seq = 0;
};

struct Fail {
	uint32_t recv_id = 0;
	uint32_t seq = 0;
	int32_t result = 0; // ncclResult_t the receive should fail with
	std::string why;
};

struct Close {
	uint32_t comm_id = 0;   // the receiving side's comm
	uint8_t to_recv = 0;    // 1: comm_id is a recv comm, 0: a send comm
	uint32_t sent = 0;      // to a recv comm: the sender's sends (seqs before it)
};

struct Message {
	Type type;
	Connect connect;
	Cts cts;
	Empty empty;
	Fail fail;
	Close close;
	EagerRing eager;
	Credit credit;
	Inline inl;
};

std::vector<uint8_t> encode(const Connect &m);
std::vector<uint8_t> encode(const Cts &m);
std::vector<uint8_t> encode(const Empty &m);
std::vector<uint8_t> encode(const Fail &m);
std::vector<uint8_t> encode(const Close &m);
std::vector<uint8_t> encode(const EagerRing &m);
std::vector<uint8_t> encode(const Credit &m);
std::vector<uint8_t> encode(const Inline &m);
// An Inline message without its data (to be followed by m.data.size() bytes).
std::vector<uint8_t> encode_head(const Inline &m);
// Into `out` (cleared; its capacity kept: no allocation per message once
// warm): an Inline head, and a Cts with `descriptor` in place of
// m.descriptor (no copy of it into the Cts first).
void encode_head_into(const Inline &m, std::vector<uint8_t> &out);
void encode_into(const Cts &m, std::span<const uint8_t> descriptor, std::vector<uint8_t> &out);
// Nothing on a malformed, foreign or other-version message.
std::optional<Message> decode(std::span<const uint8_t> bytes);

// Listen handle (NCCL_NET_HANDLE_MAXSIZE bytes, exchanged by NCCL).
struct Handle {
	uint64_t listen_id = 0;
	std::vector<uint8_t> address; // the listening engine's peer blob
};
// False when the address does not fit `cap` bytes.
bool encode_handle(const Handle &h, void *out, size_t cap);
std::optional<Handle> decode_handle(const void *in, size_t cap);

constexpr uint64_t notify_tag(uint32_t recv_id, uint32_t seq) { return (uint64_t(recv_id) << 32) | seq; }
// Notifications of eager writes (into slot seq % slots) carry this bit.
constexpr uint64_t kEagerTag = 1ULL << 63;

} // namespace hmemreg::nccl::proto
