// SPDX-License-Identifier: MIT
#include "export/export_table.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <memory>
#include <mutex>
#include <poll.h>
#include <set>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <linux/hmemreg.h>

#include "hmemreg/export.h"
#include "hmemreg/hmemreg.h"
#include "kmod_device.hpp"
#include "mrcache/cache.hpp"
#include "mrcache/kmod_monitor.hpp"
#include "mrcache/monitor.hpp"
#include "unique_fd.hpp"

// The C handle. Immutable after creation but for the fields the table
// changes under its mutex when the export is freed. A freed handle's memory
// is kept (retired_), so that a get with it reads `live` false instead of
// freed memory: the hit path checks it without the table's lock.
struct hmemreg_export_handle {
	std::atomic<bool> live{false}; // set once in the table, cleared when freed
	uint64_t id = 0;     // ledger export id
	uint64_t cookie = 0; // ours, echoed by the module's events
	bool devmem = false;
	hmemreg::UniqueFd fd; // the DMA-BUF
	void *addr = nullptr;
	size_t len = 0;
	void *map = nullptr; // DEVMEM: our CPU mapping of the DMA-BUF
	uint64_t handle = 0; // DEVMEM handle
	uint32_t watch_slot = HMEMREG_WATCH_NO_SLOT;
	uint64_t watch_gen = 0;
	uint32_t word = 0; // DEVMEM: our generation word's index
	const std::atomic<uint64_t> *gen_word = nullptr;
	uint64_t gen = 0;
};

namespace hmemreg::mr {

namespace {

thread_local std::string t_error;

int fail(int code, const std::string &why)
{
	t_error = why;
	return -code;
}

// Entries of an export check its generation word on every hit.
class ExportMonitor final : public Monitor {
public:
	hmemreg_monitor kind() const override { return HMEMREG_MONITOR_KMOD; }
	const char *name() const override { return "hmemreg-export"; }
	// A cache joins the list the table drops an export's entries from.
	int attach(MonitorSink &sink) override;
	void detach(MonitorSink &sink) noexcept override;
	int subscribe(Entry &e) override;
	void unsubscribe(Entry &e) noexcept override;
};

class ExportTable {
public:
	static ExportTable &get()
	{
		static ExportTable *t = new ExportTable(); // never destroyed: words stay mapped
		return *t;
	}

	int devmem(size_t len, hmemreg_export_t **out);
	int host(void *addr, size_t len, hmemreg_export_t **out);
	int free(hmemreg_export_t *x);
	int request(const hmemreg_export_t *x, uint64_t offset, size_t len, Request &out, std::string &why);
	const hmemreg_export_t *of_fd(int fd, std::string &why);
	int subscribe(Entry &e);
	int check(const hmemreg_export_t *x);

	std::shared_ptr<Monitor> monitor() const { return monitor_; }
	void attach(MonitorSink &c)
	{
		std::lock_guard g(cb_mu_);
		caches_.push_back(&c);
	}
	void detach(MonitorSink &c) noexcept
	{
		std::lock_guard g(cb_mu_);
		caches_.erase(std::remove(caches_.begin(), caches_.end(), &c), caches_.end());
	}

private:
	static constexpr uint32_t kWords = 4096;

	ExportTable() : monitor_(std::make_shared<ExportMonitor>()) {}
	int open_locked();
	int add_locked(std::unique_ptr<hmemreg_export_t> x, hmemreg_export_t **out);
	uint64_t drop_everywhere(uint64_t id, Cause cause);
	void event_loop();

	std::mutex mu_; // everything below but the callback list
	KmodDevice dev_;
	bool open_ = false;
	const std::atomic<uint64_t> *kgen_ = nullptr; // the fd's generation page (watches)
	uint32_t max_watches_ = 0;
	std::set<const hmemreg_export_t *> live_;
	std::map<uint64_t, hmemreg_export_t *> by_id_, by_cookie_;
	std::atomic<uint64_t> words_[kWords] = {}; // DEVMEM exports' generation words
	std::vector<uint32_t> free_words_;
	std::vector<std::unique_ptr<hmemreg_export_t>> retired_; // freed handles (see the struct)
	uint32_t next_word_ = 0;
	uint64_t next_gen_ = 1, next_cookie_ = 1;
	bool events_ = false;
	std::shared_ptr<ExportMonitor> monitor_;

