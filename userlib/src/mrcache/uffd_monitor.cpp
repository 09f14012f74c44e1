// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hmemreg/hmemreg.h"
#include "mrcache/uffd_monitor.hpp"
#include "mrcache/vma_probe.hpp"
#include "settings/settings.hpp"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

namespace hmemreg::mr {

namespace {

std::mutex g_mu;
std::weak_ptr<UffdMonitor> g_instance;
pid_t g_instance_pid;
const char *g_reason = "not tried";
// The monitor this process runs, for the fork child handler, which must not
// take g_mu (a parent thread may have held it at fork()).
std::atomic<UffdMonitor *> g_live{nullptr};

// pthread_atfork child: the copy of the monitor's userfaultfd is closed at
// once. Kept open, it would keep the parent's registrations (whole
// mappings: its heap, its stacks) alive after the parent's monitor thread
// stopped and closed its own, and the parent's next munmap there would wait
// for ever for a reader. The child never uses it: its caches are forked
// (uncached) and a new cache there opens a monitor of its own.
void close_inherited_uffd() noexcept
{
	if (UffdMonitor *m = g_live.exchange(nullptr))
		m->close_in_fork_child();
}

int open_uffd()
{
	// User-mode-only handling is allowed unprivileged since 5.11 (we never
	// handle faults anyway); then the plain syscall; then /dev/userfaultfd.
	int fd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
	if (fd < 0 && errno == EINVAL)
		fd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
	if (fd < 0) {
		int dev = ::open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
		if (dev >= 0) {
#ifdef USERFAULTFD_IOC_NEW
			fd = ::ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
#endif
			::close(dev);
		}
	}
	if (fd < 0) {
		g_reason = errno == EPERM ? "not permitted (vm.unprivileged_userfaultfd=0 and no access to /dev/userfaultfd)"
					  : "userfaultfd() failed";
		return -1;
	}
	uffdio_api api{};
	api.api = UFFD_API;
	api.features = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_REMAP;
	if (::ioctl(fd, UFFDIO_API, &api) != 0) {
		g_reason = "kernel lacks userfaultfd unmap/remove/remap events";
		::close(fd);
		return -1;
	}
	return fd;
}

} // namespace

const char *UffdMonitor::unavailable_reason()
{
	return g_reason;
}

int UffdMonitor::instance(std::shared_ptr<Monitor> &out)
{
	std::lock_guard g(g_mu);
	auto cur = g_instance.lock();
	if (cur && g_instance_pid == ::getpid() && !cur->dead()) {
		out = cur;
		return 0;
	}
	// (A dead one released its userfaultfd: a new one can register.)
	static std::once_flag atfork;
	std::call_once(atfork, [] { pthread_atfork(nullptr, nullptr, close_inherited_uffd); });
	int fd = open_uffd();
	if (fd < 0)
		return -HMEMREG_ENOTSUP;
	int ev = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ev < 0) {
		::close(fd);
		return -HMEMREG_ESYS;
	}
	auto m = std::make_shared<UffdMonitor>(UniqueFd(fd), UniqueFd(ev));
	g_instance = m;
	g_instance_pid = ::getpid();
	out = m;
	return 0;
}

UffdMonitor::UffdMonitor(UniqueFd uffd, UniqueFd stop)
	: uffd_(std::move(uffd)), stop_(std::move(stop)), owner_(::getpid())
{
	pending_ = &busy_;
	thread_ = std::thread([this] { run(); });
	g_live.store(this);
}

UffdMonitor::~UffdMonitor()
{
	UffdMonitor *self = this;
	g_live.compare_exchange_strong(self, nullptr);
	release_backing_probe();
	if (::getpid() != owner_) {
		// A fork child's copy: the thread is the parent's and the eventfd
		// is shared with it; signalling would stop the parent's monitor.
		thread_.detach();
		return;
	}
	uint64_t one = 1;
	if (::write(stop_.get(), &one, sizeof(one)) < 0) {
		// eventfd write cannot fail short of a bug; the thread then never stops
	}
	if (thread_.joinable()) {
		if (thread_.get_id() == std::this_thread::get_id())
			thread_.detach();
		else
			thread_.join();
	}
}

int UffdMonitor::attach(MonitorSink &c)
{
	std::lock_guard g(cb_mu_);
	for (auto &slot : caches_) {
		if (!slot) {
			slot = &c;
			return 0;
		}
	}
	return -HMEMREG_ENOMEM; // more caches than kMaxCaches in one process
}

void UffdMonitor::detach(MonitorSink &c) noexcept
{
	std::lock_guard g(cb_mu_); // waits for a dispatch in progress
	for (auto &slot : caches_)
		if (slot == &c)
			slot = nullptr;
}

bool UffdMonitor::known_registered(uintptr_t s, uintptr_t e) const
{
	// Every load acquire: the closing load of wide_ver_ stays last (as
	// the memo's seqlock, memo.hpp).
	constexpr auto acq = std::memory_order_acquire;
	const uint64_t v = wide_ver_.load(acq);
	if ((v & 1) || unmap_gen_.load(acq) != wide_gen_.load(acq))
		return false;
	const unsigned n = wide_n_.load(acq);
	bool found = false;
	for (unsigned i = 0; i < n && !found; i++)
		found = wide_start_[i].load(acq) <= s && e <= wide_end_[i].load(acq);
	return found && wide_ver_.load(acq) == v;
}

