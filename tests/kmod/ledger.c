// SPDX-License-Identifier: MIT
#include "ledger.h"

#include <errno.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct nl_sock *ledger_connect(int *family)
{
	struct nl_sock *sk = nl_socket_alloc();

	if (!sk)
		return NULL;
	if (genl_connect(sk) < 0) {
		nl_socket_free(sk);
		return NULL;
	}
	*family = genl_ctrl_resolve(sk, HMEMREG_GENL_NAME);
	if (*family < 0) {
		nl_socket_free(sk);
		return NULL;
	}
	return sk;
}

/*
 * One request of the family: command cmd with flags (NLM_F_DUMP or 0), the
 * owner pid filter when pid is not 0, every answer given to cb. 0, -ENOENT
 * without the family, -ENOMEM, or -EIO when libnl or the family failed it.
 */
static int ledger_request(int cmd, int flags, uint32_t pid, nl_recvmsg_msg_cb_t cb, void *arg)
{
	struct nl_sock *sk;
	struct nl_msg *msg;
	int family, ret;

	sk = ledger_connect(&family);
	if (!sk)
		return -ENOENT;
	msg = nlmsg_alloc();
	if (!msg) {
		nl_socket_free(sk);
		return -ENOMEM;
	}
	genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family, 0, flags, cmd, HMEMREG_GENL_VERSION);
	if (pid)
		nla_put_u32(msg, HMEMREG_NLA_EXP_OWNER_PID, pid);
	nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, cb, arg);
	ret = nl_send_auto(sk, msg);
	nlmsg_free(msg);
	if (ret >= 0)
		ret = nl_recvmsgs_default(sk);
	nl_socket_free(sk);
	return ret < 0 ? -EIO : 0;
}

static int stats_cb(struct nl_msg *msg, void *arg)
{
	struct ledger_stats *st = arg;
	struct nlattr *tb[HMEMREG_NLA_MAX + 1];
	int i;

	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, HMEMREG_NLA_MAX, NULL) < 0)
		return NL_SKIP;
	for (i = HMEMREG_NLA_STAT_EXPORTS_LIVE; i <= HMEMREG_NLA_STAT_USER_MMAPS_LIVE; i++) {
		if (tb[i]) {
			st->v[i] = nla_get_u64(tb[i]);
			st->present++;
		}
	}
	return NL_OK;
}

int ledger_stats(struct ledger_stats *out)
{
	memset(out, 0, sizeof(*out));
	return ledger_request(HMEMREG_CMD_GET_STATS, 0, 0, stats_cb, out);
}

struct dump_ctx {
	struct ledger_export *out;
	int max, n;
};

static int export_cb(struct nl_msg *msg, void *arg)
{
	struct dump_ctx *d = arg;
	struct nlattr *tb[HMEMREG_NLA_MAX + 1], *att[HMEMREG_NLA_ATT_MAX + 1], *pos;
	struct ledger_export *e;
	int rem;

	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, HMEMREG_NLA_MAX, NULL) < 0)
		return NL_SKIP;
	if (d->n++ >= d->max)
		return NL_OK;
	e = &d->out[d->n - 1];
	memset(e, 0, sizeof(*e));
#define U64(a, f) do { if (tb[a]) e->f = nla_get_u64(tb[a]); } while (0)
#define U32(a, f) do { if (tb[a]) e->f = nla_get_u32(tb[a]); } while (0)
	U64(HMEMREG_NLA_EXP_ID, id);
	U64(HMEMREG_NLA_EXP_ADDR, addr);
	U64(HMEMREG_NLA_EXP_LEN, len);
	U64(HMEMREG_NLA_EXP_HANDLE, handle);
	U64(HMEMREG_NLA_EXP_COOKIE, cookie);
	U64(HMEMREG_NLA_EXP_PINS_TOTAL, pins_total);
	U64(HMEMREG_NLA_EXP_MAPS_TOTAL, maps_total);
	U32(HMEMREG_NLA_EXP_PROVIDER, provider);
	U32(HMEMREG_NLA_EXP_STATE, state);
	U32(HMEMREG_NLA_EXP_OWNER_PID, owner_pid);
	U32(HMEMREG_NLA_EXP_ATTACH_LIVE, attach_live);
	U32(HMEMREG_NLA_EXP_PINS_LIVE, pins_live);
	U32(HMEMREG_NLA_EXP_MAPS_LIVE, maps_live);
	if (tb[HMEMREG_NLA_EXP_INNER_NAME])
		snprintf(e->inner, sizeof(e->inner), "%s", nla_get_string(tb[HMEMREG_NLA_EXP_INNER_NAME]));
	if (tb[HMEMREG_NLA_EXP_OWNER_COMM])
		snprintf(e->comm, sizeof(e->comm), "%s", nla_get_string(tb[HMEMREG_NLA_EXP_OWNER_COMM]));
	nla_for_each_attr(pos, genlmsg_attrdata(nlmsg_data(nlmsg_hdr(msg)), 0),
			  genlmsg_attrlen(nlmsg_data(nlmsg_hdr(msg)), 0), rem) {
		if (nla_type(pos) != HMEMREG_NLA_EXP_ATTACH)
			continue;
		if (nla_parse_nested(att, HMEMREG_NLA_ATT_MAX, pos, NULL) < 0)
			continue;
		if (!e->attachments++) {
			if (att[HMEMREG_NLA_ATT_DEVICE])
				snprintf(e->att_device, sizeof(e->att_device), "%s",
					 nla_get_string(att[HMEMREG_NLA_ATT_DEVICE]));
			if (att[HMEMREG_NLA_ATT_PINNED])
				e->att_pinned = nla_get_u32(att[HMEMREG_NLA_ATT_PINNED]);
			if (att[HMEMREG_NLA_ATT_MAPPED])
				e->att_mapped = nla_get_u32(att[HMEMREG_NLA_ATT_MAPPED]);
			if (att[HMEMREG_NLA_ATT_DYNAMIC])
				e->att_dynamic = nla_get_u32(att[HMEMREG_NLA_ATT_DYNAMIC]);
		}
	}
	return NL_OK;
}

int ledger_exports(uint32_t pid, struct ledger_export *out, int max)
{
	struct dump_ctx d = { .out = out, .max = max };
	int ret = ledger_request(HMEMREG_CMD_GET_EXPORTS, NLM_F_DUMP, pid, export_cb, &d);

	return ret < 0 ? ret : d.n;
}

int ledger_count_exports(uint32_t pid)
{
	struct ledger_export e[1];
	int n = ledger_exports(pid, e, 1);

	if (n < 0) {
		fprintf(stderr, "ledger dump failed: %d\n", n);
		abort();
	}
	return n;
}

static int ignore_cb(struct nl_msg *msg, void *arg)
{
	(void)msg;
	(void)arg;
	return NL_OK;
}

int ledger_raw_request(int cmd, int dump)
{
	return ledger_request(cmd, dump ? NLM_F_DUMP : 0, 0, ignore_cb, NULL);
}