	std::mutex cb_mu_; // held while calling into caches; detach waits on it
	std::vector<MonitorSink *> caches_;
};

int ExportMonitor::attach(MonitorSink &sink)
{
	ExportTable::get().attach(sink);
	return 0;
}

void ExportMonitor::detach(MonitorSink &sink) noexcept
{
	ExportTable::get().detach(sink);
}

// A subscribed entry is a registration of the export held by e.cache
// until its unsubscribe (Cache::miss and release_entries pair them): the
// cache's row of the export in the stats block (mr_cache_stat --exports).
int ExportMonitor::subscribe(Entry &e)
{
	int rc = ExportTable::get().subscribe(e);
	if (rc == 0 && e.cache)
		e.cache->stats_slot().export_held(e.device, 1, static_cast<int64_t>(e.range.size()));
	return rc;
}

void ExportMonitor::unsubscribe(Entry &e) noexcept
{
	if (e.cache)
		e.cache->stats_slot().export_held(e.device, -1, -static_cast<int64_t>(e.range.size()));
}

int ExportTable::open_locked()
{
	if (open_)
		return 0;
	int rc = KmodDevice::open(dev_);
	if (rc == -HMEMREG_ENODEV)
		return fail(HMEMREG_ENODEV, "hmemreg.ko is not loaded (no " HMEMREG_DEVICE_PATH ")");
	if (rc == -HMEMREG_EACCES)
		return fail(HMEMREG_EACCES, "no permission to open " HMEMREG_DEVICE_PATH " (group hmemreg)");
	if (rc)
		return fail(-rc, std::string("opening " HMEMREG_DEVICE_PATH ": ") + std::strerror(errno));
	hmemreg_kmod_info info{};
	if ((rc = dev_.query(info)) != 0)
		return fail(-rc, "hmemreg.ko: version handshake failed");
	hmemreg_watch_info wi{};
	wi.size = sizeof(wi);
	if ((info.caps & HMEMREG_CAP_WATCH) && ::ioctl(dev_.fd(), HMEMREG_IOC_WATCH_INFO, &wi) == 0 &&
	    wi.gen_offset + 8ULL * wi.max_watches <= wi.map_size) {
		void *p = ::mmap(nullptr, wi.map_size, PROT_READ, MAP_SHARED, dev_.fd(), 0);
		if (p != MAP_FAILED) { // stays mapped: entries point into it
			kgen_ = reinterpret_cast<const std::atomic<uint64_t> *>(static_cast<char *>(p) + wi.gen_offset);
			max_watches_ = wi.max_watches;
		}
	}
	::fcntl(dev_.fd(), F_SETFL, ::fcntl(dev_.fd(), F_GETFL) | O_NONBLOCK);
	open_ = true;
	return 0;
}

int ExportTable::add_locked(std::unique_ptr<hmemreg_export_t> x, hmemreg_export_t **out)
{
	live_.insert(x.get());
	by_id_[x->id] = x.get();
	by_cookie_[x->cookie] = x.get();
	x->live.store(true, std::memory_order_release);
	*out = x.release();
	return 0;
}

int ExportTable::devmem(size_t len, hmemreg_export_t **out)
{
	const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
	if (!out)
		return fail(HMEMREG_EINVAL, "hmemreg_export_devmem: out is NULL");
	if (len == 0 || len % page)
		return fail(HMEMREG_EINVAL, "hmemreg_export_devmem: length " + std::to_string(len) +
						    " is not a positive multiple of the page size");
	std::lock_guard g(mu_);
	if (int rc = open_locked())
		return rc;
	hmemreg_devmem_alloc a{};
	a.size = sizeof(a);
	a.len = len;
	if (::ioctl(dev_.fd(), HMEMREG_IOC_DEVMEM_ALLOC, &a) != 0) {
		int e = errno;
		if (e == EOPNOTSUPP)
			return fail(HMEMREG_ENOTSUP, "hmemreg.ko has no device memory pool (module parameter devmem_mb=0)");
		if (e == ENOSPC || e == ENOMEM)
			return fail(HMEMREG_ENOMEM, "hmemreg.ko's device memory pool has no room for " +
							    std::to_string(len) + " bytes");
		return fail(HMEMREG_ESYS, std::string("HMEMREG_IOC_DEVMEM_ALLOC: ") + std::strerror(e));
	}
	auto free_handle = [&] {
		hmemreg_devmem_free f{sizeof(f), 0, a.handle};
		::ioctl(dev_.fd(), HMEMREG_IOC_DEVMEM_FREE, &f);
	};
	if (!free_words_.size() && next_word_ >= kWords) {
		free_handle();
		return fail(HMEMREG_ENOMEM, "too many live exports in this process (" + std::to_string(kWords) + ")");
	}
	auto x = std::make_unique<hmemreg_export_t>();
	x->cookie = next_cookie_++;
	struct hmemreg_export arg{};
	arg.size = sizeof(arg);
	arg.provider = HMEMREG_PROVIDER_DEVMEM;
	arg.flags = HMEMREG_EXPORT_WRITE;
	arg.len = len;
	arg.handle = a.handle;
	arg.cookie = x->cookie;
	if (::ioctl(dev_.fd(), HMEMREG_IOC_EXPORT, &arg) != 0) {
		int e = errno;
		free_handle();
		return fail(e == ENOSPC ? HMEMREG_ENOMEM : HMEMREG_ESYS,
			    std::string("HMEMREG_IOC_EXPORT (DEVMEM): ") + std::strerror(e));
	}
	x->fd = UniqueFd(arg.fd);
	void *p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, arg.fd, 0);
	if (p == MAP_FAILED) {
		int e = errno;
		x->fd.reset();
		free_handle();
		return fail(HMEMREG_ESYS, std::string("mapping the device memory's DMA-BUF: ") + std::strerror(e));
	}
	x->id = arg.export_id;
	x->devmem = true;
	x->addr = x->map = p;
	x->len = len;
	x->handle = a.handle;
	if (!free_words_.empty()) {
		x->word = free_words_.back();
		free_words_.pop_back();
	} else {
		x->word = next_word_++;
	}
	x->gen = next_gen_++;
	words_[x->word].store(x->gen, std::memory_order_release);
	x->gen_word = &words_[x->word];
	return add_locked(std::move(x), out);
}

int ExportTable::host(void *addr, size_t len, hmemreg_export_t **out)
{
	const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
	const auto a = reinterpret_cast<uintptr_t>(addr);
	if (!out || !addr)
		return fail(HMEMREG_EINVAL, "hmemreg_export_host: addr or out is NULL");
	if (len == 0 || len % page || a % page || a + len < a)
		return fail(HMEMREG_EINVAL, "hmemreg_export_host: address and length must be page aligned, length > 0");
	std::unique_lock g(mu_);
	if (int rc = open_locked())
		return rc;
	if (!kgen_)
		return fail(HMEMREG_ENOTSUP, "hmemreg.ko has no watches (cannot tell when the range is unmapped)");
	auto x = std::make_unique<hmemreg_export_t>();
	x->cookie = next_cookie_++;
	struct hmemreg_export arg{};
	arg.size = sizeof(arg);
	arg.provider = HMEMREG_PROVIDER_HOST;
	arg.flags = HMEMREG_EXPORT_WRITE | HMEMREG_EXPORT_WATCH;
	arg.addr = a;
	arg.len = len;
	arg.cookie = x->cookie;
	if (::ioctl(dev_.fd(), HMEMREG_IOC_EXPORT, &arg) != 0) {
		int e = errno;
		switch (e) {
		case EFAULT:
			return fail(HMEMREG_EINVAL, "hmemreg_export_host: the range is not fully mapped writable "
						    "(or not pinnable: VM_IO/VM_PFNMAP)");
		case ENOMEM:
			return fail(HMEMREG_ENOMEM, "hmemreg_export_host: pinning " + std::to_string(len) +
							    " bytes failed (RLIMIT_MEMLOCK?)");
		case ENOSPC:
			return fail(HMEMREG_ENOMEM, "hmemreg_export_host: the module's export or watch limit is reached");
		case EAGAIN:
			return fail(HMEMREG_EAGAIN, "hmemreg_export_host: the range changed while it was pinned");
		case EXDEV:
			return fail(HMEMREG_EINVAL, "hmemreg_export_host: exports cannot be made after fork()");
		default:
			return fail(HMEMREG_ESYS, std::string("HMEMREG_IOC_EXPORT (HOST): ") + std::strerror(e));
		}
	}
	x->fd = UniqueFd(arg.fd);
	if (arg.watch_slot >= max_watches_) {
		x->fd.reset();
		return fail(HMEMREG_EABI, "hmemreg.ko returned a watch slot out of range");
	}
	x->id = arg.export_id;
	x->addr = addr;
	x->len = len;
	x->watch_slot = arg.watch_slot;
	x->watch_gen = arg.watch_gen;
	x->gen_word = &kgen_[arg.watch_slot];
	x->gen = arg.watch_gen;
	bool start = !events_;
	events_ = true;
	int rc = add_locked(std::move(x), out);
	g.unlock();
	if (start) // waits on the event ring for unmapped host exports
		std::thread([this] { event_loop(); }).detach();
	return rc;
}

uint64_t ExportTable::drop_everywhere(uint64_t id, Cause cause)
{
	std::lock_guard g(cb_mu_);
	uint64_t held = 0;
	for (MonitorSink *c : caches_)
		held += c->drop_device(Iface::kmod_export, id, cause);
	return held;
}

int ExportTable::free(hmemreg_export_t *x)
{
	if (!x)
		return 0;
	{
		std::lock_guard g(mu_);
		if (!live_.count(x))
			return fail(HMEMREG_EINVAL, "hmemreg_export_free: not a live export");
	}
	// Deregistered first, so the importer unpins before the memory goes.
	if (uint64_t held = drop_everywhere(x->id, Cause::explicit_call))
		return fail(HMEMREG_EBUSY, "export " + std::to_string(x->id) + ": " + std::to_string(held) +
						   " registration(s) still held (a region, transfer or unput mr)");
	{
		std::lock_guard g(mu_);
		live_.erase(x);
		x->live.store(false, std::memory_order_release);
		by_id_.erase(x->id);
		by_cookie_.erase(x->cookie);
		if (x->devmem) {
			words_[x->word].store(0, std::memory_order_release);
		} else {
			// Zeroes the kernel's word; ENOENT if it fired already.
			hmemreg_watch_disarm d{sizeof(d), x->watch_slot, x->watch_gen};
			::ioctl(dev_.fd(), HMEMREG_IOC_WATCH_DISARM, &d);
		}
	}
	// A get that raced with the free registered after the first drop:
	// its entry fails every hit now; drop it too.
	drop_everywhere(x->id, Cause::explicit_call);
	std::unique_ptr<hmemreg_export_t> owned(x);
	int rc = 0;
	if (x->devmem) {
		::munmap(x->map, x->len);
		x->fd.reset();
		hmemreg_devmem_free f{sizeof(f), 0, x->handle};
		std::lock_guard g(mu_);
		if (::ioctl(dev_.fd(), HMEMREG_IOC_DEVMEM_FREE, &f) != 0)
			rc = fail(errno == EBUSY ? HMEMREG_EBUSY : HMEMREG_ESYS,
				  "export " + std::to_string(x->id) + ": HMEMREG_IOC_DEVMEM_FREE: " + std::strerror(errno) +
					  " (an importer outside this library still pins it; freed with this process)");
		free_words_.push_back(x->word);
	} else {
		x->fd.reset();
	}
	std::lock_guard g(mu_);
	retired_.push_back(std::move(owned));
	return rc;
}

int ExportTable::check(const hmemreg_export_t *x)
{
	if (!x)
		return fail(HMEMREG_EINVAL, "export is NULL");
	std::lock_guard g(mu_);
	if (!live_.count(x))
		return fail(HMEMREG_ENOENT, "not a live export (freed?)");
	if (x->gen_word->load(std::memory_order_acquire) != x->gen)
		return fail(HMEMREG_ESTALE, "export " + std::to_string(x->id) +
						    ": its host range was unmapped or its pages zapped");
	return 0;
}

int ExportTable::request(const hmemreg_export_t *x, uint64_t offset, size_t len, Request &out, std::string &why)
{
	if (int rc = check(x)) {
		why = t_error;
		return rc;
	}
	if (len == 0 || offset > x->len || len > x->len - offset) {
		why = "[" + std::to_string(offset) + ", +" + std::to_string(len) + ") is not inside export " +
		      std::to_string(x->id) + " (" + std::to_string(x->len) + " bytes)";
		return -HMEMREG_EINVAL;
	}
	out.addr = static_cast<const char *>(x->addr) + offset;
	out.len = len;
	out.iface = Iface::kmod_export;
	out.device = x->id;
	out.dmabuf_fd = x->fd.get();
	out.dmabuf_offset = offset;
	return 0;
}

// The DMA-BUF behind a caller's fd is one of ours when it is the same
// open file as an export's fd (a dup of it, or the fd itself): every
// DMA-BUF is a file of its own in the kernel's dma-buf filesystem.
const hmemreg_export_t *ExportTable::of_fd(int fd, std::string &why)
{
	struct stat want{};
	if (fd < 0 || ::fstat(fd, &want) != 0) {
		why = "fd " + std::to_string(fd) + " is not an open file";
		return nullptr;
	}
	std::lock_guard g(mu_);
	for (const auto &[id, x] : by_id_) {
		struct stat have{};
		if (x->live.load(std::memory_order_acquire) && ::fstat(x->fd.get(), &have) == 0 &&
		    have.st_dev == want.st_dev && have.st_ino == want.st_ino)
			return x;
	}
	why = "fd " + std::to_string(fd) + " is no hmemreg.ko export of this process";
	return nullptr;
}

int ExportTable::subscribe(Entry &e)
{
	std::lock_guard g(mu_);
	auto it = by_id_.find(e.device);
	if (it == by_id_.end())
		return -HMEMREG_ENOENT;
	e.gen_word = it->second->gen_word;
	e.gen = it->second->gen;
	return e.gen_word->load(std::memory_order_acquire) == e.gen ? 0 : -HMEMREG_ESTALE;
}

// The module tells us a host export's range went away: drop its entries
// (and so the importers' pins) now, not at the next hit.
void ExportTable::event_loop()
{
	const int fd = dev_.fd();
	hmemreg_event ev[32];
	for (;;) {
		pollfd p{fd, POLLIN | POLLPRI, 0};
		if (::poll(&p, 1, -1) < 0 && errno != EINTR)
			return;
		ssize_t n = ::read(fd, ev, sizeof(ev));
		std::vector<std::pair<uint64_t, Cause>> drop;
		if (n < 0 && errno == EOVERFLOW) {
			hmemreg_events_ack ack{};
			ack.size = sizeof(ack);
			::ioctl(fd, HMEMREG_IOC_EVENTS_ACK, &ack);
			std::lock_guard g(mu_); // lost events: the words are exact
			for (auto &kv : by_id_)
				if (kv.second->gen_word->load(std::memory_order_acquire) != kv.second->gen)
					drop.emplace_back(kv.first, Cause::overflow);
		} else if (n > 0) {
			std::lock_guard g(mu_);
			for (size_t i = 0; i < static_cast<size_t>(n) / sizeof(hmemreg_event); i++) {
				if (!(ev[i].flags & HMEMREG_EVF_EXPORT))
					continue;
				auto it = by_cookie_.find(ev[i].cookie);
				if (it != by_cookie_.end())
					drop.emplace_back(it->second->id, event_cause(ev[i].reason));
			}
		}
		for (auto &[id, cause] : drop)
			drop_everywhere(id, cause);
	}
}

} // namespace

