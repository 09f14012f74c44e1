// SPDX-License-Identifier: MIT
// The engine's C API (hmemreg/engine.h): handles wrap the C++ objects,
// exceptions become negative HMEMREG_E* codes plus a per-thread message.
#include <cstddef>
#include <cstring>
#include <mutex>
#include <new>
#include <type_traits>

#include "engine/facade.hpp"
#include "hmem/cuda_memory.hpp"
#include "hmemreg/hmemreg.h"

using namespace hmemreg;
using namespace hmemreg::engine;

struct hmemreg_engine {
	std::unique_ptr<Facade> e;
};
struct hmemreg_region {
	RegionRef r;
	Facade *owner;
	// Memory kind, found on the first hmemreg_region_info.
	mutable std::once_flag classified;
	mutable uint32_t iface = HMEMREG_IFACE_HOST;
	mutable int32_t device = -1;
};
struct hmemreg_xfer {
	TransferRef t;
};

namespace {

thread_local std::string last_error;

template <class F> int guard(F &&f)
{
	try {
		last_error.clear();
		return f();
	} catch (const Error &e) {
		last_error = e.what();
		return -e.code();
	} catch (const std::bad_alloc &) {
		last_error = "out of memory";
		return -HMEMREG_ENOMEM;
	} catch (const std::exception &e) {
		last_error = e.what();
		return -HMEMREG_EINVAL;
	}
}

int fail(int code, const char *why)
{
	last_error = why;
	return -code;
}

int copy_out(const Bytes &b, void *buf, size_t *len)
{
	if (!len)
		return fail(HMEMREG_EINVAL, "len is NULL");
	bool fits = buf && *len >= b.size();
	size_t have = *len;
	*len = b.size();
	if (!buf && have == 0)
		return 0;
	if (!fits)
		return fail(HMEMREG_EINVAL, "buffer too small (size is in *len)");
	std::memcpy(buf, b.data(), b.size());
	return 0;
}

// A failed transfer's callback finds why in hmemreg_engine_last_error().
TransferCallback c_callback(hmemreg_xfer_cb cb, void *arg)
{
	if (!cb)
		return {};
	return [cb, arg](const Transfer &t) {
		const int status = t.status();
		if (status < 0) {
			try {
				last_error = t.error();
			} catch (const std::exception &) {
				last_error = "transfer failed";
			}
		}
		cb(arg, status);
	};
}

// Extensible structs: `size` is what the caller knows. Bytes beyond what
// this library knows must be zero (fields of a newer header left unset).
bool unknown_tail_is_zero(const void *p, size_t size, size_t known)
{
	const auto *b = static_cast<const unsigned char *>(p);
	for (size_t i = known; i < size; i++)
		if (b[i])
			return false;
	return true;
}

// Copies the first out->size bytes of `full` (what the library fills) into
// *out, zeroing what the caller's struct has beyond it.
template <class T> int fill_sized(T *out, T full, size_t min_size, const char *what)
{
	if (!out)
		return fail(HMEMREG_EINVAL, (std::string(what) + " is NULL").c_str());
	const size_t size = out->size;
	if (size < min_size)
		return fail(HMEMREG_EINVAL, (std::string(what) + "->size " + std::to_string(size) + " is below " +
					     std::to_string(min_size) + " (set it to sizeof)")
					    .c_str());
	full.size = static_cast<uint32_t>(std::min(size, sizeof(T)));
	std::memcpy(out, &full, std::min(size, sizeof(T)));
	if (size > sizeof(T))
		std::memset(reinterpret_cast<unsigned char *>(out) + sizeof(T), 0, size - sizeof(T));
	out->size = static_cast<uint32_t>(size);
	return 0;
}

int copy_text(const std::string &s, char *buf, size_t len)
{
	if (buf && len) {
		size_t n = std::min(len - 1, s.size());
		std::memcpy(buf, s.data(), n);
		buf[n] = 0;
	}
	return static_cast<int>(std::min<size_t>(s.size(), INT32_MAX));
}

Config to_config(const hmemreg_engine_config &in)
{
	// The first version of the struct is all of it today; later fields are
	// read only where in.size reaches them.
	constexpr size_t kFirstVersion = sizeof(hmemreg_engine_config);
	if (in.size < kFirstVersion)
		throw Error(HMEMREG_EINVAL, "engine config size " + std::to_string(in.size) + " is below " +
						    std::to_string(kFirstVersion) +
						    " (call hmemreg_engine_config_init first)");
	if (!unknown_tail_is_zero(&in, in.size, sizeof(in)))
		throw Error(HMEMREG_ENOTSUP, "engine config of " + std::to_string(in.size) +
						     " bytes sets fields this library (" + std::to_string(sizeof(in)) +
						     " bytes) does not know");
	constexpr uint32_t kKnownFlags = HMEMREG_ENGINE_POST_MORE | HMEMREG_ENGINE_REQUIRE_HMEM |
					 HMEMREG_ENGINE_NO_HMEM | HMEMREG_ENGINE_REQUIRE_REMOTE_CQ_DATA |
					 HMEMREG_ENGINE_NO_STAGING | HMEMREG_ENGINE_SENDS_ON_FIRST_RAIL |
					 HMEMREG_ENGINE_NO_PROVIDER_CUDA;
	if (in.flags & ~kKnownFlags)
		throw Error(HMEMREG_EINVAL, "engine config flags " + std::to_string(in.flags & ~kKnownFlags) +
						    " are not HMEMREG_ENGINE_* flags");
	Config c;
	if (in.provider)
		c.provider = in.provider;
	if (in.node)
		c.node = in.node;
	if (in.domain)
		c.domain = in.domain;
	c.rails = in.rails ? in.rails : 1;
	c.progress_threads = in.progress_threads;
	c.queue_depth = in.queue_depth;
	c.peer_queue_depth = in.peer_queue_depth;
	// Zero keeps the engine's default of each.
	auto set = [](auto &field, auto value) {
		if (value)
			field = static_cast<std::remove_reference_t<decltype(field)>>(value);
	};
	set(c.max_message, in.max_message);
	set(c.max_transfers, in.max_transfers);
	set(c.recv_buffers, in.recv_buffers);
	set(c.send_buffers, in.send_buffers);
	c.max_write = in.max_write;
	c.write_iov = in.write_iov;
	set(c.post_batch, in.post_batch);
	set(c.idle_spin, in.idle_spin);
	set(c.idle_sleep_us, in.idle_sleep_us);
	set(c.staging_piece, in.staging_piece);
	c.imm_data_bytes = in.imm_data_bytes;
	c.post_more = in.flags & HMEMREG_ENGINE_POST_MORE;
	c.require_hmem = in.flags & HMEMREG_ENGINE_REQUIRE_HMEM;
	c.ask_hmem = !(in.flags & HMEMREG_ENGINE_NO_HMEM);
	c.require_remote_cq_data = in.flags & HMEMREG_ENGINE_REQUIRE_REMOTE_CQ_DATA;
	c.stage_device_memory = !(in.flags & HMEMREG_ENGINE_NO_STAGING);
	c.sends_on_first_rail = in.flags & HMEMREG_ENGINE_SENDS_ON_FIRST_RAIL;
	c.provider_cuda_calls = !(in.flags & HMEMREG_ENGINE_NO_PROVIDER_CUDA);
	c.caller_backoff_us = in.caller_backoff_us;
	c.first_rail_write_max = in.first_rail_write_max;
	c.peer_timeout_ms = in.peer_timeout_ms == 0			   ? Config::kPeerTimeoutDefault
			    : in.peer_timeout_ms == HMEMREG_PEER_TIMEOUT_NEVER ? 0
									       : in.peer_timeout_ms;
	switch (in.notify) {
	case HMEMREG_NOTIFY_AUTO:
		c.notify = Config::Notify::Auto;
		break;
	case HMEMREG_NOTIFY_IMMEDIATE:
		c.notify = Config::Notify::Immediate;
		break;
	case HMEMREG_NOTIFY_MESSAGE:
		c.notify = Config::Notify::Message;
		break;
	default:
		throw Error(HMEMREG_EINVAL, "config notify " + std::to_string(in.notify) +
						    " is not one of HMEMREG_NOTIFY_AUTO, _IMMEDIATE, _MESSAGE");
	}
	return c;
}

} // namespace

