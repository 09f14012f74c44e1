// SPDX-License-Identifier: MIT
// Creates /dev/shm/hmemreg-stats.<pid> at the first cache (holding a shared
// flock on it), hands out slots, and removes the file when the process exits
// normally. Stale files of crashed processes are recognised by readers
// (hmemreg_stats_block_check) and removed by hmemreg_shm_gc (shm/shm_gc.cpp),
// which runs before the first block is made.
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <utility>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hmemreg/hmemreg.h"
#include "mrcache/stats_block.hpp"
#include "shm/shm_gc.hpp"
#include "unique_fd.hpp"

namespace hmemreg::mr {

// Version 3's layout: fields added since sit in padding (readers of 3 find
// every field where it was).
static_assert(sizeof(hmemreg_stats_cache) == 2752 && offsetof(hmemreg_stats_cache, hits) == 704);

namespace {

// /proc/<pid>/stat field 22 (start time in clock ticks since boot); 0 if unreadable.
uint64_t process_start_time(pid_t pid)
{
	char path[64], buf[1024];
	std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
	FILE *f = std::fopen(path, "re");
	if (!f)
		return 0;
	size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
	std::fclose(f);
	buf[n] = 0;
	const char *p = std::strrchr(buf, ')'); // comm may contain spaces
	if (!p)
		return 0;
	unsigned long long v = 0;
	// After ")": field 3 (state) ... field 22 (starttime) = 20th token.
	int field = 2;
	for (const char *q = p + 1; *q; q++) {
		if (*q == ' ') {
			field++;
			if (field == 22) {
				std::sscanf(q + 1, "%llu", &v);
				break;
			}
		}
	}
	return v;
}

void read_boot_id(char *out, size_t n)
{
	std::memset(out, 0, n);
	FILE *f = std::fopen("/proc/sys/kernel/random/boot_id", "re");
	if (!f)
		return;
	if (std::fgets(out, static_cast<int>(n), f))
		out[std::strcspn(out, "\n")] = 0;
	std::fclose(f);
}

struct SharedBlock {
	std::mutex mu;
	hmemreg_stats_block *block = nullptr;
	pid_t owner = 0; // pid that created it (a fork child makes its own)
	char name[64] = {};
	std::atomic<uint32_t> next_id{1};
	// Export rows (under mu): every (cache id, export id) pair held, and
	// its row in block->exports (-1: the table was full).
	struct Held {
		uint64_t entries = 0, bytes = 0;
		int row = -1;
	};
	std::map<std::pair<uint32_t, uint64_t>, Held> held;

	hmemreg_stats_block *get()
	{
		pid_t me = ::getpid();
		if (block && owner == me)
			return block;
		block = nullptr; // inherited from the parent: not ours to write
		held.clear();
		shm::gc_once();
		std::snprintf(name, sizeof(name), HMEMREG_STATS_SHM_PREFIX "%d", static_cast<int>(me));
		// A file under our pid is an earlier process's: remove it rather
		// than truncate it under a reader that still maps it.
		int fd = -1;
		for (int tries = 0; fd < 0 && tries < 3; tries++) {
			fd = ::shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			if (fd < 0 && errno == EEXIST)
				::shm_unlink(name);
			else if (fd < 0)
				return nullptr;
		}
		if (fd < 0)
			return nullptr;
		UniqueFd held(fd);
		size_t len = sizeof(hmemreg_stats_block);
		void *p = MAP_FAILED;
		// The shared flock says "in use" to hmemreg_shm_gc (shm/shm_gc.hpp).
		// It belongs to the open file, which the mapping keeps open after
		// the fd is closed: held until exit, no descriptor spent on it.
		// Blocking: a gc holds its exclusive lock only while it judges the file.
		if (::flock(fd, LOCK_SH) == 0 && ::ftruncate(fd, static_cast<off_t>(len)) == 0)
			p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			::shm_unlink(name);
			return nullptr;
		}
		auto *b = static_cast<hmemreg_stats_block *>(p);
		b->version = HMEMREG_STATS_VERSION;
		b->block_size = static_cast<uint32_t>(len);
		b->pid = me;
		b->max_caches = HMEMREG_STATS_MAX_CACHES;
		b->max_exports = HMEMREG_STATS_MAX_EXPORTS;
		b->start_time = process_start_time(me);
		read_boot_id(b->boot_id, sizeof(b->boot_id));
		std::atomic_ref<uint64_t>(b->magic).store(HMEMREG_STATS_MAGIC, std::memory_order_release);
		block = b;
		owner = me;
		return block;
	}

