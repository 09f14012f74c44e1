// SPDX-License-Identifier: GPL-2.0
/* dma_buf_attach_ops.move_notify renamed invalidate_mappings (7.0 cycle). */
#include <linux/dma-buf.h>
#include <linux/module.h>

static void hmemreg_probe_cb(struct dma_buf_attachment *a)
{
}

const struct dma_buf_attach_ops hmemreg_probe_ops = {
	.invalidate_mappings = hmemreg_probe_cb,
};
MODULE_LICENSE("GPL");
