// SPDX-License-Identifier: GPL-2.0
/*
 * Test importer: behaves like an RDMA driver importing DMA-BUFs (static
 * like efa, or dynamic like mlx5), one step per ioctl, so userspace tests
 * can prove hmemreg's exporter contract without an RDMA NIC (Soft-RoCE in
 * 6.1 cannot import DMA-BUFs). Its misc device is the DMA device. A dynamic
 * attachment acts on move_notify as such a driver does: it drops its
 * mapping, and the next device access fails until it maps again.
 *
 * An attachment may also bring a DMA device of its own with a given maximum
 * segment size and segment boundary, to check the segments an exporter
 * builds against the limits a real device declares.
 *
 * It also plugs two tiny providers into hmemreg's exported provider API,
 * one of which claims to need PCI peer-to-peer, to test that API and the
 * P2P refusal from the outside, as an accelerator driver would use them.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/file.h>
#include <linux/highmem.h>
#include <linux/iommu.h>
#include <linux/kref.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/xarray.h>

#include "hmemreg_compat.h"
#include "hmemreg_importer.h"
#include "hmemreg_provider.h"

/**
 * struct hmimp_att - one attachment
 * @ref:     the id table's reference plus one per ioctl using it, so a
 *           DETACH racing another ioctl frees it only after that one ends
 * @lock:    serialises ioctls on it
 * @dmabuf:  referenced DMA-BUF
 * @attach:  the attachment
 * @dev:     the attachment's own DMA device, or NULL (the misc device)
 * @sgt:     mapped table, NULL when not mapped
 * @dir:     direction of @sgt
 * @pins:    dma_buf_pin() calls not yet undone
 * @moves:   move_notify calls received
 * @invalidated: @sgt was dropped by move_notify and not mapped again since
 * @dynamic: dynamic importer (holds the reservation lock itself)
 *
 * For a dynamic attachment, @sgt, @dir, @pins, @moves and @invalidated
 * change only under the dma-buf's reservation lock too, as move_notify
 * runs under that lock alone (it cannot take @lock: ioctls hold @lock
 * while they wait for the reservation lock).
 */
struct hmimp_att {
	struct kref ref;
	struct mutex lock;	/* see @lock above */
	struct dma_buf *dmabuf;
	struct dma_buf_attachment *attach;
	struct hmimp_dev *dev;
	struct sg_table *sgt;
	enum dma_data_direction dir;
	unsigned int pins;
	unsigned int moves;
	bool invalidated;
	bool dynamic;
};

/* A DMA device with the segment limits an attachment asked for. */
struct hmimp_dev {
	struct device dev;
	struct device_dma_parameters parms;
};

/* Per open file: attachments by id. */
struct hmimp_file {
	struct xarray atts;
};

static struct miscdevice hmimp_misc;
static atomic_t hmimp_next_dev = ATOMIC_INIT(0);

static void hmimp_dev_release(struct device *dev)
{
	kfree(container_of(dev, struct hmimp_dev, dev));
}

/*
 * A 64-bit DMA-direct device under the misc device, with @max_seg and
 * @boundary as its dma_parms (what a PCI driver sets with
 * dma_set_max_seg_size() and dma_set_seg_boundary()).
 */
static struct hmimp_dev *hmimp_dev_create(u32 max_seg, u64 boundary)
{
	struct hmimp_dev *d;
	int ret;

	/* A boundary is a mask of low bits: 2^n - 1. */
	if (boundary & (boundary + 1))
		return ERR_PTR(-EINVAL);
	d = kzalloc(sizeof(*d), GFP_KERNEL);
	if (!d)
		return ERR_PTR(-ENOMEM);
	device_initialize(&d->dev);
	d->dev.parent = hmimp_misc.this_device;
	d->dev.release = hmimp_dev_release;
	d->dev.dma_parms = &d->parms;
	ret = dev_set_name(&d->dev, "hmimp-seg%d", atomic_inc_return(&hmimp_next_dev));
	if (!ret)
		ret = dma_coerce_mask_and_coherent(&d->dev, DMA_BIT_MASK(64));
	if (!ret)
		ret = hmemreg_dma_set_max_seg_size(&d->dev, max_seg);
	if (!ret && boundary)
		ret = hmemreg_dma_set_seg_boundary(&d->dev, boundary);
	if (!ret)
		ret = device_add(&d->dev);
	if (ret) {
		put_device(&d->dev);
		return ERR_PTR(ret);
	}
	return d;
}

