// SPDX-License-Identifier: GPL-2.0
/*
 * Provider "devmem": emulated device memory. A budget of devmem_mb MiB of
 * kernel pages stands in for accelerator memory so the whole stack runs
 * without an accelerator. Allocations belong to an open /dev/hmemreg and
 * are handed out as handles; each export holds a reference, and a busy
 * count (importer pins and maps, user mmaps) makes freeing a handle that
 * is in use fail with -EBUSY instead of pulling memory from under a device.
 */
#include <linux/mm.h>
#include <linux/slab.h>

#include "hmemreg_priv.h"

/**
 * struct hmemreg_devmem - one allocation
 * @ref:    the handle's reference plus one per export
 * @busy:   pins, device maps and user mmaps over all its exports
 * @freed:  the handle was freed (memory lives on for its exports)
 * @len:    bytes
 * @npages: pages in @pages
 * @pages:  the memory, zeroed at allocation
 */
struct hmemreg_devmem {
	struct kref ref;
	atomic_t busy;
	bool freed;
	u64 len;
	unsigned long npages;
	struct page **pages;
};

/* One exported range of an allocation. */
struct hmemreg_devmem_slice {
	struct hmemreg_devmem *mem;
	unsigned long first;
	unsigned long npages;
};

static atomic64_t hmemreg_pool_used = ATOMIC64_INIT(0);

static u64 hmemreg_devmem_pool_bytes(void)
{
	return (u64)hmemreg_devmem_mb << 20;
}

bool hmemreg_devmem_enabled(void)
{
	return hmemreg_devmem_mb > 0;
}

static void hmemreg_devmem_free_pages(struct hmemreg_devmem *mem)
{
	unsigned long i;

	/* pages is NULL when its own allocation failed (alloc error path). */
	for (i = 0; mem->pages && i < mem->npages; i++)
		if (mem->pages[i])
			__free_page(mem->pages[i]);
	kvfree(mem->pages);
	atomic64_sub(mem->len, &hmemreg_pool_used);
}

static void hmemreg_devmem_kref_release(struct kref *ref)
{
	struct hmemreg_devmem *mem = container_of(ref, struct hmemreg_devmem, ref);

	hmemreg_devmem_free_pages(mem);
	atomic64_sub(mem->len, &hmemreg_stats.devmem_used_bytes);
	kfree(mem);
}

long hmemreg_ioc_devmem_alloc(struct hmemreg_ctx *ctx, void *arg)
{
	struct hmemreg_devmem_alloc *a = arg;
	struct hmemreg_devmem *mem;
	unsigned long i;
	u64 handle;
	int ret;

	if (a->flags)
		return -EINVAL;
	if (!a->len || !PAGE_ALIGNED(a->len))
		return -EINVAL;
	if (!hmemreg_devmem_enabled())
		return -EOPNOTSUPP;
	if (a->len > hmemreg_devmem_pool_bytes())
		return -ENOSPC;
	if (atomic64_add_return(a->len, &hmemreg_pool_used) > hmemreg_devmem_pool_bytes()) {
		atomic64_sub(a->len, &hmemreg_pool_used);
		return -ENOSPC;
	}
	ret = -ENOMEM;
	mem = kzalloc(sizeof(*mem), GFP_KERNEL_ACCOUNT);
	if (!mem) {
		atomic64_sub(a->len, &hmemreg_pool_used);
		return -ENOMEM;
	}
	kref_init(&mem->ref);
	mem->len = a->len;
	mem->npages = a->len >> PAGE_SHIFT;
	mem->pages = kvcalloc(mem->npages, sizeof(*mem->pages), GFP_KERNEL_ACCOUNT);
	if (!mem->pages)
		goto err;
	for (i = 0; i < mem->npages; i++) {
		if (hmemreg_should_fail(HMEMREG_FAIL_DEVMEM))
			goto err;
		mem->pages[i] = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
		if (!mem->pages[i])
			goto err;
	}
	mutex_lock(&ctx->lock);
	handle = ctx->next_handle++;
	ret = xa_insert(&ctx->devmem, handle, mem, GFP_KERNEL_ACCOUNT);
	mutex_unlock(&ctx->lock);
	if (ret)
		goto err;
	atomic64_add(mem->len, &hmemreg_stats.devmem_used_bytes);
	atomic64_inc(&hmemreg_stats.devmem_handles_live);
	a->handle = handle;
	return 0;

err:
	hmemreg_devmem_free_pages(mem);
	kfree(mem);
	return ret == -EBUSY ? -ENOMEM : ret;
}

long hmemreg_ioc_devmem_free(struct hmemreg_ctx *ctx, void *arg)
{
	struct hmemreg_devmem_free *a = arg;
	struct hmemreg_devmem *mem;

	if (a->flags)
		return -EINVAL;
	mutex_lock(&ctx->lock);
	mem = xa_load(&ctx->devmem, a->handle);
	if (!mem) {
		mutex_unlock(&ctx->lock);
		return -ENOENT;
	}
	if (atomic_read(&mem->busy)) {
		mutex_unlock(&ctx->lock);
		return -EBUSY;
	}
	xa_erase(&ctx->devmem, a->handle);
	WRITE_ONCE(mem->freed, true);
	mutex_unlock(&ctx->lock);
	atomic64_dec(&hmemreg_stats.devmem_handles_live);
	kref_put(&mem->ref, hmemreg_devmem_kref_release);
	return 0;
}

