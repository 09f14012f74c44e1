#!/bin/bash
# NCCL itself through the plugin: PyTorch's collectives (tests/gpu/nccl_torch.py),
# NCCL's own kernels and proxy on every byte, every result checked exactly.
# With one GPU both ranks share it, each with its own NCCL_HOSTID, so NCCL
# sees two hosts and uses its network transport; with two or more GPUs a
# second round runs one rank per GPU. Transports, each against NCCL's Socket
# transport in the same run:
#   shm-gdr   libfabric 2.6.0 shm, NCCL_NET_GDR_LEVEL=SYS: NCCL would hand
#             the plugin GPU buffers, but it offers HOST only over shm (shm
#             copies device memory with CUDA calls; its INFO line says so)
#   shm-host  the same, GDR off: NCCL copies through host buffers
#   tcp-host  tcp;ofi_rxm on loopback (system libfabric)
#   ofi       aws-ofi-nccl over tcp, where the bundle carries it
# A run that does not finish within HMEMREG_NCCL_TORCH_LIMIT seconds (60)
# is a hang: each rank's threads (name, kernel wait channel, system call),
# the plugin's state (HMEMREG_NCCL_STALL_MS, a third of the limit), its
# Python stacks and, where cuda-gdb is, its native stacks are printed,
# then its process group is killed and nothing may be left on the GPU.
# HMEMREG_NCCL_TORCH_MPS=1 runs shm-gdr and socket again under MPS (private
# pipe and log folders, stopped at the end). HMEMREG_NCCL_TORCH_ONLY="LABEL..."
# runs only those; HMEMREG_NCCL_PLUGIN_DIR takes another build's plugin. Rows: $HMEMREG_GPU_OUT (or a
# temporary folder), one .jsonl and one NCCL log per run.
set -u
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../libfabric2.sh"
if ! ldconfig -p | grep -q 'libcuda\.so\.1'; then
	echo "SKIP: needs an NVIDIA GPU (no libcuda.so.1)"; exit 77
fi
if ! python3 -c 'import torch, torch.distributed as d; assert torch.cuda.is_available() and d.is_nccl_available()' 2>/dev/null; then
	echo "SKIP: needs PyTorch with CUDA and NCCL"; exit 77
fi
plugin_dir=${HMEMREG_NCCL_PLUGIN_DIR:-$HMEMREG_BUILD/plugins/nccl}
[ -f "$plugin_dir/libnccl-net-hmemreg.so" ] || { echo "missing $plugin_dir/libnccl-net-hmemreg.so (run make)"; exit 1; }
script=$HMEMREG_TOP/tests/gpu/nccl_torch.py
out=${HMEMREG_GPU_OUT:-$(mktemp -d)}
mkdir -p "$out"
limit=${HMEMREG_NCCL_TORCH_LIMIT:-60}
only=${HMEMREG_NCCL_TORCH_ONLY:-}
extra=${HMEMREG_NCCL_TORCH_EXTRA:-}
with_mps=${HMEMREG_NCCL_TORCH_MPS:-0}
# The suite's own knobs stop here: in the ranks the plugin would warn that
# they are not settings (they share its HMEMREG_NCCL_ prefix).
unset HMEMREG_NCCL_TORCH_LIMIT HMEMREG_NCCL_TORCH_ONLY HMEMREG_NCCL_TORCH_EXTRA HMEMREG_NCCL_TORCH_MPS
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
lf2=""
if libfabric2_env >/dev/null; then
	lf2=$HMEMREG_LIBFABRIC2
	libfabric2_env_end
fi

# NVLink multicast stays off (it can take a shared host's GPUs down); no
# InfiniBand; loopback sockets.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET PYTHONUNBUFFERED=1
export MASTER_ADDR=127.0.0.1

# A process and its descendants (torchrun starts its workers in sessions of
# their own: a process group does not hold them).
tree() {
	local c
	echo "$1"
	for c in $(ps -o pid= --ppid "$1"); do tree "$c"; done
}

