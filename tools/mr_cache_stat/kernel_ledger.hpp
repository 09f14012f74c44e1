// SPDX-License-Identifier: MIT
// The kernel's pin ledger, read over hmemreg's generic netlink family.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mr_cache_stat {

struct Attachment {
	std::string device;
	uint32_t pid = 0;
	std::string comm;
	uint32_t pinned = 0;
	uint32_t mapped = 0;
	bool dynamic = false;
	uint64_t attached_ns = 0;
};

struct Export {
	uint64_t id = 0;
	uint32_t provider = 0;
	uint32_t state = 0;
	uint32_t owner_pid = 0;
	std::string owner_comm;
	std::string inner;	// DMABUF: the wrapped buffer's exporter (exp_name), else ""
	uint64_t addr = 0, len = 0, handle = 0, cookie = 0;
	uint64_t created_ns = 0;
	uint32_t attach_live = 0, pins_live = 0, maps_live = 0;
	uint64_t pins_total = 0, maps_total = 0;
	uint64_t last_pin_ns = 0, last_unpin_ns = 0;
	std::vector<Attachment> attachments;
};

struct Ledger {
	// (name, value) in ABI order, names without the HMEMREG_NLA_STAT_ prefix, lower case.
	std::vector<std::pair<std::string, uint64_t>> stats;
	std::vector<Export> exports;

	uint64_t stat(const std::string &name) const;
};

// Reads stats and (when with_exports) the per-export dump, optionally only
// the exports of owner_pid (0 = all). Returns 0, or -1 with why set to a
// sentence for the user (module not loaded, netlink failure).
int read_ledger(Ledger &out, bool with_exports, uint32_t owner_pid, std::string &why);

const char *provider_name(uint32_t provider);
// provider_name(), and for a DMABUF wrapper the inner exporter: "dmabuf:nvidia".
std::string kind_text(const Export &e);

} // namespace mr_cache_stat
