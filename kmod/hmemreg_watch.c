// SPDX-License-Identifier: GPL-2.0
/*
 * Watches: mmu_interval_notifier over user VA ranges. A firing watch zeroes
 * its generation word (in the read-only page userspace maps from the fd)
 * and queues one event, all under a spinlock, so the user-visible
 * invalidation is complete before the change that caused it finishes.
 * Removing the fired notifier (which may sleep) is deferred to a work item,
 * which also calls the hook of the object the watch guards, if any (an
 * EXPORT_WATCH export, whose dynamic importers get move_notify under the
 * dma-buf's reservation lock). Calls run one way: that object's owner ties
 * it to the watch (hmemreg_watch_hook_add()); the watch knows only the hook.
 * The generation page (hmemreg_gen_page.c) and the event ring
 * (hmemreg_events.c) know nothing of watches.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>
#include <linux/poll.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "hmemreg_priv.h"

/**
 * struct hmemreg_watch - one armed watch
 * @mni:        the interval notifier (its own range)
 * @ctx:        owning context
 * @fired_node: on ctx->fired once fired, until reaped
 * @addr:       watched start, as armed
 * @len:        watched length, as armed
 * @cookie:     userspace's cookie
 * @gen:        generation written to ctx->gen[@slot] while live
 * @slot:       index in ctx->gen[] and ctx->slots[]
 * @flags:      HMEMREG_WATCH_* bits
 * @ev_flags:   HMEMREG_EVF_* bits for its event
 * @fired:      set (under ctx->ring_lock) when fired or being disarmed;
 *              from then on the callback ignores it
 * @hook:       the object it guards, NULL once either is gone (under
 *              hmemreg_hook_lock)
 */
struct hmemreg_watch {
	struct mmu_interval_notifier mni;
	struct hmemreg_ctx *ctx;
	struct list_head fired_node;
	u64 addr;
	u64 len;
	u64 cookie;
	u64 gen;
	u32 slot;
	u32 flags;
	u32 ev_flags;
	bool fired;
	struct hmemreg_watch_hook *hook;
};

/*
 * Guards both ends of every watch <-> hook tie; held while a fired watch
 * calls its hook, so the hook's owner cannot delete it meanwhile. Taken
 * under ctx->lock, before reservation locks.
 */
static DEFINE_MUTEX(hmemreg_hook_lock);

/* Untie @w from its hook, if still tied; @fired: call the hook first. */
static void hmemreg_watch_unhook(struct hmemreg_watch *w, bool fired)
{
	struct hmemreg_watch_hook *hook;

	lockdep_assert_held(&w->ctx->lock);
	mutex_lock(&hmemreg_hook_lock);
	hook = w->hook;
	if (hook) {
		if (fired)
			hook->ops->fired(hook);
		hook->watch = NULL;
		w->hook = NULL;
	}
	mutex_unlock(&hmemreg_hook_lock);
}

static u32 hmemreg_reason(enum mmu_notifier_event event, u32 flags)
{
	switch (event) {
	case MMU_NOTIFY_UNMAP:
		return HMEMREG_EV_UNMAP;
	case MMU_NOTIFY_CLEAR:
		return HMEMREG_EV_CLEAR;
	case MMU_NOTIFY_RELEASE:
		return HMEMREG_EV_RELEASE;
	case MMU_NOTIFY_MIGRATE:
		return HMEMREG_EV_MIGRATE;
	case MMU_NOTIFY_EXCLUSIVE:
		return HMEMREG_EV_EXCLUSIVE;
	case MMU_NOTIFY_PROTECTION_VMA:
	case MMU_NOTIFY_PROTECTION_PAGE:
		return (flags & HMEMREG_WATCH_PROT) ? HMEMREG_EV_PROTECTION : 0;
	default:
		/* Soft-dirty tracking leaves the same pages mapped. */
		return 0;
	}
}

/*
 * Called for every change that touches the watched range, possibly from a
 * context that must not sleep (e.g. the OOM reaper): only a spinlock here.
 */
