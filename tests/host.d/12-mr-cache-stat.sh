#!/bin/bash
# mr_cache_stat as an operator uses it, against real processes of libhmemreg:
# two caches of one process (both named "default") get distinct ids and sane
# rates; the reasons of uncached registrations shown; every JSON record has a
# time; REG_P99_LE labelled as a bound; -w on a terminal redraws in place and
# appends lines elsewhere; the engine names its rails' caches; --kernel says
# "not loaded" once and --check without the module exits 4, --exports too
# (saying so, the process side shown); --gc removes the
# stats block and shm regions of a dead process and keeps a live one's; the
# library removes a dead process's block when the next one starts; a live
# engine's shm region is locked and kept.
set -u
. "$(dirname "$0")/../lib.sh"
stat=$HMEMREG_BUILD/tools/mr_cache_stat
work=$HMEMREG_BUILD/tests/stat/stat_workload
bench=$HMEMREG_BUILD/tools/hmemreg_bench
for b in "$stat" "$work" "$bench"; do [ -x "$b" ] || { echo "missing $b (run make)"; exit 1; }; done
bad=0
fail() { echo "FAIL $*"; bad=1; }
ok() { echo "ok   $*"; }
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# start_workload SECONDS: runs stat_workload, sets $wp once it is ready.
start_workload() {
	local fifo=$tmp/ready.$RANDOM
	mkfifo "$fifo"
	"$work" "$1" >"$fifo" &
	wp=$!
	pids+=("$wp")
	read -r -t 20 line <"$fifo" || line=""
	rm -f "$fifo"
	[ "$line" = ready ]
}

start_workload 30 || { echo "FAIL stat_workload did not start"; exit 1; }
live=$wp

# ---- two caches, one process: ids, rates, reasons (lines appended: not a tty)
out=$("$stat" -p "$live" -w 0.3 -c 4 2>&1)
rows=$(grep -E "^[0-9:]{8} +$live " <<<"$out")
ids=$(awk '{print $4}' <<<"$rows" | sort -u | tr '\n' ' ')
if [ "$(wc -l <<<"$rows")" != 8 ] || [ "$ids" != "1 2 " ]; then
	fail "-w: want 4 samples x 2 caches with ids 1 and 2, got ids '$ids':"
	echo "$out"
else
	ok "-w appends one line per cache per sample, ids $ids"
fi
# HIT/s is column 11 (TIME PID COMM ID NAME MON ENTRIES BYTES HITS MISSES HIT/s); the
# first sample has no rate yet
rates=$(awk 'NR > 2 {print $11}' <<<"$rows" | tr '\n' ' ')
if grep -q 18446744073709551616 <<<"$out" || ! awk 'NR > 2 { if ($11 == "-" || $11 < 0 || $11 > 1e7) exit 1 }' <<<"$rows"; then
	fail "-w: rates not sane: '$rates'"
	echo "$out"
else
	ok "-w: hit rates of both caches sane ($rates/s)"
fi
grep -q "REG_P99_LE" <<<"$out" && grep -Eq '<=[0-9.]+us' <<<"$rows" && ok "REG_P99_LE is printed as a bound (<=)" ||
	fail "REG_P99_LE column or its <= missing"
grep -Eq " default +none .* limit=1$" <<<"$rows" && ok "uncached registration shown with its reason (limit=1)" ||
	fail "no 'limit=1' under WHY_UNCACHED"
once=$("$stat" -p "$live" 2>&1)
grep -q "1 registration(s) uncached by reason: limit=1" <<<"$once" && ok "one sample explains the uncached registration" ||
	{ fail "one sample does not explain the uncached registration"; echo "$once"; }

# ---- JSON: a time in every record, distinct ids, rates known after the first
json=$("$stat" -p "$live" --json -w 0.3 -c 3 2>/dev/null)
n=$(grep -c '^{"schema":1,"time":[0-9]\{10\}' <<<"$json")
ids=$(grep -o '"id":[0-9]*,"name":"default"' <<<"$json" | sort -u | wc -l)
hr=$(grep -o '"hits_per_s":[-0-9.e+]*' <<<"$json" | cut -d: -f2)
if [ "$n" != 3 ] || [ "$ids" != 2 ] || [ "$(wc -l <<<"$hr")" != 4 ] ||
	! awk '{ if ($1 < 0 || $1 > 1e7) exit 1 }' <<<"$hr"; then
	fail "--json -w: $n of 3 records with a time, $ids ids, hit rates: $(echo $hr)"
	echo "$json" | cut -c1-300
