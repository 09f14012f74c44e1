/* SPDX-License-Identifier: MIT */
/*
 * libhmemreg: the memory registration cache (C API).
 *
 * A cache belongs to one registration domain (a libfabric struct fid_domain,
 * or the in-memory test registrar). hmemreg_mr_get() returns a registration
 * covering [addr, addr + len) of the given memory kind and device, from the
 * cache when it holds one, else registering it; hmemreg_mr_put() releases it.
 * The cache learns that memory went away from a monitor (the hmemreg kernel
 * module, else userfaultfd) and never hands out a registration whose memory
 * was unmapped, zapped or remapped. It is bounded by a count and a byte limit
 * (least recently released unused entries are evicted); when every entry is
 * in use it registers "uncached" rather than fail.
 *
 * Thread safety: every call may be made from any thread concurrently, except
 * hmemreg_cache_destroy() (no other call on that cache may run or follow).
 * Errors: 0 or a negative HMEMREG_E* code; hmemreg_strerror() gives text.
 *
 * Environment (read by hmemreg_cache_config_init(); the struct wins when the
 * caller changes a field after init):
 *   HMEMREG_MR_CACHE_MAX_COUNT       max cached registrations (default 1024;
 *                                    0 disables caching: every get registers)
 *   HMEMREG_MR_CACHE_MAX_SIZE        max bytes covered by cached registrations
 *                                    (default: half of physical memory;
 *                                    suffixes K, M, G, T)
 *   HMEMREG_MR_CACHE_MAX_ENTRY_SIZE  larger registrations are never cached
 *                                    (default 0 = only MAX_SIZE applies)
 *   HMEMREG_MR_CACHE_MONITOR         auto (default: kmod if /dev/hmemreg is
 *                                    usable, else uffd), kmod, uffd, none
 *   HMEMREG_MR_CACHE_PURGE_ON_FORK   1 (default): deregister unused entries
 *                                    before fork(); 0: keep them
 *   HMEMREG_MR_CACHE_STATS           1 (default): publish the shared-memory
 *                                    stats block (hmemreg/stats.h); 0: do not
 *   HMEMREG_KEEP_PROVIDER_MR_CACHE   unset (default): when libhmemreg is
 *                                    loaded it sets FI_MR_CACHE_MONITOR=
 *                                    disabled and FI_MR_{CUDA,ROCR,ZE}_CACHE_
 *                                    MONITOR_ENABLED=0 (each unless already
 *                                    set), so libfabric providers do not
 *                                    cache registrations underneath this
 *                                    cache (double caching is a known source
 *                                    of stale keys); providers' IPC handle
 *                                    caches (shm's CUDA IPC) keep working;
 *                                    1: leave libfabric's caches alone
 *   HMEMREG_FABRIC_API               MAJOR.MINOR: cap the libfabric API
 *                                    version libhmemreg asks for (default:
 *                                    the newest of 2.0, 1.20, 1.17 that the
 *                                    runtime accepts)
 *
 * Monitors:
 *   kmod  one watch per entry in hmemreg.ko; a hit checks the watch's
 *         generation word (one load), so memory unmapped before the get is
 *         never returned, even before the event is read.
 *   uffd  userfaultfd UNMAP/REMOVE/REMAP events for host memory; the
 *         unmapping thread is held by the kernel until the monitor thread
 *         read the event, and gets wait until it was applied.
 *   none  nothing watches memory: the caller invalidates
 *         (hmemreg_cache_invalidate) before freeing or reusing memory.
 * With monitor "auto" and neither kmod nor uffd usable, the cache says so
 * once on stderr and registers everything uncached (monitor "unavailable").
 * Memory a monitor cannot watch (device memory without a device hook, a
 * range uffd refuses) is registered uncached.
 *
 * fork(): registrations are not valid in a child. In a child the cache is
 * empty and caches nothing: each get registers anew (whether the registrar
 * works after fork is its provider's business) and each put deregisters;
 * putting a handle obtained in the parent returns -HMEMREG_ESTALE and
 * releases nothing. With PURGE_ON_FORK the parent deregisters its unused
 * entries before fork().
 */
