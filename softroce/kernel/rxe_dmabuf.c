// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * dma-buf memory regions for Soft-RoCE (ib_device_ops.reg_user_mr_dmabuf),
 * written for hmemreg; not part of upstream rxe.
 *
 * rxe is a virtual-DMA device: it has no DMA device (ib_uses_virt_dma()),
 * and it moves data with memcpy through the kernel virtual addresses in its
 * MR page map. So ib_umem_dmabuf_get_pinned() does not fit (it attaches
 * with the NULL dma_device and yields DMA addresses), and reading pages out
 * of an importer's sg table is not allowed (CONFIG_DMABUF_DEBUG scrambles
 * them). An import here instead:
 *   - attaches with the rxe ib_device itself (given a 64-bit DMA mask, so
 *     exporters can build a mapping for it), dynamically, then pins and maps
 *     it under the reservation lock: the exporter sees a pinned importer,
 *     and refuses what it must (a read-only export mapped for writing);
 *   - takes CPU access the dma-buf way, dma_buf_vmap() plus
 *     dma_buf_begin_cpu_access(), and builds the MR page map from that
 *     kernel mapping: its addresses where rxe copies through addresses
 *     (6.1's rxe), the pages behind it where rxe maps pages itself (6.12's).
 *     Exporters without vmap, or whose vmap is I/O memory or memory
 *     without pages, are refused with EOPNOTSUPP: rxe cannot copy from them.
 * The sg table is never read. Deregistration (also when the process dies,
 * through uverbs' cleanup) undoes all of it, in reverse.
 *
 * Where rxe or the kernel differ, rxe_dmabuf_probed.h (softroce/build-rxe's
 * compile probes, softroce/kernel/probes/) says which form this one has.
 */
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/iosys-map.h>
#include <linux/mm.h>
#include <linux/overflow.h>
#include <linux/slab.h>

#include "rxe.h"
#include "rxe_loc.h"
#include "rxe_dmabuf_probed.h"

#ifdef HMEMREG_HAVE_IMPORT_NS_IDENT
MODULE_IMPORT_NS(DMA_BUF);
#else
MODULE_IMPORT_NS("DMA_BUF");
#endif

/**
 * struct rxe_dmabuf_import - what a dma-buf MR holds of its dma-buf
 * @rxe:    the device that imported it
 * @attach: dynamic attachment of @rxe's ib_device, pinned
 * @sgt:    the exporter's mapping for it (kept only to unmap it)
 * @dir:    direction of @sgt and of the CPU access window
 * @map:    the kernel mapping the MR's page map is built from
 */
struct rxe_dmabuf_import {
	struct rxe_dev *rxe;
	struct dma_buf_attachment *attach;
	struct sg_table *sgt;
	enum dma_data_direction dir;
	struct iosys_map map;
};

/*
 * Exporters never move a pinned buffer; one that does anyway would leave
 * rxe writing to memory the exporter gave away, so say it loudly.
 */
static void rxe_dmabuf_move_notify(struct dma_buf_attachment *attach)
{
	struct rxe_dmabuf_import *imp = attach->importer_priv;

	ibdev_warn_ratelimited(&imp->rxe->ib_dev,
			       "dma-buf %s moved while pinned by an MR\n",
			       attach->dmabuf->exp_name);
}

static const struct dma_buf_attach_ops rxe_dmabuf_attach_ops = {
	.allow_peer2peer = false,	/* rxe needs memory its CPU reaches */
	.move_notify = rxe_dmabuf_move_notify,
};

static int rxe_dmabuf_vmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
#ifdef HMEMREG_HAVE_DMA_BUF_VMAP_UNLOCKED
	return dma_buf_vmap_unlocked(dmabuf, map);
#else
	return dma_buf_vmap(dmabuf, map);
#endif
}

static void rxe_dmabuf_vunmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
#ifdef HMEMREG_HAVE_DMA_BUF_VMAP_UNLOCKED
	dma_buf_vunmap_unlocked(dmabuf, map);
#else
	dma_buf_vunmap(dmabuf, map);
