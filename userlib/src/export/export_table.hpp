// SPDX-License-Identifier: MIT
// hmemreg.ko's exports for this process: the /dev/hmemreg client behind
// the C API hmemreg/export.h, and the exports' memory kind of the
// registration cache (whose namespace it keeps: the cache calls it).
//
// The process's exports live in one table, on one /dev/hmemreg fd of its
// own (DEVMEM handles and export watches belong to the fd that made them).
// Each export has a generation word that stays mapped for the life of the
// process: a HOST export's is the kernel's word of its EXPORT_WATCH (zeroed
// before an munmap of the range returns), a DEVMEM export's a word of this
// table (zeroed when the export is freed). Cache entries of an export
// (Iface::kmod_export, device = the ledger id) point their gen_word at it,
// so every hit checks that the export still stands. Dropping the entries,
// which deregisters them and lets the importer unpin, is done at
// hmemreg_export_free() and, for unmapped host ranges, by a thread that
// waits on the fd's event ring (HMEMREG_EVF_EXPORT events).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "mrcache/memory_kind.hpp"
#include "mrcache/types.hpp"

namespace hmemreg::mr {

// The export kind's row of the memory kind table (monitor_factory.cpp):
// its monitor puts every cache on the list the table drops an export's
// entries from.
const MemoryKind &export_memory_kind();

// The request of [offset, offset + len) of an export for a cache hit, read
// without the table's lock: false unless the export is live and unchanged
// and covers the range (the caller then takes export_request(), which says
// why). No DMA-BUF fields: a miss goes through export_request().
bool export_hit_request(const void *exp, uint64_t offset, size_t len, Request &out) noexcept;

// The request a registration of [offset, offset + len) of an export makes.
// 0, or -HMEMREG_EINVAL / -HMEMREG_ENOENT / -HMEMREG_ESTALE with *why set.
int export_request(const void *exp, uint64_t offset, size_t len, Request &out, std::string *why);

// The same for the export whose DMA-BUF is the file behind a caller's `fd`
// (its own fd or a dup: DMA-BUFs handed over by fd, as NCCL's regMrDmaBuf
// does); -HMEMREG_ENOENT when no export of this process is.
int export_request_of_fd(int fd, uint64_t offset, size_t len, Request &out, std::string *why);

// Message of the last failure of the export C API on this thread.
void set_export_error(const std::string &why);

} // namespace hmemreg::mr