static struct device *hmimp_att_dev(struct hmimp_att *att)
{
	return att->dev ? &att->dev->dev : hmimp_misc.this_device;
}

/* Reservation lock of a dynamic attachment; static ones need none. */
static void hmimp_resv_lock(struct hmimp_att *att)
{
	if (att->dynamic)
		dma_resv_lock(att->dmabuf->resv, NULL);
}

static void hmimp_resv_unlock(struct hmimp_att *att)
{
	if (att->dynamic)
		dma_resv_unlock(att->dmabuf->resv);
}

/*
 * The exporter is about to move the buffer: drop the mapping, as an RDMA
 * driver invalidates its MR. Called with the reservation lock held.
 */
static void hmimp_move_notify(struct dma_buf_attachment *attach)
{
	struct hmimp_att *att = attach->importer_priv;

	dma_resv_assert_held(attach->dmabuf->resv);
	att->moves++;
	/* A pinned buffer must not move: the exporter broke its contract. */
	if (att->pins) {
		pr_warn_ratelimited("move notification for a pinned attachment\n");
		return;
	}
	if (att->sgt) {
		dma_buf_unmap_attachment(attach, att->sgt, att->dir);
		att->sgt = NULL;
		att->invalidated = true;
	}
}

static const struct dma_buf_attach_ops hmimp_attach_ops = {
	.allow_peer2peer = false,
#ifdef HMEMREG_HAVE_ATTACH_OPS_INVALIDATE_MAPPINGS
	.invalidate_mappings = hmimp_move_notify,
#else
	.move_notify = hmimp_move_notify,
#endif
};

static enum dma_data_direction hmimp_dir(u32 dir)
{
	switch (dir) {
	case HMIMP_TO_DEVICE:
		return DMA_TO_DEVICE;
	case HMIMP_FROM_DEVICE:
		return DMA_FROM_DEVICE;
	default:
		return DMA_BIDIRECTIONAL;
	}
}

static int hmimp_map(struct hmimp_att *att, struct hmimp_op *op)
{
	enum dma_data_direction dir = hmimp_dir(op->dir);
	struct scatterlist *sg;
	struct sg_table *sgt;
	u64 mapped = 0;
	int ret = 0, i;

	hmimp_resv_lock(att);
	if (att->sgt) {
		ret = -EBUSY;
		goto out;
	}
	if (att->dynamic) {
		sgt = dma_buf_map_attachment(att->attach, dir);
	} else {
#ifdef HMEMREG_HAVE_DMA_BUF_MAP_UNLOCKED
		sgt = dma_buf_map_attachment_unlocked(att->attach, dir);
#else
		sgt = dma_buf_map_attachment(att->attach, dir);
#endif
	}
	if (IS_ERR(sgt)) {
		ret = PTR_ERR(sgt);
		goto out;
	}
	for_each_sgtable_dma_sg(sgt, sg, i)
		mapped += sg_dma_len(sg);
	att->sgt = sgt;
	att->dir = dir;
	att->invalidated = false;
	op->nents = sgt->nents;
	op->mapped = mapped;
out:
	hmimp_resv_unlock(att);
	return ret;
}

/* Drop the mapping; the reservation lock is held for a dynamic attachment. */
static void hmimp_unmap_locked(struct hmimp_att *att)
{
	if (att->dynamic) {
		dma_buf_unmap_attachment(att->attach, att->sgt, att->dir);
	} else {
#ifdef HMEMREG_HAVE_DMA_BUF_MAP_UNLOCKED
		dma_buf_unmap_attachment_unlocked(att->attach, att->sgt, att->dir);
#else
		dma_buf_unmap_attachment(att->attach, att->sgt, att->dir);
#endif
	}
	att->sgt = NULL;
}

static int hmimp_unmap(struct hmimp_att *att)
{
	int ret = 0;

	hmimp_resv_lock(att);
	if (att->sgt)
		hmimp_unmap_locked(att);
	else
		ret = att->invalidated ? -ESTALE : -ENXIO;
	att->invalidated = false;
	hmimp_resv_unlock(att);
	return ret;
}

static int hmimp_pin(struct hmimp_att *att)
{
	int ret;

	if (!att->dynamic)
		return -EINVAL;	/* static importers are pinned by the core */
	dma_resv_lock(att->dmabuf->resv, NULL);
	ret = dma_buf_pin(att->attach);
	if (!ret)
		att->pins++;
	dma_resv_unlock(att->dmabuf->resv);
	return ret;
}

