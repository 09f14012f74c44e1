/* SPDX-License-Identifier: GPL-2.0 */
/* hmemreg.ko internal declarations, grouped by the file that defines them. */
#ifndef HMEMREG_PRIV_H
#define HMEMREG_PRIV_H

#include <linux/atomic.h>
#include <linux/idr.h>
#include <linux/list.h>
#include <linux/miscdevice.h>
#include <linux/mmu_notifier.h>
#include <linux/mutex.h>
#include <linux/poll.h>
#include <linux/spinlock.h>
#include <linux/timekeeping.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <uapi/linux/hmemreg.h>

#include "hmemreg_compat.h"
#include "hmemreg_provider.h"

#define HMEMREG_CAPS	(HMEMREG_CAP_EXPORT_HOST | HMEMREG_CAP_WATCH | \
			 HMEMREG_CAP_NETLINK | HMEMREG_CAP_FAULT_INJECT | \
			 HMEMREG_CAP_EXPORT_DMABUF)

struct hmemreg_watch;

/**
 * struct hmemreg_ctx - state of one open /dev/hmemreg
 * @lock:       serialises ioctls that change watches and devmem handles;
 *              taken before mmap_lock, never inside it
 * @setup_lock: guards the one-time allocation of @page, @ring and @slots;
 *              a leaf lock (also taken under mmap_lock by mmap)
 * @mm:         address space the watches observe (bound by the first arm,
 *              mmgrab()ed), NULL before
 * @page:       vmalloc_user() area mapped read-only to userspace: header
 *              followed by gen[]; NULL until the watch machinery is set up
 * @gen:        gen[] inside @page
 * @map_size:   bytes of @page
 * @slots:      watch per slot (live, or fired and waiting to be reaped)
 * @nr_slots:   occupied entries of @slots
 * @next_gen:   next generation handed out (never reused on this fd)
 * @ring_lock:  protects the ring, @fired, and each watch's @fired flag; the
 *              notifier callback takes only this spinlock
 * @ring:       event records, @ring_cap of them
 * @ring_head:  index of the oldest queued record
 * @ring_count: queued records
 * @dropped:    events lost since the last ack (sticky overflow)
 * @events_total: events produced
 * @fired:      watches that fired and still hold their notifier
 * @reap_work:  removes fired watches' notifiers (cannot be done in the
 *              callback itself)
 * @waitq:      readers and pollers
 * @devmem:     handle -> struct hmemreg_devmem of this fd
 * @next_handle: next devmem handle
 */
struct hmemreg_ctx {
	struct mutex lock;		/* see @lock above */
	struct mutex setup_lock;	/* leaf lock, see above */
	struct mm_struct *mm;
	struct hmemreg_gen_page *page;
	u64 *gen;
	size_t map_size;
	struct hmemreg_watch **slots;
	struct ida slot_ida;
	u32 nr_slots;
	u32 max_watches;
	u64 next_gen;

	spinlock_t ring_lock;		/* the notifier's only lock */
	struct hmemreg_event *ring;
	u32 ring_cap;
	u32 ring_head;
	u32 ring_count;
	u64 dropped;
	u64 events_total;
	struct list_head fired;
	struct work_struct reap_work;
	wait_queue_head_t waitq;

	struct xarray devmem;
	u64 next_handle;
};

struct hmemreg_ledger_exp;
struct dma_buf;

/* **** hmemreg_main.c **** */
extern struct miscdevice hmemreg_misc;
extern unsigned int hmemreg_max_watches;
extern unsigned int hmemreg_ring_events;
extern unsigned int hmemreg_devmem_mb;
extern unsigned int hmemreg_max_export_mb;

/* **** hmemreg_gen_page.c **** */

/* Size of the page header in front of gen[] in the fd's mapping. */
#define HMEMREG_GEN_OFFSET	sizeof(struct hmemreg_gen_page)

