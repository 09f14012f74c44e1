// SPDX-License-Identifier: GPL-2.0
/* dma_buf_map_attachment_unlocked() (Osipenko series, 6.2; in 6.1.y backports). */
#include <linux/dma-buf.h>
#include <linux/module.h>

struct sg_table *hmemreg_probe(struct dma_buf_attachment *a);
struct sg_table *hmemreg_probe(struct dma_buf_attachment *a)
{
	return dma_buf_map_attachment_unlocked(a, DMA_BIDIRECTIONAL);
}
MODULE_LICENSE("GPL");
