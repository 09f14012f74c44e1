// SPDX-License-Identifier: MIT
// Reads hmemreg.ko's pin ledger over its generic netlink family (libnl-genl).
#pragma once

#include <stdint.h>

#include <linux/hmemreg.h>

struct ledger_stats {
	uint64_t v[HMEMREG_NLA_MAX + 1];	// indexed by HMEMREG_NLA_STAT_*
	int present;				// attributes received
};

struct ledger_export {
	uint64_t id, addr, len, handle, cookie, pins_total, maps_total;
	uint32_t provider, state, owner_pid, attach_live, pins_live, maps_live;
	char comm[16];
	char inner[32];		// HMEMREG_NLA_EXP_INNER_NAME (DMABUF), else ""
	int attachments;
	char att_device[32];
	uint32_t att_pinned, att_mapped, att_dynamic;
};

// 0 or -errno.
int ledger_stats(struct ledger_stats *out);
// Exports of pid (0 = all) into out[max]: count (may exceed max), or -errno.
int ledger_exports(uint32_t pid, struct ledger_export *out, int max);
// Count of exports of pid (0 = all); aborts the test on failure.
int ledger_count_exports(uint32_t pid);
// Send command cmd (as a dump if dump) and drain the answer: 0 or -errno
// (-EIO: refused). For testing the family's refusals.
int ledger_raw_request(int cmd, int dump);
