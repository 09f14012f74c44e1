// SPDX-License-Identifier: GPL-2.0
/*
 * Generic netlink family "hmemreg": ledger totals (GET_STATS) and one
 * message per live export with its attachments (GET_EXPORTS dump).
 */
#include <linux/pid.h>
#include <net/genetlink.h>

#include "hmemreg_priv.h"

static const struct nla_policy hmemreg_nl_policy[HMEMREG_NLA_MAX + 1] = {
	[HMEMREG_NLA_EXP_OWNER_PID] = { .type = NLA_U32 },
};

static struct genl_family hmemreg_genl;

static int hmemreg_put_u64(struct sk_buff *skb, int attr, u64 val)
{
	return nla_put_u64_64bit(skb, attr, val, HMEMREG_NLA_PAD);
}

#define HMEMREG_STAT(name) ((u64)atomic64_read(&hmemreg_stats.name))

static int hmemreg_fill_stats(struct sk_buff *skb)
{
	const struct {
		int attr;
		u64 val;
	} s[] = {
		{ HMEMREG_NLA_STAT_EXPORTS_LIVE, HMEMREG_STAT(exports_live) },
		{ HMEMREG_NLA_STAT_EXPORTS_TOTAL, HMEMREG_STAT(exports_total) },
		{ HMEMREG_NLA_STAT_EXPORTED_BYTES, HMEMREG_STAT(exported_bytes) },
		{ HMEMREG_NLA_STAT_ORPHANS_LIVE, hmemreg_ledger_orphans() },
		{ HMEMREG_NLA_STAT_ATTACH_LIVE, HMEMREG_STAT(attach_live) },
		{ HMEMREG_NLA_STAT_ATTACH_TOTAL, HMEMREG_STAT(attach_total) },
		{ HMEMREG_NLA_STAT_PINS_LIVE, HMEMREG_STAT(pins_live) },
		{ HMEMREG_NLA_STAT_PINS_TOTAL, HMEMREG_STAT(pins_total) },
		{ HMEMREG_NLA_STAT_MAPS_LIVE, HMEMREG_STAT(maps_live) },
		{ HMEMREG_NLA_STAT_MAPS_TOTAL, HMEMREG_STAT(maps_total) },
		{ HMEMREG_NLA_STAT_HOST_PAGES_PINNED, HMEMREG_STAT(host_pages_pinned) },
		{ HMEMREG_NLA_STAT_DEVMEM_POOL_BYTES, HMEMREG_STAT(devmem_pool_bytes) },
		{ HMEMREG_NLA_STAT_DEVMEM_USED_BYTES, HMEMREG_STAT(devmem_used_bytes) },
		{ HMEMREG_NLA_STAT_DEVMEM_HANDLES_LIVE, HMEMREG_STAT(devmem_handles_live) },
		{ HMEMREG_NLA_STAT_WATCHES_LIVE, HMEMREG_STAT(watches_live) },
		{ HMEMREG_NLA_STAT_WATCHES_TOTAL, HMEMREG_STAT(watches_total) },
		{ HMEMREG_NLA_STAT_EVENTS_TOTAL, HMEMREG_STAT(events_total) },
		{ HMEMREG_NLA_STAT_EVENTS_DROPPED, HMEMREG_STAT(events_dropped) },
		{ HMEMREG_NLA_STAT_CONTEXTS_LIVE, HMEMREG_STAT(contexts_live) },
		{ HMEMREG_NLA_STAT_FAULTS_INJECTED, HMEMREG_STAT(faults_injected) },
		{ HMEMREG_NLA_STAT_UNBALANCED, HMEMREG_STAT(unbalanced) },
		{ HMEMREG_NLA_STAT_USER_MMAPS_LIVE, HMEMREG_STAT(user_mmaps_live) },
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(s); i++)
		if (hmemreg_put_u64(skb, s[i].attr, s[i].val))
			return -EMSGSIZE;
	return 0;
}

static int hmemreg_nl_get_stats(struct sk_buff *skb, struct genl_info *info)
{
	struct sk_buff *msg;
	void *hdr;

	msg = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &hmemreg_genl, 0, HMEMREG_CMD_GET_STATS);
	if (!hdr || hmemreg_fill_stats(msg)) {
		nlmsg_free(msg);
		return -EMSGSIZE;
	}
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);
}

/* One attachment as a nested attribute; hmemreg_ledger_lock held. */
static int hmemreg_fill_att(struct sk_buff *skb, const struct hmemreg_ledger_att *att)
{
	struct nlattr *nest = nla_nest_start(skb, HMEMREG_NLA_EXP_ATTACH);

	if (!nest)
		return -EMSGSIZE;
	if (nla_put_string(skb, HMEMREG_NLA_ATT_DEVICE, att->device) ||
	    nla_put_u32(skb, HMEMREG_NLA_ATT_PID, att->pid) ||
	    nla_put_string(skb, HMEMREG_NLA_ATT_COMM, att->comm) ||
	    nla_put_u32(skb, HMEMREG_NLA_ATT_PINNED, att->pinned) ||
	    nla_put_u32(skb, HMEMREG_NLA_ATT_MAPPED, att->mapped) ||
	    nla_put_u32(skb, HMEMREG_NLA_ATT_DYNAMIC, att->dynamic) ||
	    nla_put_u64_64bit(skb, HMEMREG_NLA_ATT_ATTACHED_NS, att->attached_ns,
			      HMEMREG_NLA_ATT_PAD)) {
		nla_nest_cancel(skb, nest);
		return -EMSGSIZE;
	}
	nla_nest_end(skb, nest);
	return 0;
}

