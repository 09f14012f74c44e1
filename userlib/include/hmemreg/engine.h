/* SPDX-License-Identifier: MIT */
/*
 * libhmemreg transfer engine: zero-copy RDMA WRITE of scattered chunks between
 * processes over libfabric, with dynamic peers and small control messages.
 *
 *   engine   one or more rails (NICs) of one provider; its address is a blob
 *   peer     added from the peer engine's address blob, removable at any time
 *   region   local memory registered on every rail; its descriptor is a blob
 *            the application ships to peers (address, length, keys)
 *   write    chunks (local region+offset+len -> remote offset in a descriptor);
 *            one RDMA WRITE per chunk (small chunks may share one), striped
 *            over rails; completes once for the caller (callback and/or xfer
 *            handle: the source buffers may be reused) and once for the
 *            target (notify callback with the writer's tag: the data is in
 *            place). Only the target's notify says the data landed: where the
 *            provider has remote CQ data, the caller's completion can come
 *            first (see Config::notify in engine.hpp).
 *   send     a control message; the target's message callback gets it
 *
 * Every function returns 0 or a negative HMEMREG_E* code; on failure,
 * hmemreg_engine_last_error() gives the message for the calling thread.
 * Callbacks run on the thread driving progress (a progress thread, or the
 * caller of hmemreg_engine_progress / hmemreg_xfer_wait).
 */
#ifndef HMEMREG_ENGINE_H
#define HMEMREG_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include <hmemreg/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libhmemreg.so (built with -fvisibility=hidden). */
#pragma GCC visibility push(default)

typedef struct hmemreg_engine hmemreg_engine_t;
typedef struct hmemreg_region hmemreg_region_t;
typedef struct hmemreg_xfer hmemreg_xfer_t;

/* How a write's target learns the data landed (see Config::notify in
 * engine.hpp): immediate data where the provider carries remote CQ data
 * (auto), always (creation fails with -HMEMREG_ENOTSUP where it cannot), or
 * a message after delivery-complete writes. */
enum hmemreg_engine_notify {
	HMEMREG_NOTIFY_AUTO = 0,
	HMEMREG_NOTIFY_IMMEDIATE = 1,
	HMEMREG_NOTIFY_MESSAGE = 2,
};

struct hmemreg_engine_config {
	const char *provider;      /* "tcp;ofi_rxm", "shm", "verbs;ofi_rxm"; NULL: best */
	const char *node;          /* address to open endpoints on; NULL: default */
	const char *domain;        /* NIC name filter; NULL: any */
	uint32_t rails;            /* 0 -> 1 */
	uint32_t progress_threads; /* 0: the caller drives progress */
	uint32_t queue_depth;      /* in-flight ops per rail; 0: provider's tx size */
	uint32_t max_message;      /* control message payload; 0 -> 4096 */
	uint32_t max_transfers;    /* active transfers; 0 -> 4096 */
	uint32_t notify;           /* enum hmemreg_engine_notify; other values: -HMEMREG_EINVAL */
	/* A peer with unfinished transfers and no completion for this long is
	 * declared dead: its transfers fail (-HMEMREG_EFABRIC), new ones are
	 * refused until it is removed and added again. 0: the default, which is
	 * HMEMREG_PEER_TIMEOUT_MS from the environment (milliseconds, 0 = never;
	 * a value that does not parse fails creation with -HMEMREG_EINVAL), else
	 * 10000 ms; HMEMREG_PEER_TIMEOUT_NEVER: never; at most 86400000 (a day).
	 * hmemreg_engine_describe says which is in force. */
	uint32_t peer_timeout_ms;
};

#define HMEMREG_PEER_TIMEOUT_NEVER UINT32_MAX

/* Fills *cfg with the defaults (1 rail, 1 progress thread, best provider,
 * HMEMREG_NOTIFY_AUTO). */
void hmemreg_engine_config_init(struct hmemreg_engine_config *cfg);

int hmemreg_engine_create(const struct hmemreg_engine_config *cfg, hmemreg_engine_t **out);
/* Stops progress, fails pending transfers and runs their callbacks, closes
 * everything: once it returns, no callback of this engine runs or is running. */
void hmemreg_engine_destroy(hmemreg_engine_t *engine);

/* Provider, rails, capabilities and decisions, as text (NUL-terminated,
 * truncated to len). Returns the full length. */
size_t hmemreg_engine_describe(const hmemreg_engine_t *engine, char *buf, size_t len);

/* Address blob: with buf NULL or *len too small, sets *len and returns
 * -HMEMREG_EINVAL (buf NULL: 0). */
int hmemreg_engine_address(const hmemreg_engine_t *engine, void *buf, size_t *len);