	~SharedBlock()
	{
		if (block && owner == ::getpid())
			::shm_unlink(name);
	}
};

SharedBlock &shared()
{
	static SharedBlock s;
	return s;
}

} // namespace

std::unique_ptr<StatsSlot> StatsSlot::acquire(bool publish, const char *name)
{
	hmemreg_stats_cache *slot = nullptr;
	uint32_t id = shared().next_id.fetch_add(1);
	if (publish) {
		SharedBlock &sb = shared();
		std::lock_guard g(sb.mu);
		if (hmemreg_stats_block *b = sb.get()) {
			for (auto &c : b->caches) {
				std::atomic_ref<uint32_t> st(c.state);
				if (st.load() == 0) {
					std::memset(&c, 0, sizeof(c));
					slot = &c;
					break;
				}
			}
		}
	}
	bool is_shared = slot != nullptr;
	if (!slot)
		slot = new hmemreg_stats_cache{};
	auto out = std::make_unique<StatsSlot>(slot, is_shared);
	slot->id = id;
	out->set_label(slot->name, sizeof(slot->name), name);
	return out;
}

namespace {

void write_row(hmemreg_stats_export &r, uint32_t cache_id, uint64_t export_id, uint64_t entries, uint64_t bytes)
{
	std::atomic_ref<uint64_t> seq(r.seq);
	const uint64_t s = seq.load(std::memory_order_relaxed);
	seq.store(s + 1, std::memory_order_relaxed); // odd: being written
	// Release stores keep the odd count ahead of the row's new values (a
	// standalone fence would do the same, but TSan does not model fences).
	auto put = [](uint64_t &field, uint64_t v) { std::atomic_ref<uint64_t>(field).store(v, std::memory_order_release); };
	put(r.export_id, export_id);
	put(r.entries, entries);
	put(r.bytes, bytes);
	std::atomic_ref<uint32_t>(r.cache_id).store(cache_id, std::memory_order_release);
	seq.store(s + 2, std::memory_order_release);
}

} // namespace

void StatsSlot::export_held(uint64_t export_id, int64_t entries, int64_t bytes)
{
	if (!shared_)
		return;
	SharedBlock &sb = shared();
	std::lock_guard g(sb.mu);
	hmemreg_stats_block *b = sb.block;
	if (!b || sb.owner != ::getpid()) // a fork child's slot is its parent's
		return;
	const auto key = std::make_pair(s_->id, export_id);
	auto &h = sb.held[key];
	h.entries += static_cast<uint64_t>(entries);
	h.bytes += static_cast<uint64_t>(bytes);
	if (h.row < 0 && h.entries) { // new pair, or listed once the table has room
		for (int i = 0; i < HMEMREG_STATS_MAX_EXPORTS; i++) {
			if (!std::atomic_ref<uint64_t>(b->exports[i].entries).load(std::memory_order_relaxed)) {
				h.row = i;
				break;
			}
		}
	}
	if (h.row >= 0)
		write_row(b->exports[h.row], s_->id, export_id, h.entries, h.entries ? h.bytes : 0);
	if (!h.entries)
		sb.held.erase(key);
	uint64_t unlisted = 0;
	for (const auto &kv : sb.held)
		unlisted += kv.second.row < 0;
	set(b->exports_unlisted, unlisted);
}

void StatsSlot::set_label(char *dst, size_t n, const char *src)
{
	std::memset(dst, 0, n);
	if (src)
		std::strncpy(dst, src, n - 1);
}

