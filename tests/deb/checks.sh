# Sourced by tests/host.d/27-deb.sh and tests/deb/in-vm.sh: checks of an
# installed root. The caller defines inroot (runs a command in that root) and
# bad (the count of failed checks).

# check WHAT CMD...: CMD run in the root must succeed.
check() {
	local what=$1; shift
	if inroot "$@"; then echo "ok: $what"; else echo "FAIL: $what"; bad=$((bad + 1)); fi
}
# check_out WHAT REGEX CMD...: CMD's output (shown) must match REGEX.
check_out() {
	local what=$1 re=$2 out
	shift 2
	out=$(inroot "$@" 2>&1) || true
	printf '%s\n' "$out"
	if grep -Eq "$re" <<<"$out"; then echo "ok: $what"; else echo "FAIL: $what"; bad=$((bad + 1)); fi
}
