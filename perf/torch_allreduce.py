#!/usr/bin/env python3
"""dist.all_reduce: Loom next to a peer backend (Gloo, or NCCL on CUDA tensors), one process group of
each in the same processes.

    python3 perf/torch_allreduce.py                     # 2 local ranks, CPU tensors, 8 B .. 256 MiB
    python3 perf/torch_allreduce.py -np 4 -e 64M --json out.json
    python3 perf/torch_allreduce.py --device cuda --peer nccl -np 1 -e 1G   # GPU 0 (rank % GPUs)
    torchrun --nproc_per_node 2 perf/torch_allreduce.py # or any launcher that sets env://

Prints, per message size, the mean time of one all_reduce (the slowest rank's; on CUDA tensors the
loop's work is waited for before the clock stops), the algorithm bandwidth (bytes / time) of each
backend, and peer_time / loom_time. `--peer none` times Loom alone (NCCL refuses two ranks on one GPU).
A benchmark, not a test.
"""
import argparse
import json
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    return int(float(text[:-1]) * units[text[-1]]) if text[-1] in units else int(text)


def human(nbytes):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= div:
            return f"{nbytes / div:g} {unit}"
    return f"{nbytes} B"


def synchronize(tensor):
    if tensor.is_cuda:
        torch.cuda.synchronize(tensor.device)


def time_allreduce(tensor, group, iters, warmup):
    for _ in range(warmup):
        dist.all_reduce(tensor, group=group)
    synchronize(tensor)
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor, group=group)
    synchronize(tensor)
    elapsed = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64, device=tensor.device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=group)  # the slowest rank's time
    return elapsed.item()


def iterations(nbytes, args):
    # About --budget seconds per size and backend at --rate GB/s, within [3, --iters].
    return max(3, min(args.iters, int(args.budget * args.rate * 1e9 / max(nbytes, 1))))


