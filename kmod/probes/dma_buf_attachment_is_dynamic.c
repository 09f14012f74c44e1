// SPDX-License-Identifier: GPL-2.0
/*
 * dma_buf_attachment_is_dynamic() left dma-buf.h (private to the core by
 * 6.18); it always was "has importer_ops".
 */
#include <linux/dma-buf.h>
#include <linux/module.h>

bool hmemreg_probe(struct dma_buf_attachment *a);
bool hmemreg_probe(struct dma_buf_attachment *a)
{
	return dma_buf_attachment_is_dynamic(a);
}
MODULE_LICENSE("GPL");