// Caller holds reg_mu_. gen: unmap_gen_ when it took it; a different
// wide_gen_ empties the table first.
void UffdMonitor::remember_locked(uintptr_t s, uintptr_t e, uint64_t gen)
{
	constexpr auto rel = std::memory_order_release;
	const uint64_t v = wide_ver_.load(std::memory_order_relaxed);
	// Odd first; every store after it is a release, so a reader that
	// sees any of them sees the odd version at its closing load too.
	wide_ver_.store(v + 1, std::memory_order_relaxed);
	unsigned n = wide_n_.load(std::memory_order_relaxed);
	if (wide_gen_.load(std::memory_order_relaxed) != gen) {
		n = 0;
		wide_next_ = 0;
		wide_gen_.store(gen, rel);
	}
	if (e != s) {
		unsigned i = n < kWide ? n++ : wide_next_++ % kWide;
		wide_start_[i].store(s, rel);
		wide_end_[i].store(e, rel);
	}
	wide_n_.store(n, rel);
	wide_ver_.store(v + 2, rel);
}

namespace {

// The first time a mapping is armed range by range instead of whole: why.
void log_fallback_once(uintptr_t s, uintptr_t e, int err)
{
	static std::atomic<bool> said{false};
	if (said.exchange(true, std::memory_order_relaxed))
		return;
	log::write(HMEMREG_LOG_WARN, "cache",
		   "userfaultfd: mapping [%#lx, %#lx) %s%s; its cached ranges are registered one by one (each splits "
		   "the mapping; counted as monitor_fallbacks; said once)",
		   static_cast<unsigned long>(s), static_cast<unsigned long>(e),
		   err ? "could not be registered whole: " : "changed while it was being registered",
		   err ? std::strerror(err) : "");
}

} // namespace

int UffdMonitor::subscribe(Entry &e)
{
	// dead_ is read after the cache's notify_seq_: a miss that reads it
	// false began before fail() invalidated everything and sees that.
	if (e.iface != Iface::host || dead_.load(std::memory_order_acquire))
		return -HMEMREG_ENOTSUP;
	const uintptr_t s = e.range.start, end = e.range.end;
	if (known_registered(s, end))
		return 0; // registered and private anonymous, nothing replaced since
	std::lock_guard g(reg_mu_);
	const uint64_t gen = unmap_gen_.load(std::memory_order_acquire);
	if (gen != wide_gen_.load(std::memory_order_relaxed))
		remember_locked(0, 0, gen); // all forgotten
	else if (known_registered(s, end))
		return 0; // another thread registered it meanwhile
	// Registering an already registered range with the same uffd changes
	// nothing. Ranges are never unregistered (other entries may live in
	// the same mapping): the registration ends with the mapping.
	// 0 or the errno.
	auto register_range = [this](uintptr_t a, uintptr_t b) {
		uffdio_register r{};
		r.range.start = a;
		r.range.len = b - a;
		r.mode = UFFDIO_REGISTER_MODE_WP;
		return ::ioctl(uffd_.get(), UFFDIO_REGISTER, &r) == 0 ? 0 : errno;
	};
	// Learn the mappings under the range, register them whole, then look
	// again: the rule is register, then probe (a mapping replaced in
	// between was registered, so its unmap raced with this miss and the
	// cache does not keep the entry). The first probe only finds bounds;
	// memory it calls shared or file-backed, or a hole, is not cached
	// either way.
	MappingSpan span;
	switch (probe_backing(s, end, &span)) {
	case Backing::private_anon:
		break;
	case Backing::shared_or_file:
		return kUnwatchable;
	case Backing::unmapped:
		return -HMEMREG_ENOTSUP; // a hole: the registrar will say what is wrong
	}
	int whole_err = 0; // 0: the mapping changed in between
	if (span.start <= s && span.end >= end) {
		whole_err = register_range(span.start, span.end);
		if (!whole_err && probe_backing(span.start, span.end) == Backing::private_anon) {
			remember_locked(span.start, span.end, gen);
			return 0;
		}
	}
	// Changed under us, or refused whole: the range alone (splits the
	// mapping; not remembered, so the next miss here asks again).
	const bool registered = register_range(s, end) == 0;
	switch (probe_backing(s, end)) {
	case Backing::private_anon:
		if (!registered)
			return -HMEMREG_ENOTSUP;
		log_fallback_once(span.start, span.end, whole_err);
		return kWatchedAlone;
	case Backing::shared_or_file:
		return kUnwatchable;
	case Backing::unmapped:
		break;
	}
	return -HMEMREG_ENOTSUP;
}

void UffdMonitor::sync(MonitorSink &)
{
	unsigned spins = 0;
	while (busy_.load(std::memory_order_acquire)) {
		if (++spins > 16)
			sched_yield();
	}
}

