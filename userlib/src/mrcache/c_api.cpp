// SPDX-License-Identifier: MIT
// The C API of hmemreg/cache.h over hmemreg::mr::Cache.
#include <cstring>
#include <memory>
#include <new>
#include <unistd.h>

#include <rdma/fabric.h>

#include "fabric/info.hpp"
#include "hmem/cuda_memory.hpp"
#include "hmemreg/hmemreg.h"
#include "mrcache/cache_hit.inl"
#include "export/export_table.hpp"
#include "mrcache/fabric_registrar.hpp"

struct hmemreg_cache {
	std::unique_ptr<hmemreg::mr::Cache> core;
};

namespace {

using namespace hmemreg::mr;

int make(std::unique_ptr<Registrar> reg, const hmemreg_cache_config *cfg, hmemreg_cache **out)
{
	hmemreg_cache_config c;
	if (cfg) {
		if (cfg->size < sizeof(hmemreg_cache_config) || cfg->monitor > HMEMREG_MONITOR_NONE)
			return -HMEMREG_EINVAL;
		c = *cfg;
	} else {
		int rc = hmemreg_cache_config_init(&c);
		if (rc)
			return rc;
	}
	auto h = std::unique_ptr<hmemreg_cache>(new (std::nothrow) hmemreg_cache);
	if (!h)
		return -HMEMREG_ENOMEM;
	int rc = Cache::create(std::move(reg), c, h->core);
	if (rc)
		return rc;
	*out = h.release(); // owned by the caller until hmemreg_cache_destroy()
	return 0;
}

// handle_ is the entry with the counter shard in its low bits (entries are
// 64-byte aligned): the put takes the reference back where the get put it.
static_assert(kCountShards <= 64);
void fill(hmemreg_mr *out, const RawRef &l)
{
	out->handle_ = reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(l.entry) | l.shard);
	out->mr = static_cast<fid_mr *>(l.handle);
	out->desc = l.desc;
	out->key = l.key;
	out->start = l.range.start;
	out->end = l.range.end;
	out->flags = l.cached ? HMEMREG_MR_CACHED : 0;
	out->reserved = 0;
}

} // namespace

extern "C" int hmemreg_cache_create_fabric(struct fid_domain *domain, const struct hmemreg_cache_config *cfg,
					   struct hmemreg_cache **out)
{
	if (!out)
		return -HMEMREG_EINVAL;
	*out = nullptr;
	if (!FabricRegistrar::is_domain(domain))
		return -HMEMREG_EINVAL;
	try {
		return make(std::make_unique<FabricRegistrar>(domain), cfg, out);
	} catch (const std::bad_alloc &) {
		return -HMEMREG_ENOMEM;
	}
}

extern "C" int hmemreg_cache_create_fabric_info(struct fid_domain *domain, const struct fi_info *info,
						const struct hmemreg_cache_config *cfg, struct hmemreg_cache **out)
{
	if (!out)
		return -HMEMREG_EINVAL;
	*out = nullptr;
	if (!FabricRegistrar::is_domain(domain) || !info || !info->fabric_attr || !info->fabric_attr->api_version ||
	    info->fabric_attr->api_version > fi_version())
		return -HMEMREG_EINVAL;
	try {
		FabricRegistrar::Facts f;
		f.api_version = info->fabric_attr->api_version;
		f.hmem = (info->caps & FI_HMEM) ? FabricRegistrar::Facts::yes : FabricRegistrar::Facts::no;
		// FI_HMEM without CUDA in this libfabric: CUDA memory is refused here.
		if (f.hmem == FabricRegistrar::Facts::yes && hmemreg::cuda::available() &&
		    !FabricRegistrar::registers_cuda(domain, nullptr))
			f.hmem = FabricRegistrar::Facts::no;
		return make(std::make_unique<FabricRegistrar>(domain, 0, nullptr, f), cfg, out);
	} catch (const std::bad_alloc &) {
		return -HMEMREG_ENOMEM;
	}
}

extern "C" uint32_t hmemreg_fabric_api_version(void)
{
	return hmemreg::fabric::api_version();
}

