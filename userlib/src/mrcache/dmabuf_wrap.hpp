// SPDX-License-Identifier: MIT
// Device memory's DMA-BUF wrapped by hmemreg.ko (provider DMABUF) before it
// is registered, so that the NIC's attachment, pins and maps of it are in
// the module's pin ledger (mr_cache_stat --exports / --check). Used when
// /dev/hmemreg is there with HMEMREG_CAP_EXPORT_DMABUF and
// HMEMREG_WRAP_DMABUF allows it (on by default).
#pragma once

#include <string>

#include "unique_fd.hpp"

namespace hmemreg::mr {

// Wrap all of the DMA-BUF `fd`: 0 with the wrapper's fd in `out` (offsets
// into it are those of `fd`), or -HMEMREG_* with `why` saying why not
// (setting off, module absent or too old, the module's refusal). The
// wrapper's fd may be closed once the provider has registered it: the
// NIC's attachment keeps it, so its lifetime is the registration's.
int wrap_dmabuf(int fd, UniqueFd &out, std::string &why);

} // namespace hmemreg::mr
