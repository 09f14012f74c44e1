// SPDX-License-Identifier: MIT
// libhmemreg: C++ RAII handles over the transfer engine's C API
// (hmemreg/engine.h). Header-only; what the C API says, in C++ types:
// strings, vectors, std::function callbacks, shared regions and transfers.
// A failed call throws hmemreg::Error (hmemreg/error.hpp) with the C API's
// code (positive) and message.
//
//   hmemreg::Engine a(cfg), b(cfg);            // cfg: hmemreg::EngineConfig
//   b.on_notify([](const hmemreg::Notification &n) { ... n.tag ... });
//   hmemreg::PeerId p = a.add_peer(b.address(), true);
//   auto src = a.register_region(buf, len), dst = b.register_region(out, len);
//   hmemreg::Chunk c{src->handle(), 0, len, 0};
//   auto t = a.write(p, {&c, 1}, b.descriptor(*dst), 7);
//   a.wait(*t, std::chrono::seconds(10));      // t->status() == 0
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <hmemreg/engine.h>
#include <hmemreg/engine_types.hpp>
#include <hmemreg/error.hpp>

namespace hmemreg {

using Chunk = hmemreg_chunk; // local region handle + offset + len -> remote offset

namespace engine_detail {

// Throws the C API's error for rc < 0; returns rc.
inline int check(int rc)
{
	if (rc < 0)
		throw Error(-rc, hmemreg_engine_last_error());
	return rc;
}

// A blob the C API sizes first (address, descriptor).
template <class F> Bytes blob(F get)
{
	size_t len = 0;
	check(get(nullptr, &len));
	Bytes b(len);
	check(get(b.data(), &len));
	b.resize(len);
	return b;
}

} // namespace engine_detail

// What hmemreg_engine_config holds, with strings. Every number: 0 is the
// engine's default (see engine.h), but progress_threads (0: the caller
// drives progress) and peer_timeout_ms (kPeerTimeoutNever: never).
struct EngineConfig {
	enum class Notify : uint32_t {
		Auto = HMEMREG_NOTIFY_AUTO,
		Immediate = HMEMREG_NOTIFY_IMMEDIATE,
		Message = HMEMREG_NOTIFY_MESSAGE,
	};
	static constexpr uint32_t kPeerTimeoutNever = HMEMREG_PEER_TIMEOUT_NEVER;

	std::string provider, node, domain;
	uint32_t rails = 1;
	uint32_t progress_threads = 1;
	uint32_t queue_depth = 0, peer_queue_depth = 0;
	uint32_t max_message = 0, max_transfers = 0, recv_buffers = 0, send_buffers = 0;
	uint64_t max_write = 0;
	uint32_t write_iov = 0, post_batch = 0, idle_spin = 0, idle_sleep_us = 0;
	Notify notify = Notify::Auto;
	uint32_t imm_data_bytes = 0;
	uint32_t peer_timeout_ms = 0;
	uint32_t caller_backoff_us = 0;
	uint64_t staging_piece = 0;
	uint64_t first_rail_write_max = 0;
	uint32_t flags = 0; // HMEMREG_ENGINE_* (post more, hmem, staging, sends on rail 0)

