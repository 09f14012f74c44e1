// SPDX-License-Identifier: MIT
// libhmemreg: C++ RAII handles over the registration cache's C API
// (hmemreg/cache.h). Header-only; no exceptions: every call returns 0 or a
// negative HMEMREG_E* code, like the C API.
//
//   hmemreg::MrCache cache;
//   if (int rc = hmemreg::MrCache::create_fabric(domain, nullptr, cache)) ...
//   hmemreg::Mr mr;
//   if (int rc = cache.get(buf, len, mr)) ...
//   fi_write(ep, buf, len, mr.desc(), ...);   // mr puts itself when destroyed
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include <hmemreg/hmemreg.h>

namespace hmemreg {

class MrCache;

// One held registration; released (put) on destruction or reset().
class Mr {
public:
	Mr() = default;
	Mr(Mr &&o) noexcept : cache_(std::exchange(o.cache_, nullptr)), mr_(o.mr_) { o.mr_.handle_ = nullptr; }
	Mr &operator=(Mr &&o) noexcept
	{
		if (this != &o) {
			reset();
			cache_ = std::exchange(o.cache_, nullptr);
			mr_ = o.mr_;
			o.mr_.handle_ = nullptr;
		}
		return *this;
	}
	Mr(const Mr &) = delete;
	Mr &operator=(const Mr &) = delete;
	~Mr() { reset(); }

	int reset()
	{
		int rc = 0;
		if (cache_ && mr_.handle_)
			rc = hmemreg_mr_put(cache_, &mr_);
		cache_ = nullptr;
		mr_.handle_ = nullptr;
		return rc;
	}
	explicit operator bool() const { return mr_.handle_ != nullptr; }
	struct fid_mr *fid() const { return mr_.mr; }
	void *desc() const { return mr_.desc; }
	uint64_t key() const { return mr_.key; }
	uint64_t start() const { return mr_.start; }
	uint64_t end() const { return mr_.end; }
	bool cached() const { return mr_.flags & HMEMREG_MR_CACHED; }

private:
	friend class MrCache;
	hmemreg_cache *cache_ = nullptr;
	hmemreg_mr mr_{};
};

// Owns a cache; destroys it on destruction (all Mr must be gone by then).
class MrCache {
public:
	MrCache() = default;
	MrCache(MrCache &&o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
	MrCache &operator=(MrCache &&o) noexcept
	{
		if (this != &o) {
			hmemreg_cache_destroy(c_);
			c_ = std::exchange(o.c_, nullptr);
		}
		return *this;
	}
	MrCache(const MrCache &) = delete;
	MrCache &operator=(const MrCache &) = delete;
	~MrCache() { hmemreg_cache_destroy(c_); }

	// cfg may be null (defaults + environment).
	static int create_fabric(struct fid_domain *domain, const hmemreg_cache_config *cfg, MrCache &out)
	{
		hmemreg_cache *c = nullptr;
		int rc = hmemreg_cache_create_fabric(domain, cfg, &c);
		if (rc == 0)
			out = MrCache(c);
		return rc;
	}
	static int create_memory(const hmemreg_cache_config *cfg, MrCache &out)
	{
		hmemreg_cache *c = nullptr;
		int rc = hmemreg_cache_create_memory(cfg, &c);
		if (rc == 0)
			out = MrCache(c);
		return rc;
	}

	int get(const void *addr, size_t len, Mr &out)
	{
		Mr m;
		int rc = hmemreg_mr_get(c_, addr, len, &m.mr_);
		if (rc == 0) {
			m.cache_ = c_;
			out = std::move(m);
		}
		return rc;
	}
	int get(const hmemreg_mr_request &req, Mr &out)
	{
		Mr m;
		int rc = hmemreg_mr_get_req(c_, &req, &m.mr_);
		if (rc == 0) {
			m.cache_ = c_;
			out = std::move(m);
		}
		return rc;
	}
	int invalidate(const void *addr, size_t len, uint32_t iface = HMEMREG_IFACE_HOST)
	{
		return hmemreg_cache_invalidate(c_, iface, addr, len);
	}
	int flush() { return hmemreg_cache_flush(c_); }
	int stats(hmemreg_cache_stats &out) const { return hmemreg_cache_get_stats(c_, &out); }
	int monitor() const { return hmemreg_cache_monitor(c_); }
	hmemreg_cache *get_c() const { return c_; }
	explicit operator bool() const { return c_ != nullptr; }

private:
	explicit MrCache(hmemreg_cache *c) : c_(c) {}
	hmemreg_cache *c_ = nullptr;
};

} // namespace hmemreg
