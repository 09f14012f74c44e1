#!/bin/bash
# mr_cache_stat and provider DMABUF: a wrapper whose owner died, still held
# by an importer (tests/kmod/dmabuf_orphan), is shown as dmabuf:hmemreg by
# --kernel (text and JSON inner_exporter), and --check exits 3 naming it;
# once the importer lets go, --check exits 0 and the ledger is idle.
set -u
. "$(dirname "$0")/../lib.sh"
require_vm
stat=$HMEMREG_BUILD/tools/mr_cache_stat
bad=0
kmod_load devmem_mb=8 || exit 1
importer_load || exit 1
coproc HOLD { "$HMEMREG_BUILD/tests/kmod/dmabuf_orphan"; }
read -r -t 30 word child id <&"${HOLD[0]}" || true
if [ "${word:-}" != ready ]; then
	echo "FAIL dmabuf_orphan did not get ready"
	exit 1
fi
echo "wrapper export $id of dead pid $child held by the importer"
out=$("$stat" --kernel 2>&1)
echo "$out"
grep -Eq "^$id +dmabuf:hmemreg +$child .*orphaned" <<<"$out" &&
	echo "ok   --kernel: the wrapper as dmabuf:hmemreg, orphaned" ||
	{ echo "FAIL --kernel does not show export $id as an orphaned dmabuf:hmemreg"; bad=1; }
"$stat" --kernel --json |
	jq -e ".kernel.exports[] | select(.id == $id) | .provider == \"dmabuf\" and .orphaned and .inner_exporter == \"hmemreg\"" >/dev/null &&
	echo "ok   --kernel --json: provider dmabuf, inner_exporter hmemreg, orphaned" ||
	{ echo "FAIL --kernel --json"; "$stat" --kernel --json; bad=1; }
"$stat" --kernel --check >/dev/null 2>/tmp/check.err
rc=$?
cat /tmp/check.err
[ $rc = 3 ] && grep -q "1 wrapping another exporter's dma-buf: export $id of pid $child over hmemreg" /tmp/check.err &&
	echo "ok   --check exits 3 and names the wrapper whose owner died" ||
	{ echo "FAIL --check: exit $rc"; bad=1; }
echo done >&"${HOLD[1]}"
wait "$HOLD_PID" 2>/dev/null || true
"$stat" --kernel --check >/dev/null && echo "ok   importer gone: --check exits 0" ||
	{ echo "FAIL --check after the importer let go"; bad=1; }
"$HMEMREG_BUILD/tests/kmod/hmemreg_ledger_dump" --idle >/dev/null || { echo "FAIL ledger not idle"; bad=1; }
rmmod hmemreg_importer
kmod_unload || bad=1
exit $bad
