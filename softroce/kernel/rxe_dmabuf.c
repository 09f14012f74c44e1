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
 *     kernel mapping. Exporters without vmap, or whose vmap is I/O memory,
 *     are refused with EOPNOTSUPP: rxe cannot copy from them.
 * The sg table is never read. Deregistration (also when the process dies,
 * through uverbs' cleanup) undoes all of it, in reverse.
 */
#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/iosys-map.h>
#include <linux/overflow.h>
#include <linux/slab.h>

#include "rxe.h"
#include "rxe_loc.h"

MODULE_IMPORT_NS(DMA_BUF);

/**
 * struct rxe_dmabuf_import - what a dma-buf MR holds of its dma-buf
 * @rxe:    the device that imported it
 * @attach: dynamic attachment of @rxe's ib_device, pinned
 * @sgt:    the exporter's mapping for it (kept only to unmap it)
 * @dir:    direction of @sgt and of the CPU access window
 * @map:    the kernel mapping rxe copies through
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
	err = dma_buf_vmap(dmabuf, &imp->map);
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
	dma_buf_vunmap(dmabuf, &imp->map);
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
	dma_buf_vunmap(dmabuf, &imp->map);
	rxe_dmabuf_unpin(imp);
	rxe_dmabuf_put(imp);
}

/* Point the MR's page map at [offset, offset + length) of the import. */
static int rxe_dmabuf_fill_map(struct rxe_mr *mr, struct rxe_dmabuf_import *imp,
			       u64 offset, u64 length, int num_buf)
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
	return 0;
}

static struct ib_mr *rxe_reg_user_mr_dmabuf(struct ib_pd *ibpd, u64 offset,
					    u64 length, u64 iova, int fd,
					    int access, struct ib_udata *udata)
{
	struct rxe_dev *rxe = to_rdev(ibpd->device);
	struct rxe_dmabuf_import *imp;
	struct rxe_mr *mr;
	u64 end, pages;
	int err;

	if (!length || check_add_overflow(offset, length, &end))
		return ERR_PTR(-EINVAL);
	pages = (PAGE_ALIGN(end) >> PAGE_SHIFT) - (offset >> PAGE_SHIFT);
	if (!PAGE_ALIGN(end) || pages > INT_MAX)
		return ERR_PTR(-EINVAL);

	mr = rxe_alloc(&rxe->mr_pool);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	rxe_get(to_rpd(ibpd));
	mr->ibmr.pd = ibpd;

	imp = rxe_dmabuf_import(rxe, fd, end, access);
	if (IS_ERR(imp)) {
		err = PTR_ERR(imp);
		goto err_cleanup;
	}
	/* From here on, cleanup of the MR releases the import. */
	mr->dmabuf_import = imp;

	rxe_mr_init(access, mr);
	err = rxe_dmabuf_fill_map(mr, imp, offset, length, pages);
	if (err)
		goto err_cleanup;
	/* uverbs sets these for reg_user_mr only; mr_check_range needs them. */
	mr->ibmr.iova = iova;
	mr->ibmr.length = length;
	mr->access = access;
	mr->state = RXE_MR_STATE_VALID;
	mr->type = IB_MR_TYPE_USER;
	rxe_finalize(mr);
	return &mr->ibmr;

err_cleanup:
	rxe_cleanup(mr);
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
