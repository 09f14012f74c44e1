// SPDX-License-Identifier: GPL-2.0
/*
 * DMA mapping of page arrays for providers (exported to other modules): an
 * sg table whose segments stay within what the importing device declares,
 * mapped once per importer with explicit syncs.
 */
#include <linux/dma-mapping.h>
#include <linux/mm.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "hmemreg_priv.h"

/* What one DMA segment may be for @dev: a length and a boundary it may not cross. */
struct hmemreg_seg_limits {
	unsigned int max;
	unsigned long boundary;
};

/*
 * The device's own segment size, and what its DMA path can map in one piece
 * (the swiotlb slot limit when it bounces: SEV/TDX guests, swiotlb=force,
 * devices that cannot reach all memory), whichever is smaller. Page-sized
 * or larger limits are kept whole pages, as RDMA importers want segments
 * that start and end on page boundaries.
 */
static struct hmemreg_seg_limits hmemreg_seg_limits(struct device *dev)
{
	size_t mapping = dma_max_mapping_size(dev);
	struct hmemreg_seg_limits lim = {
		.max = dma_get_max_seg_size(dev),
		.boundary = dma_get_seg_boundary(dev),
	};

	/* 0 means no limit (as drm_prime reads it). */
	if (mapping && mapping < lim.max)
		lim.max = mapping;
	if (lim.max >= PAGE_SIZE)
		lim.max &= PAGE_MASK;
	return lim;
}

/* Bytes a segment starting at @phys may hold. */
static unsigned int hmemreg_seg_room(phys_addr_t phys,
				     const struct hmemreg_seg_limits *lim)
{
	/* 0 when the boundary is the whole address space. */
	unsigned long to_boundary = lim->boundary - (phys & lim->boundary) + 1;

	return min_not_zero(to_boundary, (unsigned long)lim->max);
}

/*
 * Split @pages into DMA segments: physically contiguous pages share one as
 * long as it stays within @lim, as the block layer builds its segments.
 * The boundary is applied to physical addresses, as there: dma-direct maps
 * them to bus addresses as they are (or at a boundary-aligned offset), and
 * swiotlb and IOMMUs place what they map within the boundary themselves.
 * Fill @sgl if not NULL; return the number of segments either way.
 */
static unsigned long hmemreg_pages_segments(struct page **pages,
					    unsigned long npages,
					    const struct hmemreg_seg_limits *lim,
					    struct scatterlist *sgl)
{
	struct scatterlist *sg = sgl;
	unsigned long nents = 0, i = 0;

	while (i < npages) {
		unsigned long first = i, off, bytes;
		phys_addr_t phys = page_to_phys(pages[first]);
		unsigned int len;

		for (i++; i < npages; i++)
			if (page_to_pfn(pages[i]) != page_to_pfn(pages[i - 1]) + 1)
				break;
		bytes = (i - first) << PAGE_SHIFT;
		for (off = 0; off < bytes; off += len) {
			len = min_t(unsigned long, bytes - off,
				    hmemreg_seg_room(phys + off, lim));
			if (sg) {
				sg_set_page(sg, pages[first + (off >> PAGE_SHIFT)],
					    len, offset_in_page(off));
				sg = sg_next(sg);
			}
			nents++;
		}
	}
	return nents;
}

/*
 * One dma-buf is mapped by every importer that attaches (one per rail, say),
 * so its pages can be in several writable DMA mappings at once. The DMA API
 * allows that only with DMA_ATTR_SKIP_CPU_SYNC (as drm_prime does); each
 * mapping still gets its own cache and bounce-buffer syncs, explicitly, so
 * it behaves exactly as a plain mapping would.
 */
struct sg_table *hmemreg_pages_map(struct page **pages, unsigned long npages,
				   struct device *dev, enum dma_data_direction dir)
{
	struct hmemreg_seg_limits lim = hmemreg_seg_limits(dev);
	unsigned long nents;
	struct sg_table *sgt;
	int ret;

	if (hmemreg_should_fail(HMEMREG_FAIL_MAP))
		return ERR_PTR(-ENOMEM);
	nents = hmemreg_pages_segments(pages, npages, &lim, NULL);
	if (!nents || nents > UINT_MAX)
		return ERR_PTR(-EINVAL);
	sgt = kzalloc(sizeof(*sgt), GFP_KERNEL);
	if (!sgt)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table(sgt, nents, GFP_KERNEL);
	if (ret)
		goto err_free;
	hmemreg_pages_segments(pages, npages, &lim, sgt->sgl);
	ret = dma_map_sgtable(dev, sgt, dir, DMA_ATTR_SKIP_CPU_SYNC);
	if (ret)
		goto err_table;
	dma_sync_sgtable_for_device(dev, sgt, dir);
	return sgt;

err_table:
	sg_free_table(sgt);
err_free:
	kfree(sgt);
	return ERR_PTR(ret);
}
EXPORT_SYMBOL_GPL(hmemreg_pages_map);

void hmemreg_pages_unmap(struct device *dev, struct sg_table *sgt,
			 enum dma_data_direction dir)
{
	dma_sync_sgtable_for_cpu(dev, sgt, dir);
	dma_unmap_sgtable(dev, sgt, dir, DMA_ATTR_SKIP_CPU_SYNC);
	sg_free_table(sgt);
	kfree(sgt);
}
EXPORT_SYMBOL_GPL(hmemreg_pages_unmap);

/* One kernel mapping of a page array, for exporters' vmap (CPU importers). */
void *hmemreg_pages_vmap(struct page **pages, unsigned long npages)
{
	if (npages > UINT_MAX)
		return NULL;
	return vmap(pages, npages, VM_MAP, PAGE_KERNEL);
}
EXPORT_SYMBOL_GPL(hmemreg_pages_vmap);

void hmemreg_pages_vunmap(void *vaddr)
{
	vunmap(vaddr);
}
EXPORT_SYMBOL_GPL(hmemreg_pages_vunmap);
