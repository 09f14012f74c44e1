// SPDX-License-Identifier: GPL-2.0
/* genl_family.resv_start_op (9c5d03d36251, 6.1). */
#include <linux/module.h>
#include <net/genetlink.h>

struct genl_family hmemreg_probe_family = {
	.resv_start_op = 1,
};
MODULE_LICENSE("GPL");
