// SPDX-License-Identifier: MIT
#include <cerrno>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/hmemreg.h>

#include "hmemreg/hmemreg.h"
#include "kmod_device.hpp"
#include "mrcache/kmod_monitor.hpp"

namespace hmemreg::mr {

Cause event_cause(uint32_t reason)
{
	switch (reason) {
	case HMEMREG_EV_UNMAP:
		return Cause::unmap;
	case HMEMREG_EV_CLEAR:
		return Cause::clear;
	default:
		return Cause::other;
	}
}

int KmodMonitor::open(std::shared_ptr<Monitor> &out)
{
	KmodDevice dev;
	int rc = KmodDevice::open(dev);
	if (rc)
		return rc;
	hmemreg_kmod_info info{};
	rc = dev.query(info);
	if (rc)
		return rc;
	if (!(info.caps & HMEMREG_CAP_WATCH))
		return -HMEMREG_ENOTSUP;
	hmemreg_watch_info wi{};
	wi.size = sizeof(wi);
	if (::ioctl(dev.fd(), HMEMREG_IOC_WATCH_INFO, &wi) != 0)
		return -HMEMREG_ESYS;
	if (wi.event_size != sizeof(hmemreg_event) || wi.gen_offset < sizeof(hmemreg_gen_page) ||
	    wi.gen_offset + 8ULL * wi.max_watches > wi.map_size)
		return -HMEMREG_EABI;
	void *p = ::mmap(nullptr, wi.map_size, PROT_READ, MAP_SHARED, dev.fd(), 0);
	if (p == MAP_FAILED)
		return -HMEMREG_ESYS;
	auto *page = static_cast<const hmemreg_gen_page *>(p);
	if (page->magic != HMEMREG_GEN_MAGIC || page->version != HMEMREG_GEN_VERSION) {
		::munmap(p, wi.map_size);
		return -HMEMREG_EABI;
	}
	int fd = ::fcntl(dev.fd(), F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		::munmap(p, wi.map_size);
		return -HMEMREG_ESYS;
	}
	::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
	auto m = std::make_shared<KmodMonitor>();
	m->fd_ = UniqueFd(fd);
	m->map_ = p;
	m->map_size_ = wi.map_size;
	m->max_watches_ = wi.max_watches;
	// Kernel-written words, read with single loads (see the uapi header).
	m->gen_ = reinterpret_cast<const std::atomic<uint64_t> *>(static_cast<const char *>(p) + wi.gen_offset);
	m->pending_ = reinterpret_cast<const std::atomic<uint64_t> *>(&page->events_pending);
	out = m;
	return 0;
}

KmodMonitor::~KmodMonitor()
{
	if (map_)
		::munmap(map_, map_size_);
}

int KmodMonitor::attach(MonitorSink &c)
{
	MonitorSink *none = nullptr;
	return cache_.compare_exchange_strong(none, &c) ? 0 : -HMEMREG_EBUSY; // one cache per fd
}

void KmodMonitor::detach(MonitorSink &) noexcept
{
	std::lock_guard g(drain_mu_);
	cache_.store(nullptr);
}

int KmodMonitor::subscribe(Entry &e)
{
	if (e.iface != Iface::host)
		return -HMEMREG_ENOTSUP;
	hmemreg_watch_arm a{};
	a.size = sizeof(a);
	a.addr = e.range.start;
	a.len = e.range.size();
	a.cookie = e.serial;
	if (::ioctl(fd_.get(), HMEMREG_IOC_WATCH_ARM, &a) != 0)
		return errno == ENOSPC ? -HMEMREG_ENOMEM : -HMEMREG_ENOTSUP;
	if (a.slot >= max_watches_) { // cannot happen with a sane module
		hmemreg_watch_disarm d{sizeof(d), a.slot, a.gen};
		::ioctl(fd_.get(), HMEMREG_IOC_WATCH_DISARM, &d);
		return -HMEMREG_EABI;
	}
	e.watch_slot = a.slot;
	e.watch_gen = a.gen;
	e.gen_word = &gen_[a.slot];
	e.gen = a.gen;
	return 0;
}

void KmodMonitor::unsubscribe(Entry &e) noexcept
{
	// A watch that fired is already gone (ENOENT): nothing to do.
	if (gen_[e.watch_slot].load(std::memory_order_acquire) != e.watch_gen)
		return;
	hmemreg_watch_disarm d{};
	d.size = sizeof(d);
	d.slot = e.watch_slot;
	d.gen = e.watch_gen;
	::ioctl(fd_.get(), HMEMREG_IOC_WATCH_DISARM, &d);
}

void KmodMonitor::sync(MonitorSink &c)
{
	// Validity comes from the generation words; draining only releases
	// dead entries sooner, so a thread that finds another draining goes on.
	std::unique_lock g(drain_mu_, std::try_to_lock);
	if (!g.owns_lock() || cache_.load() != &c)
		return;
	hmemreg_event ev[32];
	for (;;) {
		ssize_t n = ::read(fd_.get(), ev, sizeof(ev));
		if (n < 0 && errno == EOVERFLOW) {
			hmemreg_events_ack ack{};
			ack.size = sizeof(ack);
			::ioctl(fd_.get(), HMEMREG_IOC_EVENTS_ACK, &ack);
			c.count_events(ack.dropped + ack.discarded);
			c.revalidate(Cause::overflow);
			continue;
		}
		if (n <= 0)
			break;
		size_t k = static_cast<size_t>(n) / sizeof(hmemreg_event);
		c.count_events(k);
		for (size_t i = 0; i < k; i++)
			c.notify_entry(Iface::host, 0, ev[i].addr, ev[i].cookie, event_cause(ev[i].reason));
	}
}

} // namespace hmemreg::mr