static bool hmemreg_watch_invalidate(struct mmu_interval_notifier *mni,
				     const struct mmu_notifier_range *range,
				     unsigned long cur_seq)
{
	struct hmemreg_watch *w = container_of(mni, struct hmemreg_watch, mni);
	struct hmemreg_ctx *ctx = w->ctx;
	u32 reason = hmemreg_reason(range->event, w->flags);
	bool queued = false;

	spin_lock(&ctx->ring_lock);
	mmu_interval_set_seq(mni, cur_seq);
	if (reason && !w->fired) {
		struct hmemreg_event ev = {
			.cookie = w->cookie, .addr = w->addr, .len = w->len,
			.gen = w->gen, .slot = w->slot, .reason = reason,
			.flags = w->ev_flags,
		};

		w->fired = true;
		WRITE_ONCE(ctx->gen[w->slot], 0);
		hmemreg_events_queue(ctx, &ev);
		list_add_tail(&w->fired_node, &ctx->fired);
		queued = true;
	}
	spin_unlock(&ctx->ring_lock);
	if (queued) {
		wake_up_interruptible_poll(&ctx->waitq, EPOLLIN | EPOLLRDNORM);
		schedule_work(&ctx->reap_work);
	}
	return true;
}

static const struct mmu_interval_notifier_ops hmemreg_watch_ops = {
	.invalidate = hmemreg_watch_invalidate,
};

/* Free a watch whose notifier is removed. ctx->lock held. */
static void hmemreg_watch_free(struct hmemreg_ctx *ctx, struct hmemreg_watch *w)
{
	lockdep_assert_held(&ctx->lock);
	hmemreg_watch_unhook(w, false);
	ctx->slots[w->slot] = NULL;
	ida_free(&ctx->slot_ida, w->slot);
	spin_lock(&ctx->ring_lock);
	ctx->nr_slots--;
	hmemreg_gen_sync(ctx);
	spin_unlock(&ctx->ring_lock);
	atomic64_dec(&hmemreg_stats.watches_live);
	kfree(w);
}

static void hmemreg_reap_locked(struct hmemreg_ctx *ctx)
{
	struct hmemreg_watch *w, *tmp;
	LIST_HEAD(list);

	lockdep_assert_held(&ctx->lock);
	spin_lock(&ctx->ring_lock);
	list_splice_init(&ctx->fired, &list);
	spin_unlock(&ctx->ring_lock);
	list_for_each_entry_safe(w, tmp, &list, fired_node) {
		list_del(&w->fired_node);
		mmu_interval_notifier_remove(&w->mni);
		hmemreg_watch_unhook(w, true);
		hmemreg_watch_free(ctx, w);
	}
}

static void hmemreg_reap_work(struct work_struct *work)
{
	struct hmemreg_ctx *ctx = container_of(work, struct hmemreg_ctx, reap_work);

	mutex_lock(&ctx->lock);
	hmemreg_reap_locked(ctx);
	mutex_unlock(&ctx->lock);
}

/**
 * hmemreg_watch_init() - the watch state of a new context, before any use
 * @ctx: context being opened
 */
void hmemreg_watch_init(struct hmemreg_ctx *ctx)
{
	ida_init(&ctx->slot_ida);
	INIT_LIST_HEAD(&ctx->fired);
	INIT_WORK(&ctx->reap_work, hmemreg_reap_work);
	ctx->next_gen = 1;
}

/**
 * hmemreg_watch_teardown() - remove every watch and free the watch state
 * @ctx: context being released (no more ioctls, no user mapping left)
 */
void hmemreg_watch_teardown(struct hmemreg_ctx *ctx)
{
	struct hmemreg_watch *w;
	bool fired;
	u32 i;

	if (!ctx->page)
		goto out;
	mutex_lock(&ctx->lock);
	for (i = 0; i < ctx->max_watches; i++) {
		w = ctx->slots[i];
		if (!w)
			continue;
		spin_lock(&ctx->ring_lock);
		/*
		 * A watch that fired sits on ctx->fired until reaped (no reap
		 * runs: we hold ctx->lock). Unlink it before freeing it, as a
		 * watch firing later in this loop still appends to that list.
		 */
		fired = w->fired;
		if (fired)
			list_del(&w->fired_node);
		w->fired = true;
		spin_unlock(&ctx->ring_lock);
		mmu_interval_notifier_remove(&w->mni);
		/* Fired but not reaped: its hook is called here instead. */
		hmemreg_watch_unhook(w, fired);
		hmemreg_watch_free(ctx, w);
	}
	INIT_LIST_HEAD(&ctx->fired);
	mutex_unlock(&ctx->lock);
	/* No notifier is left that could schedule it again. */
	cancel_work_sync(&ctx->reap_work);
	hmemreg_gen_free(ctx);
out:
	if (ctx->mm)
		mmdrop(ctx->mm);
	ctx->mm = NULL;
	ida_destroy(&ctx->slot_ida);
}

