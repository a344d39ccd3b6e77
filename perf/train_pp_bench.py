#!/usr/bin/env python3
"""Pipeline bubble, measured vs the schedule simulator's prediction (GPipe and 1F1B).

    python3 perf/train_pp_bench.py                   # pp=2 (2 ranks), m = 2, 4, 8
    python3 perf/train_pp_bench.py -np 4 --microbatches 4 8

Each rank runs loom.parallel's Pipeline on GPT chunks and records when each of its computations ran
(Pipeline.timeline, one clock for all processes of the machine). Measured bubble of a step: the share
of rank-time not spent computing between the step's start (barrier) and its last computation,
1 - sum(busy) / (ranks * span). Predicted: schedule_sim.simulate on the same schedule with the
forward and backward times measured per stage in the same steps, and a link time measured with a
ping-pong of one activation before. Goal: within 15% (relative) of each other.
"""
import argparse
import os
import statistics
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from spawn_ranks import spawn_ranks


def link_time(mesh, shape, rounds=20):
    """Half the round trip of one activation between stages 0 and 1 (others idle)."""
    x = torch.zeros(shape)
    peer = mesh.pp_ranks[1 - mesh.pp_rank] if mesh.pp_rank < 2 else None
    dist.barrier()
    start = time.perf_counter()
    for _ in range(rounds):
        if mesh.pp_rank == 0:
            dist.send(x, peer, group=mesh.pp_group)
            dist.recv(x, peer, group=mesh.pp_group)
        elif mesh.pp_rank == 1:
            dist.recv(x, peer, group=mesh.pp_group)
            dist.send(x, peer, group=mesh.pp_group)
    one = torch.tensor([(time.perf_counter() - start) / rounds / 2], dtype=torch.float64)
    dist.broadcast(one, src=mesh.pp_ranks[0])
    return one.item()


def worker(rank, world, port, args, queue):
    import loom.torch  # noqa: F401
    from loom import parallel as lp
    from loom.parallel import gpt
    from loom.parallel.schedule_sim import simulate
    from loom.parallel.schedules import Forward

    torch.set_num_threads(1)
    dist.init_process_group("loom", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(minutes=10))
    mesh = lp.init_mesh(pp=world)
    config = gpt.GPTConfig(vocab=args.vocab, seq_len=args.seq_len, hidden=args.hidden, heads=args.heads,
                           layers=args.layers_per_stage * world)
    shape = gpt.activation_shape(config, args.micro_batch, 1)
    link = link_time(mesh, shape)
    rows = []
    for name in ("gpipe", "1f1b"):
        for m in args.microbatches:
            models = [lp.DataParallel(c, mesh.dp_group) for c in gpt.build_chunks(config, None, mesh.pp, mesh.pp_rank)]
            pipe = lp.Pipeline(models, mesh, lp.build_schedule(name, mesh.pp, m), gpt.gpt_loss(None), shape)
            gen = torch.Generator().manual_seed(0)
            tokens = torch.randint(0, config.vocab, (m * args.micro_batch, config.seq_len + 1), generator=gen)
            xs, ys = list(tokens[:, :-1].split(args.micro_batch)), list(tokens[:, 1:].split(args.micro_batch))
            measured, predicted = [], []
            for step in range(args.steps + 1):
                dist.barrier()
                t0 = time.perf_counter()
                pipe.step(xs, ys)
                timeline = [(s - t0, e - t0, isinstance(a, Forward)) for s, e, a in pipe.timeline]
                everyone = [None] * world
                dist.all_gather_object(everyone, timeline)
                if step == 0:
                    continue  # warm-up
                span = max(e for tl in everyone for _, e, _ in tl)
                busy = [sum(e - s for s, e, _ in tl) for tl in everyone]
                measured.append(1 - sum(busy) / (world * span))
                fwd = [statistics.mean(e - s for s, e, f in tl if f) for tl in everyone]
                bwd = [statistics.mean(e - s for s, e, f in tl if not f) for tl in everyone]
                predicted.append(simulate(pipe.schedule, fwd, bwd, link).bubble)
            rows.append((name, m, statistics.median(measured), statistics.median(predicted),
                         statistics.mean(fwd), statistics.mean(bwd)))
    if rank == 0:
        queue.put((rows, link))
    dist.barrier()
    mesh.destroy()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-np", type=int, default=2, help="ranks = pipeline stages")
    ap.add_argument("--microbatches", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--layers-per-stage", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    rows, link = spawn_ranks(worker, args.np, args)
    print(f"pp={args.np}, {args.layers_per_stage} GPT blocks per stage (hidden {args.hidden}, sequence {args.seq_len}, "
          f"micro-batch {args.micro_batch}); link time {link * 1e6:.0f} us; median of {args.steps} steps; "
          f"torch {torch.__version__}, {os.cpu_count()} cores")
    print("| schedule | micro-batches | forward ms | backward ms | measured bubble | simulated bubble | (p-1)/(m+p-1) | measured / simulated - 1 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, m, measured, predicted, fwd, bwd in rows:
        ideal = (args.np - 1) / (m + args.np - 1)
        print(f"| {name} | {m} | {fwd * 1e3:.2f} | {bwd * 1e3:.2f} | {measured:.3f} | {predicted:.3f} | {ideal:.3f} | "
              f"{(measured / predicted - 1) * 100:+.1f}% |")


if __name__ == "__main__":
    main()
