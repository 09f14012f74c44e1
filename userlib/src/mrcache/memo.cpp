// SPDX-License-Identifier: MIT
#include "mrcache/memo.hpp"

namespace hmemreg::mr {

Memo::Memo(uint64_t max_entries)
{
	uint64_t want = 2 * (max_entries ? max_entries : 64), n = 64;
	while (n < want && n < (1ULL << 16))
		n <<= 1;
	sets_ = HugeArray<Set>(n);
	shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(n));
}

bool Memo::Slot::begin_write(uint32_t &q)
{
	uint32_t cur = seq.load(std::memory_order_relaxed);
	if ((cur & 1) || !seq.compare_exchange_strong(cur, cur + 1, std::memory_order_acquire))
		return false;
	q = cur;
	return true;
}

void Memo::fill(Set &set, const Entry &c)
{
	constexpr auto rx = std::memory_order_relaxed;
	constexpr auto rel = std::memory_order_release;
	Slot &w0 = set.way[0], &w1 = set.way[1];
	uint32_t q0, q1;
	if (!w0.begin_write(q0))
		return;
	if (w1.begin_write(q1)) { // we hold w0: its fields are stable
		w1.life.store(w0.life.load(rx), rel);
		w1.entry.store(w0.entry.load(rx), rel);
		w1.device.store(w0.device.load(rx), rel);
		w1.start.store(w0.start.load(rx), rel);
		w1.end.store(w0.end.load(rx), rel);
		w1.handle.store(w0.handle.load(rx), rel);
		w1.desc.store(w0.desc.load(rx), rel);
		w1.key.store(w0.key.load(rx), rel);
		w1.end_write(q1);
	}
	w0.life.store(static_cast<uint32_t>((c.state().load(rx) & kLifeMask) >> kLifeShift), rel);
	w0.entry.store(reinterpret_cast<uintptr_t>(&c) | static_cast<uint32_t>(c.iface), rel);
	w0.device.store(c.device, rel);
	w0.start.store(c.range.start, rel);
	w0.end.store(c.range.end, rel);
	w0.handle.store(reinterpret_cast<uintptr_t>(c.reg.handle), rel);
	w0.desc.store(reinterpret_cast<uintptr_t>(c.reg.desc), rel);
	w0.key.store(c.reg.key, rel);
	w0.end_write(q0);
}

} // namespace hmemreg::mr
