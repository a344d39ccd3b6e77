"""One pipeline stage of a model whose layers have their own layouts (layout.py): each layer built on its
own TP group, its gradients averaged over its own DP group (DataParallel) or reduce-scattered into a
shard (ShardedDataParallel, SDP), its activations recomputed in backward or not, and the activations
re-laid out (relayout.py) wherever a layer's layout differs from the one before it (on the first layer
of a later stage: from the previous stage's last layout, in which the pipeline delivers them).

Consecutive layers of one placement and one DP kind form a segment: one DataParallel over them (their
gradients share buckets) or one ShardedDataParallel (each layer a unit, gathered for its own forward and
backward), after one re-layout. A recomputed layer is wrapped inside its segment, so SDP gathers its
parameters before the recomputation as before the backward.

The tied input/output embedding has two copies, the embedding's and the head's, which may be split over
different TP groups, sharded or not, on different stages. After the data-parallel reductions every rank
holding either copy adds what it holds of each reduced gradient, divided by the number of ranks holding
that same part, into a zero table of the full size; the table is all-reduced over the first and last
stages and each copy takes its part back, so both get the single-process gradient. It moves the whole
table once a step: the price of letting the two ends choose their layouts freely.

StageModel stands where a DataParallel chunk stands for Pipeline (zero, no_sync, deferred_wait,
finish_grad_sync); give the Pipeline `finalize=finalize_stage_grads`.
"""
import contextlib
import math

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.checkpoint import checkpoint

from .data_parallel import DataParallel
from .relayout import Relayout
from .sharded import ShardedDataParallel


