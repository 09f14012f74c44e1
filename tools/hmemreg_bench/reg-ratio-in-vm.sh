#!/bin/bash
# Where a registration's time goes, in one VM boot: hmemreg_bench reg for
# hmemreg.ko devmem exports (FI_MR_DMABUF over hmemreg's rdma_rxe) and for
# host memory (verbs over the same rxe0: ibv_reg_mr pins; tcp: no NIC, so
# its cold registration is only libfabric's bookkeeping), the guest's
# syscall cost (perf bench syscall basic), and the kernel's share of a cold
# dma-buf registration (ftrace function_graph, depth 1, on the uverbs entry
# points while the export bench registers and deregisters).
#   HMEMREG_VM_LOCK=... tests/vm/run -t 900 tools/hmemreg_bench/reg-ratio-in-vm.sh
# The same bench run on the host (no VM) gives the emulator's slowdown of
# the user-space hit: compare the tcp rows.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/lib.sh"
require_vm
bench=$HMEMREG_BUILD/tools/hmemreg_bench
lf2=${HMEMREG_LIBFABRIC2:-}
if [ -z "$lf2" ]; then
	for d in /var/cache/hmemreg/libfabric-2.6.0-*/.done; do [ -e "$d" ] && lf2=$(dirname "$d"); done
fi
[ -n "$lf2" ] || { echo "SKIP: no libfabric 2.6.0 built (tools/vendor/build-libfabric)"; exit 77; }
verbs=$("$top/softroce/build-rdma-core" --built) || { echo "SKIP: make softroce first"; exit 77; }
kmod_load devmem_mb=64
soft_roce rxe0 hmq 10.217.0 || { echo "SKIP: no Soft-RoCE"; exit 77; }
export LD_LIBRARY_PATH=$lf2/lib:$verbs/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
grep -m1 -o 'hypervisor' /proc/cpuinfo >/dev/null && echo "cpu: $(grep -m1 'model name' /proc/cpuinfo)"

echo "---- syscall cost in this guest"
perf bench syscall basic 2>&1 | grep -E 'usecs/op' || echo "perf bench not available"
echo "---- reg, host memory, tcp (no NIC: the user-space hit and libfabric's bookkeeping)"
"$bench" reg --mem host --provider tcp --sizes 64k,1m,8m --iters 200
echo "---- reg, host memory, verbs on rxe0 (cold = ibv_reg_mr + ibv_dereg_mr: pins and unpins)"
"$bench" reg --mem host --provider verbs --sizes 64k,1m,8m --iters 50
echo "---- reg, hmemreg.ko devmem exports, verbs on rxe0 (cold = ibv_reg_dmabuf_mr + ibv_dereg_mr)"
"$bench" reg --mem export --provider verbs --sizes 64k,1m,8m --iters 50

# The kernel's share: each traced function's calls and mean duration while
# one size is registered cold and missed (20 + 20 reg/dereg pairs, 10 + 10
# at 8m; a few more uverbs calls open and close the domain). Depth 1: the
# uverbs entry points (all the kernel does for a call but the syscall entry;
# libfabric's verbs domain open adds about a thousand short ones: a GID
# table query each), then the rxe driver's own reg/dereg (two calls a pair).
t=/sys/kernel/tracing
[ -d $t/events ] || mount -t tracefs nodev $t 2>/dev/null || true
traced() { # LABEL FUNCS BENCH-ARGS...
	local label=$1 funcs=$2
	shift 2
	echo 0 >$t/tracing_on
	echo function_graph >$t/current_tracer
	echo 1 >$t/max_graph_depth
	tr ' ' '\n' <<<"$funcs" >$t/set_graph_function
	echo 16384 >$t/buffer_size_kb
	: >$t/trace
	echo 1 >$t/tracing_on
	"$bench" reg "$@" --json >/tmp/rr.json
	echo 0 >$t/tracing_on
	awk -v label="$label" '/\(\);/ {
		f = $NF ~ /^\[/ ? $(NF - 1) : $NF; sub(/\(\);/, "", f) # "func(); [module]"
		for (i = 1; i < NF; i++) if ($(i + 1) == "us") { n[f]++; s[f] += $i; break } }
		END { for (f in n) printf "kernel %s: %-24s %5d calls, mean %9.2f us\n", label, f, n[f], s[f] / n[f] }' $t/trace
	grep -o '"case":"[a-z]*","ns_per_op":[0-9.]*' /tmp/rr.json | sed "s/^/bench  $label: /"
}
if [ -w $t/set_graph_function ]; then
	for sz in 64k 8m; do
		traced "export $sz" "ib_uverbs_ioctl ib_uverbs_write" --mem export --provider verbs --sizes $sz --iters 20
		traced "export $sz" "rxe_reg_user_mr_dmabuf rxe_dereg_mr" --mem export --provider verbs --sizes $sz --iters 20
		traced "host $sz" "ib_uverbs_ioctl ib_uverbs_write" --mem host --provider verbs --sizes $sz --iters 20
	done
	echo nop >$t/current_tracer
else
	echo "no tracefs here: kernel share not measured"
fi
"$HMEMREG_BUILD/tests/kmod/hmemreg_ledger_dump" --idle