namespace {

// The module's exports as a row of the memory kind table: one monitor for
// every cache (the table is the process's); a registration covers the
// pages the request touches (the registrar's extent, not decided here).
class ExportKind final : public MemoryKind {
public:
	Iface iface() const override { return Iface::kmod_export; }
	const char *name() const override { return "hmemreg-export"; }
	std::shared_ptr<Monitor> monitor() const override { return ExportTable::get().monitor(); }
};

} // namespace

const MemoryKind &export_memory_kind()
{
	static const ExportKind kind;
	return kind;
}

bool export_hit_request(const void *exp, uint64_t offset, size_t len, Request &out) noexcept
{
	const auto *x = static_cast<const hmemreg_export_t *>(exp);
	if (!x || !x->live.load(std::memory_order_acquire) ||
	    x->gen_word->load(std::memory_order_acquire) != x->gen || len == 0 || offset > x->len ||
	    len > x->len - offset)
		return false;
	out.addr = static_cast<const char *>(x->addr) + offset;
	out.len = len;
	out.iface = Iface::kmod_export;
	out.device = x->id;
	return true;
}

int export_request(const void *exp, uint64_t offset, size_t len, Request &out, std::string *why)
{
	std::string w;
	int rc = ExportTable::get().request(static_cast<const hmemreg_export_t *>(exp), offset, len, out, w);
	if (rc && why)
		*why = w;
	return rc;
}

