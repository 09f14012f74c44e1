# SPDX-License-Identifier: MIT
# One rank of torch.distributed collectives over NCCL, as a PyTorch user runs
# them: all_reduce, all_gather and broadcast from HMEMREG_MIN_BYTES to
# HMEMREG_MAX_BYTES (x4 steps), every result checked exactly, and the check
# queued on the default stream right behind the collective (as user code
# does: that queued work is what a CUDA call syncing the legacy stream waits
# behind). Rows are JSON lines on rank 0's stdout; busbw as nccl-tests
# defines it (n ranks): all_reduce algbw*2(n-1)/n, all_gather algbw*(n-1)/n,
# broadcast algbw.
#
# HMEMREG_ONE_GPU=1: every rank on cuda:0 with its own NCCL_HOSTID (set here,
# before NCCL starts), so NCCL sees one host per rank and carries every byte
# through its network transport. HMEMREG_STREAM=side runs everything on a
# side stream instead, leaving the legacy stream empty. HMEMREG_COLLS picks
# the collectives (comma-separated; all three by default); HMEMREG_BATCHES
# (5) how many timed batches a figure is the median of.
# Run by tests/gpu.d/40-nccl-torch.sh, which bounds it and reads its state
# when it hangs (SIGUSR1 here prints every thread's Python stack).
import faulthandler
import json
import os
import signal
import sys
import time

rank_env = int(os.environ["RANK"])
one_gpu = os.environ.get("HMEMREG_ONE_GPU") == "1"
if one_gpu:
    os.environ["NCCL_HOSTID"] = f"hmemreg-test-host-{rank_env}"
faulthandler.register(signal.SIGUSR1, all_threads=True)

import torch  # noqa: E402  (NCCL_HOSTID must be set before NCCL loads)
import torch.distributed as dist  # noqa: E402


def main():
    rank, n = rank_env, int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", 0 if one_gpu else rank)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    label = os.environ.get("HMEMREG_RUN_LABEL", "run")
    size = int(os.environ.get("HMEMREG_MIN_BYTES", str(8 << 10)))
    max_bytes = int(os.environ.get("HMEMREG_MAX_BYTES", str(64 << 20)))
    colls = os.environ.get("HMEMREG_COLLS", "all_reduce,all_gather,broadcast").split(",")
    unknown = set(colls) - {"all_reduce", "all_gather", "broadcast"}
    if unknown:
        sys.exit(f"HMEMREG_COLLS: unknown collective(s) {sorted(unknown)}")
    batches = int(os.environ.get("HMEMREG_BATCHES", "5"))
    if batches < 1:
        sys.exit(f"HMEMREG_BATCHES={batches}: needs at least one batch")
    side = torch.cuda.Stream() if os.environ.get("HMEMREG_STREAM") == "side" else None
    bad = 0
    with torch.cuda.stream(side) if side else torch.cuda.stream(torch.cuda.default_stream()):
        while size <= max_bytes:
            elems = size // 4
            iters = 20 if size <= (1 << 20) else 5
            for coll in colls:
                if coll == "all_gather":
                    part = elems // n
                    inp = torch.full((part,), float(rank + 1), device=dev)
                    out = torch.empty((part * n,), device=dev)
                    want = torch.cat([torch.full((part,), float(r + 1), device=dev) for r in range(n)])

                    def op():
                        dist.all_gather_into_tensor(out, inp)
                        return torch.equal(out, want)
                    factor = (n - 1) / n
                elif coll == "all_reduce":
                    t = torch.empty((elems,), device=dev)
                    want_v = float(n * (n + 1) // 2)

                    def op():
                        t.fill_(float(rank + 1))
                        dist.all_reduce(t)
                        return bool((t == want_v).all())
                    factor = 2 * (n - 1) / n
                else:
                    t = torch.empty((elems,), device=dev)

                    def op():
                        t.fill_(7.0 if rank == 0 else -1.0)
                        dist.broadcast(t, 0)
                        return bool((t == 7.0).all())
                    factor = 1.0
                ok = op()  # first call: connections, and the check behind it
                for _ in range(2):
                    ok = op() and ok
                # Timed: batches of the collectives back to back, checked
                # after; the median batch is the figure (one batch of a
                # shared GPU swings by 2x and more).
                times = []
                for _ in range(batches):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    for _ in range(iters):
                        if coll == "all_gather":
                            dist.all_gather_into_tensor(out, inp)
                        elif coll == "all_reduce":
                            dist.all_reduce(t)
                        else:
                            dist.broadcast(t, 0)
                    torch.cuda.synchronize()
                    times.append((time.perf_counter() - t0) / iters)
                times.sort()
                dt = times[len(times) // 2]
                ok = op() and ok
                bad += not ok
                if rank == 0:
                    busbw = [round(size / x / 1e9 * factor, 3) for x in (dt, times[-1], times[0])]
                    print(json.dumps({"run": label, "coll": coll, "bytes": size, "us": round(dt * 1e6, 1),
                                      "busbw_GBps": busbw[0], "busbw_range_GBps": busbw[1:],
                                      "batches": batches, "ok": ok}), flush=True)
            size *= 4
    dist.destroy_process_group()
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
