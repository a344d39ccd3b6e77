#!/usr/bin/env python3
"""The torch.distributed side of perf/compare: times collectives on CPU float tensors with a
process-group backend (gloo by default) and prints one JSON object per size, with loom-perf's size
and bus-bandwidth conventions. Ranks are local processes (torch.multiprocessing, spawn), or, with
--rank, this process is one rank of --np started elsewhere (perf/net_compare: one per host), meeting
at --master:--port.

usage: gloo_bench.py COLLECTIVE --np N -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP [--backend gloo]
                     [--rank R --master ADDR --port PORT]
"""
import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

BLOCKED = {"all_gather", "reduce_scatter", "alltoall"}


def bus_factor(coll, n):
    if coll == "all_reduce":
        return 2.0 * (n - 1) / n
    if coll in ("broadcast", "reduce"):
        return 1.0
    return (n - 1) / n


def make_call(coll, count, n):
    if coll == "all_reduce":
        t = torch.ones(count)
        return lambda: dist.all_reduce(t)
    if coll == "broadcast":
        t = torch.ones(count)
        return lambda: dist.broadcast(t, 0)
    if coll == "reduce":
        t = torch.ones(count)
        return lambda: dist.reduce(t, 0)
    if coll == "all_gather":
        t, out = torch.ones(count), torch.empty(count * n)
        return lambda: dist.all_gather_into_tensor(out, t)
    if coll == "reduce_scatter":
        t, out = torch.ones(count * n), torch.empty(count)
        return lambda: dist.reduce_scatter_tensor(out, t)
    if coll == "alltoall":
        t, out = torch.ones(count * n), torch.empty(count * n)
        return lambda: dist.all_to_all_single(out, t)
    raise SystemExit(f"unsupported collective {coll}")


class Printer:
    """Stands for the queue when this process is one rank: rank 0 prints its rows."""

    def put(self, row):
        print(json.dumps(row), flush=True)


def worker(rank, args, port, queue):
    os.environ["MASTER_ADDR"] = args.master
    os.environ["MASTER_PORT"] = str(port)
    if args.backend == "loom":
        import loom.torch  # noqa: F401  (registers the backend)
    dist.init_process_group(args.backend, rank=rank, world_size=args.np)
    n = args.np
    size = args.b
    while size <= args.e:
        count = max(1, size // 4 // (n if args.collective in BLOCKED else 1))
        try:
            call = make_call(args.collective, count, n)
            for _ in range(args.w):
                call()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(args.n):
                call()
            mine = torch.tensor([(time.perf_counter() - t0) / args.n])
            dist.all_reduce(mine)
            if rank == 0:
                us = mine.item() / n * 1e6
                nbytes = count * 4 * (n if args.collective in BLOCKED else 1)
                algbw = nbytes / (us * 1e3)
                queue.put(dict(library=args.backend, collective=args.collective, bytes=nbytes, nranks=n,
                               time_us=us, algbw_gbs=algbw, busbw_gbs=algbw * bus_factor(args.collective, n)))
        except RuntimeError as e:  # a backend without this collective
            if rank == 0:
                queue.put(dict(error=str(e).splitlines()[0]))
            break
        size *= args.f
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("collective")
    p.add_argument("--np", type=int, default=2)
    p.add_argument("-b", type=int, default=8)
    p.add_argument("-e", type=int, default=64 << 20)
    p.add_argument("-f", type=int, default=2)
    p.add_argument("-n", type=int, default=20)
    p.add_argument("-w", type=int, default=5)
    p.add_argument("--backend", default="gloo")
    p.add_argument("--rank", type=int, default=None)
    p.add_argument("--master", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args()
    if args.rank is not None:
        worker(args.rank, args, args.port, Printer())
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, args, port, queue)) for r in range(args.np)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    while not queue.empty():
        print(json.dumps(queue.get()))
    sys.exit(max(proc.exitcode for proc in procs))


if __name__ == "__main__":
    main()