int hmemreg_engine_add_peer(hmemreg_engine_t *engine, const void *addr, size_t len, int warmup, uint64_t *peer);
int hmemreg_engine_remove_peer(hmemreg_engine_t *engine, uint64_t peer);
/* Waits until the peer has no unfinished transfer: each completed or failed
 * and its callback returned, so nothing they were given is in use for it any
 * more (call it before freeing what the callbacks' arg points to). A dead
 * peer's transfers fail within peer_timeout_ms. Drives progress without
 * threads. 0, -HMEMREG_EAGAIN on timeout, -HMEMREG_ENOENT for an unknown
 * peer, -HMEMREG_EBUSY from one of this engine's callbacks. */
int hmemreg_engine_drain(hmemreg_engine_t *engine, uint64_t peer, uint32_t timeout_ms);

int hmemreg_engine_reg(hmemreg_engine_t *engine, void *addr, size_t len, hmemreg_region_t **out);
/* [offset, offset + len) of an hmemreg.ko export (hmemreg/export.h; device
 * or host memory), registered through the export's DMA-BUF with FI_MR_DMABUF
 * where the provider can (hmemreg_engine_describe's "hmemreg.ko exports"
 * line says how). The export must outlive the region and its transfers
 * (hmemreg_export_free refuses with -HMEMREG_EBUSY until they are gone).
 * Errors: -HMEMREG_EINVAL (range outside the export), -HMEMREG_ENOENT
 * (freed export), -HMEMREG_ESTALE (host range unmapped), registration
 * errors. */
struct hmemreg_export_handle;
int hmemreg_engine_reg_export(hmemreg_engine_t *engine, const struct hmemreg_export_handle *exp, uint64_t offset,
			      size_t len, hmemreg_region_t **out);
/* Safe while transfers use the region: they keep the registration alive. */
void hmemreg_region_release(hmemreg_region_t *region);
int hmemreg_region_descriptor(const hmemreg_region_t *region, void *buf, size_t *len);

struct hmemreg_chunk {
	const hmemreg_region_t *local;
	uint64_t local_offset;
	uint64_t len;
	uint64_t remote_offset;
};

/* status: 0 or a negative HMEMREG_E* code. */
typedef void (*hmemreg_xfer_cb)(void *arg, int status);
/* Target side: `from` is 0 when the writer was not added as a peer. */
typedef void (*hmemreg_notify_cb)(void *arg, uint64_t from, uint64_t tag, uint64_t bytes);
typedef void (*hmemreg_message_cb)(void *arg, uint64_t from, const void *data, size_t len);

int hmemreg_engine_set_callbacks(hmemreg_engine_t *engine, hmemreg_notify_cb notify, hmemreg_message_cb message,
				 void *arg);

/* xfer may be NULL (then cb reports completion). Bad input: nothing posted. */
int hmemreg_engine_write(hmemreg_engine_t *engine, uint64_t peer, const struct hmemreg_chunk *chunks, size_t nchunks,
			 const void *remote_desc, size_t desc_len, uint64_t tag, hmemreg_xfer_cb cb, void *arg,
			 hmemreg_xfer_t **xfer);
int hmemreg_engine_send(hmemreg_engine_t *engine, uint64_t peer, const void *data, size_t len, hmemreg_xfer_cb cb,
			void *arg, hmemreg_xfer_t **xfer);

/* -HMEMREG_EAGAIN while in progress, else the final status. */
int hmemreg_xfer_test(const hmemreg_xfer_t *xfer);
/* Waits (driving progress without threads); -HMEMREG_EAGAIN on timeout. */
int hmemreg_xfer_wait(hmemreg_engine_t *engine, const hmemreg_xfer_t *xfer, uint32_t timeout_ms);
void hmemreg_xfer_release(hmemreg_xfer_t *xfer);

/* Which path writes took (device memory is staged through pinned host
 * mirrors where the provider has no FI_HMEM; see hmemreg_engine_describe). */
struct hmemreg_engine_path_stats {
	uint64_t direct_writes;
	uint64_t staged_writes;
	uint64_t staged_to_host_bytes;   /* device -> mirror before sending */
	uint64_t staged_to_device_bytes; /* mirror -> device after landing */
	uint64_t staged_landings;        /* staged writes delivered here */
	uint64_t staged_errors;
};
int hmemreg_engine_path_stats(const hmemreg_engine_t *engine, struct hmemreg_engine_path_stats *out);

/* One progress turn; returns the events handled (>= 0). */
int hmemreg_engine_progress(hmemreg_engine_t *engine);

/* Message of the last failed call on this thread ("" if none). */
const char *hmemreg_engine_last_error(void);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif /* HMEMREG_ENGINE_H */
