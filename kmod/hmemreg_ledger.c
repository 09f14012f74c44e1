// SPDX-License-Identifier: GPL-2.0
/*
 * The pin ledger: one record per export (embedded in it), one per
 * attachment, global counters, and the debugfs summary. Records are only
 * touched under hmemreg_ledger_lock, a spinlock, because the pin/map
 * callbacks that update them run under the dma-buf reservation lock.
 */
#include <linux/debugfs.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/timekeeping.h>

#include "hmemreg_priv.h"

struct hmemreg_stats hmemreg_stats;
DEFINE_SPINLOCK(hmemreg_ledger_lock);
LIST_HEAD(hmemreg_ledger_list);

static atomic64_t hmemreg_next_export_id = ATOMIC64_INIT(0);
static struct dentry *hmemreg_debugfs;

/**
 * hmemreg_ledger_add() - record a new export
 * @rec: record with provider, addr, len, handle, cookie and state filled in
 *
 * Fills in id, owner and creation time, and links the record.
 */
void hmemreg_ledger_add(struct hmemreg_ledger_exp *rec)
{
	INIT_LIST_HEAD(&rec->attachments);
	rec->id = atomic64_inc_return(&hmemreg_next_export_id);
	rec->owner = get_task_pid(current, PIDTYPE_TGID);
	get_task_comm(rec->comm, current);
	rec->created_ns = hmemreg_ledger_now();
	spin_lock(&hmemreg_ledger_lock);
	list_add_tail(&rec->node, &hmemreg_ledger_list);
	spin_unlock(&hmemreg_ledger_lock);
	atomic64_inc(&hmemreg_stats.exports_live);
	atomic64_inc(&hmemreg_stats.exports_total);
	atomic64_add(rec->len, &hmemreg_stats.exported_bytes);
}

/* hmemreg_ledger_del() - forget an export (its attachments are gone). */
void hmemreg_ledger_del(struct hmemreg_ledger_exp *rec)
{
	spin_lock(&hmemreg_ledger_lock);
	list_del(&rec->node);
	spin_unlock(&hmemreg_ledger_lock);
	put_pid(rec->owner);
	atomic64_dec(&hmemreg_stats.exports_live);
	atomic64_sub(rec->len, &hmemreg_stats.exported_bytes);
}

/* The exporting process has exited (and been reaped). */
bool hmemreg_ledger_orphaned(const struct hmemreg_ledger_exp *rec)
{
	bool gone;

	rcu_read_lock();
	gone = !pid_task(rec->owner, PIDTYPE_TGID);
	rcu_read_unlock();
	return gone;
}

/* HMEMREG_EXP_STATE_* of a record; hmemreg_ledger_lock held. */
u32 hmemreg_ledger_state(const struct hmemreg_ledger_exp *rec)
{
	u32 state = rec->state | rec->ops->state(rec);

	if (hmemreg_ledger_orphaned(rec))
		state |= HMEMREG_EXP_STATE_ORPHANED;
	if (rec->pins_live)
		state |= HMEMREG_EXP_STATE_PINNED;
	return state;
}

u64 hmemreg_ledger_orphans(void)
{
	struct hmemreg_ledger_exp *rec;
	u64 n = 0;

	spin_lock(&hmemreg_ledger_lock);
	list_for_each_entry(rec, &hmemreg_ledger_list, node)
		n += hmemreg_ledger_orphaned(rec);
	spin_unlock(&hmemreg_ledger_lock);
	return n;
}

#define HMEMREG_STAT(name) atomic64_read(&hmemreg_stats.name)

static int hmemreg_summary_show(struct seq_file *m, void *unused)
{
	struct hmemreg_ledger_exp *rec;
	struct hmemreg_ledger_att *att;

	seq_printf(m, "exports %lld live, %lld total, %lld bytes, %llu orphaned\n",
		   HMEMREG_STAT(exports_live), HMEMREG_STAT(exports_total),
		   HMEMREG_STAT(exported_bytes), hmemreg_ledger_orphans());
	seq_printf(m, "attachments %lld live, %lld total\n",
		   HMEMREG_STAT(attach_live), HMEMREG_STAT(attach_total));
	seq_printf(m, "pins %lld live, %lld total; maps %lld live, %lld total; unbalanced %lld\n",
		   HMEMREG_STAT(pins_live), HMEMREG_STAT(pins_total),
		   HMEMREG_STAT(maps_live), HMEMREG_STAT(maps_total),
		   HMEMREG_STAT(unbalanced));
	seq_printf(m, "host pages pinned %lld; user mmaps %lld\n",
		   HMEMREG_STAT(host_pages_pinned), HMEMREG_STAT(user_mmaps_live));
	seq_printf(m, "devmem pool %llu bytes, %lld used, %lld handles\n",
		   HMEMREG_STAT(devmem_pool_bytes), HMEMREG_STAT(devmem_used_bytes),
		   HMEMREG_STAT(devmem_handles_live));
	seq_printf(m, "watches %lld live, %lld total; events %lld, dropped %lld\n",
		   HMEMREG_STAT(watches_live), HMEMREG_STAT(watches_total),
		   HMEMREG_STAT(events_total), HMEMREG_STAT(events_dropped));
	seq_printf(m, "contexts %lld; faults injected %lld; move notifications %lld\n",
		   HMEMREG_STAT(contexts_live), HMEMREG_STAT(faults_injected),
		   HMEMREG_STAT(move_notifies));

	spin_lock(&hmemreg_ledger_lock);
	list_for_each_entry(rec, &hmemreg_ledger_list, node) {
		seq_printf(m, "export %llu prov %u owner %d %s addr 0x%llx len %llu cookie 0x%llx state 0x%x attach %u pins %u maps %u\n",
			   rec->id, rec->provider, pid_nr(rec->owner), rec->comm,
			   rec->addr, rec->len, rec->cookie,
			   hmemreg_ledger_state(rec), rec->attach_live,
			   rec->pins_live, rec->maps_live);
		if (rec->inner[0])
			seq_printf(m, "  wraps %s\n", rec->inner);
		list_for_each_entry(att, &rec->attachments, node)
			seq_printf(m, "  attach %s pid %d %s pinned %u mapped %u dynamic %d\n",
				   att->device, att->pid, att->comm, att->pinned,
				   att->mapped, att->dynamic);
	}
	spin_unlock(&hmemreg_ledger_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(hmemreg_summary);

int hmemreg_debugfs_init(void)
{
	hmemreg_debugfs = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("summary", 0400, hmemreg_debugfs, NULL,
			    &hmemreg_summary_fops);
	return 0;
}

void hmemreg_debugfs_exit(void)
{
	debugfs_remove_recursive(hmemreg_debugfs);
}