	// The C struct; its strings point into this object.
	hmemreg_engine_config to_c() const
	{
		hmemreg_engine_config c;
		hmemreg_engine_config_init(&c);
		c.flags = flags;
		c.provider = provider.empty() ? nullptr : provider.c_str();
		c.node = node.empty() ? nullptr : node.c_str();
		c.domain = domain.empty() ? nullptr : domain.c_str();
		c.rails = rails;
		c.progress_threads = progress_threads;
		c.queue_depth = queue_depth;
		c.peer_queue_depth = peer_queue_depth;
		c.max_message = max_message;
		c.max_transfers = max_transfers;
		c.recv_buffers = recv_buffers;
		c.send_buffers = send_buffers;
		c.max_write = max_write;
		c.write_iov = write_iov;
		c.post_batch = post_batch;
		c.idle_spin = idle_spin;
		c.idle_sleep_us = idle_sleep_us;
		c.notify = static_cast<uint32_t>(notify);
		c.imm_data_bytes = imm_data_bytes;
		c.peer_timeout_ms = peer_timeout_ms;
		c.caller_backoff_us = caller_backoff_us;
		c.staging_piece = staging_piece;
		c.first_rail_write_max = first_rail_write_max;
		return c;
	}
};

// What the engine chose (hmemreg_engine_info and its texts), read once.
struct EngineInfo {
	hmemreg_engine_info raw{};
	std::string provider, fabric, device_memory, hmem_why_not, notify;
	std::vector<std::string> rail_domains;
	std::vector<std::string> rail_pci_paths; // the NIC's sysfs path, "" where none
	std::vector<uint64_t> rail_link_bps;     // the NIC's link speed in bits/s, 0 where unknown
	bool hmem() const { return raw.flags & HMEMREG_ENGINE_HAS_HMEM; }
	bool dmabuf() const { return raw.flags & HMEMREG_ENGINE_HAS_DMABUF; }
	bool read_back() const { return raw.flags & HMEMREG_ENGINE_HAS_READ_BACK; }
	uint32_t imm_key_bytes() const { return raw.imm_key_bytes; }
	uint64_t write_iov() const { return raw.write_iov; }
	uint32_t peer_timeout_ms() const { return raw.peer_timeout_ms; }
};

// Registered local memory; released with the last reference (transfers
// using it keep the registration alive in the engine).
class Region {
public:
	Region(hmemreg_region_t *r, void *addr, size_t len) : r_(r), addr_(addr), len_(len) {}
	~Region() { hmemreg_region_release(r_); }
	Region(const Region &) = delete;
	Region &operator=(const Region &) = delete;
	const hmemreg_region_t *handle() const { return r_; }
	hmemreg_region_info info() const
	{
		hmemreg_region_info i{};
		i.size = sizeof(i);
		engine_detail::check(hmemreg_region_get_info(r_, &i));
		return i;
	}
	void *addr() const { return addr_; }
	size_t length() const { return len_; }
	// Device memory moved through a pinned host mirror.
	bool staged() const { return info().flags & HMEMREG_REGION_STAGED; }
	Bytes descriptor() const
	{
		return engine_detail::blob([&](void *b, size_t *n) { return hmemreg_region_descriptor(r_, b, n); });
	}

private:
	hmemreg_region_t *r_;
	void *addr_;
	size_t len_;
};
using RegionRef = std::shared_ptr<Region>;

// A write or send: a handle to wait on, or the view a callback gets.
class Transfer {
public:
	explicit Transfer(hmemreg_xfer_t *x) : x_(x) {}
	Transfer(int status, std::string error) : status_(status), error_(std::move(error)) {}
	~Transfer()
	{
		if (x_)
			hmemreg_xfer_release(x_);
	}
	Transfer(const Transfer &) = delete;
	Transfer &operator=(const Transfer &) = delete;
	// -HMEMREG_EAGAIN while in progress, 0 on success, -HMEMREG_E* on failure.
	int status() const { return x_ ? hmemreg_xfer_test(x_) : status_; }
	// Why it failed (empty on success or while pending).
	std::string error() const
	{
		if (!x_)
			return error_;
		const int s = hmemreg_xfer_test(x_); // sets the thread's last error when failed
		return s < 0 && s != -HMEMREG_EAGAIN ? hmemreg_engine_last_error() : "";
	}
	const hmemreg_xfer_t *handle() const { return x_; }

private:
	hmemreg_xfer_t *x_ = nullptr;
	int status_ = 0;
	std::string error_;
};
using TransferRef = std::shared_ptr<Transfer>;
using TransferCallback = std::function<void(const Transfer &)>;

struct Notification {
	PeerId from;     // kUnknownPeer when the writer was not added here
	uint64_t sender; // the writer engine's id
	uint64_t tag;
	uint64_t bytes;
	uint32_t chunks;
};

struct Message {
	PeerId from;
	uint64_t sender;
	std::span<const uint8_t> data; // valid during the callback only
};

class Engine {
public:
	explicit Engine(const EngineConfig &cfg) : handlers_(std::make_unique<Handlers>())
	{
		hmemreg_engine_config c = cfg.to_c();
		engine_detail::check(hmemreg_engine_create(&c, &e_));
		try {
			read_info();
		} catch (...) {
			hmemreg_engine_destroy(e_);
			throw;
		}
	}
	// Stops progress, fails what is pending (running its callbacks here).
	~Engine() { hmemreg_engine_destroy(e_); }
	Engine(const Engine &) = delete;
	Engine &operator=(const Engine &) = delete;

	hmemreg_engine_t *handle() const { return e_; }
	const EngineInfo &caps() const { return info_; }
	uint64_t id() const { return info_.raw.id; }
	std::string describe() const
	{
		std::string s(hmemreg_engine_describe(e_, nullptr, 0), '\0');
		hmemreg_engine_describe(e_, s.data(), s.size() + 1);
		return s;
	}
	Bytes address() const
	{
		return engine_detail::blob([&](void *b, size_t *n) { return hmemreg_engine_address(e_, b, n); });
	}

