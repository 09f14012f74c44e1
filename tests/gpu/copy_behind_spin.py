# SPDX-License-Identifier: MIT
# Does a host-to-device copy on a stream of our own finish while a kernel of
# the same process spins on the GPU (as NCCL's kernels spin while they wait
# for the network)? That is what any CUDA copy in a net plugin's progress
# path needs. Each trial: a kernel on its own non-blocking stream spins until
# a device word is set (or, to end a stuck trial, a host-mapped word); a
# 4-byte copy into that device word is queued on another non-blocking stream
# with an event after it, which is polled for HMEMREG_SPIN_WAIT_S seconds.
# It prints done (and how long) or stuck; a trial whose copy call itself
# never returns is ended by the caller's timeout. Needs CuPy.
#   python3 copy_behind_spin.py EXTRA_STREAMS PINNED(0|1) LEGACY_WAITS(0|1) [BETWEEN]
#   python3 copy_behind_spin.py --sweep MAX   (BETWEEN = 0..MAX, pinned, no legacy wait)
#   python3 copy_behind_spin.py --spin-only SECONDS   (a second process's spinning kernel)
#   python3 copy_behind_spin.py --first-launch   (a kernel's first launch in another thread)
#   python3 copy_behind_spin.py --load-beside-spin   (a module loaded, then launched, in another thread)
# BETWEEN streams are created after the spinner's and before the copier's.
# CUDA spreads streams over CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8
# by default) in turn, and a queue runs its work in order whatever stream it
# came from; so the copy may wait behind the spinner when it lands on the
# spinner's queue, as a net plugin's copy may behind NCCL's kernel in a
# process with many streams (PyTorch's pools, NCCL's own).
# --first-launch asks the staged hang's question (README, known issues):
# while the spinner runs, one thread launches a kernel of a module never
# launched before (as PyTorch's result check after a new collective does)
# and another queues the copy that would end the spinner. Under lazy module
# loading (CUDA_MODULE_LOADING=LAZY, CUDA's default) the launch loads the
# module then; if that waits for the spinner, so may the copy.
# --load-beside-spin loads the module itself while the spinner runs (as
# Triton, torch.compile or NVRTC users do at any time), which under eager
# loading (CUDA_MODULE_LOADING=EAGER) loads its kernels there and then.
# Needs nvcc (the module is built before the spinner starts).
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import cupy as cp
import numpy as np

SPIN = cp.RawKernel(r'''
extern "C" __global__ void spin(volatile int *dev_flag, volatile int *host_flag) {
    while (*dev_flag == 0 && *host_flag == 0) {}
}''', "spin")
WAIT = float(os.environ.get("HMEMREG_SPIN_WAIT_S", "3"))


def trial(extra_streams, pinned, legacy_dep, between=0):
    keep = [cp.cuda.Stream(non_blocking=True) for _ in range(extra_streams)]
    dev_flag = cp.zeros(1, dtype=cp.int32)
    host_mem = cp.cuda.alloc_pinned_memory(4)
    host_flag = np.frombuffer(host_mem, np.int32, 1)
    host_flag[0] = 0
    spinner = cp.cuda.Stream(non_blocking=True)
    with spinner:
        SPIN((1,), (1,), (dev_flag, np.uint64(host_mem.ptr)))
    if legacy_dep:
        # As PyTorch does after a collective: the default stream waits for it.
        done_ev = cp.cuda.Event()
        done_ev.record(spinner)
        cp.cuda.Stream.null.wait_event(done_ev)
    keep += [cp.cuda.Stream(non_blocking=True) for _ in range(between)]
    src_mem = cp.cuda.alloc_pinned_memory(4) if pinned else None
    src = np.frombuffer(src_mem, np.int32, 1) if pinned else np.ones(1, np.int32)
    src[0] = 1
    copier = cp.cuda.Stream(non_blocking=True)
    t0 = time.perf_counter()
    cp.cuda.runtime.memcpyAsync(dev_flag.data.ptr, src.ctypes.data, 4, cp.cuda.runtime.memcpyHostToDevice,
                                copier.ptr)
    ev = cp.cuda.Event(disable_timing=True)
    ev.record(copier)
    while not ev.done and time.perf_counter() - t0 < WAIT:
        time.sleep(0.001)
    took = time.perf_counter() - t0
    ok = ev.done
    host_flag[0] = 1  # ends the spinner whatever happened
    spinner.synchronize()
    copier.synchronize()
    cp.cuda.Device().synchronize()
    del keep
    return ok, took


def spin_for(seconds):
    """Another rank on the GPU: a spinning kernel for `seconds`, then ended."""
    dev_flag = cp.zeros(1, dtype=cp.int32)
    host_mem = cp.cuda.alloc_pinned_memory(4)
    host_flag = np.frombuffer(host_mem, np.int32, 1)
    host_flag[0] = 0
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        SPIN((1,), (1,), (dev_flag, np.uint64(host_mem.ptr)))
    print(f"other process: kernel spinning for {seconds} s", flush=True)
    time.sleep(seconds)
    host_flag[0] = 1
    s.synchronize()