def benchmark(args):
    torch.set_num_threads(1)
    rank = dist.get_rank()
    device = torch.device(args.device)
    if args.device == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    peer = dist.new_group(backend=args.peer) if args.peer != "none" else None
    dtype = getattr(torch, args.dtype)
    elem = torch.tensor([], dtype=dtype).element_size()
    sizes = []
    size = args.min_bytes
    while size <= args.max_bytes:
        sizes.append(size)
        size *= args.step
    # Whole sweeps repeated (not each size back to back), so that a slow spell of the machine hits one
    # sample of many sizes rather than every sample of one size; each row is the median per backend.
    times = {s: ([], []) for s in sizes}
    for rep in range(args.repeat):
        for size in sizes:
            count = max(1, size // elem)
            n = iterations(size, args)
            warm = max(1, n // 5)
            times[size][0].append(time_allreduce(torch.ones(count, dtype=dtype, device=device), None, n, warm))
            if peer is not None:
                times[size][1].append(time_allreduce(torch.ones(count, dtype=dtype, device=device), peer, n, warm))
            if rank == 0 and args.repeat > 1:
                print(f"  (sweep {rep + 1}/{args.repeat}) {human(size)}", flush=True)
    rows = []
    for size in sizes:
        count = max(1, size // elem)
        t_loom = statistics.median(times[size][0])
        t_peer = statistics.median(times[size][1]) if peer is not None else None
        row = {"bytes": count * elem, "iters": iterations(size, args), "repeats": args.repeat,
               "loom_us": t_loom * 1e6, "loom_GBps": count * elem / t_loom / 1e9}
        if t_peer is not None:
            row.update({"peer_us": t_peer * 1e6, "peer_GBps": count * elem / t_peer / 1e9, "ratio": t_peer / t_loom})
            if args.peer == "gloo":  # the names earlier JSON files used
                row.update({"gloo_us": row["peer_us"], "gloo_GBps": row["peer_GBps"]})
        rows.append(row)
        if rank == 0:
            r = rows[-1]
            peer_cols = (f"{r['peer_us']:>12.1f} {r['loom_GBps']:>10.3f} {r['peer_GBps']:>10.3f} {r['ratio']:>8.2f}"
                         if t_peer is not None else f"{'-':>12} {r['loom_GBps']:>10.3f} {'-':>10} {'-':>8}")
            print(f"{human(r['bytes']):>10} {r['iters']:>6} {r['loom_us']:>12.1f} {peer_cols}", flush=True)
    return rows


def write_markdown(args, world, rows):
    import datetime
    import platform
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from doc_section import replace_section

    lines = [f"Measured {datetime.date.today()} with `python3 perf/torch_allreduce.py -np {world} -b {args.min_bytes} "
             f"-e {args.max_bytes} -f {args.step} --budget {args.budget:g} --repeat {args.repeat} --markdown` on {platform.machine()}, {os.cpu_count()} cores, torch "
             f"{torch.__version__}: `dist.all_reduce` ({args.dtype}, sum, in place, CPU tensors) through a Loom process "
             "group and a Gloo one in the same processes; time is the slowest rank's mean over the iterations, "
             f"the median of {args.repeat} sweep(s).", "",
             "| size | loom us | gloo us | loom GB/s | gloo GB/s | gloo time / loom time |",
             "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {human(r['bytes'])} | {r['loom_us']:.1f} | {r['gloo_us']:.1f} | {r['loom_GBps']:.3f} | "
                     f"{r['gloo_GBps']:.3f} | {r['ratio']:.2f}x |")
    doc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "PERFORMANCE.md")
    replace_section(doc, f"## PyTorch dist.all_reduce on CPU tensors, {world} ranks", "\n".join(lines))


def header(args, world):
    p = args.peer
    print(f"# dist.all_reduce, {args.dtype}, sum, {args.device.upper()} tensors, {world} ranks, torch {torch.__version__}")
    print(f"{'size':>10} {'iters':>6} {'loom us':>12} {p + ' us':>12} {'loom GB/s':>10} {p + ' GB/s':>10} "
          f"{p + '/loom':>8}", flush=True)


def run(rank, world, port, args):
    import loom.torch  # noqa: F401 - registers the backend

    dist.init_process_group("loom", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    main_body(args)


def main_body(args):
    if dist.get_rank() == 0:
        header(args, dist.get_world_size())
    rows = benchmark(args)
    if dist.get_rank() == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"world_size": dist.get_world_size(), "dtype": args.dtype, "torch": torch.__version__,
                       "device": args.device, "peer": args.peer, "rows": rows}, f, indent=1)
    if dist.get_rank() == 0 and args.markdown:
        write_markdown(args, dist.get_world_size(), rows)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-np", "--nproc", type=int, default=2, help="local ranks to spawn (ignored under a launcher)")
    p.add_argument("-b", "--min-bytes", type=parse_size, default=8)
    p.add_argument("-e", "--max-bytes", type=parse_size, default=256 << 20)
    p.add_argument("-f", "--step", type=int, default=2, help="size multiplier between rows")
    p.add_argument("--iters", type=int, default=200, help="most timed iterations per size")
    p.add_argument("--budget", type=float, default=0.2, help="rough seconds per size and backend")
    p.add_argument("--repeat", type=int, default=1, help="sweeps to run; rows are the medians")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="tensors' device (cuda: rank %% GPUs)")
    p.add_argument("--peer", choices=["gloo", "nccl", "none"], default="gloo", help="the backend timed next to Loom")
    p.add_argument("--rate", type=float, default=1.0, help="GB/s assumed when sizing --budget's iterations")
    p.add_argument("--json", help="also write the rows here")
    p.add_argument("--markdown", action="store_true",
                   help="also write the table into docs/PERFORMANCE.md (section per world size)")
    args = p.parse_args()
    if args.markdown and (args.device != "cpu" or args.peer != "gloo"):
        p.error("--markdown writes the CPU-tensor table against Gloo: use it with --device cpu --peer gloo")
    if "RANK" in os.environ:  # torchrun and friends
        import loom.torch  # noqa: F401

        dist.init_process_group("loom")
        main_body(args)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(args.nproc, port, args), nprocs=args.nproc)


if __name__ == "__main__":
    main()
