/* SPDX-License-Identifier: MIT */
/*
 * libhmemreg: hmemreg.ko's exports as a memory kind.
 *
 * An export is one DMA-BUF made by the kernel module: emulated device memory
 * (a DEVMEM allocation of the module's pool, mapped here for the CPU through
 * the DMA-BUF) or a range of this process's host memory pinned long-term by
 * the module. Registrations of an export (hmemreg_mr_get_export, or the
 * engine's hmemreg_engine_reg_export) hand its DMA-BUF fd to libfabric with
 * FI_MR_DMABUF (API >= 1.20; iface FI_HMEM_SYSTEM, since the pages are
 * system RAM), so the NIC imports the DMA-BUF and the module's ledger shows
 * it as the importer. Below API 1.20, or where the provider refuses
 * FI_MR_DMABUF, they register the export's CPU address instead; libfabric's
 * util providers (tcp, shm, ...) accept FI_MR_DMABUF but turn it back into
 * that address (no import): hmemreg_engine_describe says which applies.
 *
 * The caches index these registrations by export (memory kind
 * HMEMREG_IFACE_KMOD_EXPORT, device = the export's ledger id), and never
 * hand one out once the export is gone:
 *   - hmemreg_export_free() drops the export's registrations from every
 *     cache (deregistering, so the NIC unpins) before it frees the memory;
 *   - a host export whose range is unmapped (or zapped) is stale at once:
 *     the module zeroes its watch's generation word before the munmap
 *     returns and every hit checks it; a library thread reading the
 *     module's event ring then drops its registrations (and their pins).
 *
 * Not for use across fork(): a child cannot use its parent's exports.
 * Every function returns 0 or a negative HMEMREG_E* code; on failure
 * hmemreg_export_last_error() says what was wrong (calling thread).
 */
#ifndef HMEMREG_EXPORT_H
#define HMEMREG_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include <hmemreg/common.h>
#include <hmemreg/cache.h>

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

/* (struct hmemreg_export is the module's ioctl argument, linux/hmemreg.h) */
typedef struct hmemreg_export_handle hmemreg_export_t;

/*
 * Allocate @len bytes (a page multiple, > 0) of the module's emulated
 * device memory, export them as a writable DMA-BUF and map them for the CPU
 * (hmemreg_export_addr; zero-filled).
 * Errors: -HMEMREG_EINVAL (null @out, @len 0 or not page aligned),
 * -HMEMREG_ENODEV (hmemreg.ko is not loaded), -HMEMREG_EACCES,
 * -HMEMREG_ENOTSUP (the module's pool is off: devmem_mb=0),
 * -HMEMREG_ENOMEM (the pool has no room, or out of memory), -HMEMREG_ESYS.
 */
int hmemreg_export_devmem(size_t len, hmemreg_export_t **out);

/*
 * Export [@addr, @addr + @len) of this process's memory (page aligned,
 * mapped writable) as a writable DMA-BUF, with the module watching the range.
 * Errors: -HMEMREG_EINVAL (null, 0 or unaligned, not mapped writable),
 * -HMEMREG_ENODEV, -HMEMREG_EACCES, -HMEMREG_ENOMEM (RLIMIT_MEMLOCK, pool
 * of watches), -HMEMREG_ESYS.
 */
int hmemreg_export_host(void *addr, size_t len, hmemreg_export_t **out);

/*
 * Drop the export's registrations from every cache of this process, then
 * release it (DEVMEM: unmap and free the memory). -HMEMREG_EBUSY when a
 * registration of it is still held (a region, a transfer, an unput mr):
 * the export stays usable and its cached registrations are gone; release
 * them and call again. NULL is a no-op (0).
 */
int hmemreg_export_free(hmemreg_export_t *exp);

/* The CPU address of the export (DEVMEM: its mapping; HOST: @addr). */
void *hmemreg_export_addr(const hmemreg_export_t *exp);
size_t hmemreg_export_len(const hmemreg_export_t *exp);
/* The DMA-BUF fd (owned by the export: do not close it). */
int hmemreg_export_fd(const hmemreg_export_t *exp);
/* The module's ledger id of the export (mr_cache_stat --kernel shows it). */
uint64_t hmemreg_export_id(const hmemreg_export_t *exp);
/* 1 for device memory (DEVMEM), 0 for host memory. */
int hmemreg_export_is_devmem(const hmemreg_export_t *exp);
/* 0 while usable; -HMEMREG_ESTALE once a host export's range was unmapped
 * or zapped; -HMEMREG_EINVAL for NULL. */
int hmemreg_export_check(const hmemreg_export_t *exp);

/* Message of the last failed hmemreg_export_* / hmemreg_mr_get_export call
 * on this thread ("" if none). */
const char *hmemreg_export_last_error(void);

/*
 * A registration covering [@offset, @offset + @len) of the export, from
 * @cache (one of hmemreg_cache_create_fabric*; see above for the path it
 * takes). Put it with hmemreg_mr_put(). Errors: -HMEMREG_EINVAL (null, @len
 * 0, past the export's end), -HMEMREG_ESTALE (the export's host range was
 * unmapped), -HMEMREG_ENOENT (the export was freed), and those of
 * hmemreg_mr_get().
 */
int hmemreg_mr_get_export(struct hmemreg_cache *cache, const hmemreg_export_t *exp, uint64_t offset, size_t len,
			  struct hmemreg_mr *out);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* HMEMREG_EXPORT_H */
