/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel API skew, decided by compile probes (kmod/probes/, run by
 * kmod/probe.sh into compat_probed.h) rather than version numbers.
 */
#ifndef HMEMREG_COMPAT_H
#define HMEMREG_COMPAT_H

#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <net/genetlink.h>

#include "compat_probed.h"

#ifndef HMEMREG_HAVE_MMU_INTERVAL_NOTIFIER
#error "hmemreg needs mmu_interval_notifier (Linux 5.5 or later)"
#endif

#ifdef HMEMREG_HAVE_IMPORT_NS_IDENT
#define HMEMREG_IMPORT_DMA_BUF_NS() MODULE_IMPORT_NS(DMA_BUF)
#else
#define HMEMREG_IMPORT_DMA_BUF_NS() MODULE_IMPORT_NS("DMA_BUF")
#endif

static inline void hmemreg_vma_set_flags(struct vm_area_struct *vma,
					 unsigned long set, unsigned long clear)
{
#ifdef HMEMREG_HAVE_VM_FLAGS_SET
	vm_flags_mod(vma, set, clear);
#else
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
#endif
}

/* Every attachment of @d drops its mappings; reservation lock held. */
static inline void hmemreg_dma_buf_invalidate(struct dma_buf *d)
{
#ifdef HMEMREG_HAVE_DMA_BUF_INVALIDATE_MAPPINGS
	dma_buf_invalidate_mappings(d);
#else
	dma_buf_move_notify(d);
#endif
}

/* An importer with attach ops maps on demand and is told when to let go. */
static inline bool hmemreg_attach_is_dynamic(struct dma_buf_attachment *a)
{
#ifdef HMEMREG_HAVE_DMA_BUF_ATTACHMENT_IS_DYNAMIC
	return dma_buf_attachment_is_dynamic(a);
#else
	return a->importer_ops;
#endif
}

/* The attributes a dump request carried (NULL when none were parsed). */
static inline struct nlattr **hmemreg_genl_dump_attrs(struct netlink_callback *cb)
{
#ifdef HMEMREG_HAVE_GENL_INFO_DUMP
	return genl_info_dump(cb)->attrs;
#else
	return genl_dumpit_info(cb)->attrs;
#endif
}

/* dma_set_max_seg_size() and dma_set_seg_boundary(): errors where they have them. */
static inline int hmemreg_dma_set_max_seg_size(struct device *dev, unsigned int size)
{
#ifdef HMEMREG_HAVE_DMA_SET_MAX_SEG_SIZE_INT
	return dma_set_max_seg_size(dev, size);
#else
	dma_set_max_seg_size(dev, size);
	return 0;
#endif
}

static inline int hmemreg_dma_set_seg_boundary(struct device *dev, unsigned long mask)
{
#ifdef HMEMREG_HAVE_DMA_SET_SEG_BOUNDARY_INT
	return dma_set_seg_boundary(dev, mask);
#else
	dma_set_seg_boundary(dev, mask);
	return 0;
#endif
}

#endif /* HMEMREG_COMPAT_H */
