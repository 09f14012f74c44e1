// SPDX-License-Identifier: GPL-2.0
/*
 * DMA-BUF export over memory providers: one dma-buf per exported range
 * (struct hmemreg_buf, its priv), complete dma_buf_ops that forward to the
 * provider and record every attachment, pin and map in the ledger, and the
 * export ioctl, which finds the provider by id in the registry and
 * publishes its fd last.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/dma-resv.h>
#include <linux/file.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>
#include <linux/uaccess.h>

#include "hmemreg_priv.h"

/**
 * struct hmemreg_buf - one exported range
 * @rec:    its ledger record
 * @hook:   its end of the EXPORT_WATCH watch, if one guards it
 * @prov:   provider that owns the memory
 * @priv:   provider's object for this range
 * @dmabuf: the dma-buf exporting it
 * @stale:  that watch fired (set under the reservation lock)
 */
struct hmemreg_buf {
	struct hmemreg_ledger_exp rec;
	struct hmemreg_watch_hook hook;
	struct hmemreg_provider *prov;
	void *priv;
	struct dma_buf *dmabuf;
	bool stale;
};

#ifdef HMEMREG_HAVE_DMA_BUF_LOCK
static struct lock_class_key hmemreg_forward_lock_key;
#endif

static int hmemreg_buf_attach(struct dma_buf *dmabuf,
			      struct dma_buf_attachment *attach)
{
	struct hmemreg_buf *buf = dmabuf->priv;
	struct hmemreg_ledger_att *att;

	/* See "Peer-to-peer" in hmemreg_provider.h. */
	if ((buf->prov->flags & HMEMREG_PROV_NEEDS_P2P) && !attach->peer2peer) {
		dev_warn_ratelimited(attach->dev,
				     "hmemreg: %s memory needs PCI peer-to-peer, importer cannot do it\n",
				     buf->prov->name);
		return -EOPNOTSUPP;
	}
	/*
	 * A static importer maps bidirectionally. Some cores (6.1's) map it
	 * at attach, others only when it asks; refuse what could not be
	 * mapped here, so that it fails at attach with the same errno on
	 * every kernel: the device would write a read-only export, and a
	 * stale one maps nothing.
	 */
	if (!hmemreg_attach_is_dynamic(attach)) {
		if (READ_ONCE(buf->stale))
			return -ESTALE;
		if (!(buf->rec.state & HMEMREG_EXP_STATE_WRITABLE)) {
			dev_warn_ratelimited(attach->dev,
					     "hmemreg: export %llu is read-only, a static importer maps it writable\n",
					     buf->rec.id);
			return -EACCES;
		}
	}
	if (hmemreg_should_fail(HMEMREG_FAIL_ALLOC))
		return -ENOMEM;
	att = kzalloc(sizeof(*att), GFP_KERNEL);
	if (!att)
		return -ENOMEM;
	strscpy(att->device, dev_name(attach->dev), sizeof(att->device));
	get_task_comm(att->comm, current);
	att->pid = task_tgid_nr(current);
	att->dynamic = hmemreg_attach_is_dynamic(attach);
	att->attached_ns = hmemreg_ledger_now();
	/* A forwarding provider attaches to its inner buffer for this device. */
	if (buf->prov->ops->attach) {
		int ret = buf->prov->ops->attach(buf->priv, attach, &att->prov);

		if (ret) {
			kfree(att);
			return ret;
		}
	}
	attach->priv = att;

	spin_lock(&hmemreg_ledger_lock);
	list_add_tail(&att->node, &buf->rec.attachments);
	buf->rec.attach_live++;
	spin_unlock(&hmemreg_ledger_lock);
	atomic64_inc(&hmemreg_stats.attach_live);
	atomic64_inc(&hmemreg_stats.attach_total);
	return 0;
}

static void hmemreg_buf_detach(struct dma_buf *dmabuf,
			       struct dma_buf_attachment *attach)
{
	struct hmemreg_buf *buf = dmabuf->priv;
	struct hmemreg_ledger_att *att = attach->priv;