/* Drop every handle of a context being released. */
void hmemreg_devmem_release_all(struct hmemreg_ctx *ctx)
{
	struct hmemreg_devmem *mem;
	unsigned long handle;

	xa_for_each(&ctx->devmem, handle, mem) {
		xa_erase(&ctx->devmem, handle);
		WRITE_ONCE(mem->freed, true);
		atomic64_dec(&hmemreg_stats.devmem_handles_live);
		kref_put(&mem->ref, hmemreg_devmem_kref_release);
	}
}

/* A handle's memory is no user range: it cannot be watched. */
static int hmemreg_devmem_check(struct hmemreg_ctx *ctx,
				const struct hmemreg_export_desc *desc, bool watch)
{
	if (watch)
		return -EINVAL;
	if (!hmemreg_devmem_enabled())
		return -EOPNOTSUPP;
	return 0;
}

/**
 * hmemreg_devmem_create() - take [offset, offset + len) of a handle for export
 * @ctx:  context owning the handle
 * @desc: the handle, and the page-aligned offset (addr) and length in it
 *
 * Return: provider object, or ERR_PTR(-ENOENT / -ERANGE / -ENOMEM).
 */
static void *hmemreg_devmem_create(struct hmemreg_ctx *ctx,
				   const struct hmemreg_export_desc *desc)
{
	u64 handle = desc->handle, offset = desc->addr, len = desc->len;
	struct hmemreg_devmem_slice *s;
	struct hmemreg_devmem *mem;

	if (hmemreg_should_fail(HMEMREG_FAIL_ALLOC))
		return ERR_PTR(-ENOMEM);
	s = kzalloc(sizeof(*s), GFP_KERNEL_ACCOUNT);
	if (!s)
		return ERR_PTR(-ENOMEM);
	mutex_lock(&ctx->lock);
	mem = xa_load(&ctx->devmem, handle);
	if (!mem) {
		mutex_unlock(&ctx->lock);
		kfree(s);
		return ERR_PTR(-ENOENT);
	}
	if (offset >= mem->len || len > mem->len - offset) {
		mutex_unlock(&ctx->lock);
		kfree(s);
		return ERR_PTR(-ERANGE);
	}
	kref_get(&mem->ref);
	mutex_unlock(&ctx->lock);
	s->mem = mem;
	s->first = offset >> PAGE_SHIFT;
	s->npages = len >> PAGE_SHIFT;
	return s;
}

static u32 hmemreg_devmem_state(void *priv)
{
	struct hmemreg_devmem_slice *s = priv;

	return READ_ONCE(s->mem->freed) ? HMEMREG_EXP_STATE_HANDLE_FREED : 0;
}

static struct sg_table *hmemreg_devmem_map(void *priv, struct device *dev,
					   enum dma_data_direction dir)
{
	struct hmemreg_devmem_slice *s = priv;
	struct sg_table *sgt;

	atomic_inc(&s->mem->busy);
	sgt = hmemreg_pages_map(s->mem->pages + s->first, s->npages, dev, dir);
	if (IS_ERR(sgt))
		atomic_dec(&s->mem->busy);
	return sgt;
}

static void hmemreg_devmem_unmap(void *priv, struct device *dev,
				 struct sg_table *sgt, enum dma_data_direction dir)
{
	struct hmemreg_devmem_slice *s = priv;

	hmemreg_pages_unmap(dev, sgt, dir);
	atomic_dec(&s->mem->busy);
}

static int hmemreg_devmem_pin(void *priv)
{
	struct hmemreg_devmem_slice *s = priv;

	atomic_inc(&s->mem->busy);
	return 0;
}

static void hmemreg_devmem_unpin(void *priv)
{
	struct hmemreg_devmem_slice *s = priv;

	atomic_dec(&s->mem->busy);
}

static int hmemreg_devmem_mmap(void *priv, struct vm_area_struct *vma)
{
	struct hmemreg_devmem_slice *s = priv;

	return vm_map_pages(vma, s->mem->pages + s->first, s->npages);
}

static void *hmemreg_devmem_vmap(void *priv)
{
	struct hmemreg_devmem_slice *s = priv;

	return hmemreg_pages_vmap(s->mem->pages + s->first, s->npages);
}

static void hmemreg_devmem_vunmap(void *priv, void *vaddr)
{
	hmemreg_pages_vunmap(vaddr);
}

static void hmemreg_devmem_release(void *priv)
{
	struct hmemreg_devmem_slice *s = priv;

	kref_put(&s->mem->ref, hmemreg_devmem_kref_release);
	kfree(s);
}

static const struct hmemreg_provider_ops hmemreg_devmem_ops = {
	.map = hmemreg_devmem_map,
	.unmap = hmemreg_devmem_unmap,
	.pin = hmemreg_devmem_pin,
	.unpin = hmemreg_devmem_unpin,
	.mmap = hmemreg_devmem_mmap,
	.vmap = hmemreg_devmem_vmap,
	.vunmap = hmemreg_devmem_vunmap,
	.release = hmemreg_devmem_release,
	.state = hmemreg_devmem_state,
	.check = hmemreg_devmem_check,
	.create = hmemreg_devmem_create,
};

static struct hmemreg_provider hmemreg_devmem_provider = {
	.name = "devmem",
	.id = HMEMREG_PROVIDER_DEVMEM,
	.owner = THIS_MODULE,
	.ops = &hmemreg_devmem_ops,
};

/* Registered even without a pool, so an export names it and gets EOPNOTSUPP. */
int hmemreg_devmem_init(void)
{
	atomic64_set(&hmemreg_stats.devmem_pool_bytes, hmemreg_devmem_pool_bytes());
	return hmemreg_provider_register(&hmemreg_devmem_provider);
}

void hmemreg_devmem_exit(void)
{
	hmemreg_provider_unregister(&hmemreg_devmem_provider);
}
