// SPDX-License-Identifier: MIT
#include <cstdio>
#include <mutex>

#include "settings/settings.hpp"
#include "hmemreg/hmemreg.h"
#include "hmem/cuda_monitor.hpp"
#include "export/export_table.hpp"
#include "mrcache/kmod_monitor.hpp"
#include "mrcache/monitor_factory.hpp"
#include "mrcache/uffd_monitor.hpp"

namespace hmemreg::mr {

int make_monitor(hmemreg_monitor kind, std::shared_ptr<Monitor> &out)
{
	switch (kind) {
	case HMEMREG_MONITOR_NONE:
		out = std::make_shared<NoneMonitor>();
		return 0;
	case HMEMREG_MONITOR_KMOD:
		return KmodMonitor::open(out);
	case HMEMREG_MONITOR_UFFD:
		return UffdMonitor::instance(out);
	case HMEMREG_MONITOR_AUTO: {
		int krc = KmodMonitor::open(out);
		if (krc == 0)
			return 0;
		int urc = UffdMonitor::instance(out);
		if (urc == 0)
			return 0;
		static std::once_flag once;
		std::call_once(once, [&] {
			log::write(HMEMREG_LOG_WARN, "cache",
				   "no memory monitor: hmemreg.ko: %s; userfaultfd: %s. "
				   "Registrations will not be cached (set HMEMREG_MR_CACHE_MONITOR=none "
				   "to cache and invalidate explicitly).",
				   hmemreg_strerror(krc), UffdMonitor::unavailable_reason());
		});
		out = std::make_shared<UnavailableMonitor>();
		return 0;
	}
	default:
		return -HMEMREG_EINVAL;
	}
}

namespace {

// Every memory kind besides host memory, one line each: a kind plugs in
// here and nowhere else.
const MemoryKind *const kKinds[] = {
	&cuda::memory_kind(),
	&export_memory_kind(),
};

struct KindTable {
	const MemoryKind *by_iface[HMEMREG_IFACE_MAX] = {};
	KindTable()
	{
		for (const MemoryKind *k : kKinds) {
			auto i = static_cast<uint32_t>(k->iface());
			if (i < HMEMREG_IFACE_MAX && k->iface() != Iface::host)
				by_iface[i] = k;
		}
	}
};

} // namespace

const MemoryKind *memory_kind(Iface iface)
{
	static const KindTable table;
	auto i = static_cast<uint32_t>(iface);
	return i < HMEMREG_IFACE_MAX ? table.by_iface[i] : nullptr;
}

} // namespace hmemreg::mr