/* Every byte of [start, end) must be covered by VMAs. */
static bool hmemreg_range_mapped(struct mm_struct *mm, unsigned long start,
				 unsigned long end)
{
	struct vm_area_struct *vma;
	bool ok = false;

	mmap_read_lock(mm);
	while (start < end) {
		vma = vma_lookup(mm, start);
		if (!vma)
			goto out;
		start = vma->vm_end;
	}
	ok = true;
out:
	mmap_read_unlock(mm);
	return ok;
}

/* Bind the context to the caller's address space (first arm) or check it. */
static int hmemreg_bind_mm(struct hmemreg_ctx *ctx)
{
	lockdep_assert_held(&ctx->lock);
	if (!current->mm)
		return -EXDEV;
	if (ctx->mm)
		return ctx->mm == current->mm ? 0 : -EXDEV;
	mmgrab(current->mm);
	ctx->mm = current->mm;
	return 0;
}

/**
 * hmemreg_watch_arm() - arm one watch over the caller's [addr, addr + len)
 * @ctx:      context
 * @addr:     start (any alignment)
 * @len:      bytes, > 0
 * @cookie:   returned in the event
 * @flags:    HMEMREG_WATCH_* bits
 * @ev_flags: HMEMREG_EVF_* bits copied into the event
 * @slot:     out: slot of the generation word
 * @gen:      out: generation
 *
 * Return: 0 or a negative errno as documented for HMEMREG_IOC_WATCH_ARM.
 */
int hmemreg_watch_arm(struct hmemreg_ctx *ctx, u64 addr, u64 len, u64 cookie,
		      u32 flags, u32 ev_flags, u32 *slot, u64 *gen)
{
	unsigned long start, end;
	struct hmemreg_watch *w;
	int ret, id;

	if (!len || addr + len < addr || addr + len > TASK_SIZE)
		return -EINVAL;
	start = addr & PAGE_MASK;
	end = PAGE_ALIGN(addr + len);
	ret = hmemreg_gen_setup(ctx);
	if (ret)
		return ret;

	mutex_lock(&ctx->lock);
	ret = hmemreg_bind_mm(ctx);
	if (ret)
		goto out_unlock;
	if (ctx->nr_slots >= ctx->max_watches)
		hmemreg_reap_locked(ctx);
	ret = -ENOSPC;
	if (ctx->nr_slots >= ctx->max_watches)
		goto out_unlock;
	ret = -ENOMEM;
	if (hmemreg_should_fail(HMEMREG_FAIL_ALLOC))
		goto out_unlock;
	w = kzalloc(sizeof(*w), GFP_KERNEL_ACCOUNT);
	if (!w)
		goto out_unlock;
	id = ida_alloc_max(&ctx->slot_ida, ctx->max_watches - 1, GFP_KERNEL);
	if (id < 0) {
		ret = id == -ENOSPC ? -ENOSPC : -ENOMEM;
		goto out_free;
	}
	w->ctx = ctx;
	w->addr = addr;
	w->len = len;
	w->cookie = cookie;
	w->flags = flags;
	w->ev_flags = ev_flags;
	w->slot = id;
	w->gen = ctx->next_gen++;
	ctx->slots[id] = w;
	/* Publish the word before the notifier can fire and zero it. */
	spin_lock(&ctx->ring_lock);
	ctx->nr_slots++;
	WRITE_ONCE(ctx->gen[id], w->gen);
	hmemreg_gen_sync(ctx);
	spin_unlock(&ctx->ring_lock);

	ret = -ENOMEM;
	if (hmemreg_should_fail(HMEMREG_FAIL_NOTIFIER))
		goto out_slot;
	ret = mmu_interval_notifier_insert(&w->mni, ctx->mm, start, end - start,
					   &hmemreg_watch_ops);
	if (ret)
		goto out_slot;
	/* Wait out invalidations that began before the insert took effect. */
	mmu_interval_read_begin(&w->mni);
	if (!hmemreg_range_mapped(ctx->mm, start, end)) {
		ret = -EFAULT;
		goto out_remove;
	}
	atomic64_inc(&hmemreg_stats.watches_live);
	atomic64_inc(&hmemreg_stats.watches_total);
	*slot = id;
	*gen = w->gen;
	mutex_unlock(&ctx->lock);
	return 0;

out_remove:
	mmu_interval_notifier_remove(&w->mni);
out_slot:
	spin_lock(&ctx->ring_lock);
	if (w->fired)
		list_del(&w->fired_node);
	w->fired = true;
	WRITE_ONCE(ctx->gen[id], 0);
	spin_unlock(&ctx->ring_lock);
	atomic64_inc(&hmemreg_stats.watches_live);	/* undone by _free */
	hmemreg_watch_free(ctx, w);
	goto out_unlock;
out_free:
	kfree(w);
out_unlock:
	mutex_unlock(&ctx->lock);
	return ret;
}