FIRST = r'''
extern "C" __global__ void first(int *out) { out[threadIdx.x] += 1; }'''


def first_launch(load_beside_spin):
    """The copy, while another thread launches a never-launched kernel
    (loading its module first when load_beside_spin)."""
    if load_beside_spin:
        tmp = tempfile.mkdtemp()
        with open(os.path.join(tmp, "first.cu"), "w") as f:
            f.write(FIRST)
        subprocess.run(["nvcc", "-cubin", "-arch=native", "-o", os.path.join(tmp, "first.cubin"),
                        os.path.join(tmp, "first.cu")], check=True)
        mod = cp.RawModule(path=os.path.join(tmp, "first.cubin"))  # cuModuleLoad at get_function
    else:
        mod = cp.RawModule(code=FIRST)
        mod.compile()  # NVRTC and cuModuleLoadData here; lazy loading defers the rest to the launch
    out = cp.zeros(32, dtype=cp.int32)
    dev_flag = cp.zeros(1, dtype=cp.int32)
    host_mem = cp.cuda.alloc_pinned_memory(4)
    host_flag = np.frombuffer(host_mem, np.int32, 1)
    host_flag[0] = 0
    src_mem = cp.cuda.alloc_pinned_memory(4)
    src = np.frombuffer(src_mem, np.int32, 1)
    src[0] = 1
    spinner = cp.cuda.Stream(non_blocking=True)
    launcher = cp.cuda.Stream(non_blocking=True)
    copier = cp.cuda.Stream(non_blocking=True)
    with spinner:
        SPIN((1,), (1,), (dev_flag, np.uint64(host_mem.ptr)))
    t0 = time.perf_counter()
    when = {}

    def launch():
        fn = mod.get_function("first")
        if load_beside_spin:
            when["load returned"] = time.perf_counter() - t0
        with launcher:
            fn((1,), (32,), (out,))
        when["launch returned"] = time.perf_counter() - t0

    def copy():
        cp.cuda.runtime.memcpyAsync(dev_flag.data.ptr, src.ctypes.data, 4, cp.cuda.runtime.memcpyHostToDevice,
                                    copier.ptr)
        when["copy call returned"] = time.perf_counter() - t0
        ev = cp.cuda.Event(disable_timing=True)
        ev.record(copier)
        while not ev.done and time.perf_counter() - t0 < WAIT:
            time.sleep(0.001)
        if ev.done:
            when["copy done"] = time.perf_counter() - t0

    threads = [threading.Thread(target=launch, daemon=True)]
    threads[0].start()
    time.sleep(0.05)  # the launch first, as the check is queued before the proxy's copy
    threads.append(threading.Thread(target=copy, daemon=True))
    threads[1].start()
    threads[1].join(WAIT + 1)
    steps = ("load returned",) if load_beside_spin else ()
    state = {k: when.get(k) for k in steps + ("launch returned", "copy call returned", "copy done")}
    host_flag[0] = 1  # ends the spinner whatever happened
    for t in threads:
        t.join(WAIT)
    mode = os.environ.get("CUDA_MODULE_LOADING", "unset (LAZY)")
    what = "module load and first launch" if load_beside_spin else "first launch"
    print(f"{what} beside a spinning kernel, CUDA_MODULE_LOADING={mode}: "
          + ", ".join(f"{k} {'after %.1f ms' % (v * 1e3) if v is not None else 'NOT within %.0f s' % WAIT}"
                      for k, v in state.items()), flush=True)
    cp.cuda.Device().synchronize()
    if load_beside_spin:
        shutil.rmtree(tmp, ignore_errors=True)
    ok = state["copy done"] is not None
    print(f"copy behind a {what}: " + ("done" if ok else "STUCK"), flush=True)
    return ok


def main():
    if sys.argv[1] in ("--first-launch", "--load-beside-spin"):
        sys.exit(0 if first_launch(sys.argv[1] == "--load-beside-spin") else 1)
    if sys.argv[1] == "--spin-only":
        spin_for(float(sys.argv[2]))
        return
    conns = os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "default")
    if sys.argv[1] == "--sweep":
        stuck = []
        for between in range(int(sys.argv[2]) + 1):
            ok, took = trial(0, 1, 0, between)
            print(f"connections={conns} streams_between={between}: "
                  + (f"done in {took * 1e3:.2f} ms" if ok else f"STUCK after {took:.1f} s"), flush=True)
            if not ok:
                stuck.append(between)
        print(f"connections={conns}: stuck with {stuck or 'none'} streams between spinner and copier")
        return
    extra, pinned, legacy = (int(a) for a in sys.argv[1:4])
    between = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    print(f"copy behind a spinning kernel: connections={conns} extra_streams={extra} streams_between={between} "
          f"source={'pinned' if pinned else 'pageable'} legacy_waits={bool(legacy)}: ", end="", flush=True)
    ok, took = trial(extra, pinned, legacy, between)
    print(f"done in {took * 1e3:.1f} ms" if ok else f"STUCK after {took:.1f} s", flush=True)


if __name__ == "__main__":
    main()
