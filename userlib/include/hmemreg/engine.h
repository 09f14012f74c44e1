/* SPDX-License-Identifier: MIT */
/*
 * libhmemreg transfer engine: zero-copy RDMA WRITE of scattered chunks between
 * processes over libfabric, with dynamic peers and small control messages.
 * What it does, for callers; hmemreg/engine.hpp is the same in C++ types.
 *
 *   engine   one or more rails (a rail: fabric, domain, endpoint, CQ and AV
 *            on one NIC) of one provider; its address is a blob
 *   peer     added from the peer engine's address blob at any time, removable
 *            at any time (no static world); a removed or dead peer fails only
 *            its own operations
 *   region   local memory registered on every rail; its descriptor is a blob
 *            (address, length, one key per rail) the application ships to
 *            peers however it likes
 *   write    chunks (local region+offset+len -> remote offset in a descriptor);
 *            one RDMA WRITE per chunk (split above max_write; small chunks of
 *            one rail share a write, up to write_iov of them), chunks striped
 *            round-robin over rails; completes once for the caller (callback
 *            and/or xfer handle) and once for the target (notify callback
 *            with the writer's tag, once every byte is in place)
 *   send     a control message; the target's message callback gets it, from
 *            pre-posted, recycled receive buffers
 *
 * How the target learns a write completed (hmemreg_engine_config.notify):
 *  - immediate (providers with remote CQ data): every write carries a key
 *    naming the transfer as remote CQ data, and a small Announce message (tag,
 *    key, number of writes) goes out with the writes, not after them. The
 *    target counts the key's writes and notifies once it has the Announce and
 *    exactly that many. Writes are transmit-complete: the writer's completion
 *    means its buffers may be reused, not that the target has the data; only
 *    the target's notify says that. Keys: with 8 B of CQ data (tcp;ofi_rxm,
 *    shm) the writer's engine id and a sequence; with 4 B (verbs, efa) an
 *    index the target assigned this writer and a sequence. A writer asks each
 *    peer for its index when adding it (the peer answers once it has added
 *    the writer too; a write still without one asks again, at most once a
 *    second); until the answer comes, or if the target refused (its table of
 *    4095 writers is full), writes to that peer use message mode
 *    (hmemreg_engine_immediate_to says which applies).
 *  - message (any provider): writes are delivery-complete, and once all
 *    completed the writer sends a Done message; the writer's completion then
 *    also means the target was told.
 * Write order is never relied on: completions are counted.
 *
 * Queues and memory: each rail has a queue of its own; what the provider
 * refuses with -FI_EAGAIN (or what exceeds the rail's queue depth) stays
 * queued and is posted on a later progress turn, in batches. At most
 * max_transfers transfers are active; beyond that writes and sends return
 * -HMEMREG_EAGAIN.
 *
 * Progress: progress_threads threads (rails split among them, pinned to CPUs
 * near their NIC where hwloc knows the NIC's PCI locality), or none and the
 * caller drives hmemreg_engine_progress / hmemreg_xfer_wait.
 *
 * Device (CUDA) memory: registered directly where the provider has FI_HMEM
 * and registers CUDA memory (a probe at creation); a target with such
 * regions waits for the device copies the provider queued on its legacy
 * stream before it notifies (shm's cudaMemcpy returns before a device to
 * device copy ran). Otherwise (Debian's and Ubuntu's libfabric 1.17) staged:
 * the region gets a pinned host mirror that the NIC reads and writes. A write
 * from a staged region copies each piece device-to-host on a CUDA stream and
 * posts the piece's writes as soon as its copy is done (the next piece copies
 * while this one is on the wire); a write to a staged region lands in the
 * target's mirror, and each piece is copied host-to-device as soon as its
 * writes are in place. The target's notify comes once every piece is in
 * device memory; the writer's completion and the target's notify mean what
 * they mean for host memory. HMEMREG_ENGINE_TEXT_DEVICE_MEMORY and
 * hmemreg_engine_path_stats say which path was taken.
 *
 * Every function returns 0 or a negative HMEMREG_E* code and all but
 * hmemreg_engine_destroy are thread-safe; on failure, hmemreg_engine_last_error() gives the message for the calling
 * thread, and nothing was posted. Callbacks run on the thread driving
 * progress (a progress thread, or the caller of hmemreg_engine_progress /
 * hmemreg_xfer_wait), never with an engine lock held, so they may call back
 * into the engine.
 */
