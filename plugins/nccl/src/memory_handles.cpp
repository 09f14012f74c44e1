// SPDX-License-Identifier: MIT
// regMr, regMrDmaBuf and deregMr: the memory handles NCCL passes with each
// buffer (host memory through Registrations, device memory to the engine).
#include "plugin.hpp"

#include "log.hpp"

namespace hmemreg::nccl {

ncclResult_t Plugin::reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	if (!mhandle)
		return ncclInvalidArgument;
	*mhandle = nullptr;
	{
		std::lock_guard l(mu_);
		if (!find_locked<SendComm>(comm, Comm::Kind::Send) && !find_locked<RecvComm>(comm, Comm::Kind::Recv)) {
			NWARN("regMr: %p is not a send or recv comm of this plugin", comm);
			return ncclInternalError;
		}
	}
	const bool device = type == NCCL_PTR_CUDA || type == NCCL_PTR_DMABUF;
	if (type != NCCL_PTR_HOST && !(device && (ptr_support_ & NCCL_PTR_CUDA))) {
		NWARN("regMr: memory type %d is not supported (ptrSupport is HOST only: %s)", type, host_only_why_.c_str());
		return ncclInvalidUsage;
	}
	if (!data && size) {
		NWARN("regMr: null buffer of %zu bytes", size);
		return ncclInvalidArgument;
	}
	auto h = std::make_unique<MemHandle>();
	h->addr = reinterpret_cast<uintptr_t>(data);
	h->size = size;
	if (size) {
		try {
			// Device memory: exactly the buffer (rounding could leave its
			// allocation), registered each time; the engine's cache makes a
			// repeat a hit after checking the allocation's buffer ID, which
			// the page-range sharing of Registrations would skip.
			h->region = device ? engine_->register_region(data, size) : regs_->get(data, size);
			h->descriptor = engine_->descriptor(*h->region);
		} catch (const Error &e) {
			NWARN("regMr of %p (%zu bytes)%s: %s", data, size, device ? " as CUDA memory" : "", e.what());
			return e.code() == HMEMREG_EINVAL && device ? ncclInvalidArgument : ncclSystemError;
		}
		if (device) {
			// What the engine found the memory to be (one driver query).
			hmemreg_region_info info{};
			try {
				info = h->region->info();
			} catch (const Error &e) {
				NWARN("regMr of %p (%zu bytes): %s", data, size, e.what());
				return ncclSystemError;
			}
			if (info.iface != HMEMREG_IFACE_CUDA) {
				NWARN("regMr: %p (%zu bytes) was passed as CUDA memory but is host memory", data, size);
				return ncclInvalidArgument;
			}
			h->cuda_device = info.device;
			device_regs_++;
		}
	}
	std::lock_guard l(mu_);
	*mhandle = h.get();
	mhandles_[h.get()] = std::move(h);
	return ncclSuccess;
}

ncclResult_t Plugin::reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
				   void **mhandle)
{
	if (type == NCCL_PTR_HOST && fd < 0) // no DMA-BUF at all: plain host registration
		return reg_mr(comm, data, size, type, mhandle);
	if ((type == NCCL_PTR_CUDA || type == NCCL_PTR_DMABUF) && (ptr_support_ & NCCL_PTR_DMABUF)) {
		// NCCL's fd describes [data, data + size) of a CUDA allocation. The
		// engine registers that range as CUDA memory and, where the provider
		// takes FI_MR_DMABUF, through its own export of the whole allocation
		// (one export per cached registration, shared by every buffer in it);
		// NCCL closes its fd after this call, and nothing here keeps it.
		return reg_mr(comm, data, size, NCCL_PTR_CUDA, mhandle);
	}
	if (mhandle)
		*mhandle = nullptr;
	NWARN("regMrDmaBuf: DMA-BUF registration is not supported (fd %d, offset %llu, type %d): %s", fd,
	      static_cast<unsigned long long>(offset), type, host_only_why_.c_str());
	return ncclInvalidUsage;
}

ncclResult_t Plugin::dereg_mr(void *comm, void *mhandle)
{
	std::unique_ptr<MemHandle> h;
	{
		std::lock_guard l(mu_);
		auto it = mhandles_.find(mhandle);
		if (it == mhandles_.end()) {
			NWARN("deregMr: %p is not a memory handle of this plugin", mhandle);
			return ncclInternalError;
		}
		h = std::move(it->second);
		mhandles_.erase(it);
	}
	(void)comm; // registrations are global (regIsGlobal): any comm, even a closed one
	h.reset();  // outside the lock: may deregister
	return ncclSuccess;
}

// The memory handle of [data, data + size) for `call` (isend, irecv): none
// for 0 bytes; an error (logged) when the handle is not one of ours or the
// buffer lies outside its registration.
ncclResult_t Plugin::buffer_handle_locked(const char *call, const void *data, size_t size, void *mhandle,
					  MemHandle *&mh)
{
	mh = nullptr;
	if (!size)
		return ncclSuccess;
	auto it = mhandles_.find(mhandle);
	if (it == mhandles_.end()) {
		NWARN("%s: buffer %p (%zu bytes) has no valid memory handle (%p)", call, data, size, mhandle);
		return ncclInternalError;
	}
	const MemHandle &h = *it->second;
	const uintptr_t a = reinterpret_cast<uintptr_t>(data);
	if (a < h.addr || size > h.size || a - h.addr > h.size - size) {
		NWARN("%s: buffer %p (%zu bytes) is outside its registration [%p, +%zu)", call, data, size,
		      reinterpret_cast<void *>(h.addr), h.size);
		return ncclInternalError;
	}
	mh = it->second.get();
	return ncclSuccess;
}

} // namespace hmemreg::nccl
