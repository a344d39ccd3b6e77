"""Run by torchrun on 4 ranks (env://): every re-layout between the 4-rank layouts, forward and backward,
against the reference (slices of one full micro-batch); failures written as JSON to $LOOM_TEST_OUT."""
import itertools
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist

import loom.torch  # noqa: F401 - registers the "loom" backend
from loom.parallel import LayerLayout, Relayout, init_layer_mesh

LAYOUTS = [LayerLayout(tp=4), LayerLayout(dp=4), LayerLayout(tp=2, dp=2), LayerLayout(tp=2, dp=2, tp_inner=False)]
BATCH = 8  # samples per micro-batch: every layout's slice is whole


def part(full, layout, position):
    start, stop = layout.batch_slice(position)
    return full[:, int(start * BATCH):int(stop * BATCH)]


def main():
    torch.set_num_threads(1)
    dist.init_process_group("loom", timeout=timedelta(seconds=120))
    # One "layer" per layout: the mesh makes every TP and DP group that any pair of them needs.
    mesh = init_layer_mesh([[0, 1, 2, 3]], LAYOUTS, [], tie=False)
    gen = torch.Generator().manual_seed(7)
    activations = torch.randn(3, BATCH, 5, generator=gen)  # [sequence, batch, hidden], alike on every rank
    gradients = torch.randn(3, BATCH, 5, generator=gen)  # d(mean loss over the micro-batch) / d activations
    failures = []
    for src, dst in itertools.permutations(LAYOUTS, 2):
        if src.placement == dst.placement:
            continue
        relayout = Relayout(src, dst, mesh.position, mesh.group)
        x = part(activations, src, mesh.position).clone().requires_grad_(True)
        y = relayout(x)
        if not torch.equal(y, part(activations, dst, mesh.position)):
            failures.append(f"{src} -> {dst}: forward ({relayout.describe()})")
        # Each layer's gradient is its replica's loss's: dp times the micro-batch mean's (relayout.py).
        y.backward(dst.dp * part(gradients, dst, mesh.position))
        if not torch.equal(x.grad, src.dp * part(gradients, src, mesh.position)):
            failures.append(f"{src} -> {dst}: backward ({relayout.describe()})")
    # A chain through all four and back: what a model of four layers does.
    x = part(activations, LAYOUTS[0], mesh.position).clone().requires_grad_(True)
    y = x
    for src, dst in zip(LAYOUTS, LAYOUTS[1:] + LAYOUTS[:1]):
        y = Relayout(src, dst, mesh.position, mesh.group)(y)
    y.backward(part(gradients, LAYOUTS[0], mesh.position))
    if not torch.equal(y, x.detach()) or not torch.equal(x.grad, part(gradients, LAYOUTS[0], mesh.position)):
        failures.append("chain tp4 -> dp4 -> dp2-tp2 -> tp2-dp2 -> tp4")
    with open(os.path.join(os.environ["LOOM_TEST_OUT"], f"rank{mesh.rank}.json"), "w") as f:
        json.dump(failures, f)
    mesh.destroy()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
