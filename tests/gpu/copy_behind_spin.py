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
#   python3 copy_behind_spin.py EXTRA_STREAMS PINNED(0|1) LEGACY_WAITS(0|1)
import os
import sys
import time

import cupy as cp
import numpy as np

SPIN = cp.RawKernel(r'''
extern "C" __global__ void spin(volatile int *dev_flag, volatile int *host_flag) {
    while (*dev_flag == 0 && *host_flag == 0) {}
}''', "spin")
WAIT = float(os.environ.get("HMEMREG_SPIN_WAIT_S", "3"))


def trial(extra_streams, pinned, legacy_dep):
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


def main():
    extra, pinned, legacy = (int(a) for a in sys.argv[1:4])
    conns = os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "default")
    print(f"copy behind a spinning kernel: connections={conns} extra_streams={extra} "
          f"source={'pinned' if pinned else 'pageable'} legacy_waits={bool(legacy)}: ", end="", flush=True)
    ok, took = trial(extra, pinned, legacy)
    print(f"done in {took * 1e3:.1f} ms" if ok else f"STUCK after {took:.1f} s", flush=True)


if __name__ == "__main__":
    main()
