// SPDX-License-Identifier: GPL-2.0
/*
 * Provider "dmabuf": a DMA-BUF of any exporter (an accelerator driver's,
 * udmabuf, another hmemreg export), wrapped so that every importer of it
 * is in the ledger. The wrapper holds a reference to the inner buffer,
 * shares its reservation object, and forwards each importer's attachment
 * to an attachment of the inner buffer for the same device: dynamic when
 * the importer is dynamic (the inner exporter's move_notify is passed on
 * to it), static otherwise (the inner exporter pins it as it would any
 * static importer). Map, unmap, pin and unpin of an attachment go to its
 * inner attachment; mmap and vmap go to the inner buffer where its
 * exporter has them.
 *
 * Locking: one reservation lock covers both buffers. The export core calls
 * pin_att, unpin_att, map_att and unmap_att with it held, which is what
 * dma_buf_pin() and dma_buf_map_attachment() of the inner attachment ask;
 * the inner exporter calls move_notify with it held, which is what the
 * outer importer's move_notify asks. attach and detach run without it (the
 * inner core takes it). A wrapper of a wrapper is refused, so no path
 * takes a lock of the same buffer twice.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
#include <linux/file.h>
#include <linux/iosys-map.h>
#include <linux/mm.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>

#include "hmemreg_priv.h"

/**
 * struct hmemreg_wrap - one wrapped range of an inner dma-buf
 * @inner:  the wrapped buffer, referenced
 * @offset: page-aligned byte offset of the range in @inner
 * @len:    bytes of the range
 * @whole:  the range is all of @inner: its sg tables are passed on as
 *          they are; else each map is cut to the range
 * @vmap:   @inner's kernel mapping while the export is vmapped (the core
 *          maps an export once and counts its users)
 */
struct hmemreg_wrap {
	struct dma_buf *inner;
	u64 offset;
	u64 len;
	bool whole;
	struct iosys_map vmap;
};

/**
 * struct hmemreg_wrap_att - one importer's attachment, forwarded
 * @wrap:  its wrapper
 * @outer: the importer's attachment to the export
 * @inner: the attachment to @wrap->inner for the same device
 */
struct hmemreg_wrap_att {
	struct hmemreg_wrap *wrap;
	struct dma_buf_attachment *outer;
	struct dma_buf_attachment *inner;
};

/* A cut of an inner sg table to the wrapped range (DMA side only). */
struct hmemreg_wrap_sgt {
	struct sg_table sgt;
	struct sg_table *inner;
};

/*
 * The inner exporter is moving its buffer (its reservation lock, which is
 * the export's too, is held): tell the importer whose attachment this
 * forwards. Inner attachments are dynamic only for dynamic importers.
 */
static void hmemreg_wrap_move_notify(struct dma_buf_attachment *inner)
{
	struct hmemreg_wrap_att *wa = inner->importer_priv;
	struct dma_buf_attachment *outer = wa->outer;

	dma_resv_assert_held(outer->dmabuf->resv);
	atomic64_inc(&hmemreg_stats.move_notifies);
#ifdef HMEMREG_HAVE_ATTACH_OPS_INVALIDATE_MAPPINGS
	outer->importer_ops->invalidate_mappings(outer);
#else
	outer->importer_ops->move_notify(outer);
#endif
}

/* The importer's peer2peer wish goes with its attachment to the inner buffer. */
static const struct dma_buf_attach_ops hmemreg_wrap_attach_ops = {
	.allow_peer2peer = false,
#ifdef HMEMREG_HAVE_ATTACH_OPS_INVALIDATE_MAPPINGS
	.invalidate_mappings = hmemreg_wrap_move_notify,
#else
	.move_notify = hmemreg_wrap_move_notify,
#endif
};

static const struct dma_buf_attach_ops hmemreg_wrap_attach_ops_p2p = {
	.allow_peer2peer = true,
#ifdef HMEMREG_HAVE_ATTACH_OPS_INVALIDATE_MAPPINGS
	.invalidate_mappings = hmemreg_wrap_move_notify,
#else
	.move_notify = hmemreg_wrap_move_notify,
#endif
};

static int hmemreg_wrap_attach(void *priv, struct dma_buf_attachment *outer,
			       void **att)
{
	struct hmemreg_wrap *w = priv;
	struct hmemreg_wrap_att *wa;
	struct dma_buf_attachment *inner;

	if (hmemreg_should_fail(HMEMREG_FAIL_ALLOC))
		return -ENOMEM;
	wa = kzalloc(sizeof(*wa), GFP_KERNEL);
	if (!wa)
		return -ENOMEM;
	wa->wrap = w;
	wa->outer = outer;
	if (hmemreg_attach_is_dynamic(outer))
		inner = dma_buf_dynamic_attach(w->inner, outer->dev,
					       outer->peer2peer ?
					       &hmemreg_wrap_attach_ops_p2p :
					       &hmemreg_wrap_attach_ops, wa);
	else
		inner = dma_buf_attach(w->inner, outer->dev);
	if (IS_ERR(inner)) {
		kfree(wa);
		return PTR_ERR(inner);
	}
	wa->inner = inner;
	*att = wa;
	return 0;
}

