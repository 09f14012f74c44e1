#!/bin/bash
# Unit suites: cache semantics, C API; no module, no fabric needed.
set -e
. "$(dirname "$0")/../lib.sh"
run_suites "$HMEMREG_BUILD"/tests/unit/test_*
