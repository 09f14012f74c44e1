// SPDX-License-Identifier: MIT
// The text output: a table with one line per cache, then the kernel ledger.
#pragma once

#include "sample.hpp"

namespace mr_cache_stat {

enum class Layout {
	once,   // one sample: totals, then per cache what its counters mean
	live,   // -w on a terminal: the screen redrawn in place each sample
	append, // -w into a pipe or file: lines appended, a TIME column, header once
};

struct TextView {
	Layout layout = Layout::once;
	double interval = 0;
	bool kmod_lines = true; // print the kernel ledger (false: its line went to stderr)
	bool first = true;      // append: the header is due
};

void print_text(const Sample &s, const RateBook &rates, TextView &view);

} // namespace mr_cache_stat