	spin_lock(&hmemreg_ledger_lock);
	list_del(&att->node);
	buf->rec.attach_live--;
	spin_unlock(&hmemreg_ledger_lock);
	atomic64_dec(&hmemreg_stats.attach_live);
	/* The core unmaps and unpins before detach; anything left is a bug. */
	if (att->pinned || att->mapped) {
		atomic64_inc(&hmemreg_stats.unbalanced);
		pr_warn_ratelimited("export %llu: %s detached with %u pins, %u maps\n",
				    buf->rec.id, att->device, att->pinned, att->mapped);
	}
	if (buf->prov->ops->detach)
		buf->prov->ops->detach(buf->priv, att->prov);
	kfree(att);
}

static void hmemreg_count_pin(struct hmemreg_buf *buf,
			      struct hmemreg_ledger_att *att)
{
	spin_lock(&hmemreg_ledger_lock);
	if (att)
		att->pinned++;
	buf->rec.pins_live++;
	buf->rec.pins_total++;
	buf->rec.last_pin_ns = hmemreg_ledger_now();
	spin_unlock(&hmemreg_ledger_lock);
	atomic64_inc(&hmemreg_stats.pins_live);
	atomic64_inc(&hmemreg_stats.pins_total);
}

/* Return false (and count it) for an unpin without a pin. */
static bool hmemreg_count_unpin(struct hmemreg_buf *buf,
				struct hmemreg_ledger_att *att)
{
	bool ok;

	spin_lock(&hmemreg_ledger_lock);
	ok = att ? att->pinned > 0 : buf->rec.pins_live > 0;
	if (ok) {
		if (att)
			att->pinned--;
		buf->rec.pins_live--;
		buf->rec.last_unpin_ns = hmemreg_ledger_now();
	}
	spin_unlock(&hmemreg_ledger_lock);
	if (ok) {
		atomic64_dec(&hmemreg_stats.pins_live);
	} else {
		atomic64_inc(&hmemreg_stats.unbalanced);
		pr_warn_ratelimited("export %llu: unpin without pin\n", buf->rec.id);
	}
	return ok;
}

/* Called with the reservation lock held. */
static int hmemreg_buf_pin(struct dma_buf_attachment *attach)
{
	struct hmemreg_buf *buf = attach->dmabuf->priv;
	struct hmemreg_ledger_att *att = attach->priv;
	int ret = 0;

	if (buf->prov->ops->pin_att)
		ret = buf->prov->ops->pin_att(att->prov);
	else if (buf->prov->ops->pin)
		ret = buf->prov->ops->pin(buf->priv);
	if (!ret)
		hmemreg_count_pin(buf, attach->priv);
	return ret;
}

static void hmemreg_buf_unpin(struct dma_buf_attachment *attach)
{
	struct hmemreg_buf *buf = attach->dmabuf->priv;
	struct hmemreg_ledger_att *att = attach->priv;

	if (!hmemreg_count_unpin(buf, att))
		return;
	if (buf->prov->ops->unpin_att)
		buf->prov->ops->unpin_att(att->prov);
	else if (buf->prov->ops->unpin)
		buf->prov->ops->unpin(buf->priv);
}

static struct sg_table *hmemreg_buf_map(struct dma_buf_attachment *attach,
					enum dma_data_direction dir)
{
	struct hmemreg_buf *buf = attach->dmabuf->priv;
	struct hmemreg_ledger_att *att = attach->priv;
	struct sg_table *sgt;

	/* Its watch fired: these pages are no longer the range it exported. */
	if (READ_ONCE(buf->stale))
		return ERR_PTR(-ESTALE);
	/*
	 * A read-only export never lets the device write: only DMA_TO_DEVICE
	 * (BIDIRECTIONAL writes too). Static importers never get here for one
	 * (refused at attach).
	 */
	if (dir != DMA_TO_DEVICE && !(buf->rec.state & HMEMREG_EXP_STATE_WRITABLE))
		return ERR_PTR(-EACCES);
	if (buf->prov->ops->map_att)
		sgt = buf->prov->ops->map_att(att->prov, dir);
	else
		sgt = buf->prov->ops->map(buf->priv, attach->dev, dir);
	if (IS_ERR(sgt))
		return sgt;
	spin_lock(&hmemreg_ledger_lock);
	att->mapped++;
	buf->rec.maps_live++;
	buf->rec.maps_total++;
	spin_unlock(&hmemreg_ledger_lock);
	atomic64_inc(&hmemreg_stats.maps_live);
	atomic64_inc(&hmemreg_stats.maps_total);
	return sgt;
}

