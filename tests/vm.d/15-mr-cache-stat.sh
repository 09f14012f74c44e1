#!/bin/bash
# mr_cache_stat with hmemreg.ko loaded (the host lane 12-mr-cache-stat runs
# without it): the ledger is read and said once, --check passes on an idle
# ledger (exit 0) while a process of libhmemreg runs, JSON says loaded with a
# time; after rmmod, --check exits 4 again.
set -u
. "$(dirname "$0")/../lib.sh"
require_vm
stat=$HMEMREG_BUILD/tools/mr_cache_stat
work=$HMEMREG_BUILD/tests/stat/stat_workload
bad=0
kmod_load || exit 1
"$work" 20 >/tmp/work.out &
wp=$!
for _ in $(seq 50); do grep -q ready /tmp/work.out && break; sleep 0.1; done
out=$("$stat" -p "$wp" --check 2>&1)
rc=$?
echo "$out"
if [ $rc = 0 ] && grep -q "^kernel: [0-9]* exports" <<<"$out" && ! grep -q "not loaded" <<<"$out" &&
	[ "$(grep -Ec "^ +$wp " <<<"$out")" = 2 ]; then
	echo "ok   --check with the module loaded and an idle ledger: exit 0, both caches listed"
else
	echo "FAIL --check with the module loaded: exit $rc"
	bad=1
fi
json=$("$stat" --kernel --json --check)
rc=$?
grep -q '^{"schema":1,"time":[0-9.]*,"kernel":{"loaded":true,"stats":{"exports_live":' <<<"$json" && [ $rc = 0 ] &&
	echo "ok   --kernel --json: loaded, with a time" || { echo "FAIL --kernel --json (exit $rc): $json"; bad=1; }
kill "$wp"
wait "$wp"
kmod_unload
"$stat" --kernel --check >/dev/null 2>/tmp/err
rc=$?
[ $rc = 4 ] && grep -q "could not check" /tmp/err && echo "ok   after rmmod: --check exits 4" ||
	{ echo "FAIL after rmmod: --check exit $rc: $(cat /tmp/err)"; bad=1; }
exit $bad
