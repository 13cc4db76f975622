#!/usr/bin/env python3
"""The peer of `stoke allreduce`: torch.distributed's Gloo all-reduce, timed as
nccl-tests' all_reduce_perf does, with the same rows.

    /usr/bin/torchrun --redirects 1 --tee 1 --nproc_per_node 2 \
        scripts/gloo_allreduce.py --min-bytes 4K --max-bytes 256M --iters 20 --warmup 5 --json

Rank 0 prints a table and, with --json, one JSON object as the last line of
stdout: {"world_size", "dtype", "op", "iters", "warmup", "rows": [{"bytes",
"count", "dtype", "op", "time_us", "algbw_gbps", "busbw_gbps", "errors"}],
"errors"}. The time is the mean over the timed iterations, after a barrier.
"""
import argparse
import json
import sys
import time

import torch
import torch.distributed as dist


def size(s):
    t = s.strip().upper().rstrip("B").rstrip("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    if mult > 1:
        t = t[:-1]
    return int(t) * mult


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--min-bytes", type=size, default=4 << 10)
    p.add_argument("--max-bytes", type=size, default=256 << 20)
    p.add_argument("--step-factor", type=int, default=2)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--op", choices=["sum", "avg"], default="sum")
    p.add_argument("--dtype", choices=["float32", "bf16"], default="float32")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()

    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    dtype = torch.float32 if a.dtype == "float32" else torch.bfloat16
    es = 4 if a.dtype == "float32" else 2
    buf = torch.empty(a.max_bytes // es, dtype=dtype)

    def reduce(t):
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        if a.op == "avg":
            t.div_(n)

    if rank == 0:
        print(f"# gloo allreduce: {n} ranks, {a.dtype}, op {a.op}, {a.iters} iters after {a.warmup} warm-up")
        print(f"{'bytes':>12} {'count':>12} {'dtype':>8} {'op':>6} {'time(us)':>12} {'algbw':>10} {'busbw':>10} {'#wrong':>7}")
    rows, total = [], 0
    sz = a.min_bytes
    while sz <= a.max_bytes:
        count = sz // es
        t = buf[:count]
        pat = (torch.arange(count) % 3 + 1).to(dtype)
        t.copy_(pat * (rank + 1))
        reduce(t)
        want = pat * (n * (n + 1) / 2 / (n if a.op == "avg" else 1))
        wrong = int((t != want.to(dtype)).sum())
        for _ in range(a.warmup):
            reduce(t)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(a.iters):
            reduce(t)
        us = (time.perf_counter() - start) / a.iters * 1e6
        algbw = count * es / (us * 1e3)
        row = {"bytes": count * es, "count": count, "dtype": a.dtype, "op": a.op, "time_us": us,
               "algbw_gbps": algbw, "busbw_gbps": algbw * 2 * (n - 1) / n, "errors": wrong}
        rows.append(row)
        total += wrong
        if rank == 0:
            print(f"{row['bytes']:12d} {count:12d} {a.dtype:>8} {a.op:>6} {us:12.1f} {algbw:10.3f} {row['busbw_gbps']:10.3f} {wrong:7d}", flush=True)
        sz *= a.step_factor
    if rank == 0:
        print(f"# errors: {total}")
        if a.json:
            print(json.dumps({"world_size": n, "dtype": a.dtype, "op": a.op, "iters": a.iters,
                              "warmup": a.warmup, "rows": rows, "errors": total}), flush=True)
    dist.destroy_process_group()
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
