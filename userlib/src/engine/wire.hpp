// SPDX-License-Identifier: MIT
// What engines exchange: peer address blobs, remote region descriptors and
// control message headers. Little-endian, versioned, validated on parse.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hmemreg::engine::wire {

// Blobs and messages of another version are refused: 3 added Announce and
// writes that carry remote CQ data, which an engine of version 2 would
// neither count nor expect; 4 added 4-byte keys (ImmJoin/ImmIndex, and
// Announces and writes whose key is a target-assigned writer index and a
// sequence), which a version-3 target would drop as foreign, and made 8-byte
// keys always >= 2^32 (engine ids with nonzero low 32 bits) so the two kinds
// of key never meet; 5 lets one receive carry several messages back to back
// (bundle_offset), of which a version-4 engine would read only the first.
constexpr uint16_t kVersion = 5;

struct PeerAddress {
	uint64_t engine_id = 0;
	std::string provider;
	std::vector<std::vector<uint8_t>> rails; // raw endpoint names, one per rail
};

struct RegionDescriptor {
	uint64_t engine_id = 0;
	uint64_t length = 0;
	struct Rail {
		uint64_t base; // RMA address of the region's byte 0 on this rail
		uint64_t key;
	};
	std::vector<Rail> rails; // one per rail of the owning engine
	// Staged device memory: rails address the region's host mirror, and
	// writers send a Landed notice per piece naming this id.
	uint64_t staged_id = 0;   // 0: not staged
};

// Landed: pieces of a staged write are in the target's mirror (payload: a
// LandedHeader and ranges). StagedDone: a staged write is complete once the
// given number of Landed notices arrived (payload: StagedDone). Announce: a
// write whose RDMA writes carry remote CQ data (payload: Announce); sent
// alongside the writes, not after them. ImmJoin: a writer with only 4 B of
// remote CQ data asks the target for a writer index (no payload); ImmIndex:
// the target's answer (payload: ImmIndex).
enum class MsgType : uint16_t {
	User = 1,
	Done = 2,
	Hello = 3,
	Landed = 4,
	StagedDone = 5,
	Announce = 6,
	ImmJoin = 7,
	ImmIndex = 8,
};

// Header in front of every control message.
struct MsgHeader {
	uint32_t magic;
	uint16_t type;
	uint16_t version;
	uint64_t sender;   // engine id
	uint64_t tag;      // Done: the writer's tag
	uint64_t bytes;    // Done: bytes written
	uint32_t chunks;   // Done: chunks written
	uint32_t length;   // payload bytes after the header
};
constexpr uint32_t kMsgMagic = 0x434d5248; // "HRMC"

// Where the next message of a bundle starts after `end` bytes: 8-byte
// aligned, so each header can be read where it lies.
constexpr size_t bundle_offset(size_t end) { return (end + 7) & ~size_t(7); }

// A header of `type` from engine `sender`; Done-like messages set tag,
// bytes and chunks, every message its payload length.
inline MsgHeader header(MsgType type, uint64_t sender)
{
	MsgHeader h{};
	h.magic = kMsgMagic;
	h.type = static_cast<uint16_t>(type);
	h.version = kVersion;
	h.sender = sender;
	return h;
}

struct LandedHeader {
	uint64_t seq;       // the writer's staged write
	uint64_t staged_id; // the target region
	// followed by LandedRange[] up to the payload's end
};
struct LandedRange {
	uint64_t offset;
	uint64_t len;
};
struct StagedDone {
	uint64_t seq;
	uint32_t notices;   // Landed messages the writer sent for it
	uint32_t pad;
};

// Immediate-notify writes: every RDMA write of a transfer carries this
// 64-bit key as remote CQ data, and the Announce names the key and how many
// writes carry it. The target notifies once it has the Announce and exactly
// that many writes. The key is the sender engine id's low 32 bits (checked
// against the Announce's sender) and a 32-bit per-engine sequence that starts
// at a random value (two engines whose ids share the low bits would also need
// sequences within a window of each other to collide).
constexpr unsigned kImmSeqBits = 32;
constexpr uint64_t kImmStampMask = (uint64_t(1) << (64 - kImmSeqBits)) - 1;
constexpr size_t kImmDataSize = 8; // cq_data_size needed
inline uint64_t imm_key(uint64_t engine_id, uint32_t seq)
{
	return ((engine_id & kImmStampMask) << kImmSeqBits) | seq;
}
inline bool imm_key_from(uint64_t key, uint64_t engine_id)
{
	return (key >> kImmSeqBits) == (engine_id & kImmStampMask);
}
// 4-byte keys (providers with 4 B of remote CQ data: verbs, efa): the key
// cannot name the writer, so the target assigns each writer that asks
// (ImmJoin) an index unique among its writers, never reused while the target
// lives (the same writer asking again gets the same one); the writer's keys
// are index << 20 | sequence (20 bits, wrapping). The target counts a key's
// writes only for an Announce whose sender owns the key's index. Index 0 is
// never assigned: an ImmIndex with index 0 is a refusal (table full).
// Such keys are < 2^32, 8-byte keys are >= 2^32 (see kVersion).
constexpr unsigned kImm4SeqBits = 20;
constexpr unsigned kImm4IndexBits = 32 - kImm4SeqBits;
constexpr uint32_t kImm4SeqMask = (uint32_t(1) << kImm4SeqBits) - 1;
constexpr uint32_t kImm4Writers = uint32_t(1) << kImm4IndexBits; // indices 1..kImm4Writers-1
constexpr size_t kImm4DataSize = 4;
inline uint64_t imm4_key(uint32_t index, uint32_t seq)
{
	return (uint64_t(index) << kImm4SeqBits) | (seq & kImm4SeqMask);
}
inline bool imm_is4(uint64_t key) { return key >> 32 == 0; }
inline uint32_t imm4_index(uint64_t key) { return static_cast<uint32_t>(key >> kImm4SeqBits); }
struct ImmIndex {
	uint64_t writer;    // the engine id the index is for (the ImmJoin's sender)
	uint32_t index;     // 0: refused
	uint32_t pad;
};

struct Announce {
	uint64_t key;
	uint32_t writes;    // RDMA writes carrying the key
	uint32_t rails;     // bit r: some of them go on rail r (0: not said, any rail)
};

// Control message buffers hold at least this much payload whatever the
// application's max_message: the engine's own Announce and ImmIndex (and one
// Landed range) must fit even where max_message is a few bytes.
constexpr size_t kEnginePayloadMax = sizeof(LandedHeader) + sizeof(LandedRange);
static_assert(sizeof(Announce) <= kEnginePayloadMax && sizeof(ImmIndex) <= kEnginePayloadMax);

std::vector<uint8_t> encode(const PeerAddress &a);
std::vector<uint8_t> encode(const RegionDescriptor &d);
// Throw Error(HMEMREG_EINVAL, why) on anything malformed.
PeerAddress decode_address(std::span<const uint8_t> blob);
RegionDescriptor decode_descriptor(std::span<const uint8_t> blob);

} // namespace hmemreg::engine::wire
