// SPDX-License-Identifier: MIT
// Copies of data that came through host memory (Inline messages, eager
// slots) into GPU receive buffers, on one non-blocking stream per device
// that belongs to the plugin, finished by polling an event from test().
//
// Nothing here waits for another stream: NCCL's kernels wait for this data
// (pointer_policy.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hmemreg::nccl {

class DeviceCopies {
public:
	struct EventFree {
		void operator()(void *ev) const;
	};
	using Event = std::unique_ptr<void, EventFree>;

	DeviceCopies() = default;
	DeviceCopies(const DeviceCopies &) = delete;
	DeviceCopies &operator=(const DeviceCopies &) = delete;
	~DeviceCopies();

	// Queues n bytes from host src into device memory dst of `device`. src
	// must stay as it is until poll() says done. Null with why on failure.
	Event start(uint8_t *dst, int device, const uint8_t *src, size_t n, std::string &why);
	// 1: done, 0: not yet, -1: the copy failed (why).
	static int poll(const Event &ev, std::string &why);

private:
	void *stream_of(int device, std::string &why);

	std::mutex mu_;
	std::vector<void *> streams_; // by device ordinal; null: not made yet
};

} // namespace hmemreg::nccl
