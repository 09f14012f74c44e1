// SPDX-License-Identifier: MIT
// HugeArray<T>: a fixed-size array in its own anonymous mapping, advised to
// use transparent huge pages. The cache's hot tables are read at random:
// with 4 KiB pages most lookups would also miss the TLB (twice as costly
// under nested paging in a VM).
#pragma once

#include <cstddef>
#include <new>
#include <sys/mman.h>
#include <utility>

namespace hmemreg::mr {

template <typename T>
class HugeArray {
public:
	HugeArray() = default;
	explicit HugeArray(size_t n) : n_(n)
	{
		len_ = (n * sizeof(T) + kHuge - 1) / kHuge * kHuge;
		void *p = ::mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			throw std::bad_alloc();
		::madvise(p, len_, MADV_HUGEPAGE); // best effort
		p_ = static_cast<T *>(p);
		for (size_t i = 0; i < n_; i++)
			new (&p_[i]) T();
	}
	HugeArray(HugeArray &&o) noexcept
		: p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)), len_(std::exchange(o.len_, 0))
	{
	}
	HugeArray &operator=(HugeArray &&o) noexcept
	{
		if (this != &o) {
			reset();
			p_ = std::exchange(o.p_, nullptr);
			n_ = std::exchange(o.n_, 0);
			len_ = std::exchange(o.len_, 0);
		}
		return *this;
	}
	HugeArray(const HugeArray &) = delete;
	HugeArray &operator=(const HugeArray &) = delete;
	~HugeArray() { reset(); }

	T &operator[](size_t i) { return p_[i]; }
	const T &operator[](size_t i) const { return p_[i]; }
	size_t size() const { return n_; }

private:
	static constexpr size_t kHuge = 2 << 20;
	void reset()
	{
		if (!p_)
			return;
		for (size_t i = 0; i < n_; i++)
			p_[i].~T();
		::munmap(p_, len_);
		p_ = nullptr;
	}
	T *p_ = nullptr;
	size_t n_ = 0, len_ = 0;
};

} // namespace hmemreg::mr
