#!/bin/bash
# The documentation against the code (tests/doc/check_docs.pl): settings
# names and defaults in README.md, docs/ and man/ as the settings table
# (mr_cache_stat --env) has them, links and anchors between the pages, the
# paths they name. Then the check itself, on copies of the pages with one
# mistake each: it must fail on every one, naming it.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
check=$HMEMREG_TOP/tests/doc/check_docs.pl
stat=$HMEMREG_BUILD/tools/mr_cache_stat
[ -x "$stat" ] || { echo "no $stat (run make)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$stat" --env --json > "$work/settings.json"
bad=0

echo "---- the pages"
if perl "$check" --top "$HMEMREG_TOP" --settings "$work/settings.json"; then
	echo "ok: settings, defaults, links and paths agree with the code"
else
	echo "FAIL: the pages disagree with the code (above)"
	bad=$((bad + 1))
fi

# A copy of the pages beside the rest of the tree, with one mistake.
# wrong WHAT FILE PERL-EXPR PATTERN: the check must fail, printing PATTERN.
wrong() {
	local what=$1 file=$2 expr=$3 pat=$4 copy=$work/copy out
	rm -rf "$copy"
	mkdir -p "$copy"
	for e in "$HMEMREG_TOP"/*; do
		case ${e##*/} in README.md | docs | man | build*) ;; *) ln -s "$e" "$copy/${e##*/}" ;; esac
	done
	cp -r "$HMEMREG_TOP/README.md" "$HMEMREG_TOP/docs" "$HMEMREG_TOP/man" "$copy/"
	perl -0pi -e "$expr" "$copy/$file"
	cmp -s "$copy/$file" "$HMEMREG_TOP/$file" && { echo "FAIL: $what: the mistake was not made"; bad=$((bad + 1)); return; }
	if out=$(perl "$check" --top "$copy" --settings "$work/settings.json"); then
		echo "FAIL: $what: the check passed"
		bad=$((bad + 1))
	elif grep -qE -- "$pat" <<<"$out"; then
		echo "ok: $what: $(grep -m1 -E -- "$pat" <<<"$out")"
	else
		echo "FAIL: $what: no /$pat/ in:"
		echo "$out"
		bad=$((bad + 1))
	fi
}
wrong "a wrong default in a man page" man/hmemreg.3 \
	's/none, error, warn \(default\)/none, error (default), warn/' \
	"HMEMREG_LOG_LEVEL: the prose says the default is 'error'"
wrong "a wrong size default in a page" docs/cache.md \
	's/(- \*\*Limits\*\*: )/$1`HMEMREG_NCCL_EAGER_MAX` (default 256k). /' \
	"HMEMREG_NCCL_EAGER_MAX: the prose says the default is '256k'"
wrong "a wrong boolean default" man/hmemreg.3 \
	's/^1 \(default\): device memory/0 (default): device memory/m' \
	"HMEMREG_WRAP_DMABUF: the prose says the default is '0'"
wrong "a setting that does not exist" README.md \
	's/(## Known issues\n)/$1\nSet `HMEMREG_MR_CACHE_MAX_ENTRIES` to grow the cache.\n/' \
	'HMEMREG_MR_CACHE_MAX_ENTRIES is not a setting'
wrong "a link to a missing page" README.md \
	's/\(docs\/install\.md\)/(docs\/installing.md)/' \
	'link to docs/installing.md: no docs/installing.md'
wrong "a link to a missing anchor" docs/testing.md \
	's/\(kmod\.md#tests\)/(kmod.md#testing)/' \
	'link to kmod.md#testing: no heading with that anchor'
wrong "a path that does not exist" docs/kmod.md \
	's/`kmod\/hmemreg_priv\.h`/`kmod\/hmemreg_private.h`/' \
	'names kmod/hmemreg_private.h, which does not exist'
wrong "a source file name that does not exist" docs/cache.md \
	's/`cache_hit\.inl`/`cache_hits.inl`/' \
	'names cache_hits.inl, which no file of the tree is'
exit $bad
