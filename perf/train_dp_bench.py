#!/usr/bin/env python3
"""Data-parallel step time: torch DDP over Gloo, torch DDP over Loom, loom.parallel.DataParallel.

    python3 perf/train_dp_bench.py                       # 2 local ranks, 8 x 2048-wide layers, batch 2
    python3 perf/train_dp_bench.py -np 2 --width 1024 --layers 4 --batch 64 --steps 20

The same model, batch and SGD step in every variant, interleaved round by round (so a slow spell of the
machine hits all three); each figure is the median over rounds of the slowest rank's mean step time.
A large model with a small batch makes the step mostly communication (the goal's case). Two figures per
variant: the whole step, and forward + backward including the wait for the gradient reduction (what
data parallelism changes; the optimizer step and zero_grad are the same memory-bound work in every
variant). A benchmark, not a test.
"""
import argparse
import os
import statistics
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from spawn_ranks import leave_rank_process, spawn_ranks

VARIANTS = ("ddp-gloo", "ddp-loom", "loom.parallel")


def model(width, layers):
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.ReLU()) for _ in range(layers)])


def make(variant, args, gloo):
    from torch.nn.parallel import DistributedDataParallel as DDP

    from loom import parallel as lp

    m = model(args.width, args.layers)
    if variant == "loom.parallel":
        wrapped = lp.DataParallel(m, bucket_mb=args.bucket_mb)
    else:
        wrapped = DDP(m, process_group=gloo if variant == "ddp-gloo" else None, bucket_cap_mb=args.bucket_mb,
                      gradient_as_bucket_view=True)
    return wrapped, torch.optim.SGD(wrapped.parameters(), lr=1e-4)


def time_steps(wrapped, opt, x, y, steps):
    """(whole step, forward + backward with its gradient sync): the slowest rank's means. Both DDP and
    DataParallel have waited for their reductions when backward returns."""
    def step():
        opt.zero_grad(set_to_none=False)
        began = time.perf_counter()
        nn.functional.mse_loss(wrapped(x), y).backward()
        synced = time.perf_counter() - began
        opt.step()
        return synced

    step()  # warm-up: buckets, connections
    dist.barrier()
    start = time.perf_counter()
    synced = sum(step() for _ in range(steps))
    elapsed = torch.tensor([(time.perf_counter() - start) / steps, synced / steps], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return tuple(elapsed.tolist())


def worker(rank, world, port, args, queue):
    import loom.torch  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("loom", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(minutes=10))
    gloo = dist.new_group(backend="gloo")
    gen = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch, args.width, generator=gen)
    y = torch.randn(args.batch, args.width, generator=gen)
    built = {v: make(v, args, gloo) for v in VARIANTS}
    times = {v: [] for v in VARIANTS}
    for _ in range(args.rounds):
        for v in VARIANTS:
            times[v].append(time_steps(*built[v], x, y, args.steps))
    if rank == 0:
        queue.put({v: tuple(statistics.median(t[i] for t in ts) for i in range(2)) for v, ts in times.items()})
    dist.barrier()
    dist.destroy_process_group()
    leave_rank_process()  # the DDP models' groups outlive destroy_process_group: see there


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-np", type=int, default=2)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bucket-mb", type=float, default=25.0)
    args = ap.parse_args()
    result = spawn_ranks(worker, args.np, args)
    params = args.layers * (args.width * args.width + args.width)
    print(f"{args.np} ranks, {params / 1e6:.1f} M parameters ({params * 4 / 2**20:.0f} MiB of gradients), "
          f"batch {args.batch} per rank, {args.steps} steps x {args.rounds} rounds, buckets {args.bucket_mb} MiB, "
          f"torch {torch.__version__}, {os.cpu_count()} cores")
    print("| variant | step ms | forward + backward + gradient sync ms |")
    print("|---|---:|---:|")
    for v in VARIANTS:
        print(f"| {v} | {result[v][0] * 1e3:.1f} | {result[v][1] * 1e3:.1f} |")
    for i, what in enumerate(("whole step (with SGD)", "forward + backward + sync")):
        lp, ddp_loom, ddp_gloo = (result[v][i] for v in ("loom.parallel", "ddp-loom", "ddp-gloo"))
        print(f"{what}: loom.parallel / ddp-loom = {lp / ddp_loom:.3f} (goal <= 1.05); "
              f"ddp-gloo / loom.parallel = {ddp_gloo / lp:.2f}x (goal >= 1.5x)")


if __name__ == "__main__":
    main()
