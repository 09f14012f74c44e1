// SPDX-License-Identifier: MIT
// Unique ownership of a libfabric object: closed with fi_close() exactly once.
#pragma once

#include <utility>

#include <rdma/fabric.h>

namespace hmemreg::fabric {

// T is a libfabric object struct whose first member is `struct fid fid`
// (fid_fabric, fid_domain, fid_ep, fid_av, fid_cq, fid_mr).
template <class T> class Fid {
public:
	Fid() = default;
	explicit Fid(T *p) : p_(p) {}
	Fid(Fid &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
	Fid &operator=(Fid &&o) noexcept
	{
		if (this != &o) {
			reset();
			p_ = std::exchange(o.p_, nullptr);
		}
		return *this;
	}
	Fid(const Fid &) = delete;
	Fid &operator=(const Fid &) = delete;
	~Fid() { reset(); }

	void reset()
	{
		if (p_)
			fi_close(&std::exchange(p_, nullptr)->fid);
	}
	T *get() const { return p_; }
	explicit operator bool() const { return p_ != nullptr; }

private:
	T *p_ = nullptr;
};

} // namespace hmemreg::fabric
