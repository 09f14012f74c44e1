// SPDX-License-Identifier: MIT
// What the staged path needs from CUDA: page-locked host buffers and
// asynchronous copies between them and device memory, with fences to poll.
// No CUDA types here, so that builds without cuda.h compile the callers.
// Every call returns 0 or -HMEMREG_E* (why says more).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace hmemreg::cuda {

// Page-locked host memory (cuMemHostAlloc, portable across contexts): the
// driver's copies to and from it run asynchronously at full speed.
class PinnedBuffer {
public:
	PinnedBuffer() = default;
	~PinnedBuffer();
	PinnedBuffer(PinnedBuffer &&o) noexcept;
	PinnedBuffer &operator=(PinnedBuffer &&o) noexcept;
	PinnedBuffer(const PinnedBuffer &) = delete;
	PinnedBuffer &operator=(const PinnedBuffer &) = delete;

	static int alloc(int device, size_t len, PinnedBuffer &out, std::string *why = nullptr);
	uint8_t *data() const { return p_; }
	size_t size() const { return len_; }

private:
	uint8_t *p_ = nullptr;
	size_t len_ = 0;
};

// Marks a point in a stream; done() once every copy queued before it ran.
class Fence {
public:
	Fence() = default;
	~Fence();
	Fence(Fence &&o) noexcept;
	Fence &operator=(Fence &&o) noexcept;
	Fence(const Fence &) = delete;
	Fence &operator=(const Fence &) = delete;

	bool empty() const { return !ev_; }
	// True once reached (an empty fence is reached). A copy that failed on the
	// device also reaches it; ok() then says false.
	bool done();
	// Blocks until reached.
	void wait();
	bool ok() const { return ok_; }

private:
	friend class CopyStream;
	void *ev_ = nullptr;
	bool ok_ = true;
};

// One stream on one device; copies queued on it run in order.
class CopyStream {
public:
	~CopyStream();
	CopyStream(const CopyStream &) = delete;
	CopyStream &operator=(const CopyStream &) = delete;

	static int create(int device, std::unique_ptr<CopyStream> &out, std::string *why = nullptr);
	int device() const { return device_; }
	int to_host(void *dst, const void *src, size_t len, std::string *why = nullptr);
	int to_device(void *dst, const void *src, size_t len, std::string *why = nullptr);
	// A fence after everything queued so far.
	int fence(Fence &out, std::string *why = nullptr);

private:
	explicit CopyStream(int device) : device_(device) {}
	int device_;
	void *stream_ = nullptr;
};

// Waits for the copies queued on the legacy default stream of `device`'s
// primary context in this process, which is where libfabric's providers
// (shm) copy into device memory with cudaMemcpy: a device-to-device
// cudaMemcpy may return before its copy ran, so a completion does not yet
// mean the bytes are visible to work on other (non-blocking) streams.
// Work on non-blocking streams (NCCL's kernels) is not waited for.
int finish_legacy_copies(int device, std::string *why = nullptr);

} // namespace hmemreg::cuda
