// SPDX-License-Identifier: GPL-2.0
/*
 * Provider "host": the calling process's own pages, pinned long-term for
 * the life of the dma-buf and charged to its RLIMIT_MEMLOCK. Any mapping
 * the caller may read works: anonymous, shared memory, or a regular file.
 * A writable export takes any the caller may write except a shared
 * writable mapping of a file its filesystem writes back (ext4, xfs...):
 * see hmemreg_host_dirty_tracked().
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/backing-dev.h>
#include <linux/mm.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "hmemreg_priv.h"

/**
 * struct hmemreg_host - one pinned range
 * @pages:    pinned pages
 * @npages:   number of pages
 * @writable: pinned with FOLL_WRITE (dirty them on release)
 * @mm:       address space charged for the pin (mmgrab()ed)
 */
struct hmemreg_host {
	struct page **pages;
	unsigned long npages;
	bool writable;
	struct mm_struct *mm;
};

/* The range is the caller's own memory: no handle names it. */
static int hmemreg_host_check(struct hmemreg_ctx *ctx,
			      const struct hmemreg_export_desc *desc, bool watch)
{
	return desc->handle ? -EINVAL : 0;
}

/*
 * Pages of a shared writable file mapping that the filesystem tracks for
 * writeback (it is told of writes, or writes the pages back) cannot be
 * pinned for long with write access: the filesystem would write back or
 * reclaim pages under a device writing them. 6.5 and later refuse such a
 * pin (EFAULT from inside GUP); older kernels allowed it, unsafely. The
 * test mirrors the kernel's (vma_needs_dirty_tracking()), so that every
 * kernel refuses the same exports, up front and with their own errno.
 */
static bool hmemreg_host_dirty_tracked(struct vm_area_struct *vma)
{
	const struct vm_operations_struct *ops = vma->vm_ops;

	if ((vma->vm_flags & (VM_SHARED | VM_WRITE)) != (VM_SHARED | VM_WRITE))
		return false;
	if (ops && (ops->page_mkwrite || ops->pfn_mkwrite))
		return true;
	return !(vma->vm_flags & VM_PFNMAP) && vma->vm_file &&
	       mapping_can_writeback(vma->vm_file->f_mapping);
}

/* Refuse a writable export of any dirty-tracked mapping in the range. */
static int hmemreg_host_check_writable(u64 addr, u64 len)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	int ret = 0;

	mmap_read_lock(mm);
	for (vma = find_vma(mm, addr); vma && vma->vm_start < addr + len;
	     vma = find_vma(mm, vma->vm_end)) {
		if (hmemreg_host_dirty_tracked(vma)) {
			pr_info_ratelimited("%s[%d]: a writable export of a shared file mapping (%pD) is refused: its filesystem writes the pages back; export it read-only or map it MAP_PRIVATE\n",
					    current->comm, task_tgid_nr(current),
					    vma->vm_file);
			ret = -EOPNOTSUPP;
			break;
		}
	}
	mmap_read_unlock(mm);
	return ret;
}

/**
 * hmemreg_host_create() - pin [addr, addr + len) of the calling process
 * @ctx:  unused (the pages are the calling process's)
 * @desc: page-aligned user address and length, and whether importers may
 *        write
 *
 * Return: the provider object, or ERR_PTR(-EFAULT) when the range is not
 * fully mapped (with write permission if writable), ERR_PTR(-EOPNOTSUPP)
 * when writable and a shared file mapping in it is dirty-tracked,
 * ERR_PTR(-ENOMEM).
 */