/* The reservation lock is held. */
static void hmimp_unpin_locked(struct hmimp_att *att)
{
	dma_buf_unpin(att->attach);
	if (att->pins)
		att->pins--;
}

static int hmimp_unpin(struct hmimp_att *att, bool force)
{
	int ret = 0;

	if (!att->dynamic)
		return -EINVAL;
	dma_resv_lock(att->dmabuf->resv, NULL);
	if (att->pins || force)
		hmimp_unpin_locked(att);
	else
		ret = -EINVAL;
	dma_resv_unlock(att->dmabuf->resv);
	return ret;
}

/* Last reference: nothing else can reach the attachment any more. */
static void hmimp_release_att(struct kref *ref)
{
	struct hmimp_att *att = container_of(ref, struct hmimp_att, ref);

	hmimp_resv_lock(att);
	if (att->sgt)
		hmimp_unmap_locked(att);
	while (att->pins)
		hmimp_unpin_locked(att);
	hmimp_resv_unlock(att);
	dma_buf_detach(att->dmabuf, att->attach);
	dma_buf_put(att->dmabuf);
	if (att->dev)
		device_unregister(&att->dev->dev);
	kfree(att);
}

static void hmimp_put(struct hmimp_att *att)
{
	kref_put(&att->ref, hmimp_release_att);
}

/* The attachment @id of this file, referenced, or NULL. */
static struct hmimp_att *hmimp_get(struct hmimp_file *f, u32 id)
{
	struct hmimp_att *att;

	xa_lock(&f->atts);
	att = xa_load(&f->atts, id);
	if (att)
		kref_get(&att->ref);
	xa_unlock(&f->atts);
	return att;
}

static long hmimp_attach(struct hmimp_file *f, void __user *uarg)
{
	struct hmimp_attach a;
	struct hmimp_att *att;
	struct device *dev;
	u32 id;
	int ret;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.flags & ~HMIMP_DYNAMIC || (a.seg_boundary && !a.max_seg))
		return -EINVAL;
	att = kzalloc(sizeof(*att), GFP_KERNEL);
	if (!att)
		return -ENOMEM;
	kref_init(&att->ref);
	mutex_init(&att->lock);
	att->dynamic = a.flags & HMIMP_DYNAMIC;
	if (a.max_seg) {
		att->dev = hmimp_dev_create(a.max_seg, a.seg_boundary);
		if (IS_ERR(att->dev)) {
			ret = PTR_ERR(att->dev);
			goto err_free;
		}
	}
	dev = hmimp_att_dev(att);
	att->dmabuf = dma_buf_get(a.fd);
	if (IS_ERR(att->dmabuf)) {
		ret = PTR_ERR(att->dmabuf);
		goto err_dev;
	}
	if (att->dynamic)
		att->attach = dma_buf_dynamic_attach(att->dmabuf, dev, &hmimp_attach_ops, att);
	else
		att->attach = dma_buf_attach(att->dmabuf, dev);
	if (IS_ERR(att->attach)) {
		ret = PTR_ERR(att->attach);
		goto err_put;
	}
	ret = xa_alloc(&f->atts, &id, att, xa_limit_31b, GFP_KERNEL);
	if (ret)
		goto err_detach;
	a.id = id;
	a.size = att->dmabuf->size;
	a.max_seg = dma_get_max_seg_size(dev);
	a.seg_boundary = dma_get_seg_boundary(dev);
	a.max_mapping = dma_max_mapping_size(dev);
	if (copy_to_user(uarg, &a, sizeof(a))) {
		/* Published already: another ioctl may hold a reference. */
		if (xa_erase(&f->atts, id))
			hmimp_put(att);
		return -EFAULT;
	}
	return 0;

err_detach:
	dma_buf_detach(att->dmabuf, att->attach);
err_put:
	dma_buf_put(att->dmabuf);
err_dev:
	if (att->dev)
		device_unregister(&att->dev->dev);
err_free:
	kfree(att);
	return ret;
}

/*
 * Copy between @kbuf and the buffer by DMA address, as the device would.
 * Only for DMA-direct devices without an IOMMU, where a DMA address is the
 * physical address (true for this misc device in the test VM).
 */
