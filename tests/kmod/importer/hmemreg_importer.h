/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * ABI of the test importer (hmemreg_importer.ko): a misc device that plays
 * an RDMA NIC importing DMA-BUFs, driven step by step from userspace tests.
 * Test-only; not part of hmemreg's product ABI.
 */
#ifndef _HMEMREG_IMPORTER_H
#define _HMEMREG_IMPORTER_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define HMIMP_DEVICE_PATH	"/dev/hmemreg_importer"
#define HMIMP_MAGIC		0xB6

/* struct hmimp_attach.flags */
#define HMIMP_DYNAMIC		0x1U	/* dma_buf_dynamic_attach, like mlx5 */

/* struct hmimp_op.dir */
#define HMIMP_BIDIRECTIONAL	0
#define HMIMP_TO_DEVICE		1
#define HMIMP_FROM_DEVICE	2

/* struct hmimp_op.flags (UNPIN) */
#define HMIMP_FORCE		0x1U	/* unpin even without a pin (exporter must cope) */

/**
 * struct hmimp_attach - HMIMP_IOC_ATTACH: attach to a DMA-BUF
 * @fd:      IN  DMA-BUF fd
 * @flags:   IN  HMIMP_DYNAMIC or 0 (static: the core pins and maps, at attach or first map)
 * @id:      OUT attachment id on this importer fd
 * @max_seg: IN  0: attach as the importer's misc device; else as a DMA device
 *               of the attachment's own whose max segment size is this (and
 *               whose segment boundary is @seg_boundary)
 *           OUT dma_get_max_seg_size() of the attached device
 * @size:    OUT size of the DMA-BUF
 * @seg_boundary: IN with @max_seg: segment boundary mask (2^n - 1), 0 none
 *           OUT dma_get_seg_boundary() of the attached device
 * @max_mapping: OUT dma_max_mapping_size() of the attached device (the
 *           swiotlb slot limit when it bounces)
 */
struct hmimp_attach {
	__s32 fd;
	__u32 flags;
	__u32 id;
	__u32 max_seg;
	__u64 size;
	__u64 seg_boundary;
	__u64 max_mapping;
};

/**
 * struct hmimp_op - PIN, MAP, UNMAP, UNPIN, DETACH
 * @id:     IN  attachment id
 * @dir:    IN  MAP: HMIMP_* direction
 * @flags:  IN  UNPIN: HMIMP_FORCE
 * @pad:    0
 * @nents:  OUT MAP: DMA segments
 * @mapped: OUT MAP: bytes covered by the segments
 */
struct hmimp_op {
	__u32 id;
	__u32 dir;
	__u32 flags;
	__u32 pad;
	__u64 nents;
	__u64 mapped;
};

/**
 * struct hmimp_access - HMIMP_IOC_ACCESS: "DMA" to or from a mapped buffer
 * @id:     IN attachment id (must be mapped)
 * @write:  IN 1: copy @buf into the DMA-BUF; 0: copy out of it into @buf
 * @offset: IN byte offset in the DMA-BUF
 * @len:    IN bytes
 * @buf:    IN user buffer
 *
 * Goes through the DMA addresses of the mapped sg table, as a NIC would.
 */
struct hmimp_access {
	__u32 id;
	__u32 write;
	__u64 offset;
	__u64 len;
	__u64 buf;
};

/* struct hmimp_prov_export.flags */
#define HMIMP_PROV_P2P		0x1U	/* use the provider that needs PCI P2P */

/**
 * struct hmimp_prov_export - HMIMP_IOC_PROV_EXPORT: export one page of the
 * importer's own test provider through hmemreg's in-kernel provider API
 * @flags:    IN  HMIMP_PROV_P2P
 * @fd:       OUT DMA-BUF fd
 * @provider: OUT provider id hmemreg assigned
 * @pad:      0
 * @export_id: OUT ledger id
 */
struct hmimp_prov_export {
	__u32 flags;
	__s32 fd;
	__u32 provider;
	__u32 pad;
	__u64 export_id;
};

/* struct hmimp_status.flags */
#define HMIMP_ST_MAPPED		0x1U	/* holds a mapping */
#define HMIMP_ST_INVALIDATED	0x2U	/* mapping dropped by move_notify */
#define HMIMP_ST_DYNAMIC	0x4U	/* attached with HMIMP_DYNAMIC */
/* The kernel has CONFIG_DMABUF_MOVE_NOTIFY: dynamic maps are not pinned. */
#define HMIMP_ST_MOVE_NOTIFY	0x8U

/**
 * struct hmimp_status - HMIMP_IOC_STATUS: state of one attachment
 * @id:    IN  attachment id
 * @flags: OUT HMIMP_ST_* bits
 * @pins:  OUT the importer's own pins (PIN not yet undone)
 * @moves: OUT move_notify calls received (a dynamic attachment holding a
 *             mapping and no pin drops the mapping on each: ACCESS then
 *             fails with ESTALE until it maps again)
 * @pad:   0
 */
struct hmimp_status {
	__u32 id;
	__u32 flags;
	__u32 pins;
	__u32 moves;
	__u32 pad;
};

/* struct hmimp_segs.which */
#define HMIMP_SEGS_DMA		0	/* DMA address and length of each mapped segment */
#define HMIMP_SEGS_CPU		1	/* physical address and length of each sg entry */

struct hmimp_seg {
	__u64 addr;
	__u64 len;
};

/**
 * struct hmimp_segs - HMIMP_IOC_SEGS: the segments of a mapped attachment
 * @id:    IN  attachment id (must be mapped)
 * @which: IN  HMIMP_SEGS_*
 * @count: IN  room in @segs; OUT segments there are (copied: the smaller)
 * @segs:  IN  user array of struct hmimp_seg
 */
struct hmimp_segs {
	__u32 id;
	__u32 which;
	__u64 count;
	__u64 segs;
};

#define HMIMP_IOC_ATTACH	_IOWR(HMIMP_MAGIC, 1, struct hmimp_attach)
#define HMIMP_IOC_PIN		_IOW(HMIMP_MAGIC, 2, struct hmimp_op)
#define HMIMP_IOC_MAP		_IOWR(HMIMP_MAGIC, 3, struct hmimp_op)
#define HMIMP_IOC_ACCESS	_IOW(HMIMP_MAGIC, 4, struct hmimp_access)
#define HMIMP_IOC_UNMAP		_IOW(HMIMP_MAGIC, 5, struct hmimp_op)
#define HMIMP_IOC_UNPIN		_IOW(HMIMP_MAGIC, 6, struct hmimp_op)
#define HMIMP_IOC_DETACH	_IOW(HMIMP_MAGIC, 7, struct hmimp_op)
#define HMIMP_IOC_PROV_EXPORT	_IOWR(HMIMP_MAGIC, 8, struct hmimp_prov_export)
#define HMIMP_IOC_STATUS	_IOWR(HMIMP_MAGIC, 9, struct hmimp_status)
#define HMIMP_IOC_SEGS		_IOWR(HMIMP_MAGIC, 10, struct hmimp_segs)

#endif /* _HMEMREG_IMPORTER_H */