int export_request_of_fd(int fd, uint64_t offset, size_t len, Request &out, std::string *why)
{
	std::string w;
	const hmemreg_export_t *x = ExportTable::get().of_fd(fd, w);
	int rc = x ? ExportTable::get().request(x, offset, len, out, w) : -HMEMREG_ENOENT;
	if (rc && why)
		*why = w;
	return rc;
}

void set_export_error(const std::string &why)
{
	t_error = why;
}

} // namespace hmemreg::mr

using hmemreg::mr::ExportTable;

extern "C" {

int hmemreg_export_devmem(size_t len, hmemreg_export_t **out)
{
	return ExportTable::get().devmem(len, out);
}

int hmemreg_export_host(void *addr, size_t len, hmemreg_export_t **out)
{
	return ExportTable::get().host(addr, len, out);
}

int hmemreg_export_free(hmemreg_export_t *exp)
{
	return ExportTable::get().free(exp);
}

void *hmemreg_export_addr(const hmemreg_export_t *exp)
{
	return exp ? exp->addr : nullptr;
}

size_t hmemreg_export_len(const hmemreg_export_t *exp)
{
	return exp ? exp->len : 0;
}

int hmemreg_export_fd(const hmemreg_export_t *exp)
{
	return exp ? exp->fd.get() : -1;
}

uint64_t hmemreg_export_id(const hmemreg_export_t *exp)
{
	return exp ? exp->id : 0;
}

int hmemreg_export_is_devmem(const hmemreg_export_t *exp)
{
	return exp && exp->devmem;
}

int hmemreg_export_check(const hmemreg_export_t *exp)
{
	return ExportTable::get().check(exp);
}

const char *hmemreg_export_last_error(void)
{
	return hmemreg::mr::t_error.c_str();
}

} // extern "C"
