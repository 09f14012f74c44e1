// SPDX-License-Identifier: MIT
#include "hmem/cuda_monitor.hpp"

#include <memory>

#include "hmem/cuda_memory.hpp"

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

namespace {

class CudaKind final : public mr::MemoryKind {
public:
	mr::Iface iface() const override { return mr::Iface::cuda; }
	const char *name() const override { return "cuda"; }
	std::shared_ptr<mr::Monitor> monitor() const override
	{
		return available() ? std::make_shared<BufferIdMonitor>() : nullptr;
	}
	bool extent(const mr::Request &req, mr::Range &out) const override
	{
		PointerInfo info;
		if (classify(req.addr, req.len, info) != 0 || info.kind != MemKind::device)
			return false;
		out = mr::Range{info.base, info.base + info.size};
		return true;
	}
};

} // namespace

const mr::MemoryKind &memory_kind()
{
	static const CudaKind kind;
	return kind;
}

} // namespace hmemreg::cuda