#endif
}

static void rxe_dmabuf_unpin(struct rxe_dmabuf_import *imp)
{
	struct dma_buf *dmabuf = imp->attach->dmabuf;

	dma_resv_lock(dmabuf->resv, NULL);
	if (imp->sgt)
		dma_buf_unmap_attachment(imp->attach, imp->sgt, imp->dir);
	dma_buf_unpin(imp->attach);
	dma_resv_unlock(dmabuf->resv);
}

static void rxe_dmabuf_put(struct rxe_dmabuf_import *imp)
{
	struct dma_buf *dmabuf = imp->attach->dmabuf;

	dma_buf_detach(dmabuf, imp->attach);
	dma_buf_put(dmabuf);
	kfree(imp);
}

static struct rxe_dmabuf_import *rxe_dmabuf_import(struct rxe_dev *rxe, int fd,
						   u64 end, int access)
{
	struct rxe_dmabuf_import *imp;
	struct dma_buf *dmabuf;
	int err;

	/* EBADF: no such fd; EINVAL: not a dma-buf. */
	dmabuf = dma_buf_get(fd);
	if (IS_ERR(dmabuf))
		return ERR_CAST(dmabuf);
	if (end > dmabuf->size) {
		ibdev_dbg(&rxe->ib_dev, "dma-buf MR ends at %llu, past the %zu bytes of the dma-buf\n",
			  end, dmabuf->size);
		err = -ERANGE;
		goto err_put;
	}
	imp = kzalloc(sizeof(*imp), GFP_KERNEL);
	if (!imp) {
		err = -ENOMEM;
		goto err_put;
	}
	imp->rxe = rxe;
	imp->dir = ib_access_writable(access) ? DMA_BIDIRECTIONAL : DMA_TO_DEVICE;
	imp->attach = dma_buf_dynamic_attach(dmabuf, &rxe->ib_dev.dev,
					     &rxe_dmabuf_attach_ops, imp);
	if (IS_ERR(imp->attach)) {
		err = PTR_ERR(imp->attach);
		kfree(imp);
		goto err_put;
	}

	dma_resv_lock(dmabuf->resv, NULL);
	err = dma_buf_pin(imp->attach);
	if (!err) {
		imp->sgt = dma_buf_map_attachment(imp->attach, imp->dir);
		if (IS_ERR(imp->sgt)) {
			err = PTR_ERR(imp->sgt);
			imp->sgt = NULL;
			dma_buf_unpin(imp->attach);
		}
	}
	dma_resv_unlock(dmabuf->resv);
	if (err)
		goto err_detach;

	/* EINVAL from the core means the exporter has no vmap. */
	err = rxe_dmabuf_vmap(dmabuf, &imp->map);
	if (err) {
		err = err == -EINVAL ? -EOPNOTSUPP : err;
		goto err_unpin;
	}
	if (imp->map.is_iomem) {
		err = -EOPNOTSUPP;
		goto err_vunmap;
	}
	err = dma_buf_begin_cpu_access(dmabuf, imp->dir == DMA_TO_DEVICE ?
				       DMA_FROM_DEVICE : DMA_BIDIRECTIONAL);
	if (err)
		goto err_vunmap;
	return imp;

err_vunmap:
	rxe_dmabuf_vunmap(dmabuf, &imp->map);
err_unpin:
	rxe_dmabuf_unpin(imp);
err_detach:
	ibdev_dbg(&rxe->ib_dev, "dma-buf %s: import failed (%d)\n",
		  dmabuf->exp_name, err);
	rxe_dmabuf_put(imp);
	return ERR_PTR(err);

err_put:
	dma_buf_put(dmabuf);
	return ERR_PTR(err);
}

static void rxe_dmabuf_release(struct rxe_dmabuf_import *imp)
{
	struct dma_buf *dmabuf = imp->attach->dmabuf;

	dma_buf_end_cpu_access(dmabuf, imp->dir == DMA_TO_DEVICE ?
			       DMA_FROM_DEVICE : DMA_BIDIRECTIONAL);
	rxe_dmabuf_vunmap(dmabuf, &imp->map);
	rxe_dmabuf_unpin(imp);
	rxe_dmabuf_put(imp);
}

