#!/usr/bin/env python3
"""torch's own "nccl" backend (ProcessGroupNCCL) over whichever libnccl.so.2 the loader binds: Loom's
drop-in when it is preloaded, NVIDIA's otherwise. Checks results, then times dist.all_reduce.

    LD_PRELOAD=$PWD/build/src/compat/libnccl.so.2 python3 perf/torch_nccl_dropin.py -np 2   # Loom, 2 ranks on GPU 0
    python3 perf/torch_nccl_dropin.py -np 1                                                # NVIDIA's NCCL
    python3 perf/torch_nccl_dropin.py --backend gloo --device cpu -np 2                    # the same checks, no GPU

Ranks are spawned processes on GPU rank % GPUs (two ranks on one GPU: NVIDIA's NCCL refuses them,
"Duplicate GPU detected"). Checked on every rank, element by element (exit 1 on a mismatch):
dist.all_reduce of every size, and one DDP step whose parameters must equal a step of the same model
over the whole batch in one process. Then per size the mean all_reduce time of the slowest rank. Prints
which library served the calls (the file ncclGetVersion resolves to, and its answer: Loom's is 23000).
A benchmark with checks, not a test: scripts/gpu-run.sh runs it on the GPU machine.
"""
import argparse
import ctypes
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from spawn_ranks import leave_rank_process  # this folder is the script's: on sys.path
from torch_allreduce import parse_size


class DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                ("saddr", ctypes.c_void_p)]


def nccl_library():
    """(file, version) of the ncclGetVersion that calls bind to: the process's global scope (where a
    preloaded library sits), else the libnccl mapped by torch; (None, None) when there is none."""
    try:
        get_version = ctypes.CDLL(None).ncclGetVersion
    except AttributeError:
        mapped = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libnccl" in line})
        if not mapped:
            return None, None
        get_version = ctypes.CDLL(mapped[0]).ncclGetVersion
    version = ctypes.c_int(0)
    get_version(ctypes.byref(version))
    info = DlInfo()
    ctypes.CDLL(None).dladdr(ctypes.cast(get_version, ctypes.c_void_p), ctypes.byref(info))
    return (info.fname.decode() if info.fname else None), version.value


def sizes(args):
    n = args.min_bytes
    while n <= args.max_bytes:
        yield n
        n *= args.step


def check_allreduce(nbytes, rank, world, device):
    count = max(nbytes // 4, 1)
    pattern = torch.arange(count, device=device, dtype=torch.int64) % 7
    tensor = (pattern + rank + 1).to(torch.float32)
    dist.all_reduce(tensor)
    want = (pattern * world + world * (world + 1) // 2).to(torch.float32)
    bad = (tensor != want).nonzero()
    if bad.numel():
        i = bad[0].item()
        return f"all_reduce of {nbytes} B: element {i} is {tensor[i].item()}, expected {want[i].item()}"
    return None


def model_and_batch(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).to(device)
    inputs = torch.randn(32, 64, device=device)
    targets = torch.randn(32, 8, device=device)
    return model, inputs, targets


def sgd_step(model, inputs, targets):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    optimizer.step()


def check_ddp_step(rank, world, device):
    """One DDP step over this rank's share of the batch against one process over all of it."""
    reference, inputs, targets = model_and_batch(device)
    sgd_step(reference, inputs, targets)
    model, inputs, targets = model_and_batch(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    share = inputs.shape[0] // world
    sgd_step(ddp, inputs[rank * share:(rank + 1) * share], targets[rank * share:(rank + 1) * share])
    for (name, got), want in zip(model.named_parameters(), reference.parameters()):
        if not torch.allclose(got, want, rtol=1e-4, atol=1e-6):
            return f"DDP step: parameter {name} differs from one process's step by {(got - want).abs().max().item():g}"
    return None


def time_allreduce(nbytes, device, iters, warmup):
    tensor = torch.ones(max(nbytes // 4, 1), dtype=torch.float32, device=device)
    for _ in range(warmup):
        dist.all_reduce(tensor)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return elapsed.item()


def worker(rank, args, port, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if args.device == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group(args.backend, rank=rank, world_size=args.nproc,
                            device_id=device if args.device == "cuda" else None)
    world = dist.get_world_size()
    problems = [p for p in (check_allreduce(n, rank, world, device) for n in sizes(args)) if p]
    problems += [p for p in [check_ddp_step(rank, world, device)] if p]
    rows = []
    if not problems:
        for n in sizes(args):
            iters = max(3, min(args.iters, int(args.budget * args.rate * 1e9 / max(n, 1))))
            t = time_allreduce(n, device, iters, warmup=3)
            rows.append({"bytes": n, "time_us": t * 1e6, "algbw_GBps": n / t / 1e9, "iters": iters})
    library, version = nccl_library()
    dist.destroy_process_group()
    results.put({"rank": rank, "problems": problems, "rows": rows, "library": library, "version": version})
    leave_rank_process()  # the DDP check's group outlives destroy_process_group: see there


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-np", "--nproc", type=int, default=1, help="ranks (processes) to spawn")
    p.add_argument("-b", "--min-bytes", type=parse_size, default=8)
    p.add_argument("-e", "--max-bytes", type=parse_size, default=64 << 20)
    p.add_argument("-f", "--step", type=int, default=4, help="size multiplier between rows")
    p.add_argument("--iters", type=int, default=100, help="most timed iterations per size")
    p.add_argument("--budget", type=float, default=0.2, help="rough seconds per size")
    p.add_argument("--rate", type=float, default=20.0, help="GB/s assumed when sizing --budget's iterations")
    p.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--json", help="also write the result here")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_nccl_dropin: torch sees no CUDA device (use --backend gloo --device cpu without a GPU)")
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, args, port, results)) for r in range(args.nproc)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    failed = [proc.exitcode for proc in procs if proc.exitcode != 0]
    by_rank = {}
    while not results.empty():
        got = results.get()
        by_rank[got["rank"]] = got
    if failed or len(by_rank) != args.nproc:
        sys.exit(f"torch_nccl_dropin: {len(failed)} rank(s) failed (exit codes {failed}); {len(by_rank)} reported")
    first = by_rank[0]
    problems = [f"rank {r}: {p}" for r, got in sorted(by_rank.items()) for p in got["problems"]]
    print(f"torch {torch.__version__}, backend {args.backend}, {args.nproc} rank(s) on {args.device}; "
          f"NCCL library: {first['library']} (ncclGetVersion {first['version']})")
    for row in first["rows"]:
        print(f"  {row['bytes']:>12} B  {row['time_us']:10.1f} us  {row['algbw_GBps']:8.3f} GB/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": args.backend, "device": args.device, "nprocs": args.nproc, "library": first["library"],
                       "version": first["version"], "rows": first["rows"], "problems": problems}, f, indent=1)
    for problem in problems:
        print(problem, file=sys.stderr)
    print("checks: all_reduce of every size and a DDP step: " + ("FAILED" if problems else "passed"))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
