// SPDX-License-Identifier: MIT
// Helpers shared by the cache suites.
#pragma once

#include <cstring>
#include <memory>
#include <sys/mman.h>
#include <unistd.h>

#include "mrcache/cache_hit.inl"

namespace t {

using namespace hmemreg::mr;

inline size_t page() { return static_cast<size_t>(::sysconf(_SC_PAGESIZE)); }

// Forwards to a MemoryRegistrar owned by the test, so its counters outlive
// the cache (and prove the cache released everything).
class SharedRegistrar final : public Registrar {
public:
	explicit SharedRegistrar(MemoryRegistrar *m) : m_(m) {}
	const char *name() const override { return "memory"; }
	int reg(const Request &q, Range r, Registration &o) override { return m_->reg(q, r, o); }
	void dereg(Registration &r) noexcept override { m_->dereg(r); }

private:
	MemoryRegistrar *m_;
};

// Records the 8-byte stamp found at the requested address when it was
// registered (reg.cookie): a hit whose cookie differs from the stamp now
// in memory is a stale registration.
class StampRegistrar final : public Registrar {
public:
	const char *name() const override { return "stamp"; }
	int reg(const Request &q, Range, Registration &o) override
	{
		std::memcpy(&o.cookie, q.addr, sizeof(o.cookie));
		o.key = next_.fetch_add(1);
		live_.fetch_add(1);
		return 0;
	}
	void dereg(Registration &) noexcept override { live_.fetch_sub(1); }
	static std::atomic<long> live_;
	std::atomic<uint64_t> next_{1};
};
inline std::atomic<long> StampRegistrar::live_{0};

inline hmemreg_cache_config config(uint64_t max_count = 1024, uint64_t max_size = 1ULL << 40, uint32_t monitor = HMEMREG_MONITOR_NONE)
{
	hmemreg_cache_config c;
	hmemreg_cache_config_init(&c);
	c.max_count = max_count;
	c.max_size = max_size;
	c.monitor = monitor;
	c.publish_stats = 0;
	c.purge_on_fork = 0;
	return c;
}

inline Request req(const void *addr, size_t len)
{
	Request r;
	r.addr = addr;
	r.len = len;
	return r;
}

inline hmemreg_cache_stats stats(const Cache &c)
{
	hmemreg_cache_stats s;
	c.stats(s);
	return s;
}

// An anonymous mapping, unmapped at scope exit.
struct Mapping {
	char *p = nullptr;
	size_t len = 0;
	explicit Mapping(size_t l, void *at = nullptr) : len(l)
	{
		int fl = MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0);
		void *v = ::mmap(at, l, PROT_READ | PROT_WRITE, fl, -1, 0);
		p = v == MAP_FAILED ? nullptr : static_cast<char *>(v);
		if (p)
			std::memset(p, 0x5a, l);
	}
	~Mapping()
	{
		if (p)
			::munmap(p, len);
	}
	Mapping(const Mapping &) = delete;
	Mapping &operator=(const Mapping &) = delete;
};

} // namespace t