#ifndef HMEMREG_ENGINE_H
#define HMEMREG_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <hmemreg/cache.h> /* enum hmemreg_iface */
#include <hmemreg/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libhmemreg.so (built with -fvisibility=hidden). */
#pragma GCC visibility push(default)

typedef struct hmemreg_engine hmemreg_engine_t;
typedef struct hmemreg_region hmemreg_region_t;
typedef struct hmemreg_xfer hmemreg_xfer_t;

/* How a write's target learns the data landed: immediate data (the target
 * counts writes carrying a key as remote CQ data; the writer's completion
 * may come before the data is there) where the provider carries remote CQ data
 * (auto), always (creation fails with -HMEMREG_ENOTSUP where it cannot), or
 * a message after delivery-complete writes. */
enum hmemreg_engine_notify {
	HMEMREG_NOTIFY_AUTO = 0,
	HMEMREG_NOTIFY_IMMEDIATE = 1,
	HMEMREG_NOTIFY_MESSAGE = 2,
};

/* hmemreg_engine_config.flags */
#define HMEMREG_ENGINE_POST_MORE (1U << 0)             /* post a transfer's writes with FI_MORE but the last */
#define HMEMREG_ENGINE_REQUIRE_HMEM (1U << 1)          /* fail creation unless the provider has FI_HMEM */
#define HMEMREG_ENGINE_NO_HMEM (1U << 2)               /* never ask for FI_HMEM: device memory is staged */
#define HMEMREG_ENGINE_REQUIRE_REMOTE_CQ_DATA (1U << 3) /* fail creation unless the provider has it */
#define HMEMREG_ENGINE_NO_STAGING (1U << 4)            /* refuse device memory the NIC cannot reach
							  * (-HMEMREG_ENOTSUP) instead of staging it */
#define HMEMREG_ENGINE_SENDS_ON_FIRST_RAIL (1U << 5)   /* control messages all on rail 0 (see
							  * first_rail_write_max) */
#define HMEMREG_ENGINE_NO_PROVIDER_CUDA (1U << 6)      /* the provider may make no CUDA call
							  * (FI_OPT_CUDA_API_PERMITTED false on every
							  * rail); one that refuses gets device memory
							  * staged on the engine's own streams. For
							  * clients whose GPU kernels wait on the
							  * network (NCCL): a provider's cudaMemcpy
							  * runs on the legacy stream, behind work
							  * that waits on those kernels. */

/*
 * Extensible: fields are only ever appended. `size` says how much of it
 * the caller knows (hmemreg_engine_config_init sets it to the caller's
 * sizeof); the library reads no further and takes the defaults for fields
 * after it. A caller's struct larger than the library's is accepted when
 * the bytes the library does not know are zero, else creation fails with
 * -HMEMREG_ENOTSUP. Every numeric field: 0 is the engine's default.
 */