int hmemreg_gen_setup(struct hmemreg_ctx *ctx);
void hmemreg_gen_free(struct hmemreg_ctx *ctx);
void hmemreg_gen_sync(struct hmemreg_ctx *ctx);
int hmemreg_gen_mmap(struct hmemreg_ctx *ctx, struct vm_area_struct *vma);

/* **** hmemreg_events.c **** */
void hmemreg_events_queue(struct hmemreg_ctx *ctx, const struct hmemreg_event *ev);
long hmemreg_ioc_events_ack(struct hmemreg_ctx *ctx, void *arg);
ssize_t hmemreg_events_read(struct hmemreg_ctx *ctx, char __user *buf,
			    size_t count, bool nonblock);
__poll_t hmemreg_events_poll(struct hmemreg_ctx *ctx, struct file *file,
			     poll_table *wait);

/* **** hmemreg_watch.c **** */
void hmemreg_watch_init(struct hmemreg_ctx *ctx);
void hmemreg_watch_teardown(struct hmemreg_ctx *ctx);
int hmemreg_watch_arm(struct hmemreg_ctx *ctx, u64 addr, u64 len, u64 cookie,
		      u32 flags, u32 ev_flags, u32 *slot, u64 *gen);
long hmemreg_ioc_watch_arm(struct hmemreg_ctx *ctx, void *arg);
int hmemreg_watch_disarm(struct hmemreg_ctx *ctx, u32 slot, u64 gen);
long hmemreg_ioc_watch_disarm(struct hmemreg_ctx *ctx, void *arg);
long hmemreg_ioc_watch_info(struct hmemreg_ctx *ctx, void *arg);

struct hmemreg_watch_hook;

/* What a watch tells the object it guards (the object's owner fills it in). */
struct hmemreg_watch_hook_ops {
	/*
	 * The watched range changed. Called once, under ctx->lock and the
	 * hook lock (the hook cannot be deleted meanwhile); may sleep.
	 */
	void (*fired)(struct hmemreg_watch_hook *hook);
};

/**
 * struct hmemreg_watch_hook - an object's end of its watch (embedded in it)
 * @ops:   what the watch calls
 * @watch: the watch while the two are tied, else NULL (under the hook lock)
 */
struct hmemreg_watch_hook {
	const struct hmemreg_watch_hook_ops *ops;
	struct hmemreg_watch *watch;
};

int hmemreg_watch_hook_add(struct hmemreg_ctx *ctx, u32 slot, u64 gen,
			   struct hmemreg_watch_hook *hook);
void hmemreg_watch_hook_del(struct hmemreg_watch_hook *hook);

/* **** hmemreg_export.c **** */
long hmemreg_ioc_export(struct hmemreg_ctx *ctx, struct hmemreg_export *arg,
			void __user *uarg, u32 outsize);
u32 hmemreg_buf_provider(const struct dma_buf *dmabuf);

/* **** hmemreg_provider.c **** */
struct hmemreg_provider *hmemreg_provider_get(u32 id);
void hmemreg_provider_put(struct hmemreg_provider *prov);

/* A provider of this module: its id is fixed, its module is this one. */
static inline bool hmemreg_provider_builtin(const struct hmemreg_provider *prov)
{
	return prov->owner == THIS_MODULE;
}

/* **** hmemreg_host.c **** */
int hmemreg_host_init(void);
void hmemreg_host_exit(void);

/* **** hmemreg_devmem.c **** */
int hmemreg_devmem_init(void);
void hmemreg_devmem_exit(void);
long hmemreg_ioc_devmem_alloc(struct hmemreg_ctx *ctx, void *arg);
long hmemreg_ioc_devmem_free(struct hmemreg_ctx *ctx, void *arg);
void hmemreg_devmem_release_all(struct hmemreg_ctx *ctx);
bool hmemreg_devmem_enabled(void);

/* **** hmemreg_dmabuf.c **** */
int hmemreg_dmabuf_init(void);
void hmemreg_dmabuf_exit(void);

