#!/usr/bin/env python3
"""torch's FSDP2 (fully_shard) over Loom: each rank keeps a shard of every parameter, and the
all-gathers before each layer's forward and backward and the reduce-scatters of its gradients run
through Loom. A small MLP trains on each rank's share of a seeded dataset; rank 0 gathers the sharded
parameters and compares them with the same steps run in one process over the whole batch.

    torchrun --nproc-per-node 2 examples/fsdp2.py [--steps 10] [--batch 64]

Exit status 0 when the loss fell and the parameters match the single-process run (within 1e-5).
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import loom.torch  # noqa: F401 - registers the "loom" backend


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 1))


def batch(step, size):
    g = torch.Generator().manual_seed(2000 + step)
    x = torch.randn(size, 16, generator=g)
    return x, torch.sin(x[:, :1]) + 0.1 * x[:, 1:2]


def train(model, steps, size, rank=0, world=1):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for step in range(steps):
        x, y = batch(step, size)
        share = size // world
        loss = torch.nn.functional.mse_loss(model(x[rank * share:(rank + 1) * share]), y[rank * share:(rank + 1) * share])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()

    dist.init_process_group("loom")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} must divide among {world} ranks")
    mesh = init_device_mesh("cpu", (world,))
    model = make_model()
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)  # each Linear its own unit: gathered just before it runs
    fully_shard(model, mesh=mesh)
    losses = train(model, args.steps, args.batch, rank, world)
    # Each parameter is a DTensor sharded over the ranks: full_tensor() all-gathers it (through Loom).
    gathered = [p.full_tensor() for p in model.parameters()]

    ok = True
    if rank == 0:
        alone = make_model()
        train(alone, args.steps, args.batch)
        gap = max((a - b).abs().max().item() for a, b in zip(gathered, alone.parameters()))
        ok = losses[-1] < losses[0] and gap < 1e-5
        print(f"FSDP2 over loom on {world} ranks: loss {losses[0]:.4f} -> {losses[-1]:.4f}; "
              f"largest difference from one process: {gap:.2e} ({'OK' if ok else 'FAILED'})")
    result = torch.tensor([0.0 if ok else 1.0])
    dist.all_reduce(result)
    dist.destroy_process_group()
    raise SystemExit(1 if result.item() else 0)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
