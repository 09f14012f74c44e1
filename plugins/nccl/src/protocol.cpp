// SPDX-License-Identifier: MIT
#include "protocol.hpp"

#include <cstring>

namespace hmemreg::nccl::proto {
namespace {

constexpr uint32_t kMagic = 0x4c43434e; // "NCCL"
constexpr uint16_t kVersion = 4; // 2: EagerRing, Credit, Cts.done_upto; 3: Close.sent; 4: Inline
constexpr uint32_t kHandleMagic = 0x48524e48; // "HNRH"

// Into its own vector (take()), or into the caller's, which keeps its
// capacity from message to message (the hot paths' encode_into).
class Writer {
public:
	explicit Writer(Type t) : b_(own_)
	{
		own_.reserve(64);
		start(t);
	}
	Writer(Type t, std::vector<uint8_t> &out) : b_(out)
	{
		b_.clear();
		start(t);
	}
	template <typename T> Writer &put(T v)
	{
		const auto *p = reinterpret_cast<const uint8_t *>(&v);
		b_.insert(b_.end(), p, p + sizeof(v));
		return *this;
	}
	Writer &bytes(std::span<const uint8_t> s)
	{
		put(static_cast<uint32_t>(s.size()));
		b_.insert(b_.end(), s.begin(), s.end());
		return *this;
	}
	std::vector<uint8_t> take() { return std::move(own_); }

private:
	void start(Type t)
	{
		put(kMagic);
		put(kVersion);
		put(static_cast<uint16_t>(t));
	}
	std::vector<uint8_t> own_;
	std::vector<uint8_t> &b_;
};

class Reader {
public:
	explicit Reader(std::span<const uint8_t> s) : s_(s) {}
	template <typename T> bool get(T &v)
	{
		if (s_.size() - pos_ < sizeof(T))
			return false;
		std::memcpy(&v, s_.data() + pos_, sizeof(T));
		pos_ += sizeof(T);
		return true;
	}
	bool bytes(std::vector<uint8_t> &v, size_t max = 1 << 16)
	{
		uint32_t n;
		if (!get(n) || n > max || s_.size() - pos_ < n)
			return false;
		v.assign(s_.begin() + pos_, s_.begin() + pos_ + n);
		pos_ += n;
		return true;
	}
	// A view of the next length-prefixed bytes (valid as long as the input).
	bool view(std::span<const uint8_t> &v, size_t max)
	{
		uint32_t n;
		if (!get(n) || n > max || s_.size() - pos_ < n)
			return false;
		v = s_.subspan(pos_, n);
		pos_ += n;
		return true;
	}
	bool done() const { return pos_ == s_.size(); }

private:
	std::span<const uint8_t> s_;
	size_t pos_ = 0;
};

} // namespace

std::vector<uint8_t> encode(const Connect &m)
{
	return Writer(Type::Connect).put(m.listen_id).put(m.send_id).bytes(m.address).take();
}


void encode_into(const Cts &m, std::span<const uint8_t> descriptor, std::vector<uint8_t> &out)
{
	Writer(Type::Cts, out)
		.put(m.send_id)
		.put(m.recv_id)
		.put(m.seq)
		.put(m.tag)
		.put(m.size)
		.put(m.offset)
		.put(m.done_upto)
		.bytes(descriptor);
}

std::vector<uint8_t> encode(const Cts &m)
{
	std::vector<uint8_t> out;
	encode_into(m, m.descriptor, out);
	return out;
}

std::vector<uint8_t> encode(const Credit &m) { return Writer(Type::Credit).put(m.send_id).put(m.done_upto).take(); }

std::vector<uint8_t> encode(const EagerRing &m)
{
	return Writer(Type::EagerRing)
		.put(m.send_id)
		.put(m.recv_id)
		.put(m.slots)
		.put(m.slot_size)
		.bytes(m.descriptor)
		.take();
}

std::vector<uint8_t> encode(const Inline &m)
{
	return Writer(Type::Inline).put(m.recv_id).put(m.seq).put(m.tag).bytes(m.data).take();
}

std::vector<uint8_t> encode_head(const Inline &m)
{
	std::vector<uint8_t> out;
	encode_head_into(m, out);
	return out;
}

void encode_head_into(const Inline &m, std::vector<uint8_t> &out)
{
	Writer(Type::Inline, out).put(m.recv_id).put(m.seq).put(m.tag).put(static_cast<uint32_t>(m.data.size()));
}

std::vector<uint8_t> encode(const Empty &m) { return Writer(Type::Empty).put(m.recv_id).put(m.seq).take(); }

std::vector<uint8_t> encode(const Fail &m)
{
	std::span<const uint8_t> why(reinterpret_cast<const uint8_t *>(m.why.data()), std::min<size_t>(m.why.size(), 512));
	return Writer(Type::Fail).put(m.recv_id).put(m.seq).put(m.result).bytes(why).take();
}

std::vector<uint8_t> encode(const Close &m)
{
	return Writer(Type::Close).put(m.comm_id).put(m.to_recv).put(m.sent).take();
}

std::optional<Message> decode(std::span<const uint8_t> bytes)
{
	Reader r(bytes);
	uint32_t magic;
	uint16_t version, type;
	if (!r.get(magic) || !r.get(version) || !r.get(type) || magic != kMagic || version != kVersion)
		return std::nullopt;
	Message m{};
	m.type = static_cast<Type>(type);
	bool ok = false;
	switch (m.type) {
	case Type::Connect:
		ok = r.get(m.connect.listen_id) && r.get(m.connect.send_id) && r.bytes(m.connect.address);
		break;
	case Type::Cts:
		ok = r.get(m.cts.send_id) && r.get(m.cts.recv_id) && r.get(m.cts.seq) && r.get(m.cts.tag) &&
		     r.get(m.cts.size) && r.get(m.cts.offset) && r.get(m.cts.done_upto) && r.bytes(m.cts.descriptor);
		break;
	case Type::Credit:
		ok = r.get(m.credit.send_id) && r.get(m.credit.done_upto);
		break;
	case Type::EagerRing:
		ok = r.get(m.eager.send_id) && r.get(m.eager.recv_id) && r.get(m.eager.slots) &&
		     r.get(m.eager.slot_size) && r.bytes(m.eager.descriptor) &&
		     (m.eager.slots > 0) == (m.eager.slot_size > 0);
		break;
	case Type::Empty:
		ok = r.get(m.empty.recv_id) && r.get(m.empty.seq);
		break;
	case Type::Inline:
		ok = r.get(m.inl.recv_id) && r.get(m.inl.seq) && r.get(m.inl.tag) && r.view(m.inl.data, 1u << 20);
		break;
	case Type::Fail: {
		std::vector<uint8_t> why;
		ok = r.get(m.fail.recv_id) && r.get(m.fail.seq) && r.get(m.fail.result) && r.bytes(why, 512);
		m.fail.why.assign(why.begin(), why.end());
		break;
	}
	case Type::Close:
		ok = r.get(m.close.comm_id) && r.get(m.close.to_recv) && r.get(m.close.sent);
		break;
	}
	if (!ok || !r.done())
		return std::nullopt;
	return m;
}

bool encode_handle(const Handle &h, void *out, size_t cap)
{
	const size_t head = sizeof(uint32_t) + sizeof(uint64_t) + sizeof(uint16_t);
	if (h.address.size() > cap - head || h.address.size() > UINT16_MAX)
		return false;
	auto *p = static_cast<uint8_t *>(out);
	std::memset(p, 0, cap);
	const uint16_t n = static_cast<uint16_t>(h.address.size());
	std::memcpy(p, &kHandleMagic, sizeof(kHandleMagic));
	std::memcpy(p + 4, &h.listen_id, sizeof(h.listen_id));
	std::memcpy(p + 12, &n, sizeof(n));
	std::memcpy(p + head, h.address.data(), n);
	return true;
}

std::optional<Handle> decode_handle(const void *in, size_t cap)
{
	const auto *p = static_cast<const uint8_t *>(in);
	const size_t head = sizeof(uint32_t) + sizeof(uint64_t) + sizeof(uint16_t);
	uint32_t magic;
	uint16_t n;
	Handle h;
	std::memcpy(&magic, p, sizeof(magic));
	std::memcpy(&h.listen_id, p + 4, sizeof(h.listen_id));
	std::memcpy(&n, p + 12, sizeof(n));
	if (magic != kHandleMagic || n == 0 || n > cap - head || h.listen_id == 0)
		return std::nullopt;
	h.address.assign(p + head, p + head + n);
	return h;
}

} // namespace hmemreg::nccl::proto