static void hmemreg_wrap_detach(void *priv, void *att)
{
	struct hmemreg_wrap_att *wa = att;

	dma_buf_detach(wa->wrap->inner, wa->inner);
	kfree(wa);
}

/*
 * The inner core pins a static inner attachment itself (6.1's at attach,
 * later ones at map), or its exporter never moves memory: only dynamic
 * ones are pinned here.
 */
static int hmemreg_wrap_pin(void *att)
{
	struct hmemreg_wrap_att *wa = att;

	if (!hmemreg_attach_is_dynamic(wa->inner))
		return 0;
	return dma_buf_pin(wa->inner);
}

static void hmemreg_wrap_unpin(void *att)
{
	struct hmemreg_wrap_att *wa = att;

	if (hmemreg_attach_is_dynamic(wa->inner))
		dma_buf_unpin(wa->inner);
}

/*
 * The DMA segments of @src that fall in [@offset, @offset + @len), in a
 * table of their own. CPU-side entries carry no pages: importers must not
 * read pages out of an exporter's table (CONFIG_DMABUF_DEBUG scrambles
 * them), and the inner table's may already be scrambled.
 */
static struct sg_table *hmemreg_wrap_cut(struct sg_table *src, u64 offset,
					 u64 len)
{
	struct hmemreg_wrap_sgt *cut;
	struct scatterlist *sg, *dst;
	u64 pos = 0, end = offset + len;
	unsigned int n = 0;
	int i, ret;

	for_each_sgtable_dma_sg(src, sg, i) {
		u64 s = pos, e = pos + sg_dma_len(sg);

		pos = e;
		if (e > offset && s < end)
			n++;
	}
	if (!n || pos < end)
		return ERR_PTR(-ERANGE);
	cut = kzalloc(sizeof(*cut), GFP_KERNEL);
	if (!cut)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table(&cut->sgt, n, GFP_KERNEL);
	if (ret) {
		kfree(cut);
		return ERR_PTR(ret);
	}
	cut->inner = src;
	dst = cut->sgt.sgl;
	pos = 0;
	for_each_sgtable_dma_sg(src, sg, i) {
		u64 s = pos, e = pos + sg_dma_len(sg);
		u64 from = max(s, offset), to = min(e, end);

		pos = e;
		if (from >= to)
			continue;
		dst->length = to - from;
		sg_dma_address(dst) = sg_dma_address(sg) + (from - s);
		sg_dma_len(dst) = to - from;
		dst = sg_next(dst);
	}
	cut->sgt.nents = n;
	return &cut->sgt;
}

static struct sg_table *hmemreg_wrap_map(void *att, enum dma_data_direction dir)
{
	struct hmemreg_wrap_att *wa = att;
	struct hmemreg_wrap *w = wa->wrap;
	struct sg_table *sgt, *cut;

	if (hmemreg_should_fail(HMEMREG_FAIL_MAP))
		return ERR_PTR(-ENOMEM);
	sgt = dma_buf_map_attachment(wa->inner, dir);
	if (IS_ERR(sgt) || w->whole)
		return sgt;
	cut = hmemreg_wrap_cut(sgt, w->offset, w->len);
	if (IS_ERR(cut))
		dma_buf_unmap_attachment(wa->inner, sgt, dir);
	return cut;
}

static void hmemreg_wrap_unmap(void *att, struct sg_table *sgt,
			       enum dma_data_direction dir)
{
	struct hmemreg_wrap_att *wa = att;
	struct hmemreg_wrap_sgt *cut;

	if (wa->wrap->whole) {
		dma_buf_unmap_attachment(wa->inner, sgt, dir);
		return;
	}
	cut = container_of(sgt, struct hmemreg_wrap_sgt, sgt);
	dma_buf_unmap_attachment(wa->inner, cut->inner, dir);
	sg_free_table(&cut->sgt);
	kfree(cut);
}

/* The inner buffer's own mapping, shifted to the wrapped range. */
static int hmemreg_wrap_mmap(void *priv, struct vm_area_struct *vma)
{
	struct hmemreg_wrap *w = priv;

	if (!w->inner->ops->mmap)
		return -EOPNOTSUPP;
	return dma_buf_mmap(w->inner, vma,
			    vma->vm_pgoff + (w->offset >> PAGE_SHIFT));
}

/*
 * Called under the export's vmap serialisation (its reservation lock, the
 * inner buffer's too, or on kernels with a per-buffer vmap mutex that one,
 * given a lock class of its own by the export core).
 */