extern "C" int hmemreg_cache_create_memory(const struct hmemreg_cache_config *cfg, struct hmemreg_cache **out)
{
	if (!out)
		return -HMEMREG_EINVAL;
	*out = nullptr;
	try {
		return make(std::make_unique<MemoryRegistrar>(), cfg, out);
	} catch (const std::bad_alloc &) {
		return -HMEMREG_ENOMEM;
	}
}

extern "C" int hmemreg_cache_destroy(struct hmemreg_cache *cache)
{
	if (!cache)
		return 0;
	if (cache->core->in_use())
		return -HMEMREG_EBUSY;
	delete cache; // allocated by make()
	return 0;
}

namespace {

// A request as the C API received it (validated but for addr and len).
struct Args {
	const void *addr;
	size_t len;
	Iface iface;
	uint64_t device;
	const hmemreg_mr_request *req; // the rest, or null: host memory, defaults
};

// What the hit path does not do: misses, checked hits, NO_CACHE, errors.
// Out of line, and the only place a Request and a RawRef live in memory.
__attribute__((noinline)) int get_slow(hmemreg_cache *cache, Args a, hmemreg_mr *out)
{
	Request r;
	r.addr = a.addr;
	r.len = a.len;
	r.iface = a.iface;
	r.device = a.device;
	if (a.req) {
		r.dmabuf_fd = a.req->dmabuf_fd;
		r.dmabuf_offset = a.req->dmabuf_offset;
		r.flags = a.req->flags;
	}
	RawRef l;
	try {
		int rc = cache->core->get_slow(r, l);
		if (rc)
			return rc;
	} catch (const std::bad_alloc &) {
		return -HMEMREG_ENOMEM;
	}
	fill(out, l);
	return 0;
}

// The hit path's output (Cache::memo_hit): the slot's copies go straight
// to the caller's struct (a miss or an error overwrites them), handle_
// only once the hit is certain (get() below).
struct MrOut {
	hmemreg_mr *m;
	Entry *entry = nullptr;
	unsigned shard = 0;
	template <typename View>
	void view(const View &v)
	{
		m->mr = static_cast<fid_mr *>(v.handle);
		m->desc = v.desc;
		m->key = v.key;
		m->start = v.range.start;
		m->end = v.range.end;
	}
	void held(Entry *e, unsigned s)
	{
		entry = e;
		shard = s;
	}
	Entry *held_entry() const { return entry; }
	unsigned held_shard() const { return shard; }
};

// The lock-free hit: true with *out filled and a reference counted.
__attribute__((always_inline)) inline bool hit(hmemreg_cache *cache, uintptr_t s, size_t len, Iface iface,
					       uint64_t device, hmemreg_mr *out)
{
	MrOut o{out};
	if (!cache->core->try_hit(iface, device, s, s + len, o))
		return false;
	out->handle_ = reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(o.entry) | o.shard);
	out->flags = HMEMREG_MR_CACHED;
	out->reserved = 0;
	return true;
}

// Both get entry points: the lock-free hit inline (Cache::try_hit), else
// get_slow().
__attribute__((always_inline)) inline int get(hmemreg_cache *cache, Args a, hmemreg_mr *out)
{
	uintptr_t s = reinterpret_cast<uintptr_t>(a.addr);
	if (!a.addr || !a.len || s + a.len < s)
		return -HMEMREG_EINVAL;
	if (!(a.req && (a.req->flags & HMEMREG_MR_NO_CACHE)) && hit(cache, s, a.len, a.iface, a.device, out))
		[[likely]]
		return 0;
	return get_slow(cache, a, out);
}

} // namespace

extern "C" int hmemreg_mr_get_req(struct hmemreg_cache *cache, const struct hmemreg_mr_request *req,
				  struct hmemreg_mr *out)
{
	if (!cache || !req || !out || req->size < sizeof(hmemreg_mr_request) || req->iface >= HMEMREG_IFACE_MAX ||
	    req->iface == HMEMREG_IFACE_KMOD_EXPORT || (req->flags & ~HMEMREG_MR_NO_CACHE))
		return -HMEMREG_EINVAL;
	auto iface = static_cast<Iface>(req->iface);
	return get(cache, Args{req->addr, req->len, iface, iface == Iface::host ? 0 : req->device, req}, out);
}

