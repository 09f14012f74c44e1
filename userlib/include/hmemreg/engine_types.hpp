// SPDX-License-Identifier: MIT
// libhmemreg: the C++ names of engine.h's blobs and peer handles, one
// definition for hmemreg/engine.hpp and for the library's own engine.
#pragma once

#include <cstdint>
#include <vector>

namespace hmemreg {

using Bytes = std::vector<uint8_t>; // an address or descriptor blob
using PeerId = uint64_t;            // engine-local handle of a peer, never 0
constexpr PeerId kUnknownPeer = 0;  // messages from a sender not added here

} // namespace hmemreg