static void *hmemreg_host_create(struct hmemreg_ctx *ctx,
				 const struct hmemreg_export_desc *desc)
{
	u64 addr = desc->addr, len = desc->len;
	bool writable = desc->writable;
	unsigned long npages = len >> PAGE_SHIFT;
	unsigned int gup = FOLL_LONGTERM | (writable ? FOLL_WRITE : 0);
	struct hmemreg_host *h;
	long pinned;
	int ret;

	if (addr + len > TASK_SIZE || npages > INT_MAX)
		return ERR_PTR(-EFAULT);
	if (writable) {
		ret = hmemreg_host_check_writable(addr, len);
		if (ret)
			return ERR_PTR(ret);
	}
	if (hmemreg_should_fail(HMEMREG_FAIL_ALLOC))
		return ERR_PTR(-ENOMEM);
	h = kzalloc(sizeof(*h), GFP_KERNEL_ACCOUNT);
	if (!h)
		return ERR_PTR(-ENOMEM);
	h->pages = kvmalloc_array(npages, sizeof(*h->pages), GFP_KERNEL_ACCOUNT);
	if (!h->pages) {
		ret = -ENOMEM;
		goto err_free;
	}
	ret = account_locked_vm(current->mm, npages, true);
	if (ret)
		goto err_pages;
	if (hmemreg_should_fail(HMEMREG_FAIL_PIN)) {
		ret = -ENOMEM;
		goto err_account;
	}
	pinned = pin_user_pages_fast(addr, npages, gup, h->pages);
	if (pinned != npages) {
		if (pinned > 0)
			unpin_user_pages(h->pages, pinned);
		ret = pinned < 0 ? pinned : -EFAULT;
		goto err_account;
	}
	h->npages = npages;
	h->writable = writable;
	mmgrab(current->mm);
	h->mm = current->mm;
	atomic64_add(npages, &hmemreg_stats.host_pages_pinned);
	return h;

err_account:
	account_locked_vm(current->mm, npages, false);
err_pages:
	kvfree(h->pages);
err_free:
	kfree(h);
	return ERR_PTR(ret);
}

static struct sg_table *hmemreg_host_map(void *priv, struct device *dev,
					 enum dma_data_direction dir)
{
	struct hmemreg_host *h = priv;

	return hmemreg_pages_map(h->pages, h->npages, dev, dir);
}

static void hmemreg_host_unmap(void *priv, struct device *dev,
			       struct sg_table *sgt, enum dma_data_direction dir)
{
	hmemreg_pages_unmap(dev, sgt, dir);
}

/*
 * Anonymous pages cannot be inserted into another mapping as pages
 * (vm_insert_page() refuses them), so map them by pfn: they stay pinned
 * for as long as the dma-buf lives, and the VMA holds the dma-buf.
 */
static int hmemreg_host_mmap(void *priv, struct vm_area_struct *vma)
{
	struct hmemreg_host *h = priv;
	unsigned long first = vma->vm_pgoff, n = vma_pages(vma), i;
	int ret;

	if (first > h->npages || n > h->npages - first)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		ret = remap_pfn_range(vma, vma->vm_start + (i << PAGE_SHIFT),
				      page_to_pfn(h->pages[first + i]), PAGE_SIZE,
				      vma->vm_page_prot);
		if (ret)
			return ret;
	}
	return 0;
}

static void *hmemreg_host_vmap(void *priv)
{
	struct hmemreg_host *h = priv;

	return hmemreg_pages_vmap(h->pages, h->npages);
}

static void hmemreg_host_vunmap(void *priv, void *vaddr)
{
	hmemreg_pages_vunmap(vaddr);
}

static void hmemreg_host_release(void *priv)
{
	struct hmemreg_host *h = priv;

	unpin_user_pages_dirty_lock(h->pages, h->npages, h->writable);
	account_locked_vm(h->mm, h->npages, false);
	mmdrop(h->mm);
	atomic64_sub(h->npages, &hmemreg_stats.host_pages_pinned);
	kvfree(h->pages);
	kfree(h);
}

static const struct hmemreg_provider_ops hmemreg_host_ops = {
	.map = hmemreg_host_map,
	.unmap = hmemreg_host_unmap,
	.mmap = hmemreg_host_mmap,
	.vmap = hmemreg_host_vmap,
	.vunmap = hmemreg_host_vunmap,
	.release = hmemreg_host_release,
	.check = hmemreg_host_check,
	.create = hmemreg_host_create,
};

static struct hmemreg_provider hmemreg_host_provider = {
	.name = "host",
	.id = HMEMREG_PROVIDER_HOST,
	.owner = THIS_MODULE,
	.ops = &hmemreg_host_ops,
};

int hmemreg_host_init(void)
{
	return hmemreg_provider_register(&hmemreg_host_provider);
}

void hmemreg_host_exit(void)
{
	hmemreg_provider_unregister(&hmemreg_host_provider);
}
