// SPDX-License-Identifier: MIT
// How reference counts are ordered against invalidation (entry.hpp).
//
// The count handshake is a store-load pattern on both sides (a get stores
// its count and loads the entry's state; an unlinker stores kOrphan and
// loads the counts). With membarrier(2) the frequent side (gets, puts)
// needs no fence: a thread that owns its count shard exclusively writes
// its counter with a plain load+store and then only keeps the compiler
// from reordering; the rare side (unlink, eviction) calls heavy_fence(),
// which makes every running thread of the process execute a full barrier
// (MEMBARRIER_CMD_PRIVATE_EXPEDITED), once per batch of unlinked entries.
// Without it (old kernel, seccomp, or HMEMREG_MR_CACHE_MEMBARRIER=0) every
// count is a seq_cst read-modify-write, and heavy_fence() does nothing: the
// seq_cst counts, state changes and loads are totally ordered already.
// Decided once per process, before any thread takes a count shard.
#pragma once

namespace hmemreg::mr {

enum class CountFence { membarrier, seq_cst };

CountFence count_fence();
const char *count_fence_name();
// The rare side's barrier: after it, a count stored before it by any
// thread is visible, and any thread's later state load sees what this
// thread stored before it.
void heavy_fence();

} // namespace hmemreg::mr
