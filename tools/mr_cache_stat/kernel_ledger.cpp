// SPDX-License-Identifier: MIT
// Generic netlink client for the "hmemreg" family (libnl-genl).
#include "kernel_ledger.hpp"

#include <linux/hmemreg.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>

#include <array>
#include <cerrno>
#include <memory>

namespace mr_cache_stat {

namespace {

// Names of HMEMREG_NLA_STAT_* in ABI order (index = attribute - first).
constexpr std::array kStatNames = {
	"exports_live",	      "exports_total",	  "exported_bytes",	  "orphans_live",
	"attach_live",	      "attach_total",	  "pins_live",		  "pins_total",
	"maps_live",	      "maps_total",	  "host_pages_pinned",	  "devmem_pool_bytes",
	"devmem_used_bytes",  "devmem_handles_live", "watches_live",	  "watches_total",
	"events_total",	      "events_dropped",	  "contexts_live",	  "faults_injected",
	"unbalanced",	      "user_mmaps_live",
};
static_assert(HMEMREG_NLA_STAT_EXPORTS_LIVE + kStatNames.size() - 1 == HMEMREG_NLA_STAT_USER_MMAPS_LIVE);

struct SockDeleter {
	void operator()(nl_sock *s) const { nl_socket_free(s); }
};
struct MsgDeleter {
	void operator()(nl_msg *m) const { nlmsg_free(m); }
};
using Sock = std::unique_ptr<nl_sock, SockDeleter>;
using Msg = std::unique_ptr<nl_msg, MsgDeleter>;

uint64_t get_u64(nlattr *a)
{
	return a ? nla_get_u64(a) : 0;
}
uint32_t get_u32(nlattr *a)
{
	return a ? nla_get_u32(a) : 0;
}
std::string get_str(nlattr *a)
{
	return a ? std::string(nla_get_string(a)) : std::string();
}

int on_stats(nl_msg *msg, void *arg)
{
	auto *ledger = static_cast<Ledger *>(arg);
	nlattr *tb[HMEMREG_NLA_MAX + 1] = {};
	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, HMEMREG_NLA_MAX, nullptr) < 0)
		return NL_SKIP;
	ledger->stats.clear();
	for (size_t i = 0; i < kStatNames.size(); i++)
		ledger->stats.emplace_back(kStatNames[i], get_u64(tb[HMEMREG_NLA_STAT_EXPORTS_LIVE + i]));
	return NL_OK;
}

Attachment parse_attachment(nlattr *nest)
{
	nlattr *tb[HMEMREG_NLA_ATT_MAX + 1] = {};
	Attachment a;
	if (nla_parse_nested(tb, HMEMREG_NLA_ATT_MAX, nest, nullptr) < 0)
		return a;
	a.device = get_str(tb[HMEMREG_NLA_ATT_DEVICE]);
	a.pid = get_u32(tb[HMEMREG_NLA_ATT_PID]);
	a.comm = get_str(tb[HMEMREG_NLA_ATT_COMM]);
	a.pinned = get_u32(tb[HMEMREG_NLA_ATT_PINNED]);
	a.mapped = get_u32(tb[HMEMREG_NLA_ATT_MAPPED]);
	a.dynamic = get_u32(tb[HMEMREG_NLA_ATT_DYNAMIC]) != 0;
	a.attached_ns = get_u64(tb[HMEMREG_NLA_ATT_ATTACHED_NS]);
	return a;
}