/* **** hmemreg_ledger.c **** */

/* How the ledger asks an export about itself (the export fills it in). */
struct hmemreg_ledger_exp_ops {
	/* Extra HMEMREG_EXP_STATE_* bits; called under hmemreg_ledger_lock. */
	u32 (*state)(const struct hmemreg_ledger_exp *rec);
};

/**
 * struct hmemreg_ledger_exp - ledger record of one export (embedded in it)
 * @node:      position in the global list (ordered by @id)
 * @attachments: struct hmemreg_ledger_att of live attachments
 * @ops:       asks the export for what only it knows
 * @id:        export id, unique while the module is loaded
 * @owner:     exporting process (tgid), referenced
 * @comm:      its comm at export time
 * @inner:     exp_name of the dma-buf a forwarding export wraps, else ""
 */
struct hmemreg_ledger_exp {
	struct list_head node;
	struct list_head attachments;
	const struct hmemreg_ledger_exp_ops *ops;
	u64 id;
	struct pid *owner;
	char comm[TASK_COMM_LEN];
	char inner[32];
	u32 provider;
	u32 state;
	u64 addr;
	u64 len;
	u64 handle;
	u64 cookie;
	u64 created_ns;
	u32 attach_live;
	u32 pins_live;
	u32 maps_live;
	u32 user_mmaps;
	u64 pins_total;
	u64 maps_total;
	u64 last_pin_ns;
	u64 last_unpin_ns;
};

/*
 * Ledger record of one attachment (importer device); @prov is a forwarding
 * provider's state for it (its attachment to the inner buffer).
 */
struct hmemreg_ledger_att {
	struct list_head node;
	void *prov;
	char device[32];
	char comm[TASK_COMM_LEN];
	pid_t pid;
	u32 pinned;
	u32 mapped;
	bool dynamic;
	u64 attached_ns;
};

/* Global counters; the *_live ones return to zero when idle. */
struct hmemreg_stats {
	atomic64_t exports_live, exports_total, exported_bytes;
	atomic64_t attach_live, attach_total;
	atomic64_t pins_live, pins_total;
	atomic64_t maps_live, maps_total;
	atomic64_t host_pages_pinned;
	atomic64_t devmem_pool_bytes, devmem_used_bytes, devmem_handles_live;
	atomic64_t watches_live, watches_total;
	atomic64_t events_total, events_dropped;
	atomic64_t contexts_live;
	atomic64_t faults_injected;
	atomic64_t unbalanced;
	atomic64_t user_mmaps_live;
	atomic64_t move_notifies;
};

extern struct hmemreg_stats hmemreg_stats;
extern spinlock_t hmemreg_ledger_lock;
extern struct list_head hmemreg_ledger_list;

/*
 * The ledger's times (CLOCK_BOOTTIME): ages for people, so a tick's
 * resolution does, and attach and pin read no clocksource (where that is
 * HPET, as in a TCG guest, each read is an emulated MMIO access).
 */
static inline u64 hmemreg_ledger_now(void)
{
	return ktime_get_coarse_boottime_ns();
}

void hmemreg_ledger_add(struct hmemreg_ledger_exp *rec);
void hmemreg_ledger_del(struct hmemreg_ledger_exp *rec);
bool hmemreg_ledger_orphaned(const struct hmemreg_ledger_exp *rec);
u32 hmemreg_ledger_state(const struct hmemreg_ledger_exp *rec);
u64 hmemreg_ledger_orphans(void);
int hmemreg_debugfs_init(void);
void hmemreg_debugfs_exit(void);

/* **** hmemreg_netlink.c **** */
int hmemreg_netlink_init(void);
void hmemreg_netlink_exit(void);

/* **** hmemreg_fault.c **** */
bool hmemreg_should_fail(u32 site);

#endif /* HMEMREG_PRIV_H */
