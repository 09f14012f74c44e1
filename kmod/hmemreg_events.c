// SPDX-License-Identifier: GPL-2.0
/*
 * The event ring: records of fired watches, queued under ctx->ring_lock
 * (the only lock a firing watch takes) and read with read()/poll() on the
 * fd. A full ring drops events and stays overflowed (reads fail with
 * EOVERFLOW) until userspace acks, so a loss is never silent.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "hmemreg_priv.h"

/* Queue @ev, or count it as dropped once the ring is (or was) full. */
void hmemreg_events_queue(struct hmemreg_ctx *ctx, const struct hmemreg_event *ev)
{
	lockdep_assert_held(&ctx->ring_lock);
	ctx->events_total++;
	atomic64_inc(&hmemreg_stats.events_total);
	if (ctx->dropped || ctx->ring_count == ctx->ring_cap) {
		ctx->dropped++;
		atomic64_inc(&hmemreg_stats.events_dropped);
	} else {
		ctx->ring[(ctx->ring_head + ctx->ring_count) % ctx->ring_cap] = *ev;
		ctx->ring_count++;
	}
	hmemreg_gen_sync(ctx);
}

long hmemreg_ioc_events_ack(struct hmemreg_ctx *ctx, void *arg)
{
	struct hmemreg_events_ack *a = arg;

	if (a->flags)
		return -EINVAL;
	a->dropped = 0;
	a->discarded = 0;
	/* Pairs with the release in hmemreg_gen_setup(). */
	if (!smp_load_acquire(&ctx->page))
		return 0;
	spin_lock(&ctx->ring_lock);
	if (ctx->dropped) {
		a->dropped = ctx->dropped;
		a->discarded = ctx->ring_count;
		ctx->dropped = 0;
		ctx->ring_count = 0;
		ctx->ring_head = 0;
		hmemreg_gen_sync(ctx);
	}
	spin_unlock(&ctx->ring_lock);
	return 0;
}

/* Records copied per read() pass; the bounce buffer is this big. */
#define HMEMREG_READ_BATCH	64

ssize_t hmemreg_events_read(struct hmemreg_ctx *ctx, char __user *buf,
			    size_t count, bool nonblock)
{
	const size_t esz = sizeof(struct hmemreg_event);
	struct hmemreg_event *bounce;
	size_t n, i;
	ssize_t ret;

	if (count < esz)
		return -EINVAL;
	ret = hmemreg_gen_setup(ctx);
	if (ret)
		return ret;
	n = min_t(size_t, count / esz, HMEMREG_READ_BATCH);
	bounce = kmalloc_array(n, esz, GFP_KERNEL);
	if (!bounce)
		return -ENOMEM;
	for (;;) {
		spin_lock(&ctx->ring_lock);
		if (ctx->dropped) {
			ret = -EOVERFLOW;
			break;
		}
		if (ctx->ring_count)
			break;
		spin_unlock(&ctx->ring_lock);
		if (nonblock) {
			ret = -EAGAIN;
			goto out;
		}
		ret = wait_event_interruptible(ctx->waitq,
					       READ_ONCE(ctx->ring_count) ||
					       READ_ONCE(ctx->dropped));
		if (ret)
			goto out;
	}
	if (ret) {
		spin_unlock(&ctx->ring_lock);
		goto out;
	}
	n = min_t(size_t, n, ctx->ring_count);
	for (i = 0; i < n; i++) {
		bounce[i] = ctx->ring[ctx->ring_head];
		ctx->ring_head = (ctx->ring_head + 1) % ctx->ring_cap;
	}
	ctx->ring_count -= n;
	hmemreg_gen_sync(ctx);
	spin_unlock(&ctx->ring_lock);

	if (copy_to_user(buf, bounce, n * esz)) {
		/* The records are gone: report the loss as an overflow. */
		spin_lock(&ctx->ring_lock);
		ctx->dropped += n;
		atomic64_add(n, &hmemreg_stats.events_dropped);
		hmemreg_gen_sync(ctx);
		spin_unlock(&ctx->ring_lock);
		ret = -EFAULT;
		goto out;
	}
	ret = n * esz;
out:
	kfree(bounce);
	return ret;
}

__poll_t hmemreg_events_poll(struct hmemreg_ctx *ctx, struct file *file,
			     poll_table *wait)
{
	__poll_t mask = 0;

	if (hmemreg_gen_setup(ctx))
		return EPOLLERR;
	poll_wait(file, &ctx->waitq, wait);
	spin_lock(&ctx->ring_lock);
	if (ctx->ring_count)
		mask |= EPOLLIN | EPOLLRDNORM;
	if (ctx->dropped)
		mask |= EPOLLIN | EPOLLPRI;
	spin_unlock(&ctx->ring_lock);
	return mask;
}
