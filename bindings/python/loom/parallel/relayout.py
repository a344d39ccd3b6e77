"""Moving activations between two layers of different layouts in one pipeline stage (layout.py).

Every rank must end up with the slice of the micro-batch its new layout gives it. A re-layout is, on
each rank, one all-gather along the batch within a group, then keeping a contiguous range of what was
gathered. The group is the smallest of the candidates whose members' slices, in group order, form one
run holding every member's new slice: the rank alone (going to more DP: a local slice), the new
layout's TP groups (going to less DP, more TP, as Galvatron does), the old or new layout's DP groups.
The old layout's DP groups always qualify (together their slices are the whole micro-batch, in order),
so any two layouts of a stage can follow each other.

Backward is the same kind of move the other way, applied to the gradient. The gradient of a
replicated activation is itself replicated (inside a TP layer Megatron's f operator all-reduced it),
so the inverse of a gather is a slice and the inverse of a slice a gather; the adjoint's reduce-scatter
would add up the T identical copies. A layer's activation gradients are those of its own ranks' losses
(the mean over the slice it holds), dp times the share of the micro-batch mean, and DataParallel
averages over dp; so the gradient is scaled by dp_old / dp_new on the way back, and every layer's
parameters get the single-process gradient.
"""
from dataclasses import dataclass
from fractions import Fraction

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Move:
    """One position's part of a re-layout: all-gather over `group` (positions, ascending; a group of
    one gathers nothing), then keep [start, stop) of the gathered batch (fractions of it)."""
    group: tuple
    start: Fraction
    stop: Fraction


def plan_relayout(src, dst):
    """The Move of every position (a list by position) taking activations laid out as `src` (a
    LayerLayout) to `dst`; both cover the same stage."""
    if src.size != dst.size:
        raise ValueError(f"plan_relayout: layouts of {src.size} and {dst.size} ranks are not of one stage")
    positions = list(range(src.size))
    candidates = [[[p] for p in positions], dst.groups("tp"), src.groups("dp"), dst.groups("dp")]
    for partition in sorted(candidates, key=lambda groups: len(groups[0])):  # stable: the order above breaks ties
        moves = [_move(src, dst, group, p) for group in partition for p in group]
        if all(moves):
            return [m for _, m in sorted(zip([p for g in partition for p in g], moves))]
    raise AssertionError("plan_relayout: the old layout's DP groups always gather a whole micro-batch")


def _move(src, dst, group, position):
    slices = [src.batch_slice(p) for p in group]
    if any(a[1] != b[0] for a, b in zip(slices, slices[1:])):
        return None  # the gathered slices are not one run
    lo, hi = slices[0][0], slices[-1][1]
    want_lo, want_hi = dst.batch_slice(position)
    if want_lo < lo or want_hi > hi:
        return None
    return Move(tuple(group), (want_lo - lo) / (hi - lo), (want_hi - lo) / (hi - lo))


def _gather(x, group, dim):
    """All-gather along `dim` in group-rank order."""
    n = dist.get_world_size(group)
    first = x.movedim(dim, 0).contiguous()  # all_gather_into_tensor concatenates along dim 0
    out = torch.empty((n * first.shape[0],) + tuple(first.shape[1:]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(out, first, group=group)
    return out.movedim(0, dim)


class _Step:
    """A Move bound to this rank's process group."""

    def __init__(self, move, group, dim):
        self.move, self.group, self.dim = move, group, dim

    def run(self, x):
        if len(self.move.group) > 1:
            x = _gather(x, self.group, self.dim)
        n = x.shape[self.dim]
        start, stop = self.move.start * n, self.move.stop * n
        if start.denominator != 1 or stop.denominator != 1:
            raise ValueError(f"re-layout: a batch of {n} does not split into the layouts' slices")
        return x.narrow(self.dim, int(start), int(stop - start)).clone(memory_format=torch.contiguous_format)


class _Relayout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, forward_step, backward_step, scale):
        ctx.backward_step, ctx.scale = backward_step, scale
        return forward_step.run(x)

    @staticmethod
    def backward(ctx, grad):
        return ctx.backward_step.run(grad).mul_(ctx.scale), None, None, None


class Relayout:
    """Callable: this rank's activations in layout `src` -> in layout `dst`, differentiable.
    group_of(positions) returns the process group of those positions of the stage (made beforehand on
    every rank, layer_mesh.LayerMesh.group); dim is the batch dimension ([sequence, batch, hidden]: 1)."""

    def __init__(self, src, dst, position, group_of, dim=1):
        self.src, self.dst = src, dst
        forward, backward = plan_relayout(src, dst)[position], plan_relayout(dst, src)[position]
        self.forward_move, self.backward_move = forward, backward
        self._forward = _Step(forward, group_of(forward.group) if len(forward.group) > 1 else None, dim)
        self._backward = _Step(backward, group_of(backward.group) if len(backward.group) > 1 else None, dim)
        self._scale = src.dp / dst.dp

    def __call__(self, x):
        return _Relayout.apply(x, self._forward, self._backward, self._scale)

    def describe(self):
        def one(m):
            keep = f"keep {m.start}..{m.stop}"
            return f"gather {list(m.group)}, {keep}" if len(m.group) > 1 else keep
        return f"forward: {one(self.forward_move)}; backward: {one(self.backward_move)}"
