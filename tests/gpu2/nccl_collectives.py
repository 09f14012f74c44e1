# SPDX-License-Identifier: MIT
# Two ranks, one GPU each, torch.distributed with the NCCL backend: all_reduce,
# all_gather and broadcast from 1 KiB to 1 GiB, every result checked exactly,
# bus bandwidth per size as nccl-tests defines it (n = world size):
#   all_reduce busbw = algbw * 2(n-1)/n, all_gather = algbw * (n-1)/n,
#   broadcast = algbw; algbw = bytes / time (bytes = the full output size).
# Run by tests/gpu2/run-nccl-torch.sh (which sets the transport).
import json
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    label = os.environ.get("HMEMREG_RUN_LABEL", "run")
    max_bytes = int(os.environ.get("HMEMREG_MAX_BYTES", str(1 << 30)))
    size = int(os.environ.get("HMEMREG_MIN_BYTES", str(1 << 10)))
    rows = []
    bad = 0
    while size <= max_bytes:
        elems = size // 4
        # nccl-tests' defaults are 5 warm-up and 20 timed iterations; more
        # at small sizes, where one op takes well under a millisecond and
        # 20 of them are too short a sample to repeat within 10%.
        iters = 100 if size <= (1 << 20) else (20 if size <= (64 << 20) else 5)
        for coll in ("all_reduce", "all_gather", "broadcast"):
            if coll == "all_gather":
                part = elems // n
                inp = torch.full((part,), float(rank + 1), device=dev)
                out = torch.empty((part * n,), device=dev)
                op = lambda: dist.all_gather_into_tensor(out, inp)
                want = torch.cat([torch.full((part,), float(r + 1), device=dev) for r in range(n)])
                check = lambda: torch.equal(out, want)
                factor = (n - 1) / n
            elif coll == "all_reduce":
                t = torch.empty((elems,), device=dev)
                def op():
                    t.fill_(float(rank + 1))
                    dist.all_reduce(t)
                want_v = float(n * (n + 1) // 2)
                check = lambda: bool((t == want_v).all())
                factor = 2 * (n - 1) / n
            else:
                t = torch.empty((elems,), device=dev)
                def op():
                    t.fill_(7.0 if rank == 0 else -1.0)
                    dist.broadcast(t, 0)
                check = lambda: bool((t == 7.0).all())
                factor = 1.0
            for _ in range(5):  # warm-up (and connection setup)
                op()
            torch.cuda.synchronize()
            ok = check()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                op()
            torch.cuda.synchronize()
            dt = (time.perf_counter() - t0) / iters
            ok = ok and check()
            algbw = size / dt / 1e9
            row = {"run": label, "coll": coll, "bytes": size, "us": dt * 1e6,
                   "algbw_GBps": algbw, "busbw_GBps": algbw * factor, "ok": ok}
            bad += not ok
            if rank == 0:
                print(json.dumps(row), flush=True)
        size *= 4
    dist.destroy_process_group()
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
