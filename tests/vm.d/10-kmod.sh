#!/bin/bash
# hmemreg.ko under Debian's kernel: load, ABI suite, unload, nothing left.
set -e
. "$(dirname "$0")/../lib.sh"
require_vm
kmod_load
run_suites "$HMEMREG_BUILD"/tests/kmod/test_kmod_*
kmod_unload
[ ! -e /dev/hmemreg ] || { echo "/dev/hmemreg still present after rmmod"; exit 1; }