static void *hmemreg_wrap_vmap(void *priv)
{
	struct hmemreg_wrap *w = priv;
	struct iosys_map map;

	if (dma_buf_vmap(w->inner, &map))
		return NULL;
	/* Kernel virtual addresses only: the export's vmap has no I/O form. */
	if (map.is_iomem) {
		dma_buf_vunmap(w->inner, &map);
		return NULL;
	}
	w->vmap = map;
	return map.vaddr + w->offset;
}

static void hmemreg_wrap_vunmap(void *priv, void *vaddr)
{
	struct hmemreg_wrap *w = priv;

	dma_buf_vunmap(w->inner, &w->vmap);
	iosys_map_clear(&w->vmap);
}

static bool hmemreg_wrap_can_vmap(void *priv)
{
	struct hmemreg_wrap *w = priv;

	return w->inner->ops->vmap;
}

static struct dma_resv *hmemreg_wrap_resv(void *priv)
{
	struct hmemreg_wrap *w = priv;

	return w->inner->resv;
}

static void hmemreg_wrap_describe(void *priv, char *name, size_t size)
{
	struct hmemreg_wrap *w = priv;

	strscpy(name, w->inner->exp_name ? w->inner->exp_name : "?", size);
}

static void hmemreg_wrap_release(void *priv)
{
	struct hmemreg_wrap *w = priv;

	dma_buf_put(w->inner);
	kfree(w);
}

static int hmemreg_wrap_check(struct hmemreg_ctx *ctx,
			      const struct hmemreg_export_desc *desc, bool watch)
{
	/* Another driver's memory is no range of this process: no watch. */
	if (watch)
		return -EINVAL;
	if (desc->handle > INT_MAX)
		return -EBADF;
	return 0;
}

/**
 * hmemreg_wrap_create() - wrap [offset, offset + len) of a dma-buf fd
 * @ctx:  the caller's context (unused: the fd is the caller's)
 * @desc: fd in handle, page-aligned offset in addr, length in len
 *
 * Return: provider object holding a reference to the inner buffer, or
 * ERR_PTR(-EBADF / -EINVAL / -ELOOP / -ERANGE / -EACCES / -ENOMEM).
 */
static void *hmemreg_wrap_create(struct hmemreg_ctx *ctx,
				 const struct hmemreg_export_desc *desc)
{
	struct hmemreg_wrap *w;
	struct dma_buf *inner;
	int ret;

	/* EBADF: no such fd; EINVAL: not a dma-buf. */
	inner = dma_buf_get((int)desc->handle);
	if (IS_ERR(inner))
		return inner;
	ret = -ELOOP;
	if (hmemreg_buf_provider(inner) == HMEMREG_PROVIDER_DMABUF)
		goto err_put;
	ret = -ERANGE;
	if (desc->addr >= inner->size || desc->len > inner->size - desc->addr)
		goto err_put;
	ret = -EACCES;
	if (desc->writable && !(inner->file->f_mode & FMODE_WRITE))
		goto err_put;
	ret = -ENOMEM;
	if (hmemreg_should_fail(HMEMREG_FAIL_ALLOC))
		goto err_put;
	w = kzalloc(sizeof(*w), GFP_KERNEL_ACCOUNT);
	if (!w)
		goto err_put;
	w->inner = inner;
	w->offset = desc->addr;
	w->len = desc->len;
	w->whole = !desc->addr && desc->len == inner->size;
	return w;

err_put:
	dma_buf_put(inner);
	return ERR_PTR(ret);
}

static const struct hmemreg_provider_ops hmemreg_wrap_ops = {
	.attach = hmemreg_wrap_attach,
	.detach = hmemreg_wrap_detach,
	.pin_att = hmemreg_wrap_pin,
	.unpin_att = hmemreg_wrap_unpin,
	.map_att = hmemreg_wrap_map,
	.unmap_att = hmemreg_wrap_unmap,
	.mmap = hmemreg_wrap_mmap,
	.vmap = hmemreg_wrap_vmap,
	.vunmap = hmemreg_wrap_vunmap,
	.resv = hmemreg_wrap_resv,
	.can_vmap = hmemreg_wrap_can_vmap,
	.describe = hmemreg_wrap_describe,
	.release = hmemreg_wrap_release,
	.check = hmemreg_wrap_check,
	.create = hmemreg_wrap_create,
};

static struct hmemreg_provider hmemreg_wrap_provider = {
	.name = "dmabuf",
	.id = HMEMREG_PROVIDER_DMABUF,
	.flags = HMEMREG_PROV_FORWARDS,
	.owner = THIS_MODULE,
	.ops = &hmemreg_wrap_ops,
};

int hmemreg_dmabuf_init(void)
{
	return hmemreg_provider_register(&hmemreg_wrap_provider);
}

void hmemreg_dmabuf_exit(void)
{
	hmemreg_provider_unregister(&hmemreg_wrap_provider);
}
