// SPDX-License-Identifier: GPL-2.0
/*
 * hmemreg.ko: module init/exit, the /dev/hmemreg misc device and its ioctl
 * dispatch.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/module.h>
#include <linux/uaccess.h>

#include "hmemreg_priv.h"

static long hmemreg_ioc_version(void __user *uarg)
{
	struct hmemreg_version v;
	u32 usize;

	if (get_user(usize, (u32 __user *)uarg))
		return -EFAULT;
	if (usize < sizeof(v))
		return -EINVAL;

	memset(&v, 0, sizeof(v));
	v.size = sizeof(v);
	v.abi_major = HMEMREG_ABI_MAJOR;
	v.abi_minor = HMEMREG_ABI_MINOR;
	v.caps = HMEMREG_CAPS;
	if (copy_to_user(uarg, &v, sizeof(v)))
		return -EFAULT;
	return 0;
}

static long hmemreg_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	if (_IOC_TYPE(cmd) != HMEMREG_IOC_MAGIC)
		return -ENOTTY;

	switch (cmd) {
	case HMEMREG_IOC_VERSION:
		return hmemreg_ioc_version(uarg);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations hmemreg_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = hmemreg_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

struct miscdevice hmemreg_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = HMEMREG_DEVICE_NAME,
	.fops = &hmemreg_fops,
	.mode = 0660,
};

static int __init hmemreg_init(void)
{
	int ret;

	ret = misc_register(&hmemreg_misc);
	if (ret) {
		pr_err("cannot register /dev/%s: %d\n", HMEMREG_DEVICE_NAME, ret);
		return ret;
	}
	pr_info("loaded, ABI %d.%d\n", HMEMREG_ABI_MAJOR, HMEMREG_ABI_MINOR);
	return 0;
}

static void __exit hmemreg_exit(void)
{
	misc_deregister(&hmemreg_misc);
	pr_info("unloaded\n");
}

module_init(hmemreg_init);
module_exit(hmemreg_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("DMA-BUF export, pin ledger and invalidation events for RDMA registration caches");
MODULE_AUTHOR("hmemreg developers");
MODULE_VERSION("0.1");
