#!/bin/bash
# hmemreg_bench plot: PNGs from the --json rows of short real runs (xfer
# over shm with its reference and ceiling, cache beside UCX), checked by
# file(1); a line that is not JSON and an input without rows are refused.
set -u
. "$(dirname "$0")/../lib.sh"
bench=$HMEMREG_BUILD/tools/hmemreg_bench
[ -x "$bench" ] || { echo "missing $bench (run make)"; exit 1; }
command -v gnuplot >/dev/null || { echo "gnuplot missing (make deps installs gnuplot-nox)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0
"$bench" xfer --json --provider shm --min 64k --max 256k --chunks 1 --repeat 1 --seconds 0.05 >"$tmp/xfer.json" 2>&1 ||
	{ echo "FAIL bench xfer"; tail "$tmp/xfer.json"; bad=1; }
"$bench" cache --json --entries 1,64 --iters 20000 --miss-iters 2000 --reps 1 >"$tmp/cache.json" 2>&1 ||
	{ echo "FAIL bench cache"; tail "$tmp/cache.json"; bad=1; }
out=$("$bench" plot -o "$tmp/png" "$tmp/xfer.json" - <"$tmp/cache.json" 2>&1)
rc=$?
for png in xfer-shm-host cache-hit cache-miss; do
	f=$tmp/png/$png.png
	if [ $rc = 0 ] && file "$f" | grep -q "PNG image data" && grep -qx "$f" <<<"$out" && [ -s "$tmp/png/$png.gp" ]; then
		echo "ok   $png.png: $(file -b "$f" | cut -d, -f1-2)"
	else
		echo "FAIL $png.png (plot exit $rc): $(file "$f" 2>&1)"
		echo "$out"
		bad=1
	fi
done
grep -q "ceiling: cma" "$tmp/png/xfer-shm-host.gp" && grep -q "reference: " "$tmp/png/xfer-shm-host.gp" &&
	grep -q "'ucx, 1 thread(s)'" "$tmp/png/cache-hit.gp" && echo "ok   reference, ceiling and UCX lines drawn" ||
	{ echo "FAIL reference, ceiling or UCX line missing"; bad=1; }

printf '# text\n{"bench": "cache", "entries": 1,\n' >"$tmp/broken.json"
err=$("$bench" plot -o "$tmp/png2" "$tmp/broken.json" 2>&1)
rc=$?
[ $rc = 1 ] && grep -q "broken.json:2: not a JSON object" <<<"$err" && echo "ok   a broken row is named: $err" ||
	{ echo "FAIL broken row: exit $rc, '$err'"; bad=1; }
err=$(echo "no rows here" | "$bench" plot -o "$tmp/png3" 2>&1)
rc=$?
[ $rc = 1 ] && grep -q "no rows to draw" <<<"$err" && [ ! -e "$tmp/png3" ] && echo "ok   no rows: exit 1, nothing written" ||
	{ echo "FAIL no rows: exit $rc, '$err'"; bad=1; }
exit $bad