static int hmimp_dma_copy(struct hmimp_att *att, u64 offset, void *kbuf,
			  size_t len, bool to_buf)
{
	struct device *dev = hmimp_att_dev(att);
	struct scatterlist *sg;
	u64 pos = 0;
	int i;

	if (device_iommu_mapped(dev) || dev->dma_range_map)
		return -EOPNOTSUPP;
	for_each_sgtable_dma_sg(att->sgt, sg, i) {
		u64 seg = sg_dma_len(sg), skip, n;
		phys_addr_t phys;

		if (!len)
			break;
		if (offset >= pos + seg) {
			pos += seg;
			continue;
		}
		skip = offset - pos;
		phys = (phys_addr_t)sg_dma_address(sg) + skip;
		n = min_t(u64, seg - skip, len);
		while (n) {
			size_t in_page = min_t(u64, n, PAGE_SIZE - offset_in_page(phys));
			struct page *page;
			void *va;

			if (!pfn_valid(PHYS_PFN(phys)))
				return -EFAULT;
			page = pfn_to_page(PHYS_PFN(phys));
			va = kmap_local_page(page);
			if (to_buf)
				memcpy(va + offset_in_page(phys), kbuf, in_page);
			else
				memcpy(kbuf, va + offset_in_page(phys), in_page);
			kunmap_local(va);
			kbuf += in_page;
			phys += in_page;
			offset += in_page;
			len -= in_page;
			n -= in_page;
		}
		pos += seg;
	}
	return len ? -ERANGE : 0;
}

static long hmimp_access(struct hmimp_file *f, void __user *uarg)
{
	struct hmimp_access a;
	struct hmimp_att *att;
	void *kbuf;
	int ret;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (!a.len || a.len > SZ_16M)
		return -EINVAL;
	kbuf = kvmalloc(a.len, GFP_KERNEL);
	if (!kbuf)
		return -ENOMEM;
	ret = -EFAULT;
	if (a.write && copy_from_user(kbuf, u64_to_user_ptr(a.buf), a.len))
		goto out;
	ret = -ENOENT;
	att = hmimp_get(f, a.id);
	if (!att)
		goto out;
	mutex_lock(&att->lock);
	/* The mapping cannot be invalidated while the "device" uses it. */
	hmimp_resv_lock(att);
	if (!att->sgt)
		ret = att->invalidated ? -ESTALE : -ENXIO;
	else if (a.offset >= att->dmabuf->size || a.len > att->dmabuf->size - a.offset)
		ret = -ERANGE;
	else if (a.write && att->dir == DMA_TO_DEVICE)
		ret = -EACCES;
	else
		ret = hmimp_dma_copy(att, a.offset, kbuf, a.len, a.write);
	hmimp_resv_unlock(att);
	mutex_unlock(&att->lock);
	hmimp_put(att);
	if (!ret && !a.write && copy_to_user(u64_to_user_ptr(a.buf), kbuf, a.len))
		ret = -EFAULT;
out:
	kvfree(kbuf);
	return ret;
}

/*
 * Copy out the segments of a mapped attachment: as mapped (DMA address and
 * length), or as built by the exporter (physical address and length of each
 * sg entry). Taken under the locks, copied to the user after them.
 */
static long hmimp_segs(struct hmimp_file *f, void __user *uarg)
{
	struct hmimp_seg *segs = NULL;
	struct scatterlist *sg;
	struct hmimp_segs a;
	struct hmimp_att *att;
	u64 n = 0, room;
	long ret = 0;
	int i;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.which > HMIMP_SEGS_CPU)
		return -EINVAL;
	room = min_t(u64, a.count, SZ_1M);
	if (room) {
		segs = kvcalloc(room, sizeof(*segs), GFP_KERNEL);
		if (!segs)
			return -ENOMEM;
	}
	att = hmimp_get(f, a.id);
	if (!att) {
		ret = -ENOENT;
		goto out;
	}
	mutex_lock(&att->lock);
	hmimp_resv_lock(att);
	if (!att->sgt) {
		ret = att->invalidated ? -ESTALE : -ENXIO;
	} else if (a.which == HMIMP_SEGS_DMA) {
		for_each_sgtable_dma_sg(att->sgt, sg, i) {
			if (n < room) {
				segs[n].addr = sg_dma_address(sg);
				segs[n].len = sg_dma_len(sg);
			}
			n++;
		}
	} else {
		for_each_sgtable_sg(att->sgt, sg, i) {
			if (n < room) {
				segs[n].addr = page_to_phys(sg_page(sg)) + sg->offset;
				segs[n].len = sg->length;
			}
			n++;
		}
	}
	hmimp_resv_unlock(att);
	mutex_unlock(&att->lock);
	hmimp_put(att);
	if (ret)
		goto out;
	if (copy_to_user(u64_to_user_ptr(a.segs), segs, min(n, room) * sizeof(*segs)))
		ret = -EFAULT;
	a.count = n;
	if (!ret && copy_to_user(uarg, &a, sizeof(a)))
		ret = -EFAULT;