class Recompute(nn.Module):
    """The layer, its activations recomputed in backward instead of kept."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        if torch.is_grad_enabled():
            return checkpoint(self.layer, x, use_reentrant=False)
        return self.layer(x)


def _segments(indices, layouts):
    runs = []
    for i in indices:
        key = (layouts[i].placement, layouts[i].sdp)
        if runs and runs[-1][0] == key:
            runs[-1][1].append(i)
        else:
            runs.append((key, [i]))
    return [run for _, run in runs]


class StageModel(nn.Module):
    zero = 0  # Pipeline asks: gradients are reduced in the last backward of a step (SDP: in every one)

    def __init__(self, layers, mesh):
        """layers: this stage's model layers (mesh.my_layers of them, in order), each built on
        mesh.tp_group(its index); mesh: a layer_mesh.LayerMesh."""
        super().__init__()
        indices = list(mesh.my_layers)
        if len(layers) != len(indices):
            raise ValueError(f"StageModel: {len(layers)} layers for stage {mesh.pp_rank}, which holds layers "
                             f"{indices[0]}..{indices[-1]}")
        self.mesh, self.indices = mesh, indices
        self._layer = dict(zip(indices, layers))
        wrappers, self.relayouts, self._wrapper_of = [], [], {}
        previous = mesh.input_layout()
        for run in _segments(indices, mesh.layouts):
            layout = mesh.layouts[run[0]]
            moves = previous is not None and previous.placement != layout.placement
            self.relayouts.append(Relayout(previous, layout, mesh.position, mesh.group) if moves else None)
            body = nn.Sequential(*[Recompute(self._layer[i]) if mesh.layouts[i].checkpoint else self._layer[i]
                                   for i in run])
            # Every rank makes the same parameters from seeded generators: no broadcast needed.
            if layout.dp == 1:
                wrapper = body
            elif layout.sdp:
                wrapper = ShardedDataParallel(body, mesh.dp_group(run[0]), broadcast=False)
            else:
                wrapper = DataParallel(body, mesh.dp_group(run[0]), broadcast=False)
            wrappers.append(wrapper)
            self._wrapper_of.update({i: wrapper for i in run})
            previous = layout
        self.segments = nn.ModuleList(wrappers)

    @property
    def module(self):
        """The model itself (a DataParallel chunk's .module is what it wraps)."""
        return self

    def forward(self, x):
        for relayout, segment in zip(self.relayouts, self.segments):
            if relayout is not None:
                x = relayout(x)
            x = segment(x)
        return x

    def _data_parallel(self):
        return [s for s in self.segments if isinstance(s, DataParallel)]

    @contextlib.contextmanager
    def no_sync(self):
        """DataParallel segments accumulate without reducing; SDP segments reduce-scatter every backward."""
        with contextlib.ExitStack() as stack:
            for s in self._data_parallel():
                stack.enter_context(s.no_sync())
            yield

    @contextlib.contextmanager
    def deferred_wait(self):
        with contextlib.ExitStack() as stack:
            for s in self._data_parallel():
                stack.enter_context(s.deferred_wait())
            yield

    def finish_grad_sync(self):
        for s in self._data_parallel():
            s.finish_grad_sync()

    def zero_grad(self, set_to_none=False):
        for s in self.segments:
            if isinstance(s, (DataParallel, ShardedDataParallel)):
                s.zero_grad()
            else:
                for p in s.parameters():
                    if p.grad is not None:
                        p.grad.zero_()

    def optimizer_parameters(self):
        """What the optimizer steps: the parameters of DP and single-rank layers, the shards of SDP ones."""
        params = []
        for s in self.segments:
            params += s.sharded_parameters() if isinstance(s, ShardedDataParallel) else \
                [p for p in s.parameters() if p.requires_grad]
        return params

    def tied_regions(self):
        """[(start, stop, gradient, holders)]: for each part of a tied embedding copy whose reduced
        gradient this rank holds, its elements [start, stop) in the full table (flattened; the copy is
        split by rows over its TP group), that gradient (a flat view) and how many ranks hold the same."""
        out = []
        for i in self.indices:
            layout, wrapper = self.mesh.layouts[i], self._wrapper_of[i]
            for p in self._layer[i].parameters():
                if not getattr(p, "tied_embedding", False):
                    continue
                if getattr(p, "tp_split_dim", 0) not in (0, None):
                    raise ValueError("StageModel: a tied embedding must be split by rows")
                if isinstance(wrapper, ShardedDataParallel):
                    numel = math.prod(wrapper.parameter_shape(p))
                    lo, hi, grad = wrapper.shard_region(p)
                    holders = 1  # each shard is this rank's alone
                else:
                    numel, lo, hi = p.numel(), 0, p.numel()
                    grad = (wrapper.reduced_grad(p) if isinstance(wrapper, DataParallel) else p.grad).reshape(-1)
                    holders = layout.dp  # every replica holds the same averaged gradient
                split = getattr(p, "tp_split_dim", 0) == 0
                rows = layout.tp_index(self.mesh.position) * numel if split else 0  # where this TP slice starts
                out.append((rows + lo, rows + hi, grad, holders, numel * layout.tp if split else numel))
        return out


@torch.no_grad()
def sum_tied(regions, group):
    """Gives every region the sum over `group` of all regions' gradients (tied_regions' tuples; all of
    one table). The table is whole on every rank: parts no rank here holds stay zero."""
    sizes = {full for *_, full in regions}
    if len(sizes) != 1:
        raise ValueError(f"tied embedding: copies of different sizes {sorted(sizes)}")
    grad = regions[0][2]
    table = torch.zeros(sizes.pop(), dtype=grad.dtype, device=grad.device)
    for start, stop, g, holders, _ in regions:
        table[start:stop] += g / holders
    if group is not None:
        dist.all_reduce(table, group=group)
    for start, stop, g, _, _ in regions:
        g.copy_(table[start:stop])


def finalize_stage_grads(chunks, mesh):
    """Pipeline's `finalize` for StageModel chunks: waits for the data-parallel reductions, then sums the
    tied embedding's copies over the first and last stages (mesh.tie_group)."""
    for c in chunks:
        c.finish_grad_sync()
    regions = [r for c in chunks for r in c.tied_regions()]
    if regions:
        sum_tied(regions, mesh.tie_group)