struct hmemreg_engine_config {
	uint32_t size;             /* sizeof(struct hmemreg_engine_config) */
	uint32_t flags;            /* HMEMREG_ENGINE_* */
	const char *provider;      /* "tcp;ofi_rxm", "shm", "verbs;ofi_rxm"; NULL: best */
	const char *node;          /* address to open endpoints on; NULL: default */
	const char *domain;        /* NIC name filter; NULL: any */
	uint32_t rails;            /* 0 -> 1 */
	uint32_t progress_threads; /* 0: the caller drives progress (init sets 1) */
	uint32_t queue_depth;      /* in-flight ops per rail; 0: provider's tx size */
	uint32_t peer_queue_depth; /* of which one peer may use; 0: half the queue depth */
	uint32_t max_message;      /* control message payload; 0 -> 4096 */
	uint32_t max_transfers;    /* active transfers; 0 -> 4096 */
	uint32_t recv_buffers;     /* receive buffers pre-posted per rail; 0 -> 64 */
	uint32_t send_buffers;     /* send buffers per rail; 0 -> 64 */
	uint64_t max_write;        /* split writes above this; 0: 512 KiB on tcp and net, 4 MiB on
				    * shm, else the provider's largest message */
	uint32_t write_iov;        /* small chunks per RDMA write at most; 0: the provider's limit */
	uint32_t post_batch;       /* posts per rail per progress turn; 0 -> 32 */
	uint32_t idle_spin;        /* empty turns before a progress thread sleeps; 0 -> 20000 */
	uint32_t idle_sleep_us;    /* its first sleep between turns then (each next one twice as
				    * long, up to 16x, until work shows up); 0 -> 50 */
	uint32_t notify;           /* enum hmemreg_engine_notify; other values: -HMEMREG_EINVAL */
	uint32_t imm_data_bytes;   /* remote CQ data bytes of immediate keys: 0 auto, 4 or 8 */
	/* A peer with unfinished transfers and no completion for this long is
	 * declared dead: its transfers fail (-HMEMREG_EFABRIC), new ones are
	 * refused until it is removed and added again. 0: the default, which is
	 * HMEMREG_PEER_TIMEOUT_MS from the environment (milliseconds, 0 = never;
	 * a value that does not parse fails creation with -HMEMREG_EINVAL), else
	 * 10000 ms; HMEMREG_PEER_TIMEOUT_NEVER: never; at most 86400000 (a day).
	 * hmemreg_engine_describe says which is in force. */
	uint32_t peer_timeout_ms;
	/* While a caller drove progress within this many microseconds, progress
	 * threads sleep that long between turns instead of polling (unless their
	 * rails carry bulk traffic). 0: off. */
	uint32_t caller_backoff_us;
	uint64_t staging_piece;        /* bytes per pipeline piece of a staged write; 0 -> 4 MiB */
	uint64_t first_rail_write_max; /* with SENDS_ON_FIRST_RAIL: writes of at most this many bytes
					* go on rail 0 too; 0: none */
};

#define HMEMREG_PEER_TIMEOUT_NEVER UINT32_MAX

/* Fills *cfg with the defaults (1 rail, 1 progress thread, best provider,
 * HMEMREG_NOTIFY_AUTO, everything else the engine's) and sets cfg->size to
 * the caller's sizeof. Inline: the size is the one the caller compiled. */
static inline void hmemreg_engine_config_init(struct hmemreg_engine_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->progress_threads = 1;
}

/* Opens the rails and starts the progress threads. -HMEMREG_EINVAL (null,
 * bad field, size too small), -HMEMREG_ENOTSUP (a requirement the provider
 * does not meet), -HMEMREG_EFABRIC (libfabric refused), -HMEMREG_ENOMEM. */
int hmemreg_engine_create(const struct hmemreg_engine_config *cfg, hmemreg_engine_t **out);
/* Stops progress, fails pending transfers and runs their callbacks, closes
 * everything: once it returns, no callback of this engine runs or is running. */
void hmemreg_engine_destroy(hmemreg_engine_t *engine);

/* Provider, rails, capabilities and decisions, as text (NUL-terminated,
 * truncated to len). Returns the full length. */
size_t hmemreg_engine_describe(const hmemreg_engine_t *engine, char *buf, size_t len);

/* hmemreg_engine_info.flags: what the engine chose or found. */
#define HMEMREG_ENGINE_HAS_RMA (1U << 0)
#define HMEMREG_ENGINE_HAS_HMEM (1U << 1)              /* FI_HMEM offered and used */
#define HMEMREG_ENGINE_HAS_DMABUF (1U << 2)            /* device memory may register through FI_MR_DMABUF */
#define HMEMREG_ENGINE_HAS_REMOTE_CQ_DATA (1U << 3)
#define HMEMREG_ENGINE_HAS_DELIVERY_COMPLETE (1U << 4) /* writes complete once the data is at the target */
#define HMEMREG_ENGINE_NOTIFIES_IMMEDIATE (1U << 5)    /* targets learn completion from remote CQ data */
#define HMEMREG_ENGINE_HAS_READ_BACK (1U << 6)         /* hmemreg_engine_read_back reads (FI_READ) */

/* Extensible like the config: the caller sets `size` (sizeof), the library
 * fills what it knows of that much and zeroes the rest. */