static void hmemreg_buf_unmap(struct dma_buf_attachment *attach,
			      struct sg_table *sgt, enum dma_data_direction dir)
{
	struct hmemreg_buf *buf = attach->dmabuf->priv;
	struct hmemreg_ledger_att *att = attach->priv;
	bool ok;

	spin_lock(&hmemreg_ledger_lock);
	ok = att->mapped > 0;
	if (ok) {
		att->mapped--;
		buf->rec.maps_live--;
	}
	spin_unlock(&hmemreg_ledger_lock);
	if (ok)
		atomic64_dec(&hmemreg_stats.maps_live);
	else
		atomic64_inc(&hmemreg_stats.unbalanced);
	if (buf->prov->ops->unmap_att)
		buf->prov->ops->unmap_att(att->prov, sgt, dir);
	else
		buf->prov->ops->unmap(buf->priv, attach->dev, sgt, dir);
}

static void hmemreg_buf_release(struct dma_buf *dmabuf)
{
	struct hmemreg_buf *buf = dmabuf->priv;
	struct hmemreg_provider *prov = buf->prov;

	hmemreg_watch_hook_del(&buf->hook);
	hmemreg_ledger_del(&buf->rec);
	prov->ops->release(buf->priv);
	if (!hmemreg_provider_builtin(prov))
		module_put(prov->owner);
	kfree(buf);
}

/* User mappings of the dma-buf keep the memory in place like a pin. */
static void hmemreg_buf_vm_open(struct vm_area_struct *vma)
{
	struct hmemreg_buf *buf = vma->vm_private_data;

	if (buf->prov->ops->pin)
		buf->prov->ops->pin(buf->priv);
	spin_lock(&hmemreg_ledger_lock);
	buf->rec.user_mmaps++;
	spin_unlock(&hmemreg_ledger_lock);
	atomic64_inc(&hmemreg_stats.user_mmaps_live);
}

static void hmemreg_buf_vm_close(struct vm_area_struct *vma)
{
	struct hmemreg_buf *buf = vma->vm_private_data;

	spin_lock(&hmemreg_ledger_lock);
	buf->rec.user_mmaps--;
	spin_unlock(&hmemreg_ledger_lock);
	atomic64_dec(&hmemreg_stats.user_mmaps_live);
	if (buf->prov->ops->unpin)
		buf->prov->ops->unpin(buf->priv);
}

static const struct vm_operations_struct hmemreg_buf_vm_ops = {
	.open = hmemreg_buf_vm_open,
	.close = hmemreg_buf_vm_close,
};

static int hmemreg_buf_mmap(struct dma_buf *dmabuf, struct vm_area_struct *vma)
{
	struct hmemreg_buf *buf = dmabuf->priv;
	int ret;

	if (!buf->prov->ops->mmap)
		return -EOPNOTSUPP;
	/* Pages of another mm or a pool: never copied into a child. */
	hmemreg_vma_set_flags(vma, VM_DONTCOPY | VM_DONTEXPAND, 0);
	ret = buf->prov->ops->mmap(buf->priv, vma);
	/* The inner exporter's mapping: its vm_ops and file, not ours. */
	if (ret || (buf->prov->flags & HMEMREG_PROV_FORWARDS))
		return ret;
	vma->vm_ops = &hmemreg_buf_vm_ops;
	vma->vm_private_data = buf;
	hmemreg_buf_vm_open(vma);
	return 0;
}

