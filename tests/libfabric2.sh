# Sourced by lanes that run again on libfabric 2.6.0 (see tools/vendor/build-libfabric).
#   libfabric2_env      find it (HMEMREG_LIBFABRIC2=PREFIX, else build or reuse the
#                       cache), export HMEMREG_LIBFABRIC2 and put it first on
#                       LD_LIBRARY_PATH; false (with the reason) when there is none
#                       or HMEMREG_LIBFABRIC2=none
#   libfabric2_env_end  restore LD_LIBRARY_PATH
#   libfabric_version   the version the loaded libfabric reports ("1.17.0", "2.6.0")
libfabric2_env() {
	local p=${HMEMREG_LIBFABRIC2:-}
	libfabric2_saved_ld=${LD_LIBRARY_PATH-}
	[ "$p" = none ] && return 1
	if [ -z "$p" ]; then
		p=$("${HMEMREG_TOP:-$(dirname "${BASH_SOURCE[0]}")/..}/tools/vendor/build-libfabric") || {
			echo "no libfabric 2.6.0: tools/vendor/build-libfabric failed"; return 1; }
	fi
	[ -e "$p/lib/libfabric.so.1" ] || { echo "no $p/lib/libfabric.so.1"; return 1; }
	export HMEMREG_LIBFABRIC2=$p
	export LD_LIBRARY_PATH=$p/lib${libfabric2_saved_ld:+:$libfabric2_saved_ld}
	export FI_PROVIDER_PATH=$p/lib/libfabric
}
libfabric2_env_end() {
	export LD_LIBRARY_PATH=$libfabric2_saved_ld
	unset FI_PROVIDER_PATH
}
libfabric_version() {
	# fi_version() of the libfabric the dynamic loader picks for our binaries.
	python3 -c 'import ctypes; v = ctypes.CDLL("libfabric.so.1").fi_version(); print("%d.%d" % (v >> 16, v & 0xffff))' \
		2>/dev/null || echo "?"
}