struct hmemreg_engine_info {
	uint32_t size;            /* in: sizeof(struct hmemreg_engine_info) */
	uint32_t flags;           /* HMEMREG_ENGINE_HAS_*, _NOTIFIES_* */
	uint64_t id;              /* random, unique per engine instance (also in its address) */
	uint32_t rails;
	uint32_t api_version;     /* libfabric API version asked for (FI_VERSION) */
	uint32_t cq_data_size;    /* remote CQ data bytes of the provider */
	uint32_t imm_key_bytes;   /* 8: writer-stamped keys; 4: target-assigned writer index; 0: message */
	uint64_t queue_depth;     /* in-flight ops per rail actually used */
	uint64_t peer_queue_depth;
	uint64_t max_write;
	uint64_t write_iov;       /* chunks per RDMA write at most */
	uint64_t inject_size;
	uint32_t peer_timeout_ms; /* in force (0: never) */
	uint32_t reserved;
};
/* 0, or -HMEMREG_EINVAL (null, size below the first version's). */
int hmemreg_engine_get_info(const hmemreg_engine_t *engine, struct hmemreg_engine_info *out);

/* Texts hmemreg_engine_text gives. */
enum hmemreg_engine_text {
	HMEMREG_ENGINE_TEXT_PROVIDER = 0,       /* the provider chosen, e.g. "tcp;ofi_rxm" */
	HMEMREG_ENGINE_TEXT_FABRIC = 1,
	HMEMREG_ENGINE_TEXT_RAIL_DOMAIN = 2,    /* the domain (NIC) of rail `index` */
	HMEMREG_ENGINE_TEXT_DEVICE_MEMORY = 3,  /* how CUDA memory is moved: direct, staged, or why not */
	HMEMREG_ENGINE_TEXT_HMEM_WHY_NOT = 4,   /* why no FI_HMEM ("" when it has it) */
	HMEMREG_ENGINE_TEXT_NOTIFY = 5,         /* the notification scheme and why */
	HMEMREG_ENGINE_TEXT_PROGRESS = 6,       /* who drives progress, thread pinning */
	HMEMREG_ENGINE_TEXT_PEER_TIMEOUT = 7,   /* the peer timeout and where it came from */
	HMEMREG_ENGINE_TEXT_DEVICE_ADDRESS_WHY = 8, /* why device memory last registered by address */
	HMEMREG_ENGINE_TEXT_RAIL_PCI_PATH = 9,  /* sysfs path of rail `index`'s NIC ("/sys/devices/pci.../
						 * 0000:17:00.0"), "" where the provider names no PCI device */
	HMEMREG_ENGINE_TEXT_DEVICE_WRAP = 10,   /* DMA-BUF registrations wrapped by hmemreg.ko, why not */
	HMEMREG_ENGINE_TEXT_RAIL_LINK_SPEED = 11, /* rail `index`'s link speed in bits/s, decimal ("100000000000"),
						 * "" where the provider reports none */
};
/* One text (NUL-terminated, truncated to len; buf may be NULL with len 0).
 * Returns its full length, or -HMEMREG_EINVAL (null engine, unknown text)
 * or -HMEMREG_ENOENT (no rail `index`). `index` is 0 but for the RAIL_ texts. */
int hmemreg_engine_text(const hmemreg_engine_t *engine, uint32_t what, uint32_t index, char *buf, size_t len);

/* Address blob: with buf NULL or *len too small, sets *len and returns
 * -HMEMREG_EINVAL (buf NULL: 0). */
int hmemreg_engine_address(const hmemreg_engine_t *engine, void *buf, size_t *len);
/* The engine id inside an address blob (hmemreg_engine_info.id of the
 * engine it came from). 0, or -HMEMREG_EINVAL for a blob that is not one. */
int hmemreg_peer_engine_id(const void *addr, size_t len, uint64_t *id);

/* Adds a peer from its address blob; with warmup, also connects every rail
 * before returning (at most 10 s). *peer: this engine's handle, never 0. */
int hmemreg_engine_add_peer(hmemreg_engine_t *engine, const void *addr, size_t len, int warmup, uint64_t *peer);
/* Fails the peer's queued operations (-HMEMREG_ENOENT), lets posted ones
 * finish, drops its addresses. -HMEMREG_ENOENT for an unknown peer. */
