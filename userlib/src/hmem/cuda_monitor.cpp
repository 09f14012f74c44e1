// SPDX-License-Identifier: MIT
#include "hmem/cuda_monitor.hpp"

#include <memory>

#include "hmem/cuda_memory.hpp"
#include "mrcache/cache.hpp"

namespace hmemreg::cuda {

int BufferIdMonitor::subscribe(mr::Entry &e)
{
	uint64_t id = buffer_id(reinterpret_cast<const void *>(e.range.start));
	if (!id)
		return -HMEMREG_ENOTSUP;
	e.watch_gen = id;
	e.validate = 1;
	return 0;
}

bool BufferIdMonitor::valid(const mr::Entry &e)
{
	return buffer_id(reinterpret_cast<const void *>(e.range.start)) == e.watch_gen;
}

void attach_device_monitors(mr::Cache &cache)
{
	if (available())
		cache.set_device_monitor(mr::Iface::cuda, std::make_shared<BufferIdMonitor>());
}

} // namespace hmemreg::cuda