#ifdef HMEMREG_HAVE_DMA_BUF_VMAP_IOSYS
/*
 * A kernel mapping, for importers that reach the memory with the CPU
 * (Soft-RoCE copies packets in and out of it). The core hands one mapping
 * to every caller and counts them, so this runs once per mapping; like a
 * user mmap, it keeps the memory in place. It must not fail for bad input:
 * 6.1's dma_buf_vmap() warns on any failure, so refusals (a stale export,
 * a read-only one) belong in map_dma_buf, which such importers call first.
 */
static int hmemreg_buf_vmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct hmemreg_buf *buf = dmabuf->priv;
	void *vaddr;
	int ret;

	if (!buf->prov->ops->vmap)
		return -EOPNOTSUPP;
	if (buf->prov->ops->pin) {
		ret = buf->prov->ops->pin(buf->priv);
		if (ret)
			return ret;
	}
	vaddr = buf->prov->ops->vmap(buf->priv);
	if (!vaddr) {
		if (buf->prov->ops->unpin)
			buf->prov->ops->unpin(buf->priv);
		return -ENOMEM;
	}
	iosys_map_set_vaddr(map, vaddr);
	return 0;
}

static void hmemreg_buf_vunmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct hmemreg_buf *buf = dmabuf->priv;

	buf->prov->ops->vunmap(buf->priv, map->vaddr);
	if (buf->prov->ops->unpin)
		buf->prov->ops->unpin(buf->priv);
}
#endif

#define HMEMREG_BUF_OPS_COMMON				\
	.attach = hmemreg_buf_attach,				\
	.detach = hmemreg_buf_detach,				\
	.pin = hmemreg_buf_pin,					\
	.unpin = hmemreg_buf_unpin,				\
	.map_dma_buf = hmemreg_buf_map,				\
	.unmap_dma_buf = hmemreg_buf_unmap,			\
	.release = hmemreg_buf_release,				\
	.mmap = hmemreg_buf_mmap

static const struct dma_buf_ops hmemreg_buf_ops = {
	HMEMREG_BUF_OPS_COMMON,
#ifdef HMEMREG_HAVE_DMA_BUF_VMAP_IOSYS
	.vmap = hmemreg_buf_vmap,
	.vunmap = hmemreg_buf_vunmap,
#endif
	/*
	 * No begin/end_cpu_access: both built-in providers hand out ordinary
	 * cacheable system RAM, coherent with DMA on the platforms hmemreg
	 * targets, so DMA_BUF_IOCTL_SYNC has nothing to do.
	 */
};

/*
 * Exports whose memory has no kernel mapping (a provider without vmap, a
 * wrapped buffer whose exporter has none): without the op, dma_buf_vmap()
 * refuses with EINVAL; a failing op would make 6.1's core warn.
 */
static const struct dma_buf_ops hmemreg_buf_ops_novmap = {
	HMEMREG_BUF_OPS_COMMON,
};

static bool hmemreg_is_buf(const struct dma_buf *dmabuf)
{
	return dmabuf->ops == &hmemreg_buf_ops ||
	       dmabuf->ops == &hmemreg_buf_ops_novmap;
}

/* The ledger asks: extra HMEMREG_EXP_STATE_* bits, the provider's among them. */
static u32 hmemreg_buf_ledger_state(const struct hmemreg_ledger_exp *rec)
{
	const struct hmemreg_buf *buf = container_of(rec, struct hmemreg_buf, rec);
	u32 state = READ_ONCE(buf->stale) ? HMEMREG_EXP_STATE_STALE : 0;

	if (buf->prov->ops->state)
		state |= buf->prov->ops->state(buf->priv);
	return state;
}

static const struct hmemreg_ledger_exp_ops hmemreg_buf_ledger_ops = {
	.state = hmemreg_buf_ledger_state,
};

/*
 * Its EXPORT_WATCH watch fired: the range behind the export changed.
 * Dynamic importers map without pinning (with CONFIG_DMABUF_MOVE_NOTIFY),
 * so they are told to drop their mappings, as a driver moving a buffer
 * would; the memory they mapped stays pinned by the export, so nothing is
 * ever left dangling. Pinned attachments were promised that the buffer
 * stays put: while any exists nobody is told (dma_buf_move_notify() tells
 * every attachment), and the userspace event is what reports the change.
 * The export's release deletes the hook first, which waits for this call,
 * so no dma-buf reference is needed.
 */