extern "C" int hmemreg_mr_get(struct hmemreg_cache *cache, const void *addr, size_t len, struct hmemreg_mr *out)
{
	if (!cache || !out)
		return -HMEMREG_EINVAL;
	return get(cache, Args{addr, len, Iface::host, 0, nullptr}, out);
}

namespace {

// hmemreg_mr_put's steps after the fast one, out of line (tail calls).
__attribute__((noinline)) int put_slow(hmemreg_cache *cache, hmemreg_mr *mr)
{
	auto h = reinterpret_cast<uintptr_t>(mr->handle_);
	int rc = cache->core->put(reinterpret_cast<Entry *>(h & ~uintptr_t{63}), static_cast<unsigned>(h & 63));
	if (rc == 0)
		mr->handle_ = nullptr;
	return rc;
}
__attribute__((noinline)) int put_orphan(hmemreg_cache *cache, Entry *e)
{
	cache->core->release_orphan(e);
	return 0;
}

} // namespace

extern "C" int hmemreg_mr_put(struct hmemreg_cache *cache, struct hmemreg_mr *mr)
{
	if (!cache || !mr || !mr->handle_)
		return -HMEMREG_EINVAL;
	auto h = reinterpret_cast<uintptr_t>(mr->handle_);
	auto *e = reinterpret_cast<Entry *>(h & ~uintptr_t{63});
	Cache::PutStep step = cache->core->try_put(e, static_cast<unsigned>(h & 63));
	if (step == Cache::kPutSlow) [[unlikely]]
		return put_slow(cache, mr);
	mr->handle_ = nullptr;
	if (step == Cache::kPutOrphan) [[unlikely]]
		return put_orphan(cache, e);
	return 0;
}

extern "C" int hmemreg_cache_invalidate(struct hmemreg_cache *cache, uint32_t iface, const void *addr, size_t len)
{
	uintptr_t s = reinterpret_cast<uintptr_t>(addr);
	if (!cache || iface >= HMEMREG_IFACE_MAX || !len || s + len < s)
		return -HMEMREG_EINVAL;
	return cache->core->invalidate(static_cast<Iface>(iface), s, s + len, Cause::explicit_call);
}

extern "C" int hmemreg_cache_flush(struct hmemreg_cache *cache)
{
	if (!cache)
		return -HMEMREG_EINVAL;
	return cache->core->flush();
}

extern "C" int hmemreg_cache_get_stats(struct hmemreg_cache *cache, struct hmemreg_cache_stats *out)
{
	if (!cache || !out)
		return -HMEMREG_EINVAL;
	cache->core->stats(*out);
	return 0;
}

extern "C" int hmemreg_cache_monitor(struct hmemreg_cache *cache)
{
	if (!cache)
		return -HMEMREG_EINVAL;
	return cache->core->monitor_kind();
}

// hmemreg.ko exports (hmemreg/export.h): the cache's side.
extern "C" int hmemreg_mr_get_export(struct hmemreg_cache *cache, const hmemreg_export_t *exp, uint64_t offset,
				     size_t len, struct hmemreg_mr *out)
{
	if (!cache || !out) {
		set_export_error("hmemreg_mr_get_export: cache or out is NULL");
		return -HMEMREG_EINVAL;
	}
	Request r;
	// A hit takes no lock: the export's live flag and generation word, then
	// the cache's own hit (which checks that word again, after referencing).
	if (export_hit_request(exp, offset, len, r) &&
	    hit(cache, reinterpret_cast<uintptr_t>(r.addr), r.len, r.iface, r.device, out)) [[likely]]
		return 0;
	std::string why;
	int rc = export_request(exp, offset, len, r, &why);
	if (rc) {
		set_export_error("hmemreg_mr_get_export: " + why);
		return rc;
	}
	hmemreg_mr_request req{};
	req.size = sizeof(req);
	req.iface = HMEMREG_IFACE_KMOD_EXPORT;
	req.dmabuf_fd = r.dmabuf_fd;
	req.dmabuf_offset = r.dmabuf_offset;
	rc = get(cache, Args{r.addr, r.len, r.iface, r.device, &req}, out);
	if (rc)
		set_export_error(std::string("hmemreg_mr_get_export: ") + hmemreg_strerror(rc));
	return rc;
}