int on_export(nl_msg *msg, void *arg)
{
	auto *ledger = static_cast<Ledger *>(arg);
	nlmsghdr *hdr = nlmsg_hdr(msg);
	nlattr *tb[HMEMREG_NLA_MAX + 1] = {};
	if (genlmsg_parse(hdr, 0, tb, HMEMREG_NLA_MAX, nullptr) < 0)
		return NL_SKIP;
	Export e;
	e.id = get_u64(tb[HMEMREG_NLA_EXP_ID]);
	e.provider = get_u32(tb[HMEMREG_NLA_EXP_PROVIDER]);
	e.state = get_u32(tb[HMEMREG_NLA_EXP_STATE]);
	e.owner_pid = get_u32(tb[HMEMREG_NLA_EXP_OWNER_PID]);
	e.owner_comm = get_str(tb[HMEMREG_NLA_EXP_OWNER_COMM]);
	e.inner = get_str(tb[HMEMREG_NLA_EXP_INNER_NAME]);
	e.addr = get_u64(tb[HMEMREG_NLA_EXP_ADDR]);
	e.len = get_u64(tb[HMEMREG_NLA_EXP_LEN]);
	e.handle = get_u64(tb[HMEMREG_NLA_EXP_HANDLE]);
	e.cookie = get_u64(tb[HMEMREG_NLA_EXP_COOKIE]);
	e.created_ns = get_u64(tb[HMEMREG_NLA_EXP_CREATED_NS]);
	e.attach_live = get_u32(tb[HMEMREG_NLA_EXP_ATTACH_LIVE]);
	e.pins_live = get_u32(tb[HMEMREG_NLA_EXP_PINS_LIVE]);
	e.maps_live = get_u32(tb[HMEMREG_NLA_EXP_MAPS_LIVE]);
	e.pins_total = get_u64(tb[HMEMREG_NLA_EXP_PINS_TOTAL]);
	e.maps_total = get_u64(tb[HMEMREG_NLA_EXP_MAPS_TOTAL]);
	e.last_pin_ns = get_u64(tb[HMEMREG_NLA_EXP_LAST_PIN_NS]);
	e.last_unpin_ns = get_u64(tb[HMEMREG_NLA_EXP_LAST_UNPIN_NS]);
	// Attachments are repeated nested attributes: walk them all.
	nlattr *a;
	int rem;
	nla_for_each_attr(a, genlmsg_attrdata(static_cast<genlmsghdr *>(nlmsg_data(hdr)), 0),
			  genlmsg_attrlen(static_cast<genlmsghdr *>(nlmsg_data(hdr)), 0), rem)
	{
		if (nla_type(a) == HMEMREG_NLA_EXP_ATTACH)
			e.attachments.push_back(parse_attachment(a));
	}
	ledger->exports.push_back(std::move(e));
	return NL_OK;
}

int request(nl_sock *sock, int family, uint8_t cmd, int flags, uint32_t owner_pid, nl_recvmsg_msg_cb_t cb,
	    Ledger &ledger, std::string &why)
{
	Msg msg(nlmsg_alloc());
	if (!msg || !genlmsg_put(msg.get(), NL_AUTO_PORT, NL_AUTO_SEQ, family, 0, flags, cmd,
				 HMEMREG_GENL_VERSION)) {
		why = "out of memory building a netlink request";
		return -1;
	}
	if (owner_pid && nla_put_u32(msg.get(), HMEMREG_NLA_EXP_OWNER_PID, owner_pid) < 0) {
		why = "out of memory building a netlink request";
		return -1;
	}
	nl_socket_modify_cb(sock, NL_CB_VALID, NL_CB_CUSTOM, cb, &ledger);
	int rc = nl_send_auto(sock, msg.get());
	if (rc >= 0)
		rc = nl_recvmsgs_default(sock);
	if (rc < 0) {
		why = std::string("netlink request to the hmemreg family failed: ") + nl_geterror(rc);
		return -1;
	}
	return 0;
}

} // namespace

uint64_t Ledger::stat(const std::string &name) const
{
	for (const auto &[k, v] : stats)
		if (k == name)
			return v;
	return 0;
}

const char *provider_name(uint32_t provider)
{
	switch (provider) {
	case HMEMREG_PROVIDER_HOST: return "host";
	case HMEMREG_PROVIDER_DEVMEM: return "devmem";
	case HMEMREG_PROVIDER_DMABUF: return "dmabuf";
	default: return provider >= HMEMREG_PROVIDER_DYNAMIC ? "external" : "?";
	}
}

std::string kind_text(const Export &e)
{
	std::string k = provider_name(e.provider);
	return e.inner.empty() ? k : k + ":" + e.inner;
}

// One socket per request: a dump after a doit on the same socket can come
// back empty (the doit's acknowledgement is still queued).
static Sock connect(int &family, std::string &why)
{
	Sock sock(nl_socket_alloc());
	if (!sock) {
		why = "out of memory";
		return nullptr;
	}
	int rc = genl_connect(sock.get());
	if (rc < 0) {
		why = std::string("cannot open a generic netlink socket: ") + nl_geterror(rc);
		return nullptr;
	}
	family = genl_ctrl_resolve(sock.get(), HMEMREG_GENL_NAME);
	if (family < 0) {
		why = "hmemreg.ko is not loaded (no generic netlink family \"" HMEMREG_GENL_NAME
		      "\"); load it with 'modprobe hmemreg'";
		return nullptr;
	}
	return sock;
}

int read_ledger(Ledger &out, bool with_exports, uint32_t owner_pid, std::string &why)
{
	int family = 0;
	Sock sock = connect(family, why);
	if (!sock || request(sock.get(), family, HMEMREG_CMD_GET_STATS, 0, 0, on_stats, out, why))
		return -1;
	if (!with_exports)
		return 0;
	sock = connect(family, why);
	if (!sock ||
	    request(sock.get(), family, HMEMREG_CMD_GET_EXPORTS, NLM_F_DUMP, owner_pid, on_export, out, why))
		return -1;
	return 0;
}

} // namespace mr_cache_stat
