// SPDX-License-Identifier: GPL-2.0
/* dma_set_max_seg_size() returned int until 6.12 (void since). Test importer. */
#include <linux/dma-mapping.h>
#include <linux/module.h>

int hmemreg_probe(struct device *dev);
int hmemreg_probe(struct device *dev)
{
	return dma_set_max_seg_size(dev, 65536);
}
MODULE_LICENSE("GPL");