else
	ok "--json -w: every record has a time, 2 ids, 4 rates ($(echo $hr | tr ' ' ','))"
fi
for args in "--kernel --json" "--gc --dry-run --json"; do
	# shellcheck disable=SC2086
	"$stat" $args 2>/dev/null | grep -q '^{"schema":1,"time":[0-9]\{10\}' && ok "$args: record has a time" ||
		fail "$args: record without a time"
done

# ---- live view on a terminal: redrawn in place, no TIME column
if script -qec "$stat -p $live -w 0.2 -c 3" /dev/null >"$tmp/tty" 2>&1; then
	homes=$(grep -o $'\033\[H' "$tmp/tty" | wc -l)
	if [ "$homes" = 3 ] && grep -q "every 0.2 s" "$tmp/tty" && ! grep -q "^ *TIME" "$tmp/tty"; then
		ok "-w on a terminal redraws in place ($homes redraws)"
	else
		fail "-w on a terminal: $homes cursor-home sequences for 3 samples"
		cat -v "$tmp/tty" | head -20
	fi
else
	fail "script(1) could not run mr_cache_stat on a pseudo-terminal"
fi

# ---- the engine's caches, one per rail, named after rail, provider, domain
"$bench" xfer --provider 'tcp;ofi_rxm' --rails 2 --min 64k --max 64k --chunks 1 --repeat 1 --seconds 2 \
	>"$tmp/bench" 2>&1 &
bp=$!
pids+=("$bp")
names=""
for _ in $(seq 50); do
	names=$("$stat" -p "$bp" --json 2>/dev/null | grep -o '"name":"rail[0-9] [^"]*"' | sort -u | tr '\n' ' ')
	grep -q rail1 <<<"$names" && break
	sleep 0.2
done
wait "$bp"
grep -Eq '^"name":"rail0 tcp;ofi_rxm [^"]+" "name":"rail1 tcp;ofi_rxm [^"]+" $' <<<"$names" &&
	ok "engine caches named per rail: $names" || fail "engine cache names: '$names'"

# ---- a live engine's libfabric shm regions: locked, and kept by --gc
"$bench" xfer --provider shm --min 64k --max 64k --chunks 1 --repeat 1 --seconds 2 >"$tmp/bench" 2>&1 &
bp=$!
pids+=("$bp")
region=""
for _ in $(seq 50); do
	region=$(ls /dev/shm/hmemreg_"$bp"_* 2>/dev/null | head -1)
	[ -n "$region" ] && break
	sleep 0.1
done
# fi_enable makes the region, the engine locks it next: give it a moment.
locked=0
for _ in $(seq 30); do
	[ -n "$region" ] && ! flock -n -x "$region" true && { locked=1; break; }
	sleep 0.05
done
if [ -z "$region" ]; then
	fail "the shm engine made no /dev/shm/hmemreg_${bp}_* region"
elif [ $locked = 0 ]; then
	fail "$region is not locked by its live process"
elif "$stat" --gc >/dev/null && [ -e "$region" ]; then
	ok "a live engine's shm region is locked and --gc keeps it"
else
	fail "--gc removed the live region $region"
fi
wait "$bp"

# ---- the kernel ledger, without the module
if "$stat" --kernel >"$tmp/k.out" 2>"$tmp/k.err"; then
	echo "SKIP --check without the module: hmemreg.ko is loaded here"
