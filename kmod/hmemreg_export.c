// SPDX-License-Identifier: GPL-2.0
/*
 * DMA-BUF export over memory providers: one dma-buf per exported range,
 * complete dma_buf_ops that forward to the provider and record every
 * attachment, pin and map in the ledger, and the export ioctl, which finds
 * the provider by id in the registry and publishes its fd last.
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
 * struct hmemreg_exp - one exported range
 * @rec:    its ledger record
 * @hook:   its end of the EXPORT_WATCH watch, if one guards it
 * @prov:   provider that owns the memory
 * @priv:   provider's object for this range
 * @dmabuf: the dma-buf exporting it
 * @stale:  that watch fired (set under the reservation lock)
 */
struct hmemreg_exp {
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

static int hmemreg_exp_attach(struct dma_buf *dmabuf,
			      struct dma_buf_attachment *attach)
{
	struct hmemreg_exp *exp = dmabuf->priv;
	struct hmemreg_ledger_att *att;

	/* See "Peer-to-peer" in hmemreg_provider.h. */
	if ((exp->prov->flags & HMEMREG_PROV_NEEDS_P2P) && !attach->peer2peer) {
		dev_warn_ratelimited(attach->dev,
				     "hmemreg: %s memory needs PCI peer-to-peer, importer cannot do it\n",
				     exp->prov->name);
		return -EOPNOTSUPP;
	}
	/*
	 * A static importer maps bidirectionally. Some cores (6.1's) map it
	 * at attach, others only when it asks; refuse what could not be
	 * mapped here, so that it fails at attach with the same errno on
	 * every kernel: the device would write a read-only export, and a
	 * stale one maps nothing.
	 */
	if (!dma_buf_attachment_is_dynamic(attach)) {
		if (READ_ONCE(exp->stale))
			return -ESTALE;
		if (!(exp->rec.state & HMEMREG_EXP_STATE_WRITABLE)) {
			dev_warn_ratelimited(attach->dev,
					     "hmemreg: export %llu is read-only, a static importer maps it writable\n",
					     exp->rec.id);
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
	att->dynamic = dma_buf_attachment_is_dynamic(attach);
	att->attached_ns = ktime_get_boottime_ns();
	/* A forwarding provider attaches to its inner buffer for this device. */
	if (exp->prov->ops->attach) {
		int ret = exp->prov->ops->attach(exp->priv, attach, &att->prov);

		if (ret) {
			kfree(att);
			return ret;
		}
	}
	attach->priv = att;

	spin_lock(&hmemreg_ledger_lock);
	list_add_tail(&att->node, &exp->rec.attachments);
	exp->rec.attach_live++;
	spin_unlock(&hmemreg_ledger_lock);
	atomic64_inc(&hmemreg_stats.attach_live);
	atomic64_inc(&hmemreg_stats.attach_total);
	return 0;
}

static void hmemreg_exp_detach(struct dma_buf *dmabuf,
			       struct dma_buf_attachment *attach)
{
	struct hmemreg_exp *exp = dmabuf->priv;
	struct hmemreg_ledger_att *att = attach->priv;

	spin_lock(&hmemreg_ledger_lock);
	list_del(&att->node);
	exp->rec.attach_live--;
	spin_unlock(&hmemreg_ledger_lock);
	atomic64_dec(&hmemreg_stats.attach_live);
	/* The core unmaps and unpins before detach; anything left is a bug. */
	if (att->pinned || att->mapped) {
		atomic64_inc(&hmemreg_stats.unbalanced);
		pr_warn_ratelimited("export %llu: %s detached with %u pins, %u maps\n",
				    exp->rec.id, att->device, att->pinned, att->mapped);
	}
	if (exp->prov->ops->detach)
		exp->prov->ops->detach(exp->priv, att->prov);
	kfree(att);
}

static void hmemreg_count_pin(struct hmemreg_exp *exp,
			      struct hmemreg_ledger_att *att)
{
	spin_lock(&hmemreg_ledger_lock);
	if (att)
		att->pinned++;
	exp->rec.pins_live++;
	exp->rec.pins_total++;
	exp->rec.last_pin_ns = ktime_get_boottime_ns();
	spin_unlock(&hmemreg_ledger_lock);
	atomic64_inc(&hmemreg_stats.pins_live);
	atomic64_inc(&hmemreg_stats.pins_total);
}

/* Return false (and count it) for an unpin without a pin. */
static bool hmemreg_count_unpin(struct hmemreg_exp *exp,
				struct hmemreg_ledger_att *att)
{
	bool ok;

	spin_lock(&hmemreg_ledger_lock);
	ok = att ? att->pinned > 0 : exp->rec.pins_live > 0;
	if (ok) {
		if (att)
			att->pinned--;
		exp->rec.pins_live--;
		exp->rec.last_unpin_ns = ktime_get_boottime_ns();
	}
	spin_unlock(&hmemreg_ledger_lock);
	if (ok) {
		atomic64_dec(&hmemreg_stats.pins_live);
	} else {
		atomic64_inc(&hmemreg_stats.unbalanced);
		pr_warn_ratelimited("export %llu: unpin without pin\n", exp->rec.id);
	}
	return ok;
}

/* Called with the reservation lock held. */
static int hmemreg_exp_pin(struct dma_buf_attachment *attach)
{
	struct hmemreg_exp *exp = attach->dmabuf->priv;
	struct hmemreg_ledger_att *att = attach->priv;
	int ret = 0;

	if (exp->prov->ops->pin_att)
		ret = exp->prov->ops->pin_att(att->prov);
	else if (exp->prov->ops->pin)
		ret = exp->prov->ops->pin(exp->priv);
	if (!ret)
		hmemreg_count_pin(exp, attach->priv);
	return ret;
}

static void hmemreg_exp_unpin(struct dma_buf_attachment *attach)
{
	struct hmemreg_exp *exp = attach->dmabuf->priv;
	struct hmemreg_ledger_att *att = attach->priv;

	if (!hmemreg_count_unpin(exp, att))
		return;
	if (exp->prov->ops->unpin_att)
		exp->prov->ops->unpin_att(att->prov);
	else if (exp->prov->ops->unpin)
		exp->prov->ops->unpin(exp->priv);
}

static struct sg_table *hmemreg_exp_map(struct dma_buf_attachment *attach,
					enum dma_data_direction dir)
{
	struct hmemreg_exp *exp = attach->dmabuf->priv;
	struct hmemreg_ledger_att *att = attach->priv;
	struct sg_table *sgt;

	/* Its watch fired: these pages are no longer the range it exported. */
	if (READ_ONCE(exp->stale))
		return ERR_PTR(-ESTALE);
	/*
	 * A read-only export never lets the device write: only DMA_TO_DEVICE
	 * (BIDIRECTIONAL writes too). Static importers never get here for one
	 * (refused at attach).
	 */
	if (dir != DMA_TO_DEVICE && !(exp->rec.state & HMEMREG_EXP_STATE_WRITABLE))
		return ERR_PTR(-EACCES);
	if (exp->prov->ops->map_att)
		sgt = exp->prov->ops->map_att(att->prov, dir);
	else
		sgt = exp->prov->ops->map(exp->priv, attach->dev, dir);
	if (IS_ERR(sgt))
		return sgt;
	spin_lock(&hmemreg_ledger_lock);
	att->mapped++;
	exp->rec.maps_live++;
	exp->rec.maps_total++;
	spin_unlock(&hmemreg_ledger_lock);
	atomic64_inc(&hmemreg_stats.maps_live);
	atomic64_inc(&hmemreg_stats.maps_total);
	return sgt;
}

static void hmemreg_exp_unmap(struct dma_buf_attachment *attach,
			      struct sg_table *sgt, enum dma_data_direction dir)
{
	struct hmemreg_exp *exp = attach->dmabuf->priv;
	struct hmemreg_ledger_att *att = attach->priv;
	bool ok;

	spin_lock(&hmemreg_ledger_lock);
	ok = att->mapped > 0;
	if (ok) {
		att->mapped--;
		exp->rec.maps_live--;
	}
	spin_unlock(&hmemreg_ledger_lock);
	if (ok)
		atomic64_dec(&hmemreg_stats.maps_live);
	else
		atomic64_inc(&hmemreg_stats.unbalanced);
	if (exp->prov->ops->unmap_att)
		exp->prov->ops->unmap_att(att->prov, sgt, dir);
	else
		exp->prov->ops->unmap(exp->priv, attach->dev, sgt, dir);
}

static void hmemreg_exp_release(struct dma_buf *dmabuf)
{
	struct hmemreg_exp *exp = dmabuf->priv;
	struct hmemreg_provider *prov = exp->prov;

	hmemreg_watch_hook_del(&exp->hook);
	hmemreg_ledger_del(&exp->rec);
	prov->ops->release(exp->priv);
	if (!hmemreg_provider_builtin(prov))
		module_put(prov->owner);
	kfree(exp);
}

/* User mappings of the dma-buf keep the memory in place like a pin. */
static void hmemreg_exp_vm_open(struct vm_area_struct *vma)
{
	struct hmemreg_exp *exp = vma->vm_private_data;

	if (exp->prov->ops->pin)
		exp->prov->ops->pin(exp->priv);
	spin_lock(&hmemreg_ledger_lock);
	exp->rec.user_mmaps++;
	spin_unlock(&hmemreg_ledger_lock);
	atomic64_inc(&hmemreg_stats.user_mmaps_live);
}

static void hmemreg_exp_vm_close(struct vm_area_struct *vma)
{
	struct hmemreg_exp *exp = vma->vm_private_data;

	spin_lock(&hmemreg_ledger_lock);
	exp->rec.user_mmaps--;
	spin_unlock(&hmemreg_ledger_lock);
	atomic64_dec(&hmemreg_stats.user_mmaps_live);
	if (exp->prov->ops->unpin)
		exp->prov->ops->unpin(exp->priv);
}

static const struct vm_operations_struct hmemreg_exp_vm_ops = {
	.open = hmemreg_exp_vm_open,
	.close = hmemreg_exp_vm_close,
};

static int hmemreg_exp_mmap(struct dma_buf *dmabuf, struct vm_area_struct *vma)
{
	struct hmemreg_exp *exp = dmabuf->priv;
	int ret;

	if (!exp->prov->ops->mmap)
		return -EOPNOTSUPP;
	/* Pages of another mm or a pool: never copied into a child. */
	hmemreg_vma_set_flags(vma, VM_DONTCOPY | VM_DONTEXPAND, 0);
	ret = exp->prov->ops->mmap(exp->priv, vma);
	/* The inner exporter's mapping: its vm_ops and file, not ours. */
	if (ret || (exp->prov->flags & HMEMREG_PROV_FORWARDS))
		return ret;
	vma->vm_ops = &hmemreg_exp_vm_ops;
	vma->vm_private_data = exp;
	hmemreg_exp_vm_open(vma);
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
static int hmemreg_exp_vmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct hmemreg_exp *exp = dmabuf->priv;
	void *vaddr;
	int ret;

	if (!exp->prov->ops->vmap)
		return -EOPNOTSUPP;
	if (exp->prov->ops->pin) {
		ret = exp->prov->ops->pin(exp->priv);
		if (ret)
			return ret;
	}
	vaddr = exp->prov->ops->vmap(exp->priv);
	if (!vaddr) {
		if (exp->prov->ops->unpin)
			exp->prov->ops->unpin(exp->priv);
		return -ENOMEM;
	}
	iosys_map_set_vaddr(map, vaddr);
	return 0;
}

static void hmemreg_exp_vunmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	struct hmemreg_exp *exp = dmabuf->priv;

	exp->prov->ops->vunmap(exp->priv, map->vaddr);
	if (exp->prov->ops->unpin)
		exp->prov->ops->unpin(exp->priv);
}
#endif

#define HMEMREG_DMABUF_OPS_COMMON				\
	.attach = hmemreg_exp_attach,				\
	.detach = hmemreg_exp_detach,				\
	.pin = hmemreg_exp_pin,					\
	.unpin = hmemreg_exp_unpin,				\
	.map_dma_buf = hmemreg_exp_map,				\
	.unmap_dma_buf = hmemreg_exp_unmap,			\
	.release = hmemreg_exp_release,				\
	.mmap = hmemreg_exp_mmap

static const struct dma_buf_ops hmemreg_dmabuf_ops = {
	HMEMREG_DMABUF_OPS_COMMON,
#ifdef HMEMREG_HAVE_DMA_BUF_VMAP_IOSYS
	.vmap = hmemreg_exp_vmap,
	.vunmap = hmemreg_exp_vunmap,
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
static const struct dma_buf_ops hmemreg_dmabuf_ops_novmap = {
	HMEMREG_DMABUF_OPS_COMMON,
};

static bool hmemreg_is_export(const struct dma_buf *dmabuf)
{
	return dmabuf->ops == &hmemreg_dmabuf_ops ||
	       dmabuf->ops == &hmemreg_dmabuf_ops_novmap;
}

/* The ledger asks: extra HMEMREG_EXP_STATE_* bits, the provider's among them. */
static u32 hmemreg_exp_ledger_state(const struct hmemreg_ledger_exp *rec)
{
	const struct hmemreg_exp *exp = container_of(rec, struct hmemreg_exp, rec);
	u32 state = READ_ONCE(exp->stale) ? HMEMREG_EXP_STATE_STALE : 0;

	if (exp->prov->ops->state)
		state |= exp->prov->ops->state(exp->priv);
	return state;
}

static const struct hmemreg_ledger_exp_ops hmemreg_exp_ledger_ops = {
	.state = hmemreg_exp_ledger_state,
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
static void hmemreg_exp_watch_fired(struct hmemreg_watch_hook *hook)
{
	struct hmemreg_exp *exp = container_of(hook, struct hmemreg_exp, hook);
	struct dma_buf *dmabuf = exp->dmabuf;

	dma_resv_lock(dmabuf->resv, NULL);
	WRITE_ONCE(exp->stale, true);
	/* Pins change under the reservation lock only. */
	if (!READ_ONCE(exp->rec.pins_live)) {
		hmemreg_dma_buf_invalidate(dmabuf);
		atomic64_inc(&hmemreg_stats.move_notifies);
	}
	dma_resv_unlock(dmabuf->resv);
}

static const struct hmemreg_watch_hook_ops hmemreg_exp_watch_ops = {
	.fired = hmemreg_exp_watch_fired,
};

/**
 * hmemreg_export_provider() - the provider behind a dma-buf of this module
 * @dmabuf: any dma-buf
 *
 * Return: its HMEMREG_PROVIDER_* id, or 0 if another module exported it.
 */
u32 hmemreg_export_provider(const struct dma_buf *dmabuf)
{
	const struct hmemreg_exp *exp;

	if (!hmemreg_is_export(dmabuf))
		return 0;
	exp = dmabuf->priv;
	return exp->prov->id;
}

struct dma_buf *hmemreg_export(struct hmemreg_provider *prov, void *priv,
			       const struct hmemreg_export_desc *desc, u64 *id)
{
	DEFINE_DMA_BUF_EXPORT_INFO(info);
	struct hmemreg_exp *exp;
	struct dma_buf *dmabuf;

	if (!desc->len || !PAGE_ALIGNED(desc->len))
		return ERR_PTR(-EINVAL);
	if (hmemreg_should_fail(HMEMREG_FAIL_ALLOC))
		return ERR_PTR(-ENOMEM);
	exp = kzalloc(sizeof(*exp), GFP_KERNEL_ACCOUNT);
	if (!exp)
		return ERR_PTR(-ENOMEM);
	if (!hmemreg_provider_builtin(prov) && !try_module_get(prov->owner)) {
		kfree(exp);
		return ERR_PTR(-ENODEV);
	}
	exp->prov = prov;
	exp->priv = priv;
	exp->rec.ops = &hmemreg_exp_ledger_ops;
	exp->hook.ops = &hmemreg_exp_watch_ops;
	exp->rec.provider = prov->id;
	exp->rec.addr = desc->addr;
	exp->rec.len = desc->len;
	exp->rec.handle = desc->handle;
	exp->rec.cookie = desc->cookie;
	exp->rec.state = desc->writable ? HMEMREG_EXP_STATE_WRITABLE : 0;

	info.exp_name = KBUILD_MODNAME;
	info.owner = THIS_MODULE;	/* rmmod is refused while any exists */
	info.ops = prov->ops->vmap && (!prov->ops->can_vmap || prov->ops->can_vmap(priv)) ?
		   &hmemreg_dmabuf_ops : &hmemreg_dmabuf_ops_novmap;
	info.size = desc->len;
	info.flags = desc->writable ? O_RDWR : O_RDONLY;
	info.priv = exp;
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
		kfree(exp);
		return dmabuf;
	}
	exp->dmabuf = dmabuf;
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
		prov->ops->describe(priv, exp->rec.inner, sizeof(exp->rec.inner));
	hmemreg_ledger_add(&exp->rec);
	*id = exp->rec.id;
	return dmabuf;
}
EXPORT_SYMBOL_GPL(hmemreg_export);

long hmemreg_export_ioctl(struct hmemreg_ctx *ctx, struct hmemreg_export *a,
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
	dmabuf = hmemreg_export(prov, priv, &desc, &a->export_id);
	if (IS_ERR(dmabuf)) {
		prov->ops->release(priv);
		ret = PTR_ERR(dmabuf);
		goto err_fd;
	}
	/* From here on the dma-buf owns priv: dma_buf_put() undoes it all. */
	if (watch) {
		/* EAGAIN: fired since it was armed, the pages may not be the range's. */
		struct hmemreg_exp *exp = dmabuf->priv;

		ret = hmemreg_watch_hook_add(ctx, a->watch_slot, a->watch_gen, &exp->hook);
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
