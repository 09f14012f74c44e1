// SPDX-License-Identifier: MIT
// The engine's C API (hmemreg/engine.h): handles wrap the C++ objects,
// exceptions become negative HMEMREG_E* codes plus a per-thread message.
#include <cstring>
#include <new>

#include "engine/engine.hpp"
#include "hmemreg/hmemreg.h"

using namespace hmemreg;
using namespace hmemreg::engine;

struct hmemreg_engine {
	std::unique_ptr<Engine> e;
};
struct hmemreg_region {
	RegionRef r;
	Engine *owner;
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

TransferCallback c_callback(hmemreg_xfer_cb cb, void *arg)
{
	if (!cb)
		return {};
	return [cb, arg](const Transfer &t) { cb(arg, t.status()); };
}

} // namespace

extern "C" {

void hmemreg_engine_config_init(struct hmemreg_engine_config *cfg)
{
	std::memset(cfg, 0, sizeof(*cfg));
	cfg->rails = 1;
	cfg->progress_threads = 1;
	cfg->notify = HMEMREG_NOTIFY_AUTO;
}

int hmemreg_engine_create(const struct hmemreg_engine_config *cfg, hmemreg_engine_t **out)
{
	if (!cfg || !out)
		return fail(HMEMREG_EINVAL, "config or out is NULL");
	return guard([&] {
		Config c;
		if (cfg->provider)
			c.provider = cfg->provider;
		if (cfg->node)
			c.node = cfg->node;
		if (cfg->domain)
			c.domain = cfg->domain;
		c.rails = cfg->rails ? cfg->rails : 1;
		c.progress_threads = cfg->progress_threads;
		c.queue_depth = cfg->queue_depth;
		if (cfg->max_message)
			c.max_message = cfg->max_message;
		if (cfg->max_transfers)
			c.max_transfers = cfg->max_transfers;
		c.peer_timeout_ms = cfg->peer_timeout_ms == 0			       ? Config::kPeerTimeoutDefault
				    : cfg->peer_timeout_ms == HMEMREG_PEER_TIMEOUT_NEVER ? 0
											  : cfg->peer_timeout_ms;
		switch (cfg->notify) {
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
			throw Error(HMEMREG_EINVAL, "config notify " + std::to_string(cfg->notify) +
							    " is not one of HMEMREG_NOTIFY_AUTO, _IMMEDIATE, _MESSAGE");
		}
		auto h = std::make_unique<hmemreg_engine>();
		h->e = std::make_unique<Engine>(c);
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
		*out = r.release();
		return 0;
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

int hmemreg_engine_write(hmemreg_engine_t *engine, uint64_t peer, const struct hmemreg_chunk *chunks, size_t nchunks,
			 const void *remote_desc, size_t desc_len, uint64_t tag, hmemreg_xfer_cb cb, void *arg,
			 hmemreg_xfer_t **xfer)
{
	if (!engine || (!chunks && nchunks) || !remote_desc)
		return fail(HMEMREG_EINVAL, "engine, chunks or remote_desc is NULL");
	return guard([&] {
		std::vector<Chunk> v(nchunks);
		for (size_t i = 0; i < nchunks; i++) {
			if (!chunks[i].local)
				throw Error(HMEMREG_EINVAL, "write: chunk " + std::to_string(i) + " has no local region");
			if (chunks[i].local->owner != engine->e.get())
				throw Error(HMEMREG_EINVAL, "write: chunk " + std::to_string(i) +
								    "'s local region was registered with another engine");
			v[i] = {chunks[i].local->r.get(), chunks[i].local_offset, chunks[i].len, chunks[i].remote_offset};
		}
		auto x = std::make_unique<hmemreg_xfer>();
		x->t = engine->e->write(peer, v, {static_cast<const uint8_t *>(remote_desc), desc_len}, tag,
					c_callback(cb, arg));
		if (xfer)
			*xfer = x.release();
		return 0;
	});
}

int hmemreg_engine_send(hmemreg_engine_t *engine, uint64_t peer, const void *data, size_t len, hmemreg_xfer_cb cb,
			void *arg, hmemreg_xfer_t **xfer)
{
	if (!engine || (!data && len))
		return fail(HMEMREG_EINVAL, "engine or data is NULL");
	return guard([&] {
		auto x = std::make_unique<hmemreg_xfer>();
		x->t = engine->e->send(peer, {static_cast<const uint8_t *>(data), len}, c_callback(cb, arg));
		if (xfer)
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
	if (!engine || !out)
		return fail(HMEMREG_EINVAL, "engine or out is NULL");
	return guard([&] {
		PathStats p = engine->e->path_stats();
		*out = {p.direct_writes,	  p.staged_writes,   p.staged_to_host_bytes,
			p.staged_to_device_bytes, p.staged_landings, p.staged_errors};
		return 0;
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
