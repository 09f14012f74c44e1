/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel API skew, decided by compile probes (kmod/probes/, run by
 * kmod/probe.sh into compat_probed.h) rather than version numbers.
 */
#ifndef HMEMREG_COMPAT_H
#define HMEMREG_COMPAT_H

#include <linux/mm.h>
#include <linux/module.h>

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

#endif /* HMEMREG_COMPAT_H */