#ifdef HMEMREG_HAVE_RXE_ALLOC
/* rxe's pool allocates the MR, and frees it at cleanup. */
static struct rxe_mr *rxe_dmabuf_mr_alloc(struct rxe_dev *rxe)
{
	struct rxe_mr *mr = rxe_alloc(&rxe->mr_pool);

	return mr ?: ERR_PTR(-ENOMEM);
}

static void rxe_dmabuf_mr_free(struct rxe_mr *mr)
{
	rxe_cleanup(mr);
}
#else
/* The verbs allocate the MR, add it to the pool and free it after cleanup. */
static struct rxe_mr *rxe_dmabuf_mr_alloc(struct rxe_dev *rxe)
{
	struct rxe_mr *mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	int err;

	if (!mr)
		return ERR_PTR(-ENOMEM);
	err = rxe_add_to_pool(&rxe->mr_pool, mr);
	if (err) {
		kfree(mr);
		return ERR_PTR(err);
	}
	return mr;
}

static void rxe_dmabuf_mr_free(struct rxe_mr *mr)
{
	rxe_cleanup(mr);
	kfree(mr);
}
#endif

#if defined(HMEMREG_HAVE_RXE_MR_PAGE_INFO)
/*
 * The page behind one page of the vmap. rxe maps MR pages itself, so the
 * memory must have struct pages: a vmap of a remapped PFN range has none.
 */
static struct page *rxe_dmabuf_vmap_page(const void *va)
{
	struct page *page;

	if (is_vmalloc_addr(va))
		page = vmalloc_to_page(va);
	else if (virt_addr_valid(va))
		page = virt_to_page(va);
	else
		return NULL;
	return page && pfn_valid(page_to_pfn(page)) ? page : NULL;
}

/* Point the MR's page map at the pages of [offset, offset + length). */
static int rxe_dmabuf_fill_map(struct rxe_mr *mr, struct rxe_dmabuf_import *imp,
			       u64 offset, int num_buf)
{
	const u8 *va = (const u8 *)imp->map.vaddr + (offset & PAGE_MASK);
	int err, i;

	err = alloc_mr_page_info(mr, num_buf);
	if (err)
		return err;
	for (i = 0; i < num_buf; i++, va += PAGE_SIZE) {
		struct page *page = rxe_dmabuf_vmap_page(va);

		if (!page) {
			ibdev_dbg(mr->ibmr.device, "dma-buf %s: its vmap is not backed by pages\n",
				  imp->attach->dmabuf->exp_name);
			return -EOPNOTSUPP;
		}
		mr->page_info[i].page = page;
		mr->page_info[i].offset = 0;
	}
	mr->nbuf = num_buf;
	mr->ibmr.type = IB_MR_TYPE_USER;
	return 0;
}
#elif defined(HMEMREG_HAVE_RXE_MR_MAP)
/* Point the MR's page map at the kernel addresses of [offset, offset + length). */
static int rxe_dmabuf_fill_map(struct rxe_mr *mr, struct rxe_dmabuf_import *imp,
			       u64 offset, int num_buf)
{
	u8 *va = (u8 *)imp->map.vaddr + (offset & PAGE_MASK);
	struct rxe_map **map;
	int err, i;

	err = rxe_mr_alloc(mr, num_buf);
	if (err)
		return err;
	mr->page_shift = PAGE_SHIFT;
	mr->page_mask = PAGE_SIZE - 1;
	map = mr->map;
	for (i = 0; i < num_buf; i++, va += PAGE_SIZE) {
		struct rxe_phys_buf *buf = &map[i / RXE_BUF_PER_MAP]->buf[i % RXE_BUF_PER_MAP];

		buf->addr = (uintptr_t)va;
		buf->size = PAGE_SIZE;
	}
	mr->offset = offset & ~PAGE_MASK;
	mr->type = IB_MR_TYPE_USER;
	return 0;
}
#else
#error "this rxe's MR page map is neither map[] (6.1) nor page_info[] (Debian 6.12, 6.18)"
#endif

