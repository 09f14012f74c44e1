// SPDX-License-Identifier: GPL-2.0
/*
 * genl_info_dump(): a dump's parsed attributes live in a struct genl_info
 * (6.6 on); before, in struct genl_dumpit_info itself.
 */
#include <linux/module.h>
#include <net/genetlink.h>

struct nlattr **hmemreg_probe(struct netlink_callback *cb);
struct nlattr **hmemreg_probe(struct netlink_callback *cb)
{
	return genl_info_dump(cb)->attrs;
}
MODULE_LICENSE("GPL");