out:
	kvfree(segs);
	return ret;
}

/* The test providers: one zeroed kernel page per export. */
static struct sg_table *hmimp_prov_map(void *priv, struct device *dev,
				       enum dma_data_direction dir)
{
	struct page **page = priv;

	return hmemreg_pages_map(page, 1, dev, dir);
}

static void hmimp_prov_unmap(void *priv, struct device *dev, struct sg_table *sgt,
			     enum dma_data_direction dir)
{
	hmemreg_pages_unmap(dev, sgt, dir);
}

static void hmimp_prov_release(void *priv)
{
	struct page **page = priv;

	__free_page(*page);
	kfree(page);
}

static const struct hmemreg_provider_ops hmimp_prov_ops = {
	.map = hmimp_prov_map,
	.unmap = hmimp_prov_unmap,
	.release = hmimp_prov_release,
};

static struct hmemreg_provider hmimp_prov = {
	.name = "importer-test",
	.owner = THIS_MODULE,
	.ops = &hmimp_prov_ops,
};

static struct hmemreg_provider hmimp_prov_p2p = {
	.name = "importer-test-p2p",
	.flags = HMEMREG_PROV_NEEDS_P2P,
	.owner = THIS_MODULE,
	.ops = &hmimp_prov_ops,
};

static long hmimp_prov_export(void __user *uarg)
{
	struct hmemreg_export_desc desc = { .len = PAGE_SIZE, .writable = true };
	struct hmimp_prov_export a;
	struct hmemreg_provider *prov;
	struct dma_buf *dmabuf;
	struct page **page;
	int fd;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	if (a.flags & ~HMIMP_PROV_P2P || a.pad)
		return -EINVAL;
	prov = a.flags & HMIMP_PROV_P2P ? &hmimp_prov_p2p : &hmimp_prov;
	page = kzalloc(sizeof(*page), GFP_KERNEL);
	if (!page)
		return -ENOMEM;
	*page = alloc_page(GFP_KERNEL | __GFP_ZERO);
	if (!*page) {
		kfree(page);
		return -ENOMEM;
	}
	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		hmimp_prov_release(page);
		return fd;
	}
	dmabuf = hmemreg_buf_create(prov, page, &desc, &a.export_id);
	if (IS_ERR(dmabuf)) {
		hmimp_prov_release(page);
		put_unused_fd(fd);
		return PTR_ERR(dmabuf);
	}
	a.fd = fd;
	a.provider = prov->id;
	if (copy_to_user(uarg, &a, sizeof(a))) {
		dma_buf_put(dmabuf);
		put_unused_fd(fd);
		return -EFAULT;
	}
	fd_install(fd, dmabuf->file);
	return 0;
}

static long hmimp_status(struct hmimp_file *f, void __user *uarg)
{
	struct hmimp_status st;
	struct hmimp_att *att;

	if (copy_from_user(&st, uarg, sizeof(st)))
		return -EFAULT;
	if (st.pad)
		return -EINVAL;
	att = hmimp_get(f, st.id);
	if (!att)
		return -ENOENT;
	hmimp_resv_lock(att);
	st.flags = (att->sgt ? HMIMP_ST_MAPPED : 0) |
		   (att->invalidated ? HMIMP_ST_INVALIDATED : 0) |
		   (att->dynamic ? HMIMP_ST_DYNAMIC : 0) |
		   (IS_ENABLED(CONFIG_DMABUF_MOVE_NOTIFY) ? HMIMP_ST_MOVE_NOTIFY : 0);
	st.pins = att->pins;
	st.moves = att->moves;
	hmimp_resv_unlock(att);
	hmimp_put(att);
	return copy_to_user(uarg, &st, sizeof(st)) ? -EFAULT : 0;
}

