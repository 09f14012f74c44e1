// SPDX-License-Identifier: MIT
// The application's end of the engine: its message and notification
// handlers. Notifiers and staging hand what arrived here; handlers are
// copied under the lock and called outside it (they may call the engine).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>

#include "engine/facade.hpp"

namespace hmemreg::engine {

class Delivery {
public:
	void set_on_message(std::function<void(const Message &)> fn);
	void set_on_notify(std::function<void(const Notification &)> fn);
	void message(const Message &m);
	// Before notifying, waits for the device copies a CPU-driven provider
	// (shm: cudaMemcpy, which returns early device to device) queued on
	// this process's legacy stream for devices with direct regions, so a
	// notification means the bytes are in device memory for any stream.
	void notify(std::span<const Notification> notes);
	// CUDA device (ordinal < 64) with regions registered directly.
	void direct_device(int device);

private:
	using MessageFn = std::function<void(const Message &)>;
	using NotifyFn = std::function<void(const Notification &)>;
	std::mutex mu_;
	std::shared_ptr<const MessageFn> on_message_;
	std::shared_ptr<const NotifyFn> on_notify_;
	std::atomic<uint64_t> direct_devices_{0}; // bit = ordinal
};

} // namespace hmemreg::engine
