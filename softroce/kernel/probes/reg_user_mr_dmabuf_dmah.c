// SPDX-License-Identifier: GPL-2.0
/*
 * ib_device_ops.reg_user_mr_dmabuf() takes a struct ib_dmah * (a DMA
 * handle) before its uverbs_attr_bundle * (Debian's 6.18).
 */
#include <linux/module.h>
#include <rdma/ib_verbs.h>

static struct ib_mr *hmemreg_probe_reg(struct ib_pd *pd, u64 offset, u64 length,
				       u64 iova, int fd, int access,
				       struct ib_dmah *dmah,
				       struct uverbs_attr_bundle *attrs)
{
	return NULL;
}

const struct ib_device_ops hmemreg_probe_ops = {
	.reg_user_mr_dmabuf = hmemreg_probe_reg,
};
MODULE_LICENSE("GPL");
