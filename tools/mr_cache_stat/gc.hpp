// SPDX-License-Identifier: MIT
// mr_cache_stat --gc: the stale /dev/shm files of dead processes.
#pragma once

namespace mr_cache_stat {

// Removes (or with dry_run lists) them; prints one line per stale file and a
// summary, or one JSON record. Returns the exit status: 0, or 1 when a stale
// file could not be removed or /dev/shm could not be read.
int run_gc(bool json, bool dry_run);

} // namespace mr_cache_stat