static void hmemreg_buf_watch_fired(struct hmemreg_watch_hook *hook)
{
	struct hmemreg_buf *buf = container_of(hook, struct hmemreg_buf, hook);
	struct dma_buf *dmabuf = buf->dmabuf;

	dma_resv_lock(dmabuf->resv, NULL);
	WRITE_ONCE(buf->stale, true);
	/* Pins change under the reservation lock only. */
	if (!READ_ONCE(buf->rec.pins_live)) {
		hmemreg_dma_buf_invalidate(dmabuf);
		atomic64_inc(&hmemreg_stats.move_notifies);
	}
	dma_resv_unlock(dmabuf->resv);
}

static const struct hmemreg_watch_hook_ops hmemreg_buf_watch_ops = {
	.fired = hmemreg_buf_watch_fired,
};

/**
 * hmemreg_buf_provider() - the provider behind a dma-buf of this module
 * @dmabuf: any dma-buf
 *
 * Return: its HMEMREG_PROVIDER_* id, or 0 if another module exported it.
 */
u32 hmemreg_buf_provider(const struct dma_buf *dmabuf)
{
	const struct hmemreg_buf *buf;

	if (!hmemreg_is_buf(dmabuf))
		return 0;
	buf = dmabuf->priv;
	return buf->prov->id;
}

struct dma_buf *hmemreg_buf_create(struct hmemreg_provider *prov, void *priv,
				   const struct hmemreg_export_desc *desc,
				   u64 *id)
{
	DEFINE_DMA_BUF_EXPORT_INFO(info);
	struct hmemreg_buf *buf;
	struct dma_buf *dmabuf;

	if (!desc->len || !PAGE_ALIGNED(desc->len))
		return ERR_PTR(-EINVAL);
	if (hmemreg_should_fail(HMEMREG_FAIL_ALLOC))
		return ERR_PTR(-ENOMEM);
	buf = kzalloc(sizeof(*buf), GFP_KERNEL_ACCOUNT);
	if (!buf)
		return ERR_PTR(-ENOMEM);
	if (!hmemreg_provider_builtin(prov) && !try_module_get(prov->owner)) {
		kfree(buf);
		return ERR_PTR(-ENODEV);
	}
	buf->prov = prov;
	buf->priv = priv;
	buf->rec.ops = &hmemreg_buf_ledger_ops;
	buf->hook.ops = &hmemreg_buf_watch_ops;
	buf->rec.provider = prov->id;
	buf->rec.addr = desc->addr;
	buf->rec.len = desc->len;
	buf->rec.handle = desc->handle;
	buf->rec.cookie = desc->cookie;
	buf->rec.state = desc->writable ? HMEMREG_EXP_STATE_WRITABLE : 0;

	info.exp_name = KBUILD_MODNAME;
	info.owner = THIS_MODULE;	/* rmmod is refused while any exists */
	info.ops = prov->ops->vmap && (!prov->ops->can_vmap || prov->ops->can_vmap(priv)) ?
		   &hmemreg_buf_ops : &hmemreg_buf_ops_novmap;
	info.size = desc->len;
	info.flags = desc->writable ? O_RDWR : O_RDONLY;
	info.priv = buf;
	/*
	 * A forwarding provider's buffer shares its inner buffer's reservation
	 * object: one lock covers both, so the inner exporter's move_notify
	 * (under its lock) reaches this buffer's importers, and map and pin
	 * (under this buffer's lock) reach the inner buffer without nesting.
	 */
	if (prov->ops->resv)
		info.resv = prov->ops->resv(priv);
	dmabuf = dma_buf_export(&info);
	if (IS_ERR(dmabuf)) {
		if (!hmemreg_provider_builtin(prov))
			module_put(prov->owner);
		kfree(buf);
		return dmabuf;
	}
	buf->dmabuf = dmabuf;
#ifdef HMEMREG_HAVE_DMA_BUF_LOCK
	/*
	 * Kernels whose dma_buf_vmap() takes the buffer's own mutex: a
	 * forwarding buffer's vmap takes its inner buffer's under its own, an
	 * order of two locks of one class that lockdep would flag.
	 */
	if (info.resv)
		lockdep_set_class(&dmabuf->lock, &hmemreg_forward_lock_key);
#endif
	if (prov->ops->describe)
		prov->ops->describe(priv, buf->rec.inner, sizeof(buf->rec.inner));
	hmemreg_ledger_add(&buf->rec);
	*id = buf->rec.id;
	return dmabuf;
}
EXPORT_SYMBOL_GPL(hmemreg_buf_create);

