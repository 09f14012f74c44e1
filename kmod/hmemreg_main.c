// SPDX-License-Identifier: GPL-2.0
/*
 * hmemreg.ko: module init/exit, the /dev/hmemreg misc device, per-open
 * context, and the ioctl dispatch (argument size handling lives here once).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/module.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "hmemreg_priv.h"

unsigned int hmemreg_max_watches = 16384;
module_param_named(max_watches, hmemreg_max_watches, uint, 0444);
MODULE_PARM_DESC(max_watches, "live watches allowed per open file (default 16384)");

unsigned int hmemreg_ring_events = 4096;
module_param_named(ring_events, hmemreg_ring_events, uint, 0444);
MODULE_PARM_DESC(ring_events, "event ring capacity per open file, in records (default 4096)");

unsigned int hmemreg_devmem_mb;
module_param_named(devmem_mb, hmemreg_devmem_mb, uint, 0444);
MODULE_PARM_DESC(devmem_mb, "emulated device memory pool in MiB for tests, 0 = off (default 0)");

unsigned int hmemreg_max_export_mb = 1024;
module_param_named(max_export_mb, hmemreg_max_export_mb, uint, 0444);
MODULE_PARM_DESC(max_export_mb, "largest single export in MiB (default 1024)");

static long hmemreg_ioc_version(struct hmemreg_ctx *ctx, void *arg)
{
	struct hmemreg_version *v = arg;

	if (v->reserved)
		return -EINVAL;
	v->size = sizeof(*v);
	v->abi_major = HMEMREG_ABI_MAJOR;
	v->abi_minor = HMEMREG_ABI_MINOR;
	v->caps = HMEMREG_CAPS;
	if (hmemreg_devmem_enabled())
		v->caps |= HMEMREG_CAP_EXPORT_DEVMEM;
	return 0;
}

/**
 * struct hmemreg_ioctl_desc - one ioctl of the table
 * @cmd:      full ioctl number
 * @min_size: size of the first published version of the argument
 * @handler:  works on a kernel copy of the argument; must not touch user
 *            memory (the dispatcher copies in and out)
 */
struct hmemreg_ioctl_desc {
	unsigned int cmd;
	u32 min_size;
	long (*handler)(struct hmemreg_ctx *ctx, void *arg);
};

static const struct hmemreg_ioctl_desc hmemreg_ioctls[] = {
	{ HMEMREG_IOC_VERSION, sizeof(struct hmemreg_version), hmemreg_ioc_version },
	{ HMEMREG_IOC_EXPORT, sizeof(struct hmemreg_export), NULL },
	{ HMEMREG_IOC_DEVMEM_ALLOC, sizeof(struct hmemreg_devmem_alloc),
	  hmemreg_ioc_devmem_alloc },
	{ HMEMREG_IOC_DEVMEM_FREE, sizeof(struct hmemreg_devmem_free),
	  hmemreg_ioc_devmem_free },
	{ HMEMREG_IOC_WATCH_ARM, sizeof(struct hmemreg_watch_arm), hmemreg_ioc_watch_arm },
	{ HMEMREG_IOC_WATCH_DISARM, sizeof(struct hmemreg_watch_disarm),
	  hmemreg_ioc_watch_disarm },
	{ HMEMREG_IOC_WATCH_INFO, sizeof(struct hmemreg_watch_info), hmemreg_ioc_watch_info },
	{ HMEMREG_IOC_EVENTS_ACK, sizeof(struct hmemreg_events_ack), hmemreg_ioc_events_ack },
};

/* Largest argument struct of the table; the kernel copy lives on the stack. */
#define HMEMREG_IOC_MAX_ARG	128

/*
 * Copy the argument in: at least @min_size, at most what the kernel knows
 * (_IOC_SIZE); a longer user struct must have an all-zero tail.
 */
static long hmemreg_copy_arg_in(void *karg, u32 ksize, u32 min_size,
				void __user *uarg, u32 *usize)
{
	int zero;

	if (get_user(*usize, (u32 __user *)uarg))
		return -EFAULT;
	if (*usize < min_size)
		return -EINVAL;
	if (*usize > ksize) {
		zero = check_zeroed_user(uarg + ksize, *usize - ksize);
		if (zero < 0)
			return zero;
		if (!zero)
			return -E2BIG;
	}
	memset(karg, 0, ksize);
	if (copy_from_user(karg, uarg, min(*usize, ksize)))
		return -EFAULT;
	return 0;
}