#if defined(HMEMREG_HAVE_REG_USER_MR_DMABUF_DMAH)
static struct ib_mr *rxe_reg_user_mr_dmabuf(struct ib_pd *ibpd, u64 offset,
					    u64 length, u64 iova, int fd,
					    int access, struct ib_dmah *dmah,
					    struct uverbs_attr_bundle *attrs)
#elif defined(HMEMREG_HAVE_REG_USER_MR_DMABUF_ATTRS)
static struct ib_mr *rxe_reg_user_mr_dmabuf(struct ib_pd *ibpd, u64 offset,
					    u64 length, u64 iova, int fd,
					    int access,
					    struct uverbs_attr_bundle *attrs)
#else
static struct ib_mr *rxe_reg_user_mr_dmabuf(struct ib_pd *ibpd, u64 offset,
					    u64 length, u64 iova, int fd,
					    int access, struct ib_udata *udata)
#endif
{
	struct rxe_dev *rxe = to_rdev(ibpd->device);
	struct rxe_dmabuf_import *imp;
	struct rxe_mr *mr;
	u64 end, pages;
	int err;

#ifdef HMEMREG_HAVE_REG_USER_MR_DMABUF_DMAH
	/* as rxe's own reg_user_mr: no DMA handles */
	if (dmah)
		return ERR_PTR(-EOPNOTSUPP);
#endif
	if (!length || check_add_overflow(offset, length, &end))
		return ERR_PTR(-EINVAL);
	pages = (PAGE_ALIGN(end) >> PAGE_SHIFT) - (offset >> PAGE_SHIFT);
	if (!PAGE_ALIGN(end) || pages > INT_MAX)
		return ERR_PTR(-EINVAL);

	mr = rxe_dmabuf_mr_alloc(rxe);
	if (IS_ERR(mr))
		return ERR_CAST(mr);
	rxe_get(to_rpd(ibpd));
	mr->ibmr.pd = ibpd;
	mr->ibmr.device = ibpd->device;

	imp = rxe_dmabuf_import(rxe, fd, end, access);
	if (IS_ERR(imp)) {
		err = PTR_ERR(imp);
		goto err_free;
	}
	/* From here on, cleanup of the MR releases the import. */
	mr->dmabuf_import = imp;

	rxe_mr_init(access, mr);
	err = rxe_dmabuf_fill_map(mr, imp, offset, pages);
	if (err)
		goto err_free;
	/* uverbs sets these for reg_user_mr only; mr_check_range needs them. */
	mr->ibmr.iova = iova;
	mr->ibmr.length = length;
	mr->access = access;
	mr->state = RXE_MR_STATE_VALID;
	rxe_finalize(mr);
	return &mr->ibmr;

err_free:
	rxe_dmabuf_mr_free(mr);
	return ERR_PTR(err);
}

/* From rxe_mr_cleanup(), in process context, once no packet uses the MR. */
void rxe_dmabuf_mr_release(struct rxe_mr *mr)
{
	if (mr->dmabuf_import)
		rxe_dmabuf_release(mr->dmabuf_import);
	mr->dmabuf_import = NULL;
}

static const struct ib_device_ops rxe_dmabuf_dev_ops = {
	.reg_user_mr_dmabuf = rxe_reg_user_mr_dmabuf,
};

/* From rxe_register_device(), before ib_register_device(). */
void rxe_dmabuf_setup_device(struct rxe_dev *rxe)
{
	struct device *dev = &rxe->ib_dev.dev;

	/*
	 * Exporters map their memory for the attached device; without a
	 * DMA mask the DMA API refuses (and warns). Nothing else of rxe uses
	 * it: its own verbs stay virtual-DMA (no dma_device).
	 */
	dev->coherent_dma_mask = DMA_BIT_MASK(64);
	dev->dma_mask = &dev->coherent_dma_mask;
	ib_set_device_ops(&rxe->ib_dev, &rxe_dmabuf_dev_ops);
}