/* One export; hmemreg_ledger_lock held. */
static int hmemreg_fill_exp(struct sk_buff *skb, const struct hmemreg_ledger_exp *rec)
{
	const struct hmemreg_ledger_att *att;

	if (hmemreg_put_u64(skb, HMEMREG_NLA_EXP_ID, rec->id) ||
	    nla_put_u32(skb, HMEMREG_NLA_EXP_PROVIDER, rec->provider) ||
	    nla_put_u32(skb, HMEMREG_NLA_EXP_STATE, hmemreg_ledger_state(rec)) ||
	    nla_put_u32(skb, HMEMREG_NLA_EXP_OWNER_PID, pid_nr(rec->owner)) ||
	    nla_put_string(skb, HMEMREG_NLA_EXP_OWNER_COMM, rec->comm) ||
	    hmemreg_put_u64(skb, HMEMREG_NLA_EXP_ADDR, rec->addr) ||
	    hmemreg_put_u64(skb, HMEMREG_NLA_EXP_LEN, rec->len) ||
	    hmemreg_put_u64(skb, HMEMREG_NLA_EXP_HANDLE, rec->handle) ||
	    hmemreg_put_u64(skb, HMEMREG_NLA_EXP_COOKIE, rec->cookie) ||
	    hmemreg_put_u64(skb, HMEMREG_NLA_EXP_CREATED_NS, rec->created_ns) ||
	    nla_put_u32(skb, HMEMREG_NLA_EXP_ATTACH_LIVE, rec->attach_live) ||
	    nla_put_u32(skb, HMEMREG_NLA_EXP_PINS_LIVE, rec->pins_live) ||
	    nla_put_u32(skb, HMEMREG_NLA_EXP_MAPS_LIVE, rec->maps_live) ||
	    hmemreg_put_u64(skb, HMEMREG_NLA_EXP_PINS_TOTAL, rec->pins_total) ||
	    hmemreg_put_u64(skb, HMEMREG_NLA_EXP_MAPS_TOTAL, rec->maps_total) ||
	    hmemreg_put_u64(skb, HMEMREG_NLA_EXP_LAST_PIN_NS, rec->last_pin_ns) ||
	    hmemreg_put_u64(skb, HMEMREG_NLA_EXP_LAST_UNPIN_NS, rec->last_unpin_ns) ||
	    (rec->inner[0] &&
	     nla_put_string(skb, HMEMREG_NLA_EXP_INNER_NAME, rec->inner)))
		return -EMSGSIZE;
	list_for_each_entry(att, &rec->attachments, node)
		if (hmemreg_fill_att(skb, att))
			return -EMSGSIZE;
	return 0;
}

/* cb->args[0]: last export id sent; cb->args[1]: owner pid filter (0 = all). */
static int hmemreg_nl_exports_start(struct netlink_callback *cb)
{
	struct nlattr **attrs = hmemreg_genl_dump_attrs(cb);

	cb->args[0] = 0;
	cb->args[1] = 0;
	if (attrs && attrs[HMEMREG_NLA_EXP_OWNER_PID])
		cb->args[1] = nla_get_u32(attrs[HMEMREG_NLA_EXP_OWNER_PID]);
	return 0;
}

static int hmemreg_nl_exports_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	const struct hmemreg_ledger_exp *rec;
	u64 last = cb->args[0];
	void *hdr;

	spin_lock(&hmemreg_ledger_lock);
	list_for_each_entry(rec, &hmemreg_ledger_list, node) {
		if (rec->id <= last)
			continue;
		if (cb->args[1] && pid_nr(rec->owner) != cb->args[1])
			continue;
		hdr = genlmsg_put(skb, NETLINK_CB(cb->skb).portid, cb->nlh->nlmsg_seq,
				  &hmemreg_genl, NLM_F_MULTI, HMEMREG_CMD_GET_EXPORTS);
		if (!hdr)
			break;
		if (hmemreg_fill_exp(skb, rec)) {
			genlmsg_cancel(skb, hdr);
			break;
		}
		genlmsg_end(skb, hdr);
		last = rec->id;
	}
	spin_unlock(&hmemreg_ledger_lock);
	cb->args[0] = last;
	return skb->len;
}

static const struct genl_ops hmemreg_nl_ops[] = {
	{
		.cmd = HMEMREG_CMD_GET_STATS,
		.doit = hmemreg_nl_get_stats,
	},
	{
		.cmd = HMEMREG_CMD_GET_EXPORTS,
		.start = hmemreg_nl_exports_start,
		.dumpit = hmemreg_nl_exports_dump,
	},
};

static struct genl_family hmemreg_genl = {
	.name = HMEMREG_GENL_NAME,
	.version = HMEMREG_GENL_VERSION,
	.maxattr = HMEMREG_NLA_MAX,
	.policy = hmemreg_nl_policy,
	.module = THIS_MODULE,
	.ops = hmemreg_nl_ops,
	.n_ops = ARRAY_SIZE(hmemreg_nl_ops),
#ifdef HMEMREG_HAVE_GENL_RESV_START_OP
	.resv_start_op = HMEMREG_CMD_GET_EXPORTS + 1,
#endif
};

int hmemreg_netlink_init(void)
{
	return genl_register_family(&hmemreg_genl);
}

void hmemreg_netlink_exit(void)
{
	genl_unregister_family(&hmemreg_genl);
}