else
	said=$(cat "$tmp/k.out" "$tmp/k.err" | grep -c "not loaded")
	[ "$said" = 1 ] && ok "--kernel says 'not loaded' once" || fail "--kernel says 'not loaded' $said times"
	"$stat" --check >"$tmp/c.out" 2>"$tmp/c.err"
	rc=$?
	if [ $rc = 4 ] && grep -q "could not check" "$tmp/c.err" && [ "$(grep -c "not loaded" "$tmp/c.out" "$tmp/c.err" |
		awk -F: '{s += $2} END {print s}')" = 1 ]; then
		ok "--check without the module: exit 4, '$(cat "$tmp/c.err")'"
	else
		fail "--check without the module: exit $rc, stderr '$(cat "$tmp/c.err")'"
	fi
	# --exports: the process side alone, the kernel side said missing, exit 4
	"$stat" --exports -p "$live" >"$tmp/x.out" 2>&1
	rc=$?
	if [ $rc = 4 ] && grep -q "^kernel: .*not loaded" "$tmp/x.out" &&
		grep -q "no cache holds registrations of hmemreg.ko exports" "$tmp/x.out"; then
		ok "--exports without the module: exit 4, '$(head -1 "$tmp/x.out")'"
	else
		fail "--exports without the module: exit $rc:"; cat "$tmp/x.out"
	fi
	"$stat" --exports --json >"$tmp/x.json" 2>&1
	rc=$?
	if [ $rc = 4 ] && grep -q '"view":"exports","kernel":{"loaded":false,"error":"[^"]*not loaded' "$tmp/x.json" &&
		grep -q '"exports":\[\],"missing_in_kernel":0' "$tmp/x.json"; then
		ok "--exports --json without the module: exit 4, loaded false, no rows"
	else
		fail "--exports --json without the module: exit $rc:"; cat "$tmp/x.json"
	fi
fi
"$stat" --exports -w 1 >/dev/null 2>&1
rc=$?
[ $rc = 2 ] && ok "--exports -w: usage error (exit 2)" || fail "--exports -w: exit $rc, want 2"

# ---- --gc: a dead process's block and regions go, a live one's stay
start_workload 30 || fail "second stat_workload did not start"
dead=$wp
{ kill -9 "$dead" && wait "$dead"; } 2>/dev/null
: >"/dev/shm/hmemreg_${dead}_1"
: >"/dev/shm/hmemreg_${live}_1"
if [ ! -e "/dev/shm/hmemreg-stats.$dead" ]; then
	fail "the killed process left no stats block to collect"
else
	dry=$("$stat" --gc --dry-run)
	if grep -q "stale /dev/shm/hmemreg-stats.$dead " <<<"$dry" && [ -e "/dev/shm/hmemreg-stats.$dead" ]; then
		ok "--gc --dry-run lists the dead block and keeps it"
	else
		fail "--gc --dry-run:"; echo "$dry"
	fi
	gc=$("$stat" --gc)
	if grep -q "removed /dev/shm/hmemreg-stats.$dead (stats block of dead pid $dead" <<<"$gc" &&
		grep -q "removed /dev/shm/hmemreg_${dead}_1 (libfabric shm region" <<<"$gc" &&
		[ ! -e "/dev/shm/hmemreg-stats.$dead" ] && [ ! -e "/dev/shm/hmemreg_${dead}_1" ] &&
		[ -e "/dev/shm/hmemreg-stats.$live" ] && [ -e "/dev/shm/hmemreg_${live}_1" ]; then
		ok "--gc removed the dead pid's block and region, kept the live ones ($(tail -1 <<<"$gc"))"
	else
		fail "--gc:"; echo "$gc"; ls -l /dev/shm | grep -E "hmemreg.*($dead|$live)"
	fi
fi
rm -f "/dev/shm/hmemreg_${live}_1"

# ---- the library removes a dead process's files when the next one starts
start_workload 30 || fail "third stat_workload did not start"
dead=$wp
{ kill -9 "$dead" && wait "$dead"; } 2>/dev/null
: >"/dev/shm/hmemreg_${dead}_7"
[ -e "/dev/shm/hmemreg-stats.$dead" ] || fail "the killed process left no stats block"
start_workload 1 || fail "fourth stat_workload did not start"
if [ ! -e "/dev/shm/hmemreg-stats.$dead" ] && [ ! -e "/dev/shm/hmemreg_${dead}_7" ] &&
	[ -e "/dev/shm/hmemreg-stats.$live" ]; then
	ok "a new process removed the dead one's block and region at start"
else
	fail "after a new process started: $(ls /dev/shm | grep -E "hmemreg.*$dead" | tr '\n' ' ')"
fi
wait "$wp"

kill "$live" 2>/dev/null
wait "$live" 2>/dev/null
exit $bad
