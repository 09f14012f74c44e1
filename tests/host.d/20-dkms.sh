#!/bin/bash
# DKMS builds the module from a packaged source tree (private dkms and source
# trees, so the host's DKMS state is untouched). For another kernel than
# kmod/'s (tests/kernels/run): HMEMREG_KERNEL_KVER and HMEMREG_KERNEL_KDIR,
# its headers where they lie (dkms --kernelsourcedir).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
command -v dkms >/dev/null || { echo "SKIP: dkms not installed"; exit 77; }
kver=${HMEMREG_KERNEL_KVER:-$(make -s -C "$HMEMREG_TOP/kmod" print-kver)}
ksrc=()
[ -z "${HMEMREG_KERNEL_KDIR:-}" ] || ksrc=(--kernelsourcedir "$HMEMREG_KERNEL_KDIR")
ver=$(cat "$HMEMREG_TOP/VERSION")
work=$(mktemp -d)
mkdir -p "$work/dkms"
trap 'rm -rf "$work"' EXIT
"$HMEMREG_TOP/tools/dkms-stage" "$work/src/hmemreg-$ver"
dkms build -m hmemreg -v "$ver" -k "$kver" --sourcetree "$work/src" --dkmstree "$work/dkms" "${ksrc[@]}" 2>&1 | tail -n 5
ko=$(find "$work/dkms" -name 'hmemreg.ko*' | head -n1)
[ -n "$ko" ] || { echo "dkms build produced no hmemreg.ko"; exit 1; }
modinfo "$ko" | grep -E "^(vermagic|depends|license)"
modinfo -F vermagic "$ko" | grep -q "^$kver " || { echo "built for the wrong kernel"; exit 1; }
[ "$(modinfo -F version "$ko")" = "$ver" ] || { echo "modinfo says version $(modinfo -F version "$ko"), VERSION $ver"; exit 1; }
echo "dkms build OK for $kver"
