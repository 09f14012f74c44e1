#!/bin/bash
# The module's style gates: W=1, sparse, checkpatch --strict.
set -e
. "$(dirname "$0")/../lib.sh"
"$HMEMREG_TOP/kmod/check-style"
# check-style cleans the tree; put the module back for the VM lane.
make -s -C "$HMEMREG_TOP" kmod >/dev/null
