#!/bin/bash
# hmemreg_bench xfer end to end, briefly (figures come from longer runs, not
# from here): both providers, target in this process and in a child process,
# every row verified byte for byte, with its fields and a measured reference.
set -u
. "$(dirname "$0")/../lib.sh"
bench=$HMEMREG_BUILD/tools/hmemreg_bench
[ -x "$bench" ] || { echo "missing $bench (run make)"; exit 1; }
command -v iperf3 >/dev/null || { echo "iperf3 missing (make deps): it is tcp's reference"; exit 1; }
bad=0
for procs in 1 2; do
	out=$("$bench" xfer --json --procs $procs --min 64k --max 256k --chunks 1,16 --repeat 1 --seconds 0.05 \
		--verify 2>&1)
	rc=$?
	rows=$(grep -c '^{"bench": "xfer"' <<<"$out")
	good=$(grep '^{"bench": "xfer"' <<<"$out" | grep '"verified": "yes"' | grep "\"procs\": $procs," |
		grep -v '"gbps": 0.00,' | grep -v '"ref_gbps": 0.00,' | grep -c '"pct_ref": ')
	# 2 providers x 2 sizes x 2 chunk counts
	if [ $rc != 0 ] || [ "$rows" != 8 ] || [ "$good" != 8 ]; then
		echo "FAIL xfer --procs $procs: exit $rc, $rows rows, $good complete"
		echo "$out" | tail -20
		bad=1
	else
		echo "ok   xfer --procs $procs: $rows rows verified"
	fi
done
# Bad input: a clear message and a non-zero exit.
if "$bench" xfer --procs 2 --mem cuda 2>/dev/null; then
	echo "FAIL xfer --procs 2 --mem cuda was accepted"
	bad=1
fi
if ! "$bench" xfer --procs 3 2>&1 | grep -q usage; then
	echo "FAIL xfer --procs 3 did not print the usage"
	bad=1
fi
exit $bad
