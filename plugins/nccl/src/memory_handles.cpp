// SPDX-License-Identifier: MIT
// regMr, regMrDmaBuf and deregMr: the memory handles NCCL passes with each
// buffer (host memory through Registrations, device memory and DMA-BUFs to
// the engine).
#include "plugin.hpp"

#include "log.hpp"

namespace hmemreg::nccl {

ncclResult_t Plugin::reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	return register_buffer("regMr", comm, data, size, type, -1, 0, mhandle);
}

ncclResult_t Plugin::reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
				   void **mhandle)
{
	if (fd >= 0 && type != NCCL_PTR_CUDA && type != NCCL_PTR_DMABUF) {
		if (mhandle)
			*mhandle = nullptr;
		NWARN("regMrDmaBuf: a DMA-BUF (fd %d) of memory type %d: only device memory comes as one", fd, type);
		return ncclInvalidUsage;
	}
	return register_buffer("regMrDmaBuf", comm, data, size, type, fd, offset, mhandle);
}

// Host memory through Registrations; device memory to the engine, exactly
// the buffer (rounding could leave its allocation) and registered each
// time: the engine's cache makes a repeat a hit after checking the
// allocation's buffer ID, which the page-range sharing of Registrations
// would skip. A DMA-BUF (regMrDmaBuf) registers as NCCL gave it: its fd,
// offset and mapping type on the engine's cache miss (NCCL closes the fd
// after this call; the registration holds the DMA-BUF). One of this
// process's hmemreg.ko exports given by its fd registers whatever ptrSupport
// says: to NCCL it is host memory (system RAM), imported by the NIC.
ncclResult_t Plugin::register_buffer(const char *call, void *comm, void *data, size_t size, int type, int fd,
				     uint64_t offset, void **mhandle)
{
	if (!mhandle)
		return ncclInvalidArgument;
	*mhandle = nullptr;
	{
		std::lock_guard l(mu_);
		if (!find_locked<SendComm>(comm, Comm::Kind::Send) && !find_locked<RecvComm>(comm, Comm::Kind::Recv)) {
			NWARN("%s: %p is not a send or recv comm of this plugin", call, comm);
			return ncclInternalError;
		}
	}
	const bool device = type == NCCL_PTR_CUDA || type == NCCL_PTR_DMABUF;
	if (type != NCCL_PTR_HOST && !device) {
		NWARN("%s: unknown memory type %d", call, type);
		return ncclInvalidUsage;
	}
	if (device && fd < 0 && !(ptr_support_ & NCCL_PTR_CUDA)) {
		NWARN("%s: memory type %d is not supported (ptrSupport is HOST only: %s)", call, type,
		      host_only_why_.c_str());
		return ncclInvalidUsage;
	}
	if (!data && size) {
		NWARN("%s: null buffer of %zu bytes", call, size);
		return ncclInvalidArgument;
	}
	auto h = std::make_unique<MemHandle>();
	h->addr = reinterpret_cast<uintptr_t>(data);
	h->size = size;
	if (size) {
		try {
			h->region = fd >= 0 ? engine_->register_dmabuf(data, size, fd, offset)
				    : device ? engine_->register_region(data, size)
					     : regs_->get(data, size);
			h->descriptor = engine_->descriptor(*h->region);
		} catch (const Error &e) {
			NWARN("%s of %p (%zu bytes)%s: %s%s%s", call, data, size,
			      fd >= 0 ? " by DMA-BUF" : device ? " as CUDA memory" : "", e.what(),
			      host_only_why_.empty() ? "" : "; ptrSupport is HOST only: ", host_only_why_.c_str());
			// A DMA-BUF of memory that is neither CUDA memory nor an export.
			if (fd >= 0 && (e.code() == HMEMREG_EINVAL || e.code() == HMEMREG_ENOENT))
				return ncclInvalidUsage;
			return e.code() == HMEMREG_EINVAL && device ? ncclInvalidArgument : ncclSystemError;
		}
		if (device) {
			if (ncclResult_t r = classify_device_handle(call, *h))
				return r;
		}
	}
	std::lock_guard l(mu_);
	*mhandle = h.get();
	mhandles_[h.get()] = std::move(h);
	return ncclSuccess;
}

// What the engine found a device buffer to be (one driver query): CUDA
// memory (only where ptrSupport has CUDA), or an hmemreg.ko export; and
// whether iflush reads it back.
ncclResult_t Plugin::classify_device_handle(const char *call, MemHandle &h)
{
	hmemreg_region_info info{};
	try {
		info = h.region->info();
	} catch (const Error &e) {
		NWARN("%s of %p (%zu bytes): %s", call, reinterpret_cast<void *>(h.addr), h.size, e.what());
		return ncclSystemError;
	}
	if (info.iface == HMEMREG_IFACE_KMOD_EXPORT) {
		// Device memory to NCCL; the CPU may reach it only where the NIC
		// cannot copy into it (no FI_READ), as an export is mapped.
		h.read_back = engine_->caps().read_back();
		h.landing = h.read_back ? Landing::Nic : Landing::Cpu;
		return ncclSuccess;
	}
	if (info.iface != HMEMREG_IFACE_CUDA) {
		NWARN("%s: %p (%zu bytes) was passed as device memory but is host memory", call,
		      reinterpret_cast<void *>(h.addr), h.size);
		return ncclInvalidArgument;
	}
	if (!(ptr_support_ & NCCL_PTR_CUDA)) {
		NWARN("%s: %p (%zu bytes) is CUDA memory, which ptrSupport does not take: %s", call,
		      reinterpret_cast<void *>(h.addr), h.size, host_only_why_.c_str());
		return ncclInvalidUsage;
	}
	h.cuda_device = info.device;
	const bool staged = info.flags & HMEMREG_REGION_STAGED;
	h.read_back = read_back_ && !staged;
	h.landing = staged ? Landing::Cuda : Landing::Nic; // Nic: ptrSupport CUDA needs FI_READ
	device_regs_++;
	return ncclSuccess;
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
