// SPDX-License-Identifier: GPL-2.0
/*
 * The generation page: a vmalloc_user() area that userspace maps read-only
 * from the fd, a header (struct hmemreg_gen_page: the ring's and watches'
 * counters) followed by one generation word per watch slot, which a cache
 * reads on every hit. Set up once per fd on first use, together with the
 * event ring and the watch slot table.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "hmemreg_priv.h"

/* Mirror the ring's and watches' counters into the page. ring_lock held. */
void hmemreg_gen_sync(struct hmemreg_ctx *ctx)
{
	lockdep_assert_held(&ctx->ring_lock);
	WRITE_ONCE(ctx->page->events_pending, ctx->ring_count);
	WRITE_ONCE(ctx->page->events_total, ctx->events_total);
	WRITE_ONCE(ctx->page->overflowed, ctx->dropped);
	WRITE_ONCE(ctx->page->watches_live, ctx->nr_slots);
}

/**
 * hmemreg_gen_setup() - allocate the generation page, ring and slot table
 * @ctx: context
 *
 * Done once per open file, on first use of any watch feature, so fds used
 * only for export cost nothing. The three are published together: a
 * context whose @page is set has all of them. Takes only ctx->setup_lock (a leaf lock),
 * so it is safe from mmap (which runs under mmap_lock).
 *
 * Return: 0 or -ENOMEM.
 */
int hmemreg_gen_setup(struct hmemreg_ctx *ctx)
{
	u32 max = hmemreg_max_watches, cap = hmemreg_ring_events;
	struct hmemreg_watch **slots = NULL;
	struct hmemreg_event *ring = NULL;
	struct hmemreg_gen_page *page;
	size_t size;
	int ret = -ENOMEM;

	/* Pairs with the release below: a non-NULL page means all is set. */
	if (smp_load_acquire(&ctx->page))
		return 0;
	mutex_lock(&ctx->setup_lock);
	if (ctx->page) {
		mutex_unlock(&ctx->setup_lock);
		return 0;
	}
	size = PAGE_ALIGN(HMEMREG_GEN_OFFSET + (size_t)max * sizeof(u64));
	if (hmemreg_should_fail(HMEMREG_FAIL_ALLOC))
		goto out;
	page = vmalloc_user(size);
	if (!page)
		goto out;
	ring = kvcalloc(cap, sizeof(*ring), GFP_KERNEL_ACCOUNT);
	slots = kvcalloc(max, sizeof(*slots), GFP_KERNEL_ACCOUNT);
	if (!ring || !slots) {
		kvfree(ring);
		kvfree(slots);
		vfree(page);
		goto out;
	}
	page->magic = HMEMREG_GEN_MAGIC;
	page->version = HMEMREG_GEN_VERSION;
	page->max_watches = max;
	page->gen_offset = HMEMREG_GEN_OFFSET;
	ctx->gen = (u64 *)((char *)page + HMEMREG_GEN_OFFSET);
	ctx->map_size = size;
	ctx->max_watches = max;
	ctx->ring = ring;
	ctx->ring_cap = cap;
	ctx->slots = slots;
	/* Publish: readers that see @page see everything set above. */
	smp_store_release(&ctx->page, page);
	ret = 0;
out:
	mutex_unlock(&ctx->setup_lock);
	return ret;
}

/**
 * hmemreg_gen_free() - free what hmemreg_gen_setup() allocated
 * @ctx: context without watches, notifiers or user mapping left
 */
void hmemreg_gen_free(struct hmemreg_ctx *ctx)
{
	kvfree(ctx->slots);
	kvfree(ctx->ring);
	vfree(ctx->page);
	ctx->page = NULL;
}

int hmemreg_gen_mmap(struct hmemreg_ctx *ctx, struct vm_area_struct *vma)
{
	int ret;

	if (vma->vm_pgoff)
		return -EINVAL;
	if (vma->vm_flags & VM_WRITE)
		return -EPERM;
	ret = hmemreg_gen_setup(ctx);
	if (ret)
		return ret;
	if (vma->vm_end - vma->vm_start > ctx->map_size)
		return -EINVAL;
	hmemreg_vma_set_flags(vma, VM_DONTEXPAND | VM_DONTDUMP | VM_DONTCOPY,
			      VM_MAYWRITE);
	return remap_vmalloc_range(vma, ctx->page, 0);
}