int hmemreg_engine_remove_peer(hmemreg_engine_t *engine, uint64_t peer);
/* Waits until the peer has no unfinished transfer: each completed or failed
 * and its callback returned, so nothing they were given is in use for it any
 * more (call it before freeing what the callbacks' arg points to). A dead
 * peer's transfers fail within peer_timeout_ms. Drives progress without
 * threads. 0, -HMEMREG_EAGAIN on timeout, -HMEMREG_ENOENT for an unknown
 * peer, -HMEMREG_EBUSY from one of this engine's callbacks. */
int hmemreg_engine_drain(hmemreg_engine_t *engine, uint64_t peer, uint32_t timeout_ms);
/* 1 when writes to the peer now notify it with immediate data, 0 when by
 * message (message mode, or 4-byte keys before the peer assigned an index),
 * -HMEMREG_ENOENT for an unknown peer. */
int hmemreg_engine_immediate_to(const hmemreg_engine_t *engine, uint64_t peer);

/* Registers [addr, addr + len) on every rail: host memory, or CUDA device
 * memory (registered directly where the provider has FI_HMEM, else staged
 * through a pinned host mirror; hmemreg_region_info says which).
 * -HMEMREG_EINVAL (null, zero length, managed or freed device memory, a
 * range past its allocation), -HMEMREG_ENOTSUP (device memory with
 * HMEMREG_ENGINE_NO_STAGING and no FI_HMEM), -HMEMREG_EFABRIC. */
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
/* [addr, addr + len) registered through the caller's DMA-BUF of it: fd,
 * with addr at byte `offset` of it (NCCL's regMrDmaBuf). CUDA device memory
 * registers with that fd as given (its mapping type included) on a cache
 * miss, a hit being the registration of the same memory (staged regions
 * never hand it to the provider); other memory must be one of this
 * process's hmemreg.ko exports, named by its fd or a dup of it
 * (hmemreg_region_info then says HMEMREG_IFACE_KMOD_EXPORT). The caller may
 * close fd once this returns. Errors: -HMEMREG_EINVAL (null, zero length,
 * fd < 0, addr not at that offset), -HMEMREG_ENOENT (host memory that no
 * export of this process is), registration errors. */
int hmemreg_engine_reg_dmabuf(hmemreg_engine_t *engine, void *addr, size_t len, int fd, uint64_t offset,
			      hmemreg_region_t **out);
/* Safe while transfers use the region: they keep the registration alive. */
void hmemreg_region_release(hmemreg_region_t *region);
/* The region's descriptor blob for peers; sizes as hmemreg_engine_address. */
int hmemreg_region_descriptor(const hmemreg_region_t *region, void *buf, size_t *len);

/* hmemreg_region_info.flags */
#define HMEMREG_REGION_STAGED (1U << 0) /* device memory moved through a pinned host mirror */

struct hmemreg_region_info {
	uint32_t size;   /* in: sizeof(struct hmemreg_region_info) */
	uint32_t flags;  /* HMEMREG_REGION_* */
	uint32_t iface;  /* enum hmemreg_iface: HMEMREG_IFACE_HOST, _CUDA, or _KMOD_EXPORT
	                  * (hmemreg_engine_reg_export) */
	int32_t device;  /* device ordinal for CUDA memory, else -1 */
	void *addr;
	uint64_t length;
};
/* 0, or -HMEMREG_EINVAL (null, size below the first version's). */
int hmemreg_region_get_info(const hmemreg_region_t *region, struct hmemreg_region_info *out);

struct hmemreg_chunk {
	const hmemreg_region_t *local;
	uint64_t local_offset;
	uint64_t len;
	uint64_t remote_offset;
};

/* status: 0 or a negative HMEMREG_E* code; when negative,
 * hmemreg_engine_last_error() on the callback's thread says why. */
typedef void (*hmemreg_xfer_cb)(void *arg, int status);
/* Target side: `from` is 0 when the writer was not added as a peer. */
typedef void (*hmemreg_notify_cb)(void *arg, uint64_t from, uint64_t tag, uint64_t bytes);
typedef void (*hmemreg_message_cb)(void *arg, uint64_t from, const void *data, size_t len);

