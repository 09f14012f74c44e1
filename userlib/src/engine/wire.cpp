// SPDX-License-Identifier: MIT
#include "engine/wire.hpp"

#include <cstring>

#include "fabric/error.hpp"

namespace hmemreg::engine::wire {
namespace {

constexpr uint32_t kAddressMagic = 0x41524d48;    // "HMRA"
constexpr uint32_t kDescriptorMagic = 0x44524d48; // "HMRD"
constexpr size_t kMaxRails = 64;

class Writer {
public:
	template <class T> void put(T v)
	{
		uint8_t b[sizeof(T)];
		for (size_t i = 0; i < sizeof(T); i++)
			b[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
		out.insert(out.end(), b, b + sizeof(T));
	}
	void bytes(const void *p, size_t n)
	{
		put<uint16_t>(static_cast<uint16_t>(n));
		auto *c = static_cast<const uint8_t *>(p);
		out.insert(out.end(), c, c + n);
	}
	std::vector<uint8_t> out;
};

class Reader {
public:
	Reader(std::span<const uint8_t> in, const char *what) : in_(in), what_(what) {}
	template <class T> T get()
	{
		need(sizeof(T));
		uint64_t v = 0;
		for (size_t i = 0; i < sizeof(T); i++)
			v |= static_cast<uint64_t>(in_[pos_ + i]) << (8 * i);
		pos_ += sizeof(T);
		return static_cast<T>(v);
	}
	std::vector<uint8_t> bytes()
	{
		size_t n = get<uint16_t>();
		need(n);
		std::vector<uint8_t> v(in_.begin() + pos_, in_.begin() + pos_ + n);
		pos_ += n;
		return v;
	}
	void fail(const std::string &why) const { throw Error(HMEMREG_EINVAL, std::string(what_) + ": " + why); }
	void done() const
	{
		if (pos_ != in_.size())
			fail("trailing bytes");
	}

private:
	void need(size_t n) const
	{
		if (in_.size() - pos_ < n)
			fail("truncated");
	}
	std::span<const uint8_t> in_;
	size_t pos_ = 0;
	const char *what_;
};

} // namespace

std::vector<uint8_t> encode(const PeerAddress &a)
{
	Writer w;
	w.put<uint32_t>(kAddressMagic);
	w.put<uint16_t>(kVersion);
	w.put<uint16_t>(static_cast<uint16_t>(a.rails.size()));
	w.put<uint64_t>(a.engine_id);
	w.bytes(a.provider.data(), a.provider.size());
	for (const auto &r : a.rails)
		w.bytes(r.data(), r.size());
	return std::move(w.out);
}

std::vector<uint8_t> encode(const RegionDescriptor &d)
{
	Writer w;
	w.put<uint32_t>(kDescriptorMagic);
	w.put<uint16_t>(kVersion);
	w.put<uint16_t>(static_cast<uint16_t>(d.rails.size()));
	w.put<uint64_t>(d.engine_id);
	w.put<uint64_t>(d.length);
	w.put<uint64_t>(d.staged_id);
	for (const auto &r : d.rails) {
		w.put<uint64_t>(r.base);
		w.put<uint64_t>(r.key);
	}
	return std::move(w.out);
}

PeerAddress decode_address(std::span<const uint8_t> blob)
{
	Reader r(blob, "peer address blob");
	if (r.get<uint32_t>() != kAddressMagic)
		r.fail("not a peer address (bad magic)");
	if (r.get<uint16_t>() != kVersion)
		r.fail("unsupported version");
	PeerAddress a;
	size_t n = r.get<uint16_t>();
	if (n == 0 || n > kMaxRails)
		r.fail("bad rail count " + std::to_string(n));
	a.engine_id = r.get<uint64_t>();
	auto p = r.bytes();
	a.provider.assign(p.begin(), p.end());
	for (size_t i = 0; i < n; i++) {
		a.rails.push_back(r.bytes());
		if (a.rails.back().empty())
			r.fail("empty rail address");
	}
	r.done();
	return a;
}

RegionDescriptor decode_descriptor(std::span<const uint8_t> blob)
{
	Reader r(blob, "region descriptor");
	if (r.get<uint32_t>() != kDescriptorMagic)
		r.fail("not a region descriptor (bad magic)");
	if (r.get<uint16_t>() != kVersion)
		r.fail("unsupported version");
	RegionDescriptor d;
	size_t n = r.get<uint16_t>();
	if (n == 0 || n > kMaxRails)
		r.fail("bad rail count " + std::to_string(n));
	d.engine_id = r.get<uint64_t>();
	d.length = r.get<uint64_t>();
	d.staged_id = r.get<uint64_t>();
	for (size_t i = 0; i < n; i++) {
		uint64_t base = r.get<uint64_t>();
		d.rails.push_back({base, r.get<uint64_t>()});
	}
	r.done();
	return d;
}

} // namespace hmemreg::engine::wire