static long hmemreg_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct hmemreg_ctx *ctx = file->private_data;
	void __user *uarg = (void __user *)arg;
	const struct hmemreg_ioctl_desc *d = NULL;
	u64 karg[HMEMREG_IOC_MAX_ARG / sizeof(u64)];
	u32 ksize, usize;
	unsigned int i;
	long ret;

	if (_IOC_TYPE(cmd) != HMEMREG_IOC_MAGIC)
		return -ENOTTY;
	for (i = 0; i < ARRAY_SIZE(hmemreg_ioctls); i++) {
		if (hmemreg_ioctls[i].cmd == cmd) {
			d = &hmemreg_ioctls[i];
			break;
		}
	}
	if (!d)
		return -ENOTTY;
	ksize = _IOC_SIZE(cmd);
	BUILD_BUG_ON(sizeof(struct hmemreg_export) > sizeof(karg));

	ret = hmemreg_copy_arg_in(karg, ksize, d->min_size, uarg, &usize);
	if (ret)
		return ret;
	/* The export publishes its fd itself, after its own copy out. */
	if (cmd == HMEMREG_IOC_EXPORT)
		return hmemreg_ioc_export(ctx, (void *)karg, uarg, min(usize, ksize));
	ret = d->handler(ctx, karg);
	if (ret)
		return ret;
	if ((_IOC_DIR(cmd) & _IOC_READ) &&
	    copy_to_user(uarg, karg, min(usize, ksize)))
		return -EFAULT;
	return 0;
}

static int hmemreg_open(struct inode *inode, struct file *file)
{
	struct hmemreg_ctx *ctx;

	if (hmemreg_should_fail(HMEMREG_FAIL_ALLOC))
		return -ENOMEM;
	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT);
	if (!ctx)
		return -ENOMEM;
	mutex_init(&ctx->lock);
	mutex_init(&ctx->setup_lock);
	spin_lock_init(&ctx->ring_lock);
	init_waitqueue_head(&ctx->waitq);
	hmemreg_watch_init(ctx);
	xa_init(&ctx->devmem);
	ctx->next_handle = 1;
	file->private_data = ctx;
	atomic64_inc(&hmemreg_stats.contexts_live);
	/* An event stream: no position, so lseek and pread fail with ESPIPE. */
	return stream_open(inode, file);
}

static int hmemreg_release(struct inode *inode, struct file *file)
{
	struct hmemreg_ctx *ctx = file->private_data;

	hmemreg_watch_teardown(ctx);
	hmemreg_devmem_release_all(ctx);
	xa_destroy(&ctx->devmem);
	mutex_destroy(&ctx->setup_lock);
	mutex_destroy(&ctx->lock);
	kfree(ctx);
	atomic64_dec(&hmemreg_stats.contexts_live);
	return 0;
}

static ssize_t hmemreg_read(struct file *file, char __user *buf, size_t count,
			    loff_t *ppos)
{
	return hmemreg_events_read(file->private_data, buf, count,
				   file->f_flags & O_NONBLOCK);
}

static __poll_t hmemreg_poll(struct file *file, poll_table *wait)
{
	return hmemreg_events_poll(file->private_data, file, wait);
}

static int hmemreg_mmap(struct file *file, struct vm_area_struct *vma)
{
	return hmemreg_gen_mmap(file->private_data, vma);
}

static const struct file_operations hmemreg_fops = {
	.owner = THIS_MODULE,
	.open = hmemreg_open,
	.release = hmemreg_release,
	.read = hmemreg_read,
	.poll = hmemreg_poll,
	.mmap = hmemreg_mmap,
	.unlocked_ioctl = hmemreg_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
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

	if (!hmemreg_max_watches || !hmemreg_ring_events ||
	    hmemreg_max_watches > (1U << 24) || hmemreg_ring_events > (1U << 24)) {
		pr_err("max_watches and ring_events must be in 1..16777216\n");
		return -EINVAL;
	}
	ret = hmemreg_host_init();
	if (ret)
		return ret;
	ret = hmemreg_devmem_init();
	if (ret)
		goto err_host;
	ret = hmemreg_dmabuf_init();
	if (ret)
		goto err_devmem;
	ret = misc_register(&hmemreg_misc);
	if (ret) {
		pr_err("cannot register /dev/%s: %d\n", HMEMREG_DEVICE_NAME, ret);
		goto err_dmabuf;
	}
	ret = hmemreg_netlink_init();
	if (ret) {
		pr_err("cannot register generic netlink family: %d\n", ret);
		goto err_misc;
	}
	hmemreg_debugfs_init();
	pr_info("loaded, ABI %d.%d, devmem pool %u MiB\n", HMEMREG_ABI_MAJOR,
		HMEMREG_ABI_MINOR, hmemreg_devmem_mb);
	return 0;

err_misc:
	misc_deregister(&hmemreg_misc);
err_dmabuf:
	hmemreg_dmabuf_exit();
err_devmem:
	hmemreg_devmem_exit();
err_host:
	hmemreg_host_exit();
	return ret;
}

static void __exit hmemreg_exit(void)
{
	hmemreg_debugfs_exit();
	hmemreg_netlink_exit();
	misc_deregister(&hmemreg_misc);
	hmemreg_dmabuf_exit();
	hmemreg_devmem_exit();
	hmemreg_host_exit();
	pr_info("unloaded\n");
}

module_init(hmemreg_init);
module_exit(hmemreg_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("DMA-BUF export, pin ledger and invalidation events for RDMA registration caches");
MODULE_AUTHOR("hmemreg developers");
MODULE_VERSION(HMEMREG_VERSION);
HMEMREG_IMPORT_DMA_BUF_NS();