/* The simple callbacks (set before adding peers; NULL: none). */
int hmemreg_engine_set_callbacks(hmemreg_engine_t *engine, hmemreg_notify_cb notify, hmemreg_message_cb message,
				 void *arg);

/* What the handlers get: extensible, read fields only below `size`. */
struct hmemreg_notification {
	uint32_t size;   /* sizeof(struct hmemreg_notification) of the library */
	uint32_t chunks; /* chunks of the write */
	uint64_t from;   /* peer handle here, 0 when the writer was not added */
	uint64_t sender; /* the writer engine's id (hmemreg_peer_engine_id of its address) */
	uint64_t tag;    /* what the writer passed to hmemreg_engine_write */
	uint64_t bytes;
};
struct hmemreg_message {
	uint32_t size;    /* sizeof(struct hmemreg_message) of the library */
	uint32_t reserved;
	uint64_t from;    /* peer handle here, 0 when the sender was not added */
	uint64_t sender;  /* the sender engine's id */
	const void *data; /* valid during the call only */
	uint64_t len;
};
typedef void (*hmemreg_notification_fn)(void *arg, const struct hmemreg_notification *n);
typedef void (*hmemreg_message_fn)(void *arg, const struct hmemreg_message *m);
/* The handlers, with the sender's engine id (replaces callbacks set with
 * hmemreg_engine_set_callbacks; NULL: none). Set before publishing the
 * engine's address; they run on the thread driving progress. */
int hmemreg_engine_set_handlers(hmemreg_engine_t *engine, hmemreg_notification_fn notify, hmemreg_message_fn message,
				void *arg);

/* Writes the chunks to the peer's region that remote_desc describes; tag
 * goes to the target's notification once every byte is in place. xfer may
 * be NULL (then cb reports completion). Bad input: nothing posted.
 * -HMEMREG_EAGAIN: max_transfers active (try again after progress). */
int hmemreg_engine_write(hmemreg_engine_t *engine, uint64_t peer, const struct hmemreg_chunk *chunks, size_t nchunks,
			 const void *remote_desc, size_t desc_len, uint64_t tag, hmemreg_xfer_cb cb, void *arg,
			 hmemreg_xfer_t **xfer);
/* A control message of at most max_message bytes; the peer's message
 * handler gets it. */
int hmemreg_engine_send(hmemreg_engine_t *engine, uint64_t peer, const void *data, size_t len, hmemreg_xfer_cb cb,
			void *arg, hmemreg_xfer_t **xfer);

struct hmemreg_iov {
	const void *base;
	size_t len;
};
/* The same message gathered from pieces (e.g. a header and the caller's
 * payload: copied once, into the engine's send buffer), at most
 * max_message bytes together. */
int hmemreg_engine_sendv(hmemreg_engine_t *engine, uint64_t peer, const struct hmemreg_iov *iov, size_t niov,
			 hmemreg_xfer_cb cb, void *arg, hmemreg_xfer_t **xfer);

/* hmemreg_engine_sendv's completion means the peer has the message
 * (delivery-complete: shm, for one, hands each such message back to its
 * sender, a round trip, and sends none of them inline). With
 * HMEMREG_SEND_TRANSMIT_COMPLETE it means only that the message left this
 * engine (transmit-complete; Debian's tcp;ofi_rxm 1.17 gives no more either
 * way: its rxm ignores delivery-complete). Either way the message is the
 * engine's copy (the caller's buffers are free when the call returns),
 * except a HMEMREG_SEND_BORROW tail, and messages to one peer stay in
 * order. A peer that dies after a transmit-complete send is found by the
 * next delivery-complete operation or the peer timeout, not by that send. */
#define HMEMREG_SEND_TRANSMIT_COMPLETE (1u << 0)
/* The last iov is not copied: the engine sends it from where it lies where
 * the provider allows (else copies it when posting), so the caller keeps it
 * valid and unchanged until the completion callback ran (or, when the call
 * fails, until it returned). One exception: a send failed because its peer
 * was declared dead is reported at once, while the provider may still hold
 * the piece until the engine is destroyed, so keep such memory mapped that
 * long (NCCL's registered buffers are). The other iovs are copied as ever.
 * For a payload large next to its header (a copy saved per message). */
