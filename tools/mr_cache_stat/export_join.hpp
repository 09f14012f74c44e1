// SPDX-License-Identifier: MIT
// mr_cache_stat --exports: the process view and the kernel view of one
// registration joined on the ledger's export id. Each cache publishes the
// hmemreg.ko exports it holds registrations of (stats block version 3);
// the ledger says who imports and pins each export.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "json_view.hpp"
#include "sample.hpp"

namespace mr_cache_stat {

struct JoinedExport {
	int pid = 0;
	std::string comm;
	uint32_t cache_id = 0;
	std::string cache_name;
	uint64_t export_id = 0;
	uint64_t entries = 0, bytes = 0;
	const Export *kernel = nullptr; // null: the ledger has no such export (a bug, or it went meanwhile)
};

struct ExportJoin {
	std::vector<JoinedExport> rows;
	size_t missing = 0;                 // rows the ledger has no export for
	std::vector<const Export *> unexplained; // pinned or attached exports no cache holds
	uint64_t unlisted = 0;              // pairs left out of full tables
	int old_blocks = 0;                 // blocks of version < 3 (no export rows)
};

// Valid while s lives.
ExportJoin join_exports(const Sample &s);

void print_exports_text(const Sample &s, const ExportJoin &j);
Json exports_json(const Sample &s, const ExportJoin &j);

} // namespace mr_cache_stat
