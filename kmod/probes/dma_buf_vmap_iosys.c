// SPDX-License-Identifier: GPL-2.0
/* dma_buf_ops.vmap taking a struct iosys_map (5.18 on; dma_buf_map before). */
#include <linux/dma-buf.h>
#include <linux/iosys-map.h>
#include <linux/module.h>

static int hmemreg_probe_vmap(struct dma_buf *dmabuf, struct iosys_map *map)
{
	iosys_map_clear(map);
	return 0;
}

const struct dma_buf_ops hmemreg_probe_ops;
const struct dma_buf_ops hmemreg_probe_ops = { .vmap = hmemreg_probe_vmap };
MODULE_LICENSE("GPL");
