// SPDX-License-Identifier: GPL-2.0
/* dma_set_seg_boundary() returned int until 6.12 (void since). Test importer. */
#include <linux/dma-mapping.h>
#include <linux/module.h>

int hmemreg_probe(struct device *dev);
int hmemreg_probe(struct device *dev)
{
	return dma_set_seg_boundary(dev, 0xffff);
}
MODULE_LICENSE("GPL");