/**
 * hmemreg_watch_hook_add() - make the live watch (@slot, @gen) guard @hook's object
 * @ctx:  context
 * @slot: slot from arm
 * @gen:  generation from arm
 * @hook: the object's hook, not tied to any watch
 *
 * Once tied, the watch firing calls @hook->ops->fired; a firing from now on
 * is reaped under ctx->lock, so after this it cannot be missed. The tie
 * ends when the watch goes, or with hmemreg_watch_hook_del().
 *
 * Return: 0, or -EAGAIN when the watch fired already.
 */
int hmemreg_watch_hook_add(struct hmemreg_ctx *ctx, u32 slot, u64 gen,
			   struct hmemreg_watch_hook *hook)
{
	struct hmemreg_watch *w;
	int ret = -EAGAIN;

	mutex_lock(&ctx->lock);
	w = slot < ctx->max_watches ? ctx->slots[slot] : NULL;
	if (w && w->gen == gen && READ_ONCE(ctx->gen[slot]) == gen) {
		mutex_lock(&hmemreg_hook_lock);
		hook->watch = w;
		w->hook = hook;
		mutex_unlock(&hmemreg_hook_lock);
		ret = 0;
	}
	mutex_unlock(&ctx->lock);
	return ret;
}

/**
 * hmemreg_watch_hook_del() - untie @hook from its watch, if still tied
 * @hook: hook whose object is going away
 *
 * May sleep. Waits for a call of @hook->ops->fired in progress; none comes
 * after it.
 */
void hmemreg_watch_hook_del(struct hmemreg_watch_hook *hook)
{
	mutex_lock(&hmemreg_hook_lock);
	if (hook->watch)
		hook->watch->hook = NULL;
	hook->watch = NULL;
	mutex_unlock(&hmemreg_hook_lock);
}

long hmemreg_ioc_watch_arm(struct hmemreg_ctx *ctx, void *arg)
{
	struct hmemreg_watch_arm *a = arg;

	if (a->reserved || (a->flags & ~HMEMREG_WATCH_PROT))
		return -EINVAL;
	return hmemreg_watch_arm(ctx, a->addr, a->len, a->cookie, a->flags, 0,
				 &a->slot, &a->gen);
}

/**
 * hmemreg_watch_disarm() - remove the live watch (@slot, @gen) without event
 * @ctx:  context
 * @slot: slot from arm
 * @gen:  generation from arm
 *
 * Return: 0, -ENOENT (no such live watch) or -EXDEV (other address space).
 */
int hmemreg_watch_disarm(struct hmemreg_ctx *ctx, u32 slot, u64 gen)
{
	struct hmemreg_watch *w;
	int ret;

	/* Pairs with the release in hmemreg_gen_setup(). */
	if (!smp_load_acquire(&ctx->page))
		return -ENOENT;
	mutex_lock(&ctx->lock);
	ret = hmemreg_bind_mm(ctx);
	if (ret)
		goto out;
	ret = -ENOENT;
	if (slot >= ctx->max_watches)
		goto out;
	w = ctx->slots[slot];
	if (!w || w->gen != gen)
		goto out;
	spin_lock(&ctx->ring_lock);
	if (w->fired) {
		/* Fired already; the reaper owns it. */
		spin_unlock(&ctx->ring_lock);
		goto out;
	}
	w->fired = true;
	WRITE_ONCE(ctx->gen[w->slot], 0);
	spin_unlock(&ctx->ring_lock);
	mmu_interval_notifier_remove(&w->mni);
	hmemreg_watch_free(ctx, w);
	ret = 0;
out:
	mutex_unlock(&ctx->lock);
	return ret;
}

long hmemreg_ioc_watch_disarm(struct hmemreg_ctx *ctx, void *arg)
{
	struct hmemreg_watch_disarm *a = arg;

	return hmemreg_watch_disarm(ctx, a->slot, a->gen);
}

long hmemreg_ioc_watch_info(struct hmemreg_ctx *ctx, void *arg)
{
	struct hmemreg_watch_info *a = arg;
	int ret;

	if (a->reserved)
		return -EINVAL;
	ret = hmemreg_gen_setup(ctx);
	if (ret)
		return ret;
	a->max_watches = ctx->max_watches;
	a->map_size = ctx->map_size;
	a->gen_offset = HMEMREG_GEN_OFFSET;
	a->ring_events = ctx->ring_cap;
	a->event_size = sizeof(struct hmemreg_event);
	return 0;
}