void UffdMonitor::dispatch(uintptr_t start, uintptr_t end, int cause)
{
	for (MonitorSink *c : caches_) {
		if (c) {
			c->count_events(1);
			c->notify(Iface::host, start, end, static_cast<Cause>(cause));
		}
	}
}

// The thread cannot go on: every cache it serves drops what it covered and
// caches nothing more through it (subscribe refuses), then the userfaultfd
// goes (see the end of run()). Gets wait (busy_) until all that is done.
void UffdMonitor::fail(const char *call, int err) noexcept
{
	busy_.fetch_add(1, std::memory_order_seq_cst);
	dead_.store(true, std::memory_order_seq_cst);
	{
		std::lock_guard g(cb_mu_);
		for (MonitorSink *c : caches_)
			if (c)
				c->monitor_stopped(Iface::host);
	}
	// subscribe() may be using the descriptor's number right now: the
	// number stays taken (by a copy of the eventfd, which refuses the
	// ioctls) while the userfaultfd behind it is released, and with it
	// every registration. Closed with the monitor.
	if (::dup2(stop_.get(), uffd_.get()) < 0)
		uffd_.reset(); // cannot fail with both descriptors open
	busy_.fetch_sub(1, std::memory_order_release);
	// Only now: writing may allocate, and memory freed could be in a
	// mapping that was registered (its unmap would wait for this thread).
	log::write(HMEMREG_LOG_ERROR, "cache",
		   "userfaultfd monitor stopped: %s failed: %s. Its caches dropped every entry and cache nothing more "
		   "(registrations are made uncached; counted as monitor_failures)",
		   call, std::strerror(err));
}

void UffdMonitor::run()
{
	uffd_msg msgs[32];
	// poll() short of memory: tried again, for about a second at most
	// (unmappers in registered mappings wait meanwhile; gets do not).
	constexpr unsigned kRetries = 1000;
	unsigned retries = 0;
	const char *failed = nullptr;
	int err = 0;
	while (!failed) {
		pollfd p[2] = {{uffd_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
		if (::poll(p, 2, -1) < 0) {
			err = errno;
			if (err == EINTR)
				continue;
			if ((err == ENOMEM || err == EAGAIN) && ++retries <= kRetries) {
				const timespec ms{0, 1000000};
				::nanosleep(&ms, nullptr);
				continue;
			}
			failed = "poll";
			break;
		}
		retries = 0;
		if (p[1].revents)
			break;
		if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
			// (else poll would return at once for ever)
			failed = "poll";
			err = p[0].revents & POLLNVAL ? EBADF : EIO;
			break;
		}
		// Raise busy before read(): the unmapper is released by the read,
		// and must find busy set until its range is invalidated. (A count:
		// an interposed call may hold it too.)
		busy_.fetch_add(1, std::memory_order_seq_cst);
		for (;;) {
			ssize_t n = ::read(uffd_.get(), msgs, sizeof(msgs));
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				failed = "read";
				err = errno;
			}
			if (n <= 0)
				break;
			std::lock_guard g(cb_mu_);
			for (size_t i = 0; i < static_cast<size_t>(n) / sizeof(uffd_msg); i++) {
				const uffd_msg &m = msgs[i];
				if (m.event == UFFD_EVENT_UNMAP || m.event == UFFD_EVENT_REMAP)
					unmap_gen_.fetch_add(1, std::memory_order_release); // before busy_ drops
				switch (m.event) {
				case UFFD_EVENT_UNMAP:
					dispatch(m.arg.remove.start, m.arg.remove.end, HMEMREG_INVAL_UNMAP);
					break;
				case UFFD_EVENT_REMOVE:
					dispatch(m.arg.remove.start, m.arg.remove.end, HMEMREG_INVAL_CLEAR);
					break;
				case UFFD_EVENT_REMAP:
					dispatch(m.arg.remap.from, m.arg.remap.from + m.arg.remap.len, HMEMREG_INVAL_REMAP);
					break;
				default:
					break;
				}
			}
		}
		busy_.fetch_sub(1, std::memory_order_release);
	}
	// Close the userfaultfd before this thread ends: that unregisters every
	// range. Whole mappings are registered, so they may hold memory this
	// thread's own exit releases (its stack or TLS, an allocator's
	// per-thread cache, a sanitizer's); an event from there would wait
	// for this thread to read it, for ever. (Stopped by the destructor:
	// nobody subscribes any more.)
	if (failed)
		fail(failed, err);
	else
		uffd_.reset();
}

std::shared_ptr<UffdMonitor> UffdMonitor::running()
{
	std::lock_guard g(g_mu);
	auto cur = g_instance.lock();
	if (cur && g_instance_pid == ::getpid())
		return cur;
	return nullptr;
}

void UffdMonitor::replaced(uintptr_t start, uintptr_t end)
{
	unmap_gen_.fetch_add(1, std::memory_order_release); // what is there now is not registered
	std::lock_guard g(cb_mu_);
	dispatch(start, end, HMEMREG_INVAL_UNMAP);
}

} // namespace hmemreg::mr
