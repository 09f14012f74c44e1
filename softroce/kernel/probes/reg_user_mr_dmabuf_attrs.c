// SPDX-License-Identifier: GPL-2.0
/*
 * ib_device_ops.reg_user_mr_dmabuf() ends in a struct uverbs_attr_bundle *
 * (6.12's) instead of a struct ib_udata * (6.1's).
 */
#include <linux/module.h>
#include <rdma/ib_verbs.h>

static struct ib_mr *hmemreg_probe_reg(struct ib_pd *pd, u64 offset, u64 length,
				       u64 iova, int fd, int access,
				       struct uverbs_attr_bundle *attrs)
{
	return NULL;
}

const struct ib_device_ops hmemreg_probe_ops = {
	.reg_user_mr_dmabuf = hmemreg_probe_reg,
};
MODULE_LICENSE("GPL");