long hmemreg_ioc_export(struct hmemreg_ctx *ctx, struct hmemreg_export *a,
			void __user *uarg, u32 outsize)
{
	struct hmemreg_export_desc desc = {
		.addr = a->addr, .len = a->len, .handle = a->handle,
		.cookie = a->cookie, .writable = a->flags & HMEMREG_EXPORT_WRITE,
	};
	bool watch = a->flags & HMEMREG_EXPORT_WATCH;
	struct hmemreg_provider *prov;
	struct dma_buf *dmabuf;
	void *priv;
	long ret;
	int fd;

	if (a->reserved || (a->flags & ~(HMEMREG_EXPORT_WRITE | HMEMREG_EXPORT_WATCH)))
		return -EINVAL;
	if (!a->len || !PAGE_ALIGNED(a->addr) || !PAGE_ALIGNED(a->len) ||
	    a->addr + a->len < a->addr)
		return -EINVAL;
	if (a->len > (u64)hmemreg_max_export_mb << 20)
		return -ENOSPC;

	prov = hmemreg_provider_get(a->provider);
	if (!prov)
		return -EINVAL;
	if (prov->ops->check) {
		ret = prov->ops->check(ctx, &desc, watch);
		if (ret)
			goto out;
	}

	/*
	 * Arm before pinning: a change of the range between the pin and the
	 * arm would otherwise go unseen. A firing in between is caught below.
	 */
	a->watch_slot = HMEMREG_WATCH_NO_SLOT;
	a->watch_gen = 0;
	if (watch) {
		ret = hmemreg_watch_arm(ctx, a->addr, a->len, a->cookie, 0,
					HMEMREG_EVF_EXPORT, &a->watch_slot,
					&a->watch_gen);
		if (ret)
			goto out;
	}
	priv = prov->ops->create(ctx, &desc);
	if (IS_ERR(priv)) {
		ret = PTR_ERR(priv);
		goto err_watch;
	}

	/* Reserve the fd first; it is installed only once nothing can fail. */
	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		prov->ops->release(priv);
		ret = fd;
		goto err_watch;
	}
	dmabuf = hmemreg_buf_create(prov, priv, &desc, &a->export_id);
	if (IS_ERR(dmabuf)) {
		prov->ops->release(priv);
		ret = PTR_ERR(dmabuf);
		goto err_fd;
	}
	/* From here on the dma-buf owns priv: dma_buf_put() undoes it all. */
	if (watch) {
		/* EAGAIN: fired since it was armed, the pages may not be the range's. */
		struct hmemreg_buf *buf = dmabuf->priv;

		ret = hmemreg_watch_hook_add(ctx, a->watch_slot, a->watch_gen, &buf->hook);
		if (ret)
			goto err_put;
	}
	a->fd = fd;
	if (copy_to_user(uarg, a, outsize)) {
		ret = -EFAULT;
		goto err_put;
	}
	/* Publish last: after this the dma-buf may be gone at any time. */
	fd_install(fd, dmabuf->file);
	hmemreg_provider_put(prov);
	return 0;

err_put:
	dma_buf_put(dmabuf);
err_fd:
	put_unused_fd(fd);
err_watch:
	if (watch)
		hmemreg_watch_disarm(ctx, a->watch_slot, a->watch_gen);
out:
	hmemreg_provider_put(prov);
	return ret;
}