# A hung run's state, then its end: nothing of it may stay on the GPU.
dump_state() { # label pid...
	local label=$1 p t workers
	shift
	workers=$(for p in "$@"; do
		! grep -qs torch.distributed.run "/proc/$p/cmdline" && grep -qs nccl_torch "/proc/$p/cmdline" && echo "$p"
	done)
	echo "   HANG: $label did not finish in ${limit}s; its state:"
	for p in "$@"; do
		echo "   -- pid $p: $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | cut -c1-100)"
		for t in /proc/$p/task/*; do
			printf '      %-16s wchan=%-24s syscall=%s\n' "$(cat "$t/comm" 2>/dev/null)" \
				"$(cat "$t/wchan" 2>/dev/null)" "$(cut -d' ' -f1 "$t/syscall" 2>/dev/null)"
		done | sort | uniq -c | sed 's/^/   /'
	done
	[ -n "$workers" ] && kill -USR1 $workers 2>/dev/null # Python stacks into the run's log
	sleep 1
	if command -v cuda-gdb >/dev/null; then
		for p in $workers; do
			echo "   -- native stacks of rank pid $p (cuda-gdb)"
			timeout 60 cuda-gdb -q -batch -p "$p" -ex 'thread apply all bt 14' 2>/dev/null |
				grep -E '^(Thread|#)' | grep -v -E 'in (syscall|__GI___|pthread_cond)' | cut -c1-160 | head -120 |
				sed 's/^/      /'
		done
	fi
	echo "   -- the plugin's own account (HMEMREG_NCCL_STALL_MS)"
	grep -h 'stall:' "$out/$label.log" 2>/dev/null | sed 's/^.*stall:/      stall:/' | head -30
	grep -h -A12 'Stack (most recent call first)' "$out/$label.log" 2>/dev/null | grep -E 'File|Thread' | head -20 |
		sed 's/^/      /'
}

rc=0
run() { # label ranks-on-one-gpu(0|1) env...
	local label=$1 one=$2 port pg waited=0 pids
	shift 2
	case " ${only:-$label} " in *" $label "*) ;; *) return 0 ;; esac
	port=$((29600 + RANDOM % 300))
	# shellcheck disable=SC2086 # $extra (HMEMREG_NCCL_TORCH_EXTRA): more VAR=value words
	# From the output folder: python -m puts the working folder first on
	# sys.path, and the checkout's top folders must not shadow a module.
	(cd "$out" && exec setsid env "$@" $extra HMEMREG_ONE_GPU="$one" HMEMREG_RUN_LABEL="$label" MASTER_PORT="$port" \
		python3 -m torch.distributed.run --nproc_per_node=2 --master_port="$port" "$script" \
		>"$out/$label.jsonl" 2>"$out/$label.log") &
	pg=$!
	while kill -0 "$pg" 2>/dev/null && [ "$waited" -lt "$limit" ]; do
		sleep 1
		waited=$((waited + 1))
	done
	local verdict
	if kill -0 "$pg" 2>/dev/null; then
		pids=$(tree "$pg")
		# shellcheck disable=SC2086
		dump_state "$label" $pids
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null
		wait "$pg" 2>/dev/null
		verdict="FAIL (hang)"
		rc=1
	elif wait "$pg"; then
		verdict="ok"
	else
		verdict="FAIL (exit $?)"
		rc=1
		grep -h -E 'Error|error:|WARN|Traceback|failed' "$out/$label.log" | grep -v 'should dump' | tail -n 12 |
			cut -c1-240 | sed 's/^/   /'
	fi
	local left=""
	for _ in 1 2 3 4 5; do
		left=$(for p in ${pids:-}; do [ -d /proc/$p ] && echo $p; done)
		left="$left $(pgrep -f "master_port=$port" || true)"
		[ -z "${left// /}" ] && break
		sleep 1
	done
	if [ -n "${left// /}" ]; then
		echo "   FAIL: processes of $label outlived it:$left"
		rc=1
	fi
	local good wrong
	good=$(grep -c '"ok": true' "$out/$label.jsonl")
	wrong=$(grep -c '"ok": false' "$out/$label.jsonl")
	[ "$wrong" = 0 ] || rc=1
	echo "== $label: $verdict in ${waited}s, $good results exact, $wrong wrong"
	# What NCCL chose: the transport and whether GPU buffers went to the
	# network (NCCL logs to the ranks' stdout, the .jsonl).
	grep -h -o -E 'NET/[A-Za-z0-9_-]+ : Using .{0,60}|ptrSupport [A-Z|]+.{0,90}|via NET/[^ ]+|GDR [01]|opened again without FI_HMEM' \
		"$out/$label.log" "$out/$label.jsonl" | sort | uniq -c | sort -rn | head -6 | sed 's/^/   /'
	# Host buffers only: the provider must run without FI_HMEM (with it,
	# shm copies host memory twice, through its bounce buffers).
	if grep -q -h 'ptrSupport HOST only' "$out/$label.log" "$out/$label.jsonl" &&
		grep -q -h 'FI_HMEM yes' "$out/$label.log" "$out/$label.jsonl"; then
		echo "   FAIL: $label: host buffers only, yet the provider was opened with FI_HMEM"
		rc=1
	fi
}

hm=(NCCL_NET_PLUGIN=hmemreg LD_LIBRARY_PATH="$plugin_dir:${LD_LIBRARY_PATH:-}" HMEMREG_NCCL_STALL_MS=$((limit * 1000 / 3)))
round() { # suffix one-gpu(0|1)
	local s=$1 one=$2
	run "socket$s" "$one" NCCL_NET=Socket NCCL_NET_PLUGIN=none
	if [ -n "$lf2" ]; then
		run "shm-gdr$s" "$one" "${hm[@]/#LD_LIBRARY_PATH=/LD_LIBRARY_PATH=$lf2/lib:}" FI_PROVIDER_PATH="$lf2/lib/libfabric" \
			HMEMREG_NCCL_PROVIDER=shm NCCL_NET_GDR_LEVEL=SYS
		run "shm-host$s" "$one" "${hm[@]/#LD_LIBRARY_PATH=/LD_LIBRARY_PATH=$lf2/lib:}" FI_PROVIDER_PATH="$lf2/lib/libfabric" \
			HMEMREG_NCCL_PROVIDER=shm NCCL_NET_GDR_LEVEL=LOC
	else
		echo "== shm runs: SKIP (no libfabric 2.6.0 with CUDA; HMEMREG_LIBFABRIC2)"
	fi
	run "tcp-host$s" "$one" "${hm[@]}" HMEMREG_NCCL_PROVIDER="tcp;ofi_rxm" HMEMREG_NCCL_NODE=127.0.0.1
	# A checkout keeps the peer in .gpu/peer (tests/gpu/bundle); the bundle is the top there.
	local ofi=${HMEMREG_PEER_PLUGIN_DIR:-$HMEMREG_TOP/.gpu/peer}
	[ -n "${HMEMREG_PEER_PLUGIN_DIR:-}" ] || [ -f "$ofi/libnccl-net-ofi.so" ] || ofi=$HMEMREG_TOP/peer
	if [ -f "$ofi/libnccl-net-ofi.so" ]; then
		run "ofi$s" "$one" NCCL_NET_PLUGIN="$ofi/libnccl-net-ofi.so" FI_PROVIDER="tcp" \
			LD_LIBRARY_PATH="${lf2:+$lf2/lib:}${LD_LIBRARY_PATH:-}" ${lf2:+FI_PROVIDER_PATH=$lf2/lib/libfabric}
	else
		echo "== ofi$s: SKIP (no aws-ofi-nccl: make aws-ofi-nccl, then tests/gpu/bundle)"
	fi
}

round "" 1
if [ "$with_mps" = 1 ] && command -v nvidia-cuda-mps-control >/dev/null; then
	mps=$(mktemp -d)
	export CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$mps/log
	mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
	nvidia-cuda-mps-control -d
	run socket-mps 1 NCCL_NET=Socket NCCL_NET_PLUGIN=none
	[ -n "$lf2" ] && run shm-gdr-mps 1 "${hm[@]/#LD_LIBRARY_PATH=/LD_LIBRARY_PATH=$lf2/lib:}" \
		FI_PROVIDER_PATH="$lf2/lib/libfabric" HMEMREG_NCCL_PROVIDER=shm NCCL_NET_GDR_LEVEL=SYS
	echo quit | nvidia-cuda-mps-control
	unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi
if [ "$gpus" -ge 2 ]; then
	round "-2gpu" 0
else
	echo "== one rank per GPU: SKIP ($gpus GPU here; needs two)"
fi

# busbw per collective and size, each transport over Socket of its round.
python3 - "$out" <<'EOF'
import glob, json, os, sys
rows = {}
for f in glob.glob(os.path.join(sys.argv[1], "*.jsonl")):
    for line in open(f):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        rows[(r["run"], r["coll"], r["bytes"])] = r["busbw_GBps"]
runs = sorted({k[0] for k in rows}, key=lambda r: (not r.startswith("socket"), r))
keys = sorted({(k[1], k[2]) for k in rows})
print("busbw GB/s (x Socket of the same round)")
print("%-11s %9s " % ("coll", "bytes") + " ".join("%17s" % r for r in runs))
def suffix(run):
    return next((x for x in ("-mps", "-2gpu") if run.endswith(x)), "")
for coll, size in keys:
    cells = []
    for r in runs:
        v = rows.get((r, coll, size))
        ref = rows.get(("socket" + suffix(r), coll, size))
        ratio = "" if v is None or not ref or r.startswith("socket") else " (%.2fx)" % (v / ref)
        cells.append("%17s" % ("-" if v is None else "%.2f%s" % (v, ratio)))
    print("%-11s %9d " % (coll, size) + " ".join(cells))
if any(suffix(r) == "" for r in runs):
    print("note: without MPS the two ranks' contexts take turns on the one GPU, which sets both sides' "
          "pace; compare speed under MPS (the -mps columns)")
EOF
exit $rc