#define HMEMREG_SEND_BORROW (1u << 1)
/* hmemreg_engine_sendv with flags (0, or HMEMREG_SEND_TRANSMIT_COMPLETE
 * and/or HMEMREG_SEND_BORROW; another bit: -HMEMREG_EINVAL). */
int hmemreg_engine_sendv_flags(hmemreg_engine_t *engine, uint64_t peer, const struct hmemreg_iov *iov, size_t niov,
			       uint32_t flags, hmemreg_xfer_cb cb, void *arg, hmemreg_xfer_t **xfer);

/* Reads len (1 to 64) bytes at offset of the region back through every
 * rail's NIC: an RDMA READ from each rail's own endpoint into a host word
 * the engine registered. Once it completes, what the NICs wrote into the
 * region before is in place for the device owning it: GPUDirect RDMA's
 * flush (NCCL's iflush). A staged region (the engine landed its data)
 * completes at once. No callback: hmemreg_xfer_test / _wait, then
 * hmemreg_xfer_release. -HMEMREG_EINVAL (null, another engine's region, a
 * range outside the region or not 1 to 64 bytes), -HMEMREG_ENOTSUP (no
 * FI_READ: HMEMREG_ENGINE_HAS_READ_BACK unset). */
int hmemreg_engine_read_back(hmemreg_engine_t *engine, const hmemreg_region_t *region, uint64_t offset, size_t len,
			     hmemreg_xfer_t **xfer);

/* Copies len bytes at src_offset of src into dst at dst_offset through the
 * first rail's NIC (an RDMA READ from its own endpoint into dst): how data
 * reaches device memory the NIC registered with no CPU access and no CUDA
 * call (a CUDA call can wait behind a GPU's kernels). No callback, as for
 * hmemreg_engine_read_back. -HMEMREG_EINVAL (null, another engine's
 * region, a staged region, a range outside either region or of 0 bytes),
 * -HMEMREG_ENOTSUP (no FI_READ: HMEMREG_ENGINE_HAS_READ_BACK unset). */
int hmemreg_engine_nic_copy(hmemreg_engine_t *engine, const hmemreg_region_t *dst, uint64_t dst_offset,
			    const hmemreg_region_t *src, uint64_t src_offset, size_t len, hmemreg_xfer_t **xfer);

/* -HMEMREG_EAGAIN while in progress, else the final status (when negative,
 * hmemreg_engine_last_error() says why). */
int hmemreg_xfer_test(const hmemreg_xfer_t *xfer);
/* Waits (driving progress without threads); -HMEMREG_EAGAIN on timeout. */
int hmemreg_xfer_wait(hmemreg_engine_t *engine, const hmemreg_xfer_t *xfer, uint32_t timeout_ms);
void hmemreg_xfer_release(hmemreg_xfer_t *xfer);

/* Which path writes took (device memory is staged through pinned host
 * mirrors where the provider has no FI_HMEM; see hmemreg_engine_describe).
 * Extensible: the caller sets `size`; the library fills that much. */
struct hmemreg_engine_path_stats {
	uint32_t size;                   /* in: sizeof(struct hmemreg_engine_path_stats) */
	uint32_t reserved;
	uint64_t direct_writes;          /* hmemreg_engine_write calls (not fabric writes) */
	uint64_t staged_writes;          /* ditto, from or to a staged region */
	uint64_t staged_to_host_bytes;   /* device -> mirror before sending */
	uint64_t staged_to_device_bytes; /* mirror -> device after landing */
	uint64_t staged_landings;        /* staged writes delivered here */
	uint64_t staged_errors;
	uint64_t immediate_notices;      /* target: transfers notified from counted writes */
	uint64_t immediate_abandoned;    /* target: partial arrivals dropped */
	uint64_t immediate_pending;      /* target: transfers partly arrived now */
	uint64_t immediate_writers;      /* target: writers holding a 4-byte key index assigned here */
	uint64_t immediate_writes;       /* writer: host-memory writes told by immediate data */
	uint64_t message_writes;         /* writer: ... told by a Done message */
	uint64_t device_regs_dmabuf;     /* device memory registered through FI_MR_DMABUF */
	uint64_t device_regs_address;    /* ... by address (HMEMREG_ENGINE_TEXT_DEVICE_ADDRESS_WHY) */
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
