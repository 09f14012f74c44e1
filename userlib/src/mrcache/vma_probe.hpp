// SPDX-License-Identifier: MIT
// What backs a range of this process's address space, asked at miss time
// only (never on a hit). The userfaultfd monitor caches a range only when
// every mapping under it is private and anonymous: for those, every change
// of the pages behind the range goes through an event userfaultfd reports
// (unmap, remap, remove) or a call libhmemreg intercepts (mapping_hooks).
// Shared and file-backed mappings can lose their pages through the file
// (fallocate, ftruncate, madvise through another mapping, another
// process), which userfaultfd never reports.
#pragma once

#include <cstdint>

namespace hmemreg::mr {

enum class Backing {
	private_anon, // every page of the range: MAP_PRIVATE, no file behind it
	shared_or_file, // some of it shared, or backed by a file (shmem, memfd, hugetlbfs, ...)
	unmapped,       // a hole in the range, or the probe failed
};

// The mappings a probe walked: from the start of the first one under the
// range to the end of the last (private_anon only; else unset).
struct MappingSpan {
	uintptr_t start = 0, end = 0;
};

// PROCMAP_QUERY (Linux 6.11+): one ioctl per mapping in the range; older
// kernels: /proc/self/maps read up to the range's end. span, if given,
// receives the bounds of the mappings under a private_anon range.
Backing probe_backing(uintptr_t start, uintptr_t end, MappingSpan *span = nullptr);

// "procmap_query" or "maps": which probe this kernel gave (after a probe).
const char *backing_probe_name();

// Closes the descriptor PROCMAP_QUERY keeps open; the next probe reopens it.
// The uffd monitor calls it when it goes, so a process without caches holds
// no descriptor of ours.
void release_backing_probe();

} // namespace hmemreg::mr