	PeerId add_peer(std::span<const uint8_t> address, bool warmup = false)
	{
		PeerId p = 0;
		engine_detail::check(hmemreg_engine_add_peer(e_, address.data(), address.size(), warmup, &p));
		return p;
	}
	void remove_peer(PeerId peer) { engine_detail::check(hmemreg_engine_remove_peer(e_, peer)); }
	// False on timeout.
	bool drain(PeerId peer, std::chrono::milliseconds timeout)
	{
		int rc = hmemreg_engine_drain(e_, peer, clamp_ms(timeout));
		return rc == -HMEMREG_EAGAIN ? false : engine_detail::check(rc) == 0;
	}
	bool immediate_to(PeerId peer) const { return engine_detail::check(hmemreg_engine_immediate_to(e_, peer)) == 1; }

	RegionRef register_region(void *addr, size_t len)
	{
		hmemreg_region_t *r = nullptr;
		engine_detail::check(hmemreg_engine_reg(e_, addr, len, &r));
		return std::make_shared<Region>(r, addr, len);
	}
	// Through the caller's DMA-BUF of it (hmemreg_engine_reg_dmabuf).
	RegionRef register_dmabuf(void *addr, size_t len, int fd, uint64_t offset)
	{
		hmemreg_region_t *r = nullptr;
		engine_detail::check(hmemreg_engine_reg_dmabuf(e_, addr, len, fd, offset, &r));
		return std::make_shared<Region>(r, addr, len);
	}
	Bytes descriptor(const Region &r) const { return r.descriptor(); }
	// Reads [offset, +len) (1 to 64 bytes) back through every rail's NIC
	// (hmemreg_engine_read_back): a handle to wait on.
	TransferRef read_back(const Region &r, uint64_t offset, size_t len)
	{
		hmemreg_xfer_t *x = nullptr;
		engine_detail::check(hmemreg_engine_read_back(e_, r.handle(), offset, len, &x));
		return std::make_shared<Transfer>(x);
	}

	// Copies [src_offset, +len) of src into dst at dst_offset through the
	// first rail's NIC (hmemreg_engine_nic_copy): a handle to wait on.
	TransferRef nic_copy(const Region &dst, uint64_t dst_offset, const Region &src, uint64_t src_offset, size_t len)
	{
		hmemreg_xfer_t *x = nullptr;
		engine_detail::check(
			hmemreg_engine_nic_copy(e_, dst.handle(), dst_offset, src.handle(), src_offset, len, &x));
		return std::make_shared<Transfer>(x);
	}

	// A handle to wait on.
	TransferRef write(PeerId peer, std::span<const Chunk> chunks, std::span<const uint8_t> remote, uint64_t tag = 0)
	{
		hmemreg_xfer_t *x = nullptr;
		engine_detail::check(hmemreg_engine_write(e_, peer, chunks.data(), chunks.size(), remote.data(),
							  remote.size(), tag, nullptr, nullptr, &x));
		return std::make_shared<Transfer>(x);
	}
	// `done` runs once, on the thread driving progress.
	void write(PeerId peer, std::span<const Chunk> chunks, std::span<const uint8_t> remote, uint64_t tag,
		   TransferCallback done)
	{
		auto *fn = new TransferCallback(std::move(done));
		int rc = hmemreg_engine_write(e_, peer, chunks.data(), chunks.size(), remote.data(), remote.size(), tag,
					      &Engine::completed, fn, nullptr);
		if (rc < 0)
			delete fn;
		engine_detail::check(rc);
	}
	TransferRef send(PeerId peer, std::span<const uint8_t> data)
	{
		hmemreg_xfer_t *x = nullptr;
		engine_detail::check(hmemreg_engine_send(e_, peer, data.data(), data.size(), nullptr, nullptr, &x));
		return std::make_shared<Transfer>(x);
	}
	// Head and body as one message (copied once).
	void send(PeerId peer, std::span<const uint8_t> head, std::span<const uint8_t> body, TransferCallback done)
	{
		const hmemreg_iov iov[2] = {{head.data(), head.size()}, {body.data(), body.size()}};
		auto *fn = new TransferCallback(std::move(done));
		int rc = hmemreg_engine_sendv(e_, peer, iov, body.empty() ? 1 : 2, &Engine::completed, fn, nullptr);
		if (rc < 0)
			delete fn;
		engine_detail::check(rc);
	}
	void send(PeerId peer, std::span<const uint8_t> data, TransferCallback done)
	{
		send(peer, data, {}, std::move(done));
	}

