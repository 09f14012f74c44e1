#!/bin/bash
# Settings as an application sees them: the library's load-time code against
# the environment (through the shared library), mr_cache_stat --env, and the
# sources reading no HMEMREG_* name that the settings table lacks, and the
# NCCL plugin's numeric defaults as the table has them.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
probe=$HMEMREG_BUILD/tests/unit/settings_probe
stat=$HMEMREG_BUILD/tools/mr_cache_stat
bad=0
fail() { echo "FAIL: $*"; bad=$((bad + 1)); }
# expect NAME "ENV..." PATTERN: the probe's stdout+stderr under ENV matches PATTERN.
expect() {
	local what=$1 envs=$2 pat=$3 out
	out=$(env -u HMEMREG_LOG_LEVEL $envs "$probe" 2>&1) || { fail "$what: probe exited $?"; return; }
	grep -qE -- "$pat" <<<"$out" && echo "ok: $what" || { fail "$what: no /$pat/ in:"; echo "$out"; }
}
refuse() {
	local what=$1 envs=$2 pat=$3 out
	out=$(env -u HMEMREG_LOG_LEVEL $envs "$probe" 2>&1) || true
	! grep -qE -- "$pat" <<<"$out" && echo "ok: $what" || { fail "$what: /$pat/ in:"; echo "$out"; }
}

expect "providers' MR cache off by default" "" '^FI_MR_CACHE_MONITOR=disabled$'
expect "KEEP_PROVIDER_MR_CACHE=no means no" "HMEMREG_KEEP_PROVIDER_MR_CACHE=no" '^FI_MR_CACHE_MONITOR=disabled$'
expect "KEEP_PROVIDER_MR_CACHE=yes keeps it" "HMEMREG_KEEP_PROVIDER_MR_CACHE=yes" '^FI_MR_CACHE_MONITOR=\(unset\)$'
expect "a bad boolean is refused by name" "HMEMREG_KEEP_PROVIDER_MR_CACHE=maybe" \
	"warn:settings: HMEMREG_KEEP_PROVIDER_MR_CACHE='maybe' is not a boolean"
expect "a typo is named, with the setting meant" "HMEMREG_MR_CACHE_MAXCOUNT=3" \
	'HMEMREG_MR_CACHE_MAXCOUNT is not a setting \(ignored\); did you mean HMEMREG_MR_CACHE_MAX_COUNT\?'
expect "an unknown name under an owned prefix" "HMEMREG_NCCL_RAIL=2" 'HMEMREG_NCCL_RAIL is not a setting'
refuse "test harness variables are not reported" "HMEMREG_TESTS=x HMEMREG_IN_VM=0" 'is not a setting'
refuse "HMEMREG_LOG_LEVEL=error silences warnings" "HMEMREG_LOG_LEVEL=error HMEMREG_MR_CACHE_MAXCOUNT=3" 'warn:'
expect "HMEMREG_LOG_LEVEL=debug" "HMEMREG_LOG_LEVEL=debug" '^log_level=4$'
expect "a bad log level says so" "HMEMREG_LOG_LEVEL=loud" "HMEMREG_LOG_LEVEL='loud' is not one of"
expect "cache sizes take KiB" "HMEMREG_MR_CACHE_MAX_COUNT=1KiB" '^max_count=1024$'
expect "a bad cache size is refused" "HMEMREG_MR_CACHE_MAX_COUNT=12q" "config_init=-1|MAX_COUNT='12q' is not a size"

# mr_cache_stat --env: every setting, defaults and values.
out=$(HMEMREG_MR_CACHE_MAX_COUNT=77 "$stat" --env)
grep -q '^HMEMREG_MR_CACHE_MAX_COUNT=77$' <<<"$out" && grep -q '^# HMEMREG_NCCL_RAILS=$' <<<"$out" &&
	echo "ok: --env lists values and unset settings" || fail "--env listing"
json=$("$stat" --env --json)
jq -e '.time > 0 and (.settings | length) > 10' <<<"$json" >/dev/null &&
	echo "ok: --env --json" || fail "--env --json"

# Every HMEMREG_* name the library and the plugin read is in the table.
listed=$(jq -r '.settings[].name' <<<"$json")
read_names=$(grep -rhoE --exclude-dir=settings '"HMEMREG_[A-Z0-9_]+"' "$HMEMREG_TOP/userlib/src" "$HMEMREG_TOP/plugins" | tr -d '"' | sort -u)
missing=$(comm -23 <(echo "$read_names") <(echo "$listed" | sort -u))
[ -z "$missing" ] && echo "ok: every name read is a listed setting" || fail "read but not in the settings table: $missing"

# The plugin's numeric defaults (config.hpp: "x = N; // NAME: ...") are the table's.
compared=0 before=$bad
while read -r name value; do
	listed_default=$(jq -r --arg n "HMEMREG_NCCL_$name" '.settings[] | select(.name == $n) | .default' <<<"$json")
	compared=$((compared + 1))
	[ "${listed_default%% *}" = "$value" ] ||
		fail "HMEMREG_NCCL_$name: the plugin's default is $value, the settings table says '$listed_default'"
done < <(perl -ne 'print "$2 $1\n" if m{=\s*([0-9]+)\s*;\s*//\s*([A-Z_]+):}' "$HMEMREG_TOP/plugins/nccl/src/config.hpp")
if [ $compared -lt 3 ]; then
	fail "found $compared plugin defaults in config.hpp to compare (expected SPEED_MBPS, LATENCY_US, MAX_REQUESTS, ...)"
elif [ $bad = "$before" ]; then
	echo "ok: the plugin's $compared numeric defaults are the table's"
fi
exit $bad
