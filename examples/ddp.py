#!/usr/bin/env python3
"""torch's DistributedDataParallel over Loom: a job changes only the backend's name (and imports
loom.torch, which registers it). A small regression model trains on each rank's share of a seeded
dataset; DDP all-reduces the gradients through Loom, so every rank ends with the same parameters,
which rank 0 checks against a run of the same steps in one process over the whole batch.

    torchrun --nproc-per-node 2 examples/ddp.py [--steps 20] [--batch 64]

Exit status 0 when the loss fell and the parameters match the single-process run (within 1e-5).
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import loom.torch  # noqa: F401 - registers the "loom" backend


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


def batch(step, size):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(size, 16, generator=g)
    y = x[:, :4].sum(dim=1, keepdim=True) - 0.5 * x[:, 4:8].sum(dim=1, keepdim=True)
    return x, y


def train(model, steps, size, rank=0, world=1):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for step in range(steps):
        x, y = batch(step, size)
        share = size // world
        x, y = x[rank * share:(rank + 1) * share], y[rank * share:(rank + 1) * share]
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()  # DDP: the gradients are averaged over the ranks here, through Loom
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()

    dist.init_process_group("loom")  # torchrun's environment names the rank, world and rendezvous
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} must divide among {world} ranks")
    model = DDP(make_model())
    losses = train(model, args.steps, args.batch, rank, world)

    ok = True
    if rank == 0:
        alone = make_model()
        train(alone, args.steps, args.batch)
        gap = max((a - b).abs().max().item() for a, b in zip(model.module.parameters(), alone.parameters()))
        ok = losses[-1] < losses[0] and gap < 1e-5
        print(f"DDP over loom on {world} ranks: loss {losses[0]:.4f} -> {losses[-1]:.4f}; "
              f"largest difference from one process: {gap:.2e} ({'OK' if ok else 'FAILED'})")
    result = torch.tensor([0.0 if ok else 1.0])
    dist.all_reduce(result)  # every rank exits with rank 0's verdict
    dist.destroy_process_group()
    raise SystemExit(1 if result.item() else 0)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