	// Set before the engine's address goes out; called from progress context.
	void on_notify(std::function<void(const Notification &)> fn)
	{
		handlers_->notify = std::move(fn);
		set_handlers();
	}
	void on_message(std::function<void(const Message &)> fn)
	{
		handlers_->message = std::move(fn);
		set_handlers();
	}

	size_t progress() { return static_cast<size_t>(engine_detail::check(hmemreg_engine_progress(e_))); }
	// True once the transfer completed (its status says how).
	bool wait(const Transfer &t, std::chrono::milliseconds timeout)
	{
		return !t.handle() || hmemreg_xfer_wait(e_, t.handle(), clamp_ms(timeout)) != -HMEMREG_EAGAIN;
	}
	struct hmemreg_engine_path_stats path_stats() const
	{
		struct hmemreg_engine_path_stats s{};
		s.size = sizeof(s);
		engine_detail::check(hmemreg_engine_path_stats(e_, &s));
		return s;
	}
	std::string text(uint32_t what, uint32_t index = 0) const
	{
		int n = engine_detail::check(hmemreg_engine_text(e_, what, index, nullptr, 0));
		std::string s(static_cast<size_t>(n), '\0');
		engine_detail::check(hmemreg_engine_text(e_, what, index, s.data(), s.size() + 1));
		return s;
	}

	// The engine id inside an address blob.
	static uint64_t peer_engine_id(std::span<const uint8_t> address)
	{
		uint64_t id = 0;
		engine_detail::check(hmemreg_peer_engine_id(address.data(), address.size(), &id));
		return id;
	}

private:
	struct Handlers {
		std::function<void(const Notification &)> notify;
		std::function<void(const Message &)> message;
	};

	static uint32_t clamp_ms(std::chrono::milliseconds t)
	{
		return static_cast<uint32_t>(std::clamp<long long>(t.count(), 0, UINT32_MAX));
	}
	static void completed(void *arg, int status)
	{
		std::unique_ptr<TransferCallback> fn(static_cast<TransferCallback *>(arg));
		Transfer view(status, status < 0 ? hmemreg_engine_last_error() : "");
		if (*fn)
			(*fn)(view);
	}
	static void notified(void *arg, const hmemreg_notification *n)
	{
		static_cast<Handlers *>(arg)->notify({n->from, n->sender, n->tag, n->bytes, n->chunks});
	}
	static void received(void *arg, const hmemreg_message *m)
	{
		static_cast<Handlers *>(arg)->message(
			{m->from, m->sender, {static_cast<const uint8_t *>(m->data), static_cast<size_t>(m->len)}});
	}
	void set_handlers()
	{
		engine_detail::check(hmemreg_engine_set_handlers(e_, handlers_->notify ? &Engine::notified : nullptr,
								 handlers_->message ? &Engine::received : nullptr,
								 handlers_.get()));
	}
	void read_info()
	{
		info_.raw.size = sizeof(info_.raw);
		engine_detail::check(hmemreg_engine_get_info(e_, &info_.raw));
		info_.provider = text(HMEMREG_ENGINE_TEXT_PROVIDER);
		info_.fabric = text(HMEMREG_ENGINE_TEXT_FABRIC);
		info_.device_memory = text(HMEMREG_ENGINE_TEXT_DEVICE_MEMORY);
		info_.hmem_why_not = text(HMEMREG_ENGINE_TEXT_HMEM_WHY_NOT);
		info_.notify = text(HMEMREG_ENGINE_TEXT_NOTIFY);
		for (uint32_t r = 0; r < info_.raw.rails; r++) {
			info_.rail_domains.push_back(text(HMEMREG_ENGINE_TEXT_RAIL_DOMAIN, r));
			info_.rail_pci_paths.push_back(text(HMEMREG_ENGINE_TEXT_RAIL_PCI_PATH, r));
			const std::string bps = text(HMEMREG_ENGINE_TEXT_RAIL_LINK_SPEED, r);
			info_.rail_link_bps.push_back(bps.empty() ? 0 : std::stoull(bps));
		}
	}

	std::unique_ptr<Handlers> handlers_; // outlives e_: destroyed after it
	hmemreg_engine_t *e_ = nullptr;
	EngineInfo info_;
};

} // namespace hmemreg