// A cache that goes while registrations are still counted (they are
// released before it normally) leaves no rows behind.
void StatsSlot::drop_export_rows() noexcept
{
	SharedBlock &sb = shared();
	std::lock_guard g(sb.mu);
	if (!sb.block || sb.owner != ::getpid())
		return;
	for (auto it = sb.held.begin(); it != sb.held.end();) {
		if (it->first.first != s_->id) {
			++it;
			continue;
		}
		if (it->second.row >= 0)
			write_row(sb.block->exports[it->second.row], s_->id, it->first.second, 0, 0);
		it = sb.held.erase(it);
	}
	uint64_t unlisted = 0;
	for (const auto &kv : sb.held)
		unlisted += kv.second.row < 0;
	set(sb.block->exports_unlisted, unlisted);
}

StatsSlot::~StatsSlot()
{
	if (shared_) {
		drop_export_rows();
		std::atomic_ref<uint32_t>(s_->state).store(0, std::memory_order_release);
	} else {
		delete s_; // private slot allocated in acquire()
	}
}

} // namespace hmemreg::mr

extern "C" void hmemreg_stats_sum(const struct hmemreg_stats_cache *s, struct hmemreg_cache_stats *o)
{
	if (!s || !o)
		return;
	auto ld = [](const uint64_t &f) {
		return std::atomic_ref<uint64_t>(const_cast<uint64_t &>(f)).load(std::memory_order_relaxed);
	};
	std::memset(o, 0, sizeof(*o));
	for (unsigned i = 0; i < HMEMREG_STATS_HIT_SHARDS; i++)
		o->hits += ld(s->hits[8 * i]);
	o->misses = ld(s->misses);
	o->entries = ld(s->entries);
	o->bytes = ld(s->bytes);
	o->uncached = ld(s->uncached);
	o->uncached_bytes = ld(s->uncached_bytes);
	o->dead = ld(s->dead);
	o->dead_bytes = ld(s->dead_bytes);
	o->registrations = ld(s->registrations);
	o->registration_ns = ld(s->registration_ns);
	o->registration_failures = ld(s->registration_failures);
	o->deregistrations = ld(s->deregistrations);
	o->uncached_registrations = ld(s->uncached_registrations);
	o->evictions = ld(s->evictions);
	o->monitor_events = ld(s->monitor_events);
	o->races = ld(s->races);
	o->monitor_failures = ld(s->monitor_failures);
	o->monitor_fallbacks = ld(s->monitor_fallbacks);
	for (unsigned i = 0; i < HMEMREG_INVAL_MAX; i++)
		o->invalidations[i] = ld(s->invalidations[i]);
	for (unsigned i = 0; i < HMEMREG_UNCACHED_MAX; i++)
		o->uncached_by[i] = ld(s->uncached_by[i]);
	std::memcpy(o->monitor, s->monitor, sizeof(o->monitor));
	std::memcpy(o->registrar, s->registrar, sizeof(o->registrar));
	o->monitor[sizeof(o->monitor) - 1] = 0;
	o->registrar[sizeof(o->registrar) - 1] = 0;
}

extern "C" int hmemreg_stats_block_check(const struct hmemreg_stats_block *b, size_t len)
{
	if (!b || len < offsetof(hmemreg_stats_block, caches))
		return -HMEMREG_EINVAL;
	if (b->magic != HMEMREG_STATS_MAGIC || b->version < HMEMREG_STATS_VERSION_MIN ||
	    b->version > HMEMREG_STATS_VERSION)
		return -HMEMREG_EABI;
	// Versions 1 and 2 end where the export rows begin.
	const size_t need = b->version >= HMEMREG_STATS_VERSION_EXPORTS ? sizeof(hmemreg_stats_block)
									 : HMEMREG_STATS_BLOCK_SIZE_V2;
	if (b->block_size < need || len < need)
		return -HMEMREG_EABI;
	char boot[40];
	hmemreg::mr::read_boot_id(boot, sizeof(boot));
	if (std::strncmp(boot, b->boot_id, sizeof(boot)) != 0)
		return -HMEMREG_ESTALE;
	if (b->pid <= 0 || (::kill(b->pid, 0) != 0 && errno == ESRCH))
		return -HMEMREG_ESTALE;
	uint64_t st = hmemreg::mr::process_start_time(b->pid);
	if (st == 0 || st != b->start_time)
		return -HMEMREG_ESTALE;
	return 0;
}
