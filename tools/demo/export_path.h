// SPDX-License-Identifier: MIT
// The demo's DMA-BUF path (hmemreg_demo --exports): public C API only.
#pragma once

#include <cstddef>

// Two engines on `provider` at `node` write `mib` MiB of hmemreg.ko device
// memory into another devmem export, both registered through their
// DMA-BUFs; prints the path, the ledger (`stat` --kernel) and the check.
// Returns the exit status.
int demo_export_path(const char *provider, const char *node, size_t mib, const char *stat);
