// SPDX-License-Identifier: MIT
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "settings/settings.hpp"
#include "mrcache/count_fence.hpp"
#include "mrcache/reader_lock.hpp"

namespace hmemreg::mr {

namespace {

long membarrier(int cmd)
{
	return ::syscall(__NR_membarrier, cmd, 0, 0);
}

CountFence detect()
{
	bool use = true;
	settings::boolean("HMEMREG_MR_CACHE_MEMBARRIER", use);
	if (!use)
		return CountFence::seq_cst;
	long cmds = membarrier(MEMBARRIER_CMD_QUERY);
	if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) ||
	    membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0)
		return CountFence::seq_cst;
	return CountFence::membarrier;
}

} // namespace

CountFence count_fence()
{
	static const CountFence mode = detect();
	return mode;
}

const char *count_fence_name()
{
	return count_fence() == CountFence::membarrier ? "membarrier" : "seq_cst";
}

void heavy_fence()
{
	// seq_cst mode: counts, state changes and the sums' loads are all
	// seq_cst, so they are totally ordered already (no fence needed).
	if (count_fence() != CountFence::membarrier)
		return;
	// Only this thread counts with plain stores (no other thread owns a
	// shard): its own stores are ordered for it already, and the other
	// threads' counts are seq_cst read-modify-writes. A thread claiming a
	// shard right now does so with a seq_cst CAS that this seq_cst load
	// did not see: then the caller's seq_cst state change (made before
	// calling) precedes that CAS, and so that thread's first state load,
	// which sees kOrphan. (A membarrier is 1.6 us on a 2-core VM; a miss
	// of a single-threaded process paid one every 16-64 evictions.)
	if (!other_thread_owns_a_shard())
		return;
	if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
		return;
	// Registration is per address space: re-register (a process image
	// that lost it) and retry. Counting without the barrier would be
	// unsound, so a kernel refusing both is fatal.
	int err = errno;
	if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
	    membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0)
		return;
	log::write(HMEMREG_LOG_ERROR, "cache", "membarrier(PRIVATE_EXPEDITED) failed: %s; set HMEMREG_MR_CACHE_MEMBARRIER=0",
		   std::strerror(err));
	std::abort();
}

} // namespace hmemreg::mr
