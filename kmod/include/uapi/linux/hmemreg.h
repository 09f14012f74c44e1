/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * hmemreg: memory registration helper for RDMA from accelerator memory.
 *
 * This is the one ABI header shared by hmemreg.ko and libhmemreg.
 *
 * Rules for this file:
 *  - fixed-width fields only (no pointers, no size_t, no enums in structs);
 *  - every argument struct starts with a __u32 size that the caller sets to
 *    sizeof() of the struct it was built with; the kernel accepts smaller
 *    (older) structs when the missing tail is optional and zero-fills it,
 *    and accepts larger (newer) ones when the unknown tail is all zero
 *    (otherwise E2BIG);
 *  - ioctl numbers are assigned once and never change; extend with a _V2;
 *  - reserved fields and unknown flag bits must be zero (else EINVAL);
 *    OUT-only fields are ignored on input.
 *
 * Errors common to every ioctl below (not repeated per ioctl):
 *   EFAULT  the argument pointer (or a pointer-sized field) is not readable
 *           or writable;
 *   EINVAL  @size smaller than the first published version of the struct,
 *           unknown flag bits, non-zero reserved fields;
 *   E2BIG   @size larger than the kernel knows and the extra tail not zero;
 *   ENOTTY  unknown ioctl number or magic;
 *   ENOMEM  the kernel could not allocate bookkeeping (also what the
 *           module's fault injection returns, see "Fault injection").
 *
 * Overview
 *   1. Export: HMEMREG_IOC_EXPORT turns a range of memory from a "provider"
 *      (the caller's own pages, or the emulated device memory pool) into a
 *      DMA-BUF fd that an RDMA driver imports (ibv_reg_dmabuf_mr,
 *      fi_mr_regattr with FI_MR_DMABUF).
 *   2. Emulated device memory: HMEMREG_IOC_DEVMEM_ALLOC/FREE hand out
 *      handles into a pool of kernel pages that stands in for accelerator
 *      memory (module parameter devmem_mb, 0 = off).
 *   3. Watches: HMEMREG_IOC_WATCH_ARM asks to be told when a VA range of the
 *      calling process is unmapped, remapped or freed. Each watch owns a
 *      64-bit generation word in a read-only page mapped from the same fd,
 *      and firing also queues a struct hmemreg_event, read() from the fd.
 *   4. Ledger: every export, attachment, pin and map is tracked; totals and
 *      a per-export dump come over the generic netlink family "hmemreg"
 *      (and a summary in debugfs hmemreg/summary).
 */
#ifndef _UAPI_LINUX_HMEMREG_H
#define _UAPI_LINUX_HMEMREG_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define HMEMREG_DEVICE_NAME	"hmemreg"
#define HMEMREG_DEVICE_PATH	"/dev/hmemreg"

/* ABI version: major changes break userspace, minor ones only add. */
#define HMEMREG_ABI_MAJOR	1
#define HMEMREG_ABI_MINOR	2

/* ioctl magic; not listed in Documentation/userspace-api/ioctl/ioctl-number.rst. */
#define HMEMREG_IOC_MAGIC	0xB5

/* HMEMREG_IOC_VERSION caps bits. */
#define HMEMREG_CAP_EXPORT_HOST		0x1ULL	/* provider HOST */
#define HMEMREG_CAP_EXPORT_DEVMEM	0x2ULL	/* provider DEVMEM (pool > 0) */
#define HMEMREG_CAP_WATCH		0x4ULL	/* watches, gen page, events */
#define HMEMREG_CAP_NETLINK		0x8ULL	/* genl family "hmemreg" */
#define HMEMREG_CAP_FAULT_INJECT	0x10ULL	/* fail_every knob present */
#define HMEMREG_CAP_EXPORT_DMABUF	0x20ULL	/* provider DMABUF (ABI 1.2) */

/**
 * struct hmemreg_version - HMEMREG_IOC_VERSION argument
 * @size:      IN  sizeof(struct hmemreg_version) as built by the caller
 * @abi_major: OUT HMEMREG_ABI_MAJOR of the loaded module
 * @abi_minor: OUT HMEMREG_ABI_MINOR of the loaded module
 * @caps:      OUT HMEMREG_CAP_* bits the loaded module supports
 *
 * Errors: only the common ones.
 */
struct hmemreg_version {
	__u32 size;
	__u32 abi_major;
	__u32 abi_minor;
	__u32 reserved;
	__u64 caps;
};

/* ------------------------------------------------------------------------ */
/* Export                                                                    */
/* ------------------------------------------------------------------------ */

/* Providers built into hmemreg.ko. In-kernel providers registered by other
 * modules get ids from HMEMREG_PROVIDER_DYNAMIC up (see hmemreg_provider.h).
 */
#define HMEMREG_PROVIDER_HOST		1	/* caller's own pages (pinned) */
#define HMEMREG_PROVIDER_DEVMEM		2	/* emulated device memory pool */
#define HMEMREG_PROVIDER_DMABUF		3	/* another exporter's DMA-BUF */
#define HMEMREG_PROVIDER_DYNAMIC	16

/* struct hmemreg_export.flags */
#define HMEMREG_EXPORT_WRITE	0x1U	/* importers may write; fd is O_RDWR */
#define HMEMREG_EXPORT_WATCH	0x2U	/* HOST only: also arm a watch */

/*
 * HMEMREG_PROVIDER_DMABUF (HMEMREG_CAP_EXPORT_DMABUF): wrap a DMA-BUF of
 * any exporter so that its importers are in the ledger. @handle is the fd
 * of that DMA-BUF in the calling process, @addr a page-aligned byte offset
 * into it and @len the bytes from there. The export holds a reference to
 * the inner buffer (closing its fd afterwards changes nothing) and
 * forwards to it: an importer's attach attaches to the inner buffer for
 * the same device (dynamically when the importer is dynamic, so the inner
 * exporter's move_notify reaches it; else a static attachment, which the
 * inner exporter pins as it does for any static importer), and map, unmap,
 * pin and unpin go through; the inner exporter's rules (peer-to-peer,
 * direction) apply and its errors come back unchanged. The export is
 * [@addr, @addr + @len) of the inner buffer for importers (their table is
 * cut to it), mmap() and vmap; mmap() maps the inner buffer's pages
 * (EOPNOTSUPP where its exporter has no mmap), and an export whose inner
 * exporter has no vmap offers none (dma_buf_vmap() fails with EINVAL).
 * The ledger record names the inner exporter (HMEMREG_NLA_EXP_INNER_NAME);
 * @handle there is the fd number given here. HMEMREG_EXPORT_WRITE needs an
 * inner fd opened for writing. Nothing is attached or pinned until an
 * importer attaches. Errors besides those above:
 *   EBADF      @handle is not an open fd
 *   EINVAL     @handle is not a DMA-BUF, or HMEMREG_EXPORT_WATCH
 *   ELOOP      @handle is itself a DMABUF export of hmemreg (a wrapper
 *              of a wrapper)
 *   ERANGE     [@addr, @addr + @len) is not inside the inner buffer
 *   EACCES     HMEMREG_EXPORT_WRITE on a read-only inner buffer
 */
/**
 * struct hmemreg_export - HMEMREG_IOC_EXPORT argument
 * @size:       IN  sizeof(struct hmemreg_export)
 * @provider:   IN  HMEMREG_PROVIDER_HOST, _DEVMEM or _DMABUF (above)
 * @flags:      IN  HMEMREG_EXPORT_* bits
 * @fd:         OUT the new DMA-BUF fd (O_CLOEXEC; O_RDWR with
 *                  HMEMREG_EXPORT_WRITE, else O_RDONLY)
 * @addr:       IN  HOST: user virtual address, page aligned;
 *                  DEVMEM, DMABUF: byte offset inside @handle, page aligned
 * @len:        IN  bytes, page aligned, > 0
 * @handle:     IN  DEVMEM: handle from HMEMREG_IOC_DEVMEM_ALLOC; DMABUF: the
 *                  DMA-BUF fd; HOST: 0
 * @cookie:     IN  any value; echoed in events and the ledger dump
 * @export_id:  OUT ledger id of this export (HMEMREG_NLA_EXP_ID), never
 *                  reused while the module is loaded
 * @watch_slot: OUT with HMEMREG_EXPORT_WATCH: slot of the watch armed over
 *                  [@addr, @addr + @len) with @cookie (see WATCH_ARM);
 *                  else HMEMREG_WATCH_NO_SLOT
 * @watch_gen:  OUT with HMEMREG_EXPORT_WATCH: its generation; else 0
 *
 * Exports one range as one DMA-BUF (so the ledger knows exactly which range
 * an importer pins). HOST pins the pages with FOLL_LONGTERM for the life
 * of the DMA-BUF, so it stays valid when the caller unmaps the range or
 * exits (the ledger then shows it orphaned); the watch, if requested, is
 * what tells the caller its VA no longer maps those pages. When that watch
 * fires the export goes stale (HMEMREG_EXP_STATE_STALE): new device maps
 * fail with ESTALE, and if no importer pins it, dynamic importers get
 * move_notify and drop their mappings (shortly after: it is sent from a
 * work item, the event and the generation word come first). DEVMEM exports
 * hold a reference on the allocation. The fd is installed last: once this
 * ioctl returns, closing the fd is the only way to release the export
 * (it goes away when the last fd and the last importer let go).
 * Importers: a read-only export (no HMEMREG_EXPORT_WRITE) maps only
 * DMA_TO_DEVICE (FROM_DEVICE and BIDIRECTIONAL get EACCES, and static
 * importers, which map bidirectionally, are refused at attach with EACCES)
 * and cannot be mmap()ed writable; both
 * built-in providers are system RAM, reachable by every DMA-capable
 * importer without PCI peer-to-peer; providers of real device memory that
 * need P2P refuse importers that cannot do it with EOPNOTSUPP at attach
 * (see hmemreg_provider.h; Debian 12 has CONFIG_PCI_P2PDMA off).
 *
 * Errors:
 *   EINVAL     unknown @provider; @len 0; @addr/@len not page aligned;
 *              @addr + @len overflows; @handle non-zero for HOST;
 *              HMEMREG_EXPORT_WATCH with DEVMEM
 *   EOPNOTSUPP DEVMEM requested but the pool is off (devmem_mb=0);
 *              HOST with HMEMREG_EXPORT_WRITE: the range has a shared
 *              writable mapping of a file its filesystem writes back
 *              (ext4, xfs...; tmpfs, memfd and hugetlbfs are fine): such
 *              pages cannot be pinned for device writes (6.5 on refuse
 *              it in the kernel itself); export read-only or MAP_PRIVATE
 *   EFAULT     HOST: range not fully mapped, or mapped without write
 *              permission while HMEMREG_EXPORT_WRITE is set, or not
 *              pinnable (VM_IO/VM_PFNMAP)
 *   ENOENT     DEVMEM: no such @handle on this fd
 *   ERANGE     DEVMEM: [@addr, @addr + @len) not inside the allocation
 *   ENOSPC     the per-export limit (max_export_mb) or, with
 *              HMEMREG_EXPORT_WATCH, the per-fd watch limit is reached
 *   EXDEV      HMEMREG_EXPORT_WATCH from a process other than the one
 *              whose memory this fd watches (e.g. a forked child)
 *   EAGAIN     HMEMREG_EXPORT_WATCH: the range changed while it was being
 *              pinned (the watch, armed first, fired); nothing was exported
 *   EMFILE     no free file descriptor
 *   ENOMEM     out of memory or could not pin pages; HOST: the pin would
 *              exceed the caller's RLIMIT_MEMLOCK (pins are charged to it
 *              unless the caller has CAP_IPC_LOCK)
 */
struct hmemreg_export {
	__u32 size;
	__u32 provider;
	__u32 flags;
	__s32 fd;
	__u64 addr;
	__u64 len;
	__u64 handle;
	__u64 cookie;
	__u64 export_id;
	__u32 watch_slot;
	__u32 reserved;
	__u64 watch_gen;
};

/* ------------------------------------------------------------------------ */
/* Emulated device memory                                                    */
/* ------------------------------------------------------------------------ */

/**
 * struct hmemreg_devmem_alloc - HMEMREG_IOC_DEVMEM_ALLOC argument
 * @size:   IN  sizeof(struct hmemreg_devmem_alloc)
 * @flags:  IN  0
 * @len:    IN  bytes, page aligned, > 0
 * @handle: OUT non-zero handle, valid on this fd only, never reused on it
 *
 * Allocates @len bytes (zeroed) from the emulated device memory pool. The
 * allocation belongs to the fd: closing the fd frees every handle it still
 * has (memory still exported stays alive until its DMA-BUFs are released).
 *
 * Errors:
 *   EINVAL     @len 0 or not page aligned
 *   EOPNOTSUPP the pool is off (module parameter devmem_mb=0)
 *   ENOSPC     not enough free memory in the pool
 *   ENOMEM     out of memory
 */
struct hmemreg_devmem_alloc {
	__u32 size;
	__u32 flags;
	__u64 len;
	__u64 handle;
};

/**
 * struct hmemreg_devmem_free - HMEMREG_IOC_DEVMEM_FREE argument
 * @size:   IN  sizeof(struct hmemreg_devmem_free)
 * @flags:  IN  0
 * @handle: IN  handle from HMEMREG_IOC_DEVMEM_ALLOC on this fd
 *
 * Frees the handle. If DMA-BUFs of it exist but no importer has them
 * pinned or mapped, the handle goes away now and the memory returns to the
 * pool when the last DMA-BUF is released. An allocation some importer
 * still has pinned or mapped is never freed under it.
 *
 * Errors:
 *   ENOENT  no such handle on this fd (includes a second free)
 *   EBUSY   an importer has an export of this handle pinned or mapped, or
 *           userspace has it mmap()ed through a DMA-BUF; nothing changed
 */
struct hmemreg_devmem_free {
	__u32 size;
	__u32 flags;
	__u64 handle;
};

/* ------------------------------------------------------------------------ */
/* Watches, the generation page and the event ring                           */
/* ------------------------------------------------------------------------ */

/* struct hmemreg_watch_arm.flags */
#define HMEMREG_WATCH_PROT	0x1U	/* also fire on protection changes */

#define HMEMREG_WATCH_NO_SLOT	0xffffffffU

/**
 * struct hmemreg_watch_arm - HMEMREG_IOC_WATCH_ARM argument
 * @size:   IN  sizeof(struct hmemreg_watch_arm)
 * @flags:  IN  HMEMREG_WATCH_* bits
 * @addr:   IN  start of the VA range in the calling process (any alignment;
 *              the kernel watches the whole pages it touches)
 * @len:    IN  bytes, > 0
 * @cookie: IN  any value; returned in the watch's event
 * @slot:   OUT index of this watch's word in the generation page's gen[]
 * @reserved: IN 0
 * @gen:    OUT the watch's generation; while gen[@slot] == @gen the range
 *              still maps what it mapped when this ioctl returned
 *
 * The first WATCH_ARM binds the fd to the caller's address space; later
 * arms must come from the same one. A watch fires once, on the first of:
 * munmap or mremap away of any part of the range (HMEMREG_EV_UNMAP), pages
 * zapped (madvise(MADV_DONTNEED), truncation, reclaim or migration of
 * unpinned pages: HMEMREG_EV_CLEAR), the address space going away
 * (HMEMREG_EV_RELEASE), migration to device memory (HMEMREG_EV_MIGRATE),
 * device-exclusive access (HMEMREG_EV_EXCLUSIVE) and, only with
 * HMEMREG_WATCH_PROT, protection changes (HMEMREG_EV_PROTECTION; fork's
 * copy-on-write write-protection is one, so it is off by default). Firing
 * writes 0 to gen[@slot] before the kernel finishes the change that caused
 * it (so the munmap() that fired it has not returned yet), queues one
 * struct hmemreg_event, and frees the slot; there is no need to disarm a
 * fired watch. The range must be mapped when armed.
 *
 * Errors:
 *   EINVAL  @len 0, or @addr + @len overflows or is beyond the user
 *           address space
 *   EFAULT  some page of the range is not mapped
 *   ENOSPC  this fd already has max_watches live watches (module parameter,
 *           per fd; HMEMREG_IOC_WATCH_INFO reports it)
 *   EXDEV   the fd watches another process's address space (a forked child
 *           using the parent's fd), or the caller has no address space
 */
struct hmemreg_watch_arm {
	__u32 size;
	__u32 flags;
	__u64 addr;
	__u64 len;
	__u64 cookie;
	__u32 slot;
	__u32 reserved;
	__u64 gen;
};

/**
 * struct hmemreg_watch_disarm - HMEMREG_IOC_WATCH_DISARM argument
 * @size: IN  sizeof(struct hmemreg_watch_disarm)
 * @slot: IN  slot from WATCH_ARM (or HMEMREG_EXPORT_WATCH)
 * @gen:  IN  generation from the same call
 *
 * Removes a live watch: gen[@slot] becomes 0 and no event is queued.
 *
 * Errors:
 *   ENOENT  no live watch with this (@slot, @gen): it fired already, was
 *           disarmed, or @slot is out of range
 *   EXDEV   the fd watches another process's address space
 */
struct hmemreg_watch_disarm {
	__u32 size;
	__u32 slot;
	__u64 gen;
};

/**
 * struct hmemreg_watch_info - HMEMREG_IOC_WATCH_INFO argument
 * @size:        IN  sizeof(struct hmemreg_watch_info)
 * @max_watches: OUT live watches allowed on this fd; gen[] has this many
 * @map_size:    OUT bytes to mmap() at offset 0 of the fd (page multiple)
 * @gen_offset:  OUT byte offset of gen[] in that mapping
 * @ring_events: OUT capacity of the event ring, in records
 * @event_size:  OUT sizeof(struct hmemreg_event) the kernel writes
 *
 * Describes the generation page of this fd. Errors: only the common ones.
 */
struct hmemreg_watch_info {
	__u32 size;
	__u32 max_watches;
	__u64 map_size;
	__u32 gen_offset;
	__u32 ring_events;
	__u32 event_size;
	__u32 reserved;
};

/**
 * struct hmemreg_events_ack - HMEMREG_IOC_EVENTS_ACK argument
 * @size:    IN  sizeof(struct hmemreg_events_ack)
 * @flags:   IN  0
 * @dropped: OUT events that did not fit in the ring since the last ack
 *               (0: the ring had not overflowed; nothing is discarded)
 * @discarded: OUT events still queued that the ack threw away
 *
 * Acknowledges an overflow. While the ring is overflowed, read() fails with
 * EOVERFLOW and poll() reports EPOLLIN | EPOLLPRI; after the ack, events
 * flow again. Userspace must then revalidate everything it caches: the
 * generation words were kept exact all along (only events were lost), so
 * checking gen[slot] == gen for every entry is enough. An ack without an
 * overflow is a no-op that returns zeros.
 *
 * Errors: only the common ones.
 */
struct hmemreg_events_ack {
	__u32 size;
	__u32 flags;
	__u64 dropped;
	__u64 discarded;
};

/**
 * struct hmemreg_gen_page - the start of the fd's read-only mapping
 *
 * mmap(NULL, info.map_size, PROT_READ, MAP_SHARED, fd, 0) maps it; asking
 * for PROT_WRITE, a non-zero offset, or more than map_size fails (EPERM,
 * EINVAL, EINVAL). The mapping is not inherited across fork. All fields
 * are written by the kernel with WRITE_ONCE; read them with single loads.
 *
 * @magic:          HMEMREG_GEN_MAGIC
 * @version:        HMEMREG_GEN_VERSION
 * @max_watches:    entries in gen[]
 * @gen_offset:     byte offset of gen[] from the start of the mapping
 * @watches_live:   live watches on this fd
 * @events_pending: records waiting in the ring
 * @events_total:   events produced (queued or dropped) since open
 * @overflowed:     events dropped since the last ack; non-zero = overflowed
 *
 * gen[slot] (a __u64 at gen_offset + 8 * slot): the generation of the live
 * watch in that slot, or 0 when the slot is free or the watch fired.
 * Generations are unique per fd and never reused, so a stale (slot, gen)
 * pair can never match again.
 */
struct hmemreg_gen_page {
	__u32 magic;
	__u32 version;
	__u32 max_watches;
	__u32 gen_offset;
	__u64 watches_live;
	__u64 events_pending;
	__u64 events_total;
	__u64 overflowed;
	__u64 reserved[2];
};

#define HMEMREG_GEN_MAGIC	0x484d4747U	/* "HMGG" */
#define HMEMREG_GEN_VERSION	1

/* struct hmemreg_event.reason: what fired the watch. */
#define HMEMREG_EV_UNMAP	1	/* munmap(), mremap() moved or shrank it */
#define HMEMREG_EV_CLEAR	2	/* pages zapped: MADV_DONTNEED, truncate... */
#define HMEMREG_EV_PROTECTION	3	/* protection change (HMEMREG_WATCH_PROT) */
#define HMEMREG_EV_RELEASE	4	/* the address space is being torn down */
#define HMEMREG_EV_MIGRATE	5	/* migrated to device-private memory */
#define HMEMREG_EV_EXCLUSIVE	6	/* made exclusive to a device */

/* struct hmemreg_event.flags */
#define HMEMREG_EVF_EXPORT	0x1U	/* watch armed by EXPORT_WATCH */

/**
 * struct hmemreg_event - one record read() from the fd
 * @cookie: the watch's cookie
 * @addr:   start of the watched range (as armed)
 * @len:    length of the watched range (as armed)
 * @gen:    the generation that fired (matches WATCH_ARM's @gen)
 * @slot:   the slot that fired (already free when the event is read)
 * @reason: HMEMREG_EV_*
 * @flags:  HMEMREG_EVF_*
 * @reserved: 0
 *
 * read(fd, buf, n) copies as many whole records as fit in n (n must hold at
 * least one); it blocks while the ring is empty unless O_NONBLOCK (EAGAIN).
 * poll() reports EPOLLIN when records are queued. Errors of read():
 *   EINVAL     n < sizeof(struct hmemreg_event)
 *   EAGAIN     ring empty and O_NONBLOCK
 *   EOVERFLOW  the ring overflowed and HMEMREG_IOC_EVENTS_ACK has not been
 *              called since (sticky)
 *   ESPIPE     pread() (offsets are meaningless)
 *   EINTR      a signal arrived while blocked
 */
struct hmemreg_event {
	__u64 cookie;
	__u64 addr;
	__u64 len;
	__u64 gen;
	__u32 slot;
	__u32 reason;
	__u32 flags;
	__u32 reserved;
};

/* ------------------------------------------------------------------------ */
/* ioctl numbers (assigned once, never changed)                              */
/* ------------------------------------------------------------------------ */
#define HMEMREG_IOC_VERSION	_IOWR(HMEMREG_IOC_MAGIC, 0x00, struct hmemreg_version)
#define HMEMREG_IOC_EXPORT	_IOWR(HMEMREG_IOC_MAGIC, 0x01, struct hmemreg_export)
#define HMEMREG_IOC_DEVMEM_ALLOC _IOWR(HMEMREG_IOC_MAGIC, 0x02, struct hmemreg_devmem_alloc)
#define HMEMREG_IOC_DEVMEM_FREE	_IOW(HMEMREG_IOC_MAGIC, 0x03, struct hmemreg_devmem_free)
#define HMEMREG_IOC_WATCH_ARM	_IOWR(HMEMREG_IOC_MAGIC, 0x04, struct hmemreg_watch_arm)
#define HMEMREG_IOC_WATCH_DISARM _IOW(HMEMREG_IOC_MAGIC, 0x05, struct hmemreg_watch_disarm)
#define HMEMREG_IOC_WATCH_INFO	_IOWR(HMEMREG_IOC_MAGIC, 0x06, struct hmemreg_watch_info)
#define HMEMREG_IOC_EVENTS_ACK	_IOWR(HMEMREG_IOC_MAGIC, 0x07, struct hmemreg_events_ack)

/* ------------------------------------------------------------------------ */
/* Generic netlink: the pin ledger                                          */
/* ------------------------------------------------------------------------ */
/*
 * Family HMEMREG_GENL_NAME, version HMEMREG_GENL_VERSION. Readable by any
 * user (it reveals pids/comms of exporters, like /proc does).
 *
 * HMEMREG_CMD_GET_STATS (doit, no attributes): one reply with every
 *   HMEMREG_NLA_STAT_* attribute (u64 each).
 * HMEMREG_CMD_GET_EXPORTS (dumpit; doit is not supported): one message per
 *   live export with the HMEMREG_NLA_EXP_* attributes and, per attachment,
 *   one nested HMEMREG_NLA_EXP_ATTACH holding HMEMREG_NLA_ATT_*. Optional
 *   request attribute HMEMREG_NLA_EXP_OWNER_PID (u32) keeps only the
 *   exports of that owner.
 */
#define HMEMREG_GENL_NAME	"hmemreg"
#define HMEMREG_GENL_VERSION	1

enum hmemreg_genl_cmd {
	HMEMREG_CMD_UNSPEC,
	HMEMREG_CMD_GET_STATS,		/* 1 */
	HMEMREG_CMD_GET_EXPORTS,	/* 2 */
	__HMEMREG_CMD_MAX,
};

#define HMEMREG_CMD_MAX (__HMEMREG_CMD_MAX - 1)

/* Top-level attributes; numbers never change, new ones are appended. */
enum hmemreg_genl_attr {
	HMEMREG_NLA_UNSPEC,
	HMEMREG_NLA_PAD,			/* 1: alignment padding */
	/* GET_STATS: all u64; "live" counts go back to 0 when idle */
	HMEMREG_NLA_STAT_EXPORTS_LIVE,		/* 2 */
	HMEMREG_NLA_STAT_EXPORTS_TOTAL,		/* 3 */
	HMEMREG_NLA_STAT_EXPORTED_BYTES,	/* 4: live */
	HMEMREG_NLA_STAT_ORPHANS_LIVE,		/* 5: owner process gone */
	HMEMREG_NLA_STAT_ATTACH_LIVE,		/* 6 */
	HMEMREG_NLA_STAT_ATTACH_TOTAL,		/* 7 */
	HMEMREG_NLA_STAT_PINS_LIVE,		/* 8: importer dma_buf_pin */
	HMEMREG_NLA_STAT_PINS_TOTAL,		/* 9 */
	HMEMREG_NLA_STAT_MAPS_LIVE,		/* 10: mapped sg tables */
	HMEMREG_NLA_STAT_MAPS_TOTAL,		/* 11 */
	HMEMREG_NLA_STAT_HOST_PAGES_PINNED,	/* 12: pin_user_pages, live */
	HMEMREG_NLA_STAT_DEVMEM_POOL_BYTES,	/* 13 */
	HMEMREG_NLA_STAT_DEVMEM_USED_BYTES,	/* 14: live */
	HMEMREG_NLA_STAT_DEVMEM_HANDLES_LIVE,	/* 15 */
	HMEMREG_NLA_STAT_WATCHES_LIVE,		/* 16 */
	HMEMREG_NLA_STAT_WATCHES_TOTAL,		/* 17 */
	HMEMREG_NLA_STAT_EVENTS_TOTAL,		/* 18: queued or dropped */
	HMEMREG_NLA_STAT_EVENTS_DROPPED,	/* 19: lost to overflow */
	HMEMREG_NLA_STAT_CONTEXTS_LIVE,		/* 20: open /dev/hmemreg fds */
	HMEMREG_NLA_STAT_FAULTS_INJECTED,	/* 21 */
	HMEMREG_NLA_STAT_UNBALANCED,		/* 22: unpin/unmap without pin/map */
	HMEMREG_NLA_STAT_USER_MMAPS_LIVE,	/* 23: DMA-BUF mmaps by userspace */
	/* GET_EXPORTS, one message per export */
	HMEMREG_NLA_EXP_ID,			/* 24: u64 */
	HMEMREG_NLA_EXP_PROVIDER,		/* 25: u32 HMEMREG_PROVIDER_* */
	HMEMREG_NLA_EXP_STATE,			/* 26: u32 HMEMREG_EXP_STATE_* bits */
	HMEMREG_NLA_EXP_OWNER_PID,		/* 27: u32 tgid of the exporter */
	HMEMREG_NLA_EXP_OWNER_COMM,		/* 28: string */
	HMEMREG_NLA_EXP_ADDR,			/* 29: u64 VA (HOST) / offset (DEVMEM) */
	HMEMREG_NLA_EXP_LEN,			/* 30: u64 */
	HMEMREG_NLA_EXP_HANDLE,			/* 31: u64 DEVMEM handle, else 0 */
	HMEMREG_NLA_EXP_COOKIE,			/* 32: u64 */
	HMEMREG_NLA_EXP_CREATED_NS,		/* 33: u64 CLOCK_BOOTTIME, coarse */
	HMEMREG_NLA_EXP_ATTACH_LIVE,		/* 34: u32 */
	HMEMREG_NLA_EXP_PINS_LIVE,		/* 35: u32 */
	HMEMREG_NLA_EXP_MAPS_LIVE,		/* 36: u32 */
	HMEMREG_NLA_EXP_PINS_TOTAL,		/* 37: u64 */
	HMEMREG_NLA_EXP_MAPS_TOTAL,		/* 38: u64 */
	HMEMREG_NLA_EXP_LAST_PIN_NS,		/* 39: u64 CLOCK_BOOTTIME, coarse, 0 never */
	HMEMREG_NLA_EXP_LAST_UNPIN_NS,		/* 40: u64 CLOCK_BOOTTIME, coarse, 0 never */
	HMEMREG_NLA_EXP_ATTACH,			/* 41: nested HMEMREG_NLA_ATT_*, repeated */
	HMEMREG_NLA_EXP_INNER_NAME,		/* 42: string, DMABUF: the wrapped */
						/*     buffer's exporter (exp_name) */
	__HMEMREG_NLA_MAX,
};

#define HMEMREG_NLA_MAX (__HMEMREG_NLA_MAX - 1)

/* Attributes inside one HMEMREG_NLA_EXP_ATTACH. */
enum hmemreg_genl_att_attr {
	HMEMREG_NLA_ATT_UNSPEC,
	HMEMREG_NLA_ATT_DEVICE,		/* 1: string, dev_name() of the importer */
	HMEMREG_NLA_ATT_PID,		/* 2: u32 tgid that attached */
	HMEMREG_NLA_ATT_COMM,		/* 3: string */
	HMEMREG_NLA_ATT_PINNED,		/* 4: u32 pins held */
	HMEMREG_NLA_ATT_MAPPED,		/* 5: u32 mappings held */
	HMEMREG_NLA_ATT_DYNAMIC,	/* 6: u32 1 = dynamic importer */
	HMEMREG_NLA_ATT_ATTACHED_NS,	/* 7: u64 CLOCK_BOOTTIME, coarse */
	HMEMREG_NLA_ATT_PAD,		/* 8 */
	__HMEMREG_NLA_ATT_MAX,
};

#define HMEMREG_NLA_ATT_MAX (__HMEMREG_NLA_ATT_MAX - 1)

/* HMEMREG_NLA_EXP_STATE bits */
#define HMEMREG_EXP_STATE_ORPHANED	0x1U	/* owner process exited */
#define HMEMREG_EXP_STATE_WRITABLE	0x2U	/* HMEMREG_EXPORT_WRITE */
#define HMEMREG_EXP_STATE_PINNED	0x4U	/* some importer pins it */
#define HMEMREG_EXP_STATE_HANDLE_FREED	0x8U	/* DEVMEM handle freed */
#define HMEMREG_EXP_STATE_STALE		0x10U	/* its EXPORT_WATCH fired */

/*
 * Fault injection (module parameters, root only, for tests):
 *   /sys/module/hmemreg/parameters/fail_every  N > 0: every Nth pass through
 *       an enabled site fails (ENOMEM); 0 = off
 *   /sys/module/hmemreg/parameters/fail_sites  bit mask of HMEMREG_FAIL_*
 * HMEMREG_NLA_STAT_FAULTS_INJECTED counts injected failures.
 */
#define HMEMREG_FAIL_ALLOC	0x1U	/* bookkeeping allocations */
#define HMEMREG_FAIL_PIN	0x2U	/* pin_user_pages */
#define HMEMREG_FAIL_DEVMEM	0x4U	/* pool allocation */
#define HMEMREG_FAIL_MAP	0x8U	/* building/mapping sg tables */
#define HMEMREG_FAIL_NOTIFIER	0x10U	/* mmu_interval_notifier_insert */

#endif /* _UAPI_LINUX_HMEMREG_H */
