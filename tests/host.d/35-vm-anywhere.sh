#!/bin/bash
# The VM lanes from a checkout where the guest lays its own tmpfs: a copy of
# this working tree under /root (where `git clone` puts it for root), with the
# module and the kmod suites built in it, runs `tests/run vm`'s kmod lane from
# there; the same tree moved under /var/tmp runs it again. Before the harness
# shared the checkout into the guest, both failed with "FAIL exit 1".
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
command -v qemu-system-x86_64 >/dev/null || { echo "SKIP: no qemu-system-x86_64 (install qemu-system-x86)"; exit 77; }
[ -w /root ] && [ -w /var/tmp ] || { echo "SKIP: needs to write under /root and /var/tmp (run as root)"; exit 77; }

home=$(mktemp -d /root/hmemreg-anywhere.XXXXXX)
spool=$(mktemp -d /var/tmp/hmemreg-anywhere.XXXXXX)
trap 'rm -rf "$home" "$spool"' EXIT

# The working tree as it is (tracked files, uncommitted edits included).
tree=$home/hmemreg
mkdir "$tree"
git -C "$HMEMREG_TOP" ls-files -z | tar -C "$HMEMREG_TOP" --null -T - -cf - | tar -C "$tree" -xf -

echo "---- building the module and the kmod suites in $tree"
make -s -C "$tree" kmod >/dev/null
cmake -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
suites=$(cd "$tree/tests/kmod" && ls test_kmod_*.c | sed 's/\.c$//')
# shellcheck disable=SC2086
cmake --build "$tree/build" -j "$(nproc)" --target $suites hmemreg_ledger_dump >/dev/null

# Run as a new user would: nothing of this checkout in the environment.
run_from() {
	echo "---- tests/run vm from $1"
	(cd "$1" && env -u HMEMREG_TOP -u HMEMREG_BUILD -u HMEMREG_KMOD_DIR \
		HMEMREG_TESTS='10-kmod' tests/run vm) | tee "$1.log"
	grep -qE '^vm +PASS +10-kmod' "$1.log" || { echo "FAIL: the kmod lane did not pass from $1"; return 1; }
}
run_from "$tree"
mv "$tree" "$spool/hmemreg"
run_from "$spool/hmemreg"
echo "PASS: VM lanes run from checkouts under /root and /var/tmp"