extern "C" {

int hmemreg_engine_create(const struct hmemreg_engine_config *cfg, hmemreg_engine_t **out)
{
	if (!cfg || !out)
		return fail(HMEMREG_EINVAL, "config or out is NULL");
	return guard([&] {
		Config c = to_config(*cfg);
		auto h = std::make_unique<hmemreg_engine>();
		h->e = std::make_unique<Facade>(c);
		*out = h.release();
		return 0;
	});
}

void hmemreg_engine_destroy(hmemreg_engine_t *engine)
{
	delete engine;
}

size_t hmemreg_engine_describe(const hmemreg_engine_t *engine, char *buf, size_t len)
{
	if (!engine)
		return 0;
	std::string s = engine->e->caps().describe();
	if (buf && len) {
		size_t n = std::min(len - 1, s.size());
		std::memcpy(buf, s.data(), n);
		buf[n] = 0;
	}
	return s.size();
}

int hmemreg_engine_get_info(const hmemreg_engine_t *engine, struct hmemreg_engine_info *out)
{
	if (!engine)
		return fail(HMEMREG_EINVAL, "engine is NULL");
	return guard([&] {
		const Capabilities &c = engine->e->caps();
		hmemreg_engine_info i{};
		i.flags = (c.rma ? HMEMREG_ENGINE_HAS_RMA : 0) | (c.hmem ? HMEMREG_ENGINE_HAS_HMEM : 0) |
			  (c.dmabuf ? HMEMREG_ENGINE_HAS_DMABUF : 0) |
			  (c.remote_cq_data ? HMEMREG_ENGINE_HAS_REMOTE_CQ_DATA : 0) |
			  (c.delivery_complete ? HMEMREG_ENGINE_HAS_DELIVERY_COMPLETE : 0) |
			  (c.notify_immediate ? HMEMREG_ENGINE_NOTIFIES_IMMEDIATE : 0) |
			  (c.read_back ? HMEMREG_ENGINE_HAS_READ_BACK : 0);
		i.id = engine->e->id();
		i.rails = static_cast<uint32_t>(c.rail_domains.size());
		i.api_version = c.api_version;
		i.cq_data_size = static_cast<uint32_t>(c.cq_data_size);
		i.imm_key_bytes = static_cast<uint32_t>(c.imm_key_bytes);
		i.queue_depth = c.queue_depth;
		i.peer_queue_depth = c.peer_queue_depth;
		i.max_write = c.max_write;
		i.write_iov = c.write_iov;
		i.inject_size = c.inject_size;
		i.peer_timeout_ms = c.peer_timeout_ms;
		return fill_sized(out, i, sizeof(hmemreg_engine_info), "info");
	});
}

int hmemreg_engine_text(const hmemreg_engine_t *engine, uint32_t what, uint32_t index, char *buf, size_t len)
{
	if (!engine)
		return fail(HMEMREG_EINVAL, "engine is NULL");
	return guard([&] {
		const Capabilities &c = engine->e->caps();
		if (what != HMEMREG_ENGINE_TEXT_RAIL_DOMAIN && what != HMEMREG_ENGINE_TEXT_RAIL_PCI_PATH &&
		    what != HMEMREG_ENGINE_TEXT_RAIL_LINK_SPEED && index != 0)
			throw Error(HMEMREG_EINVAL, "engine text " + std::to_string(what) + " has no index " +
							    std::to_string(index));
		switch (what) {
		case HMEMREG_ENGINE_TEXT_PROVIDER:
			return copy_text(c.provider, buf, len);
		case HMEMREG_ENGINE_TEXT_FABRIC:
			return copy_text(c.fabric, buf, len);
		case HMEMREG_ENGINE_TEXT_RAIL_DOMAIN:
			if (index >= c.rail_domains.size())
				throw Error(HMEMREG_ENOENT, "engine text: no rail " + std::to_string(index) + " (" +
								    std::to_string(c.rail_domains.size()) + " rails)");
			return copy_text(c.rail_domains[index], buf, len);
		case HMEMREG_ENGINE_TEXT_RAIL_PCI_PATH:
			if (index >= c.rail_pci_paths.size())
				throw Error(HMEMREG_ENOENT, "engine text: no rail " + std::to_string(index) + " (" +
								    std::to_string(c.rail_pci_paths.size()) + " rails)");
			return copy_text(c.rail_pci_paths[index], buf, len);
		case HMEMREG_ENGINE_TEXT_RAIL_LINK_SPEED:
			if (index >= c.rail_link_bps.size())
				throw Error(HMEMREG_ENOENT, "engine text: no rail " + std::to_string(index) + " (" +
								    std::to_string(c.rail_link_bps.size()) + " rails)");
			return copy_text(c.rail_link_bps[index] ? std::to_string(c.rail_link_bps[index]) : "", buf,
					 len);
		case HMEMREG_ENGINE_TEXT_DEVICE_MEMORY:
			return copy_text(c.device_memory, buf, len);
		case HMEMREG_ENGINE_TEXT_HMEM_WHY_NOT:
			return copy_text(c.hmem_why_not, buf, len);
		case HMEMREG_ENGINE_TEXT_NOTIFY:
			return copy_text(c.notify, buf, len);
		case HMEMREG_ENGINE_TEXT_PROGRESS:
			return copy_text(c.progress, buf, len);
		case HMEMREG_ENGINE_TEXT_PEER_TIMEOUT:
			return copy_text(c.peer_timeout, buf, len);
		case HMEMREG_ENGINE_TEXT_DEVICE_ADDRESS_WHY:
			return copy_text(engine->e->path_stats().device_address_why, buf, len);
		case HMEMREG_ENGINE_TEXT_DEVICE_WRAP: {
			const PathStats ps = engine->e->path_stats();
			std::string t = std::to_string(ps.device_regs_wrapped) + " of " +
					std::to_string(ps.device_regs_dmabuf) +
					" DMA-BUF registrations wrapped by hmemreg.ko";
			if (!ps.device_wrap_why.empty())
				t += "; not wrapped: " + ps.device_wrap_why;
			return copy_text(t, buf, len);
		}
		default:
			throw Error(HMEMREG_EINVAL, "engine text " + std::to_string(what) +
							    " is not one of HMEMREG_ENGINE_TEXT_*");
		}
	});
}

int hmemreg_peer_engine_id(const void *addr, size_t len, uint64_t *id)
{
	if (!addr || !id)
		return fail(HMEMREG_EINVAL, "addr or id is NULL");
	return guard([&] {
		*id = peer_engine_id({static_cast<const uint8_t *>(addr), len});
		return 0;
	});
}

int hmemreg_engine_immediate_to(const hmemreg_engine_t *engine, uint64_t peer)
{
	if (!engine)
		return fail(HMEMREG_EINVAL, "engine is NULL");
	return guard([&] { return engine->e->immediate_to(peer) ? 1 : 0; });
}

int hmemreg_engine_address(const hmemreg_engine_t *engine, void *buf, size_t *len)
{
	if (!engine)
		return fail(HMEMREG_EINVAL, "engine is NULL");
	return guard([&] { return copy_out(engine->e->address(), buf, len); });
}

int hmemreg_engine_add_peer(hmemreg_engine_t *engine, const void *addr, size_t len, int warmup, uint64_t *peer)
{
	if (!engine || !addr || !peer)
		return fail(HMEMREG_EINVAL, "engine, addr or peer is NULL");
	return guard([&] {
		*peer = engine->e->add_peer({static_cast<const uint8_t *>(addr), len}, warmup != 0);
		return 0;
	});
}

int hmemreg_engine_remove_peer(hmemreg_engine_t *engine, uint64_t peer)
{
	if (!engine)
		return fail(HMEMREG_EINVAL, "engine is NULL");
	return guard([&] {
		engine->e->remove_peer(peer);
		return 0;
	});
}

int hmemreg_engine_drain(hmemreg_engine_t *engine, uint64_t peer, uint32_t timeout_ms)
{
	if (!engine)
		return fail(HMEMREG_EINVAL, "engine is NULL");
	return guard([&] {
		if (engine->e->drain(peer, std::chrono::milliseconds(timeout_ms)))
			return 0;
		last_error = "drain: peer " + std::to_string(peer) + " still has unfinished transfers after " +
			     std::to_string(timeout_ms) + " ms";
		return -HMEMREG_EAGAIN;
	});
}

int hmemreg_engine_reg(hmemreg_engine_t *engine, void *addr, size_t len, hmemreg_region_t **out)
{
	if (!engine || !out)
		return fail(HMEMREG_EINVAL, "engine or out is NULL");
	return guard([&] {
		auto r = std::make_unique<hmemreg_region>();
		r->r = engine->e->register_region(addr, len);
		r->owner = engine->e.get();
		*out = r.release();
		return 0;
	});
}

int hmemreg_engine_reg_export(hmemreg_engine_t *engine, const hmemreg_export_t *exp, uint64_t offset, size_t len,
			      hmemreg_region_t **out)
{
	if (!engine || !out)
		return fail(HMEMREG_EINVAL, "engine or out is NULL");
	return guard([&] {
		auto r = std::make_unique<hmemreg_region>();
		r->r = engine->e->register_export(exp, offset, len);
		r->owner = engine->e.get();
		// An export's kind is known here; the CPU address would classify as host.
		std::call_once(r->classified, [&] { r->iface = HMEMREG_IFACE_KMOD_EXPORT; });
		*out = r.release();
		return 0;
	});
}

int hmemreg_engine_reg_dmabuf(hmemreg_engine_t *engine, void *addr, size_t len, int fd, uint64_t offset,
			      hmemreg_region_t **out)
{
	if (!engine || !out)
		return fail(HMEMREG_EINVAL, "engine or out is NULL");
	return guard([&] {
		auto r = std::make_unique<hmemreg_region>();
		r->r = engine->e->register_dmabuf(addr, len, fd, offset);
		r->owner = engine->e.get();
		// Not CUDA memory: it registered as the export its fd names.
		cuda::PointerInfo p;
		if (cuda::classify(addr, len, p) != 0 || p.kind != cuda::MemKind::device)
			std::call_once(r->classified, [&] { r->iface = HMEMREG_IFACE_KMOD_EXPORT; });
		*out = r.release();
		return 0;
	});
}

int hmemreg_region_get_info(const hmemreg_region_t *region, struct hmemreg_region_info *out)
{
	if (!region)
		return fail(HMEMREG_EINVAL, "region is NULL");
	return guard([&] {
		const Region &r = *region->r;
		hmemreg_region_info i{};
		i.flags = r.staged() ? HMEMREG_REGION_STAGED : 0;
		i.addr = r.addr();
		i.length = r.length();
		// Asked here, not at registration: most callers never ask.
		std::call_once(region->classified, [&] {
			cuda::PointerInfo p;
			if (cuda::classify(r.addr(), r.length(), p) == 0 && p.kind == cuda::MemKind::device) {
				region->iface = HMEMREG_IFACE_CUDA;
				region->device = p.device;
			}
		});
		i.iface = region->iface;
		i.device = region->device;
		return fill_sized(out, i, sizeof(hmemreg_region_info), "info");
	});
}

void hmemreg_region_release(hmemreg_region_t *region)
{
	delete region;
}

int hmemreg_region_descriptor(const hmemreg_region_t *region, void *buf, size_t *len)
{
	if (!region)
		return fail(HMEMREG_EINVAL, "region is NULL");
	return guard([&] { return copy_out(region->owner->descriptor(*region->r), buf, len); });
}

int hmemreg_engine_set_callbacks(hmemreg_engine_t *engine, hmemreg_notify_cb notify, hmemreg_message_cb message,
				 void *arg)
{
	if (!engine)
		return fail(HMEMREG_EINVAL, "engine is NULL");
	return guard([&] {
		engine->e->on_notify(notify ? std::function<void(const Notification &)>(
						      [=](const Notification &n) { notify(arg, n.from, n.tag, n.bytes); })
					    : nullptr);
		engine->e->on_message(message ? std::function<void(const Message &)>([=](const Message &m) {
						message(arg, m.from, m.data.data(), m.data.size());
					})
					      : nullptr);
		return 0;
	});
}

int hmemreg_engine_set_handlers(hmemreg_engine_t *engine, hmemreg_notification_fn notify, hmemreg_message_fn message,
				void *arg)
{
	if (!engine)
		return fail(HMEMREG_EINVAL, "engine is NULL");
	return guard([&] {
		engine->e->on_notify(notify ? std::function<void(const Notification &)>([=](const Notification &n) {
			hmemreg_notification c{sizeof(c), n.chunks, n.from, n.sender, n.tag, n.bytes};
			notify(arg, &c);
		})
					    : nullptr);
		engine->e->on_message(message ? std::function<void(const Message &)>([=](const Message &m) {
			hmemreg_message c{sizeof(c), 0, m.from, m.sender, m.data.data(), m.data.size()};
			message(arg, &c);
		})
					      : nullptr);
		return 0;
	});
}

int hmemreg_engine_write(hmemreg_engine_t *engine, uint64_t peer, const struct hmemreg_chunk *chunks, size_t nchunks,
			 const void *remote_desc, size_t desc_len, uint64_t tag, hmemreg_xfer_cb cb, void *arg,
			 hmemreg_xfer_t **xfer)
{
	if (!engine || (!chunks && nchunks) || !remote_desc)
		return fail(HMEMREG_EINVAL, "engine, chunks or remote_desc is NULL");
	return guard([&] {
		// A few chunks (the common case) on the stack: no allocation.
		constexpr size_t kOnStack = 8;
		Chunk few[kOnStack];
		std::vector<Chunk> many(nchunks > kOnStack ? nchunks : 0);
		Chunk *v = nchunks > kOnStack ? many.data() : few;
		for (size_t i = 0; i < nchunks; i++) {
			if (!chunks[i].local)
				throw Error(HMEMREG_EINVAL, "write: chunk " + std::to_string(i) + " has no local region");
			if (chunks[i].local->owner != engine->e.get())
				throw Error(HMEMREG_EINVAL, "write: chunk " + std::to_string(i) +
								    "'s local region was registered with another engine");
			v[i] = {chunks[i].local->r.get(), chunks[i].local_offset, chunks[i].len, chunks[i].remote_offset};
		}
		// A handle only when asked for (allocated before posting: a failure posts nothing).
		std::unique_ptr<hmemreg_xfer> x = xfer ? std::make_unique<hmemreg_xfer>() : nullptr;
		TransferRef t;
		t = engine->e->write(peer, {v, nchunks}, {static_cast<const uint8_t *>(remote_desc), desc_len}, tag,
				     c_callback(cb, arg));
		if (x) {
			x->t = std::move(t);
			*xfer = x.release();
		}
		return 0;
	});
}

int hmemreg_engine_send(hmemreg_engine_t *engine, uint64_t peer, const void *data, size_t len, hmemreg_xfer_cb cb,
			void *arg, hmemreg_xfer_t **xfer)
{
	if (!engine || (!data && len))
		return fail(HMEMREG_EINVAL, "engine or data is NULL");
	return guard([&] {
		// A handle only when asked for (allocated before posting: a failure posts nothing).
		std::unique_ptr<hmemreg_xfer> x = xfer ? std::make_unique<hmemreg_xfer>() : nullptr;
		TransferRef t;
		t = engine->e->send(peer, {static_cast<const uint8_t *>(data), len}, c_callback(cb, arg));
		if (x) {
			x->t = std::move(t);
			*xfer = x.release();
		}
		return 0;
	});
}

int hmemreg_engine_sendv(hmemreg_engine_t *engine, uint64_t peer, const struct hmemreg_iov *iov, size_t niov,
			 hmemreg_xfer_cb cb, void *arg, hmemreg_xfer_t **xfer)
{
	return hmemreg_engine_sendv_flags(engine, peer, iov, niov, 0, cb, arg, xfer);
}

int hmemreg_engine_sendv_flags(hmemreg_engine_t *engine, uint64_t peer, const struct hmemreg_iov *iov, size_t niov,
			       uint32_t flags, hmemreg_xfer_cb cb, void *arg, hmemreg_xfer_t **xfer)
{
	if (!engine || (!iov && niov))
		return fail(HMEMREG_EINVAL, "engine or iov is NULL");
	if (const uint32_t unknown = flags & ~uint32_t{HMEMREG_SEND_TRANSMIT_COMPLETE | HMEMREG_SEND_BORROW})
		return fail(HMEMREG_EINVAL, ("unknown send flags " + std::to_string(unknown) +
					     " (defined: HMEMREG_SEND_TRANSMIT_COMPLETE, HMEMREG_SEND_BORROW)").c_str());
	const auto completion = (flags & HMEMREG_SEND_TRANSMIT_COMPLETE) ? Facade::SendCompletion::Transmitted
									  : Facade::SendCompletion::Delivered;
	const auto how = (flags & HMEMREG_SEND_BORROW) ? Facade::SendBody::Borrowed : Facade::SendBody::Copied;
	for (size_t i = 0; i < niov; i++)
		if (!iov[i].base && iov[i].len)
			return fail(HMEMREG_EINVAL, ("iov[" + std::to_string(i) + "].base is NULL").c_str());
	return guard([&] {
		// A handle only when asked for (allocated before posting: a failure posts nothing).
		std::unique_ptr<hmemreg_xfer> x = xfer ? std::make_unique<hmemreg_xfer>() : nullptr;
		TransferRef t;
		auto piece = [&](size_t i) {
			return std::span<const uint8_t>(static_cast<const uint8_t *>(iov[i].base), iov[i].len);
		};
		// The last piece is the body (borrowed with HMEMREG_SEND_BORROW),
		// the pieces before it the head (copied).
		if (niov <= 1) {
			t = engine->e->send(peer, {}, niov ? piece(0) : std::span<const uint8_t>(), c_callback(cb, arg),
					    completion, how);
		} else if (niov == 2) { // head + body: one copy of each, into the send buffer
			t = engine->e->send(peer, piece(0), piece(1), c_callback(cb, arg), completion, how);
		} else {
			Bytes head;
			for (size_t i = 0; i + 1 < niov; i++)
				head.insert(head.end(), piece(i).begin(), piece(i).end());
			t = engine->e->send(peer, head, piece(niov - 1), c_callback(cb, arg), completion, how);
		}
		if (x) {
			x->t = std::move(t);
			*xfer = x.release();
		}
		return 0;
	});
}

int hmemreg_engine_read_back(hmemreg_engine_t *engine, const hmemreg_region_t *region, uint64_t offset, size_t len,
			     hmemreg_xfer_t **xfer)
{
	if (!engine || !region || !xfer)
		return fail(HMEMREG_EINVAL, "engine, region or xfer is NULL");
	if (region->owner != engine->e.get())
		return fail(HMEMREG_EINVAL, "the region was registered with another engine");
	return guard([&] {
		auto x = std::make_unique<hmemreg_xfer>();
		x->t = engine->e->read_back(*region->r, offset, len);
		*xfer = x.release();
		return 0;
	});
}

int hmemreg_engine_nic_copy(hmemreg_engine_t *engine, const hmemreg_region_t *dst, uint64_t dst_offset,
			    const hmemreg_region_t *src, uint64_t src_offset, size_t len, hmemreg_xfer_t **xfer)
{
	if (!engine || !dst || !src || !xfer)
		return fail(HMEMREG_EINVAL, "engine, dst, src or xfer is NULL");
	if (dst->owner != engine->e.get() || src->owner != engine->e.get())
		return fail(HMEMREG_EINVAL, "a region was registered with another engine");
	return guard([&] {
		auto x = std::make_unique<hmemreg_xfer>();
		x->t = engine->e->nic_copy(*dst->r, dst_offset, *src->r, src_offset, len);
		*xfer = x.release();
		return 0;
	});
}

int hmemreg_xfer_test(const hmemreg_xfer_t *xfer)
{
	if (!xfer)
		return fail(HMEMREG_EINVAL, "xfer is NULL");
	int s = xfer->t->status();
	if (s < 0 && s != -HMEMREG_EAGAIN)
		last_error = xfer->t->error();
	return s;
}

int hmemreg_xfer_wait(hmemreg_engine_t *engine, const hmemreg_xfer_t *xfer, uint32_t timeout_ms)
{
	if (!engine || !xfer)
		return fail(HMEMREG_EINVAL, "engine or xfer is NULL");
	return guard([&] {
		if (!engine->e->wait(*xfer->t, std::chrono::milliseconds(timeout_ms)))
			return fail(HMEMREG_EAGAIN, "timed out");
		return hmemreg_xfer_test(xfer);
	});
}

void hmemreg_xfer_release(hmemreg_xfer_t *xfer)
{
	delete xfer;
}

int hmemreg_engine_path_stats(const hmemreg_engine_t *engine, struct hmemreg_engine_path_stats *out)
{
	if (!engine)
		return fail(HMEMREG_EINVAL, "engine is NULL");
	return guard([&] {
		PathStats p = engine->e->path_stats();
		struct hmemreg_engine_path_stats c{};
		c.direct_writes = p.direct_writes;
		c.staged_writes = p.staged_writes;
		c.staged_to_host_bytes = p.staged_to_host_bytes;
		c.staged_to_device_bytes = p.staged_to_device_bytes;
		c.staged_landings = p.staged_landings;
		c.staged_errors = p.staged_errors;
		c.immediate_notices = p.immediate_notices;
		c.immediate_abandoned = p.immediate_abandoned;
		c.immediate_pending = p.immediate_pending;
		c.immediate_writers = p.immediate_writers;
		c.immediate_writes = p.immediate_writes;
		c.message_writes = p.message_writes;
		c.device_regs_dmabuf = p.device_regs_dmabuf;
		c.device_regs_address = p.device_regs_address;
		return fill_sized(out, c, sizeof(struct hmemreg_engine_path_stats), "stats");
	});
}

int hmemreg_engine_progress(hmemreg_engine_t *engine)
{
	if (!engine)
		return fail(HMEMREG_EINVAL, "engine is NULL");
	return guard([&] { return static_cast<int>(std::min<size_t>(engine->e->progress(), INT32_MAX)); });
}

const char *hmemreg_engine_last_error(void)
{
	return last_error.c_str();
}

} // extern "C"
