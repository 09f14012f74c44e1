// SPDX-License-Identifier: MIT
// ofi_rxm over verbs sizes each endpoint's MSG CQ as (msg tx + msg rx size) x
// universe size (256 by default): beyond what Soft-RoCE (rxe) and smaller HCAs
// allow per CQ, so fi_enable fails with -EINVAL. The universe size is read
// once, when libfabric initializes, from FI_UNIVERSE_SIZE; this caps it from
// the verbs devices' max_cqe before libfabric's first use in the process.
#pragma once

#include <string>

namespace hmemreg::engine {

// Call before the first fi_getinfo(). For a verbs-based provider with
// FI_UNIVERSE_SIZE unset, sets it to fit the smallest device CQ limit and
// returns a note saying so; "" when nothing was needed or possible (with a
// note if libfabric was already initialized).
std::string fit_rxm_queues(const std::string &provider);

// Record that libfabric is initialized in this process.
void note_fabric_initialized();

} // namespace hmemreg::engine
