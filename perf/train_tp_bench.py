#!/usr/bin/env python3
"""Tensor-parallel step time on the loom backend vs on gloo: the same code, only the backend switched.

    python3 perf/train_tp_bench.py                 # 2 ranks, GPT blocks of loom.parallel.gpt, tp=2
    python3 perf/train_tp_bench.py -np 4 --hidden 512 --sequence-parallel

One forward and backward of a tensor-parallel GPT chunk (column/row-parallel linears, vocab-parallel
embedding and cross-entropy: 4 all-reduces per block per pass) and an SGD step. Each backend runs in
its own processes (init_process_group with that backend, groups made by init_mesh); the two are
alternated round by round and each figure is the median over rounds of the slowest rank's mean step.
"""
import argparse
import os
import statistics
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from spawn_ranks import spawn_ranks


def worker(rank, world, port, backend, args, queue):
    import loom.torch  # noqa: F401
    from loom import parallel as lp
    from loom.parallel import gpt

    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(minutes=10))
    mesh = lp.init_mesh(tp=world)
    config = gpt.GPTConfig(vocab=args.vocab, seq_len=args.seq_len, hidden=args.hidden, heads=args.heads,
                           layers=args.layers, sequence_parallel=args.sequence_parallel)
    (model,) = gpt.build_chunks(config, mesh.tp_group)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = gpt.gpt_loss(mesh.tp_group)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, args.vocab, (args.batch, args.seq_len + 1), generator=gen)

    def step():
        opt.zero_grad()
        loss_fn(model(tokens[:, :-1]), tokens[:, 1:]).backward()
        lp.finalize_grads([_Unwrapped(model)], mesh)
        opt.step()

    step()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    elapsed = torch.tensor([(time.perf_counter() - start) / args.steps], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    if rank == 0:
        queue.put(elapsed.item())
    dist.barrier()
    mesh.destroy()
    dist.destroy_process_group()


class _Unwrapped:
    """finalize_grads' view of a model without data parallelism: its gradients are already whole."""

    def __init__(self, module):
        self.module = module

    def finish_grad_sync(self):
        pass

    def reduced_grad(self, p):
        return p.grad


def run(backend, args):
    return spawn_ranks(worker, args.np, backend, args)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-np", type=int, default=2, help="ranks = tensor-parallel size")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sequence-parallel", action="store_true")
    args = ap.parse_args()
    times = {"loom": [], "gloo": []}
    for _ in range(args.rounds):
        for backend in times:
            times[backend].append(run(backend, args))
    loom, gloo = statistics.median(times["loom"]), statistics.median(times["gloo"])
    print(f"tp={args.np}: GPT chunk of {args.layers} blocks, hidden {args.hidden}, sequence {args.seq_len}, "
          f"batch {args.batch}, vocabulary {args.vocab}, sequence parallel {'on' if args.sequence_parallel else 'off'}; "
          f"{args.steps} steps x {args.rounds} rounds; torch {torch.__version__}, {os.cpu_count()} cores")
    print(f"  loom {loom * 1e3:8.2f} ms/step   (rounds: {', '.join(f'{t * 1e3:.2f}' for t in times['loom'])})")
    print(f"  gloo {gloo * 1e3:8.2f} ms/step   (rounds: {', '.join(f'{t * 1e3:.2f}' for t in times['gloo'])})")
    print(f"  gloo / loom = {gloo / loom:.2f}x (goal >= 2x)")


if __name__ == "__main__":
    main()
