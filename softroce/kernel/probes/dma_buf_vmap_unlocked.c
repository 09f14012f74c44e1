// SPDX-License-Identifier: GPL-2.0
/*
 * dma_buf_vmap_unlocked(): where it exists (6.2 on), dma_buf_vmap() wants
 * the reservation lock held and this one takes it; before, dma_buf_vmap()
 * took the buffer's own mutex.
 */
#include <linux/dma-buf.h>
#include <linux/module.h>

int hmemreg_probe(struct dma_buf *d, struct iosys_map *map);
int hmemreg_probe(struct dma_buf *d, struct iosys_map *map)
{
	return dma_buf_vmap_unlocked(d, map);
}
MODULE_LICENSE("GPL");