static long hmimp_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct hmimp_file *f = file->private_data;
	void __user *uarg = (void __user *)arg;
	struct hmimp_att *att;
	struct hmimp_op op;
	long ret;

	if (cmd == HMIMP_IOC_ATTACH)
		return hmimp_attach(f, uarg);
	if (cmd == HMIMP_IOC_ACCESS)
		return hmimp_access(f, uarg);
	if (cmd == HMIMP_IOC_PROV_EXPORT)
		return hmimp_prov_export(uarg);
	if (cmd == HMIMP_IOC_STATUS)
		return hmimp_status(f, uarg);
	if (cmd == HMIMP_IOC_SEGS)
		return hmimp_segs(f, uarg);
	if (_IOC_TYPE(cmd) != HMIMP_MAGIC || _IOC_SIZE(cmd) != sizeof(op))
		return -ENOTTY;
	if (copy_from_user(&op, uarg, sizeof(op)))
		return -EFAULT;
	if (cmd == HMIMP_IOC_DETACH) {
		/* Freed here, or by the last ioctl still using it. */
		att = xa_erase(&f->atts, op.id);
		if (!att)
			return -ENOENT;
		hmimp_put(att);
		return 0;
	}
	att = hmimp_get(f, op.id);
	if (!att)
		return -ENOENT;
	mutex_lock(&att->lock);
	switch (cmd) {
	case HMIMP_IOC_PIN:
		ret = hmimp_pin(att);
		break;
	case HMIMP_IOC_MAP:
		ret = hmimp_map(att, &op);
		break;
	case HMIMP_IOC_UNMAP:
		ret = hmimp_unmap(att);
		break;
	case HMIMP_IOC_UNPIN:
		ret = hmimp_unpin(att, op.flags & HMIMP_FORCE);
		break;
	default:
		ret = -ENOTTY;
	}
	mutex_unlock(&att->lock);
	hmimp_put(att);
	if (!ret && cmd == HMIMP_IOC_MAP && copy_to_user(uarg, &op, sizeof(op)))
		ret = -EFAULT;
	return ret;
}

static int hmimp_open(struct inode *inode, struct file *file)
{
	struct hmimp_file *f = kzalloc(sizeof(*f), GFP_KERNEL);

	if (!f)
		return -ENOMEM;
	xa_init_flags(&f->atts, XA_FLAGS_ALLOC);
	file->private_data = f;
	return nonseekable_open(inode, file);
}

/* A killed test leaves nothing attached, mapped or pinned. */
static int hmimp_release(struct inode *inode, struct file *file)
{
	struct hmimp_file *f = file->private_data;
	struct hmimp_att *att;
	unsigned long id;

	xa_for_each(&f->atts, id, att) {
		xa_erase(&f->atts, id);
		hmimp_put(att);
	}
	xa_destroy(&f->atts);
	kfree(f);
	return 0;
}

static const struct file_operations hmimp_fops = {
	.owner = THIS_MODULE,
	.open = hmimp_open,
	.release = hmimp_release,
	.unlocked_ioctl = hmimp_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice hmimp_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "hmemreg_importer",
	.fops = &hmimp_fops,
	.mode = 0600,
};

static int __init hmimp_init(void)
{
	int ret = misc_register(&hmimp_misc);

	if (ret)
		return ret;
	/* Make the misc device a 64-bit DMA-direct device (udmabuf does too). */
	ret = dma_coerce_mask_and_coherent(hmimp_misc.this_device, DMA_BIT_MASK(64));
	if (ret)
		goto err_misc;
	ret = hmemreg_provider_register(&hmimp_prov);
	if (ret)
		goto err_misc;
	ret = hmemreg_provider_register(&hmimp_prov_p2p);
	if (ret)
		goto err_prov;
	return 0;

err_prov:
	hmemreg_provider_unregister(&hmimp_prov);
err_misc:
	misc_deregister(&hmimp_misc);
	return ret;
}

static void __exit hmimp_exit(void)
{
	hmemreg_provider_unregister(&hmimp_prov_p2p);
	hmemreg_provider_unregister(&hmimp_prov);
	misc_deregister(&hmimp_misc);
}

module_init(hmimp_init);
module_exit(hmimp_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("hmemreg test importer: plays an RDMA NIC importing DMA-BUFs");
HMEMREG_IMPORT_DMA_BUF_NS();
