// SPDX-License-Identifier: MIT
// mr_cache_stat --env: every HMEMREG_* setting with its default, the value in
// this environment and its meaning (like fi_info -e).
#pragma once

namespace mr_cache_stat {

// Prints the table (or one JSON document); returns the exit status.
int print_settings(bool json);

} // namespace mr_cache_stat
