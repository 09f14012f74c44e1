// SPDX-License-Identifier: GPL-2.0
/* dma_buf_move_notify() renamed dma_buf_invalidate_mappings() (7.0 cycle). */
#include <linux/dma-buf.h>
#include <linux/module.h>

void hmemreg_probe(struct dma_buf *d);
void hmemreg_probe(struct dma_buf *d)
{
	dma_buf_invalidate_mappings(d);
}
MODULE_LICENSE("GPL");