#ifndef HMEMREG_CACHE_H
#define HMEMREG_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include <hmemreg/common.h>
#include <hmemreg/stats.h>

#ifdef __cplusplus
extern "C" {
#endif

struct fid_domain;
struct fid_mr;
struct fi_info;
struct hmemreg_cache; /* opaque */

/* Memory kinds (values match libfabric's enum fi_hmem_iface). */
enum hmemreg_iface {
	HMEMREG_IFACE_HOST = 0,
	HMEMREG_IFACE_CUDA = 1,
	HMEMREG_IFACE_ROCR = 2,
	HMEMREG_IFACE_ZE = 3,
	HMEMREG_IFACE_NEURON = 4,
	HMEMREG_IFACE_SYNAPSEAI = 5,
	/* Not a libfabric iface: an hmemreg.ko export (hmemreg/export.h),
	 * device = its ledger id; registered as FI_HMEM_SYSTEM with
	 * FI_MR_DMABUF. Only through hmemreg_mr_get_export(). */
	HMEMREG_IFACE_KMOD_EXPORT = 6,
	HMEMREG_IFACE_MAX
};

enum hmemreg_monitor {
	HMEMREG_MONITOR_AUTO = 0,
	HMEMREG_MONITOR_KMOD = 1,
	HMEMREG_MONITOR_UFFD = 2,
	HMEMREG_MONITOR_NONE = 3,
	HMEMREG_MONITOR_UNAVAILABLE = 4, /* reported only: auto found none */
};

struct hmemreg_cache_config {
	uint32_t size;           /* sizeof(struct hmemreg_cache_config) */
	uint32_t monitor;        /* enum hmemreg_monitor */
	uint64_t max_count;
	uint64_t max_size;
	uint64_t max_entry_size; /* 0: no per-entry ceiling */
	uint32_t purge_on_fork;  /* 0 or 1 */
	uint32_t publish_stats;  /* 0 or 1 */
	char name[32];           /* shows in the stats block */
};

/* Defaults, then the HMEMREG_MR_CACHE_* environment. Returns 0 or
 * -HMEMREG_EINVAL (null, or an unparsable variable: named on stderr). */
int hmemreg_cache_config_init(struct hmemreg_cache_config *cfg);

/*
 * A cache registering with fi_mr_regattr() on @domain (which must be an
 * open libfabric domain and outlive the cache). @cfg NULL: defaults + env.
 * Errors: -HMEMREG_EINVAL (null, not a domain, bad config), -HMEMREG_ENOTSUP
 * (the configured monitor is not available here), -HMEMREG_ENOMEM.
 */
int hmemreg_cache_create_fabric(struct fid_domain *domain, const struct hmemreg_cache_config *cfg,
				struct hmemreg_cache **out);

/*
 * The same, for a domain opened from @info (the fi_info given to
 * fi_domain(); only read here). Its API version (fabric_attr->api_version,
 * stamped by fi_getinfo) at 1.20 or later: device memory registers through
 * FI_MR_DMABUF (the request's dmabuf_fd, or for CUDA memory the
 * allocation's own export) where the provider takes it, else by address
 * with iface and device. Without FI_HMEM in info->caps, device memory is
 * refused (-HMEMREG_ENOTSUP) instead of reaching a provider that might take
 * it for host memory. hmemreg_cache_create_fabric() knows neither: it never
 * uses FI_MR_DMABUF and lets the provider judge device memory. Also
 * -HMEMREG_EINVAL for a null @info or an API version newer than the runtime.
 */
int hmemreg_cache_create_fabric_info(struct fid_domain *domain, const struct fi_info *info,
				     const struct hmemreg_cache_config *cfg, struct hmemreg_cache **out);

/*
 * The libfabric API version libhmemreg's own fi_getinfo() calls use with
 * the libfabric loaded in this process: the newest of 2.0, 1.20 and 1.17
 * that fi_version() accepts (HMEMREG_FABRIC_API caps it). For callers that
 * open domains to hand to hmemreg_cache_create_fabric_info().
 */
uint32_t hmemreg_fabric_api_version(void);

/*
 * A cache over the in-memory registrar (registers nothing, keys are serial
 * numbers, mr and desc are NULL): for tests and for measuring the cache
 * alone. Same errors as above.
 */
int hmemreg_cache_create_memory(const struct hmemreg_cache_config *cfg, struct hmemreg_cache **out);

/*
 * Deregister everything and free the cache. -HMEMREG_EBUSY (and nothing
 * changes) while any registration from it is still held; NULL is a no-op.
 */
int hmemreg_cache_destroy(struct hmemreg_cache *cache);

/* hmemreg_mr_request.flags */
#define HMEMREG_MR_NO_CACHE (1U << 0) /* register uncached, bypass the index */

struct hmemreg_mr_request {
	uint32_t size;          /* sizeof(struct hmemreg_mr_request) */
	uint32_t iface;         /* enum hmemreg_iface */
	const void *addr;
	uint64_t len;
	uint64_t device;        /* device ordinal for device memory kinds */
	int32_t dmabuf_fd;      /* -1, or a DMA-BUF of the memory */
	uint32_t flags;         /* HMEMREG_MR_* */
	uint64_t dmabuf_offset; /* where addr sits inside the DMA-BUF */
};

/* hmemreg_mr.flags */
#define HMEMREG_MR_CACHED (1U << 0) /* in the index (else uncached) */

/*
 * A held registration. Caller-owned storage; fill it with a get, release it
 * with one put (which clears @handle_; a second put with the same struct
 * returns -HMEMREG_EINVAL). @mr/@desc/@key are what fi_mr_regattr returned
 * (NULL/NULL/serial for the memory registrar); [@start, @end) is the range
 * actually registered (it covers the request).
 */
struct hmemreg_mr {
	void *handle_;          /* private */
	struct fid_mr *mr;
	void *desc;
	uint64_t key;
	uint64_t start;
	uint64_t end;
	uint32_t flags;
	uint32_t reserved;
};

/*
 * Get a registration covering [addr, addr + len) of host memory.
 * Errors: -HMEMREG_EINVAL (null cache/out/addr, len 0, addr + len
 * overflows), -HMEMREG_ENOMEM, -HMEMREG_EFABRIC (the provider refused; see
 * errno-style detail on stderr with FI_LOG_LEVEL), -HMEMREG_ENOTSUP.
 * On error @out->handle_ is unchanged and its other fields are undefined.
 */
int hmemreg_mr_get(struct hmemreg_cache *cache, const void *addr, size_t len, struct hmemreg_mr *out);

/* Same with memory kind, device, DMA-BUF and flags. Also -HMEMREG_EINVAL
 * for an unknown iface or request size. */
int hmemreg_mr_get_req(struct hmemreg_cache *cache, const struct hmemreg_mr_request *req, struct hmemreg_mr *out);

/*
 * Release a registration. -HMEMREG_EINVAL: null, already put, or not from
 * this cache; -HMEMREG_ESTALE: obtained before fork() in the parent.
 */
int hmemreg_mr_put(struct hmemreg_cache *cache, struct hmemreg_mr *mr);

/*
 * Drop every entry overlapping [addr, addr + len) of @iface (all devices):
 * in-use entries leave the index now and are deregistered at their last
 * put. For callers with monitor "none", or that know better. Returns the
 * number of entries dropped (>= 0) or -HMEMREG_EINVAL.
 */
int hmemreg_cache_invalidate(struct hmemreg_cache *cache, uint32_t iface, const void *addr, size_t len);

/* Deregister every unused entry now. Returns how many, or -HMEMREG_EINVAL. */
int hmemreg_cache_flush(struct hmemreg_cache *cache);

/* Counters of this cache. -HMEMREG_EINVAL on null. */
int hmemreg_cache_get_stats(struct hmemreg_cache *cache, struct hmemreg_cache_stats *out);

/* The monitor in use (enum hmemreg_monitor), or -HMEMREG_EINVAL. */
int hmemreg_cache_monitor(struct hmemreg_cache *cache);

#ifdef __cplusplus
}
#endif

#endif /* HMEMREG_CACHE_H */
