"""Runs a pipeline schedule (schedules.py) on this rank's model chunks, one training step at a time.

Each action of the rank's list is done in order: a forward or backward of one micro-batch on one
chunk, or a communication step whose sends and receives are posted at once with
batch_isend_irecv (activations on the mesh's pp_group, gradients on pp_grad_group: each its own Loom
communicator, matched in order per peer, as the schedule checker assumes). Receives are waited for at
once; sends are kept until the end of the step, so a rank never waits for its output to be taken.

Gradients are reduced over data parallelism during the last backward of each chunk (earlier ones
accumulate under no_sync, except with ZeRO-2 which reduces every time), waited for after the
schedule, then finalize_grads sums tied and sequence-parallel gradients.
"""
import time

import torch
import torch.distributed as dist

from .grads import finalize_grads
from .schedule_check import check
from .schedules import ACTIVATION, Backward, Comm, Forward, Send


def split_layers(n_layers, n_parts, boundaries=None):
    """[(start, end)] ranges of layers for n_parts consecutive parts: by count (the first
    n_layers % n_parts parts get one more), or at explicit `boundaries` (the n_parts - 1 indices where
    parts 1.. begin)."""
    if n_parts < 1:
        raise ValueError(f"split_layers: {n_parts} parts")
    if boundaries is None:
        if n_layers < n_parts:
            raise ValueError(f"cannot split {n_layers} layers into {n_parts} pipeline stages: "
                             f"every stage needs at least one layer")
        base, extra = divmod(n_layers, n_parts)
        sizes = [base + (1 if i < extra else 0) for i in range(n_parts)]
        boundaries = [sum(sizes[:i]) for i in range(1, n_parts)]
    boundaries = list(boundaries)
    if len(boundaries) != n_parts - 1:
        raise ValueError(f"split_layers: {len(boundaries)} boundaries for {n_parts} stages "
                         f"(need {n_parts - 1})")
    edges = [0] + boundaries + [n_layers]
    for a, b in zip(edges, edges[1:]):
        if not a < b:
            raise ValueError(f"cannot split {n_layers} layers at boundaries {boundaries}: "
                             f"every stage needs at least one layer, in order")
    return list(zip(edges, edges[1:]))


class Pipeline:
    """chunks: this rank's model chunks (DataParallel-wrapped), chunk c being virtual stage
    c * stages + pp_rank; loss_fn(output, target) -> scalar mean loss of a micro-batch (last stage);
    tensor_shape: shape of the activation between stages for one micro-batch (received from the previous
    stage); grad_shape: that of the gradient received from the next stage, this stage's output, where
    stages differ (layers with their own layouts hold different parts of a micro-batch), else tensor_shape;
    finalize(chunks, mesh): what runs after the schedule (default: finalize_grads)."""

    def __init__(self, chunks, mesh, schedule, loss_fn, tensor_shape, dtype=torch.float32, device="cpu",
                 grad_shape=None, finalize=finalize_grads):
        if schedule.stages != mesh.pp:
            raise ValueError(f"Pipeline: the schedule has {schedule.stages} stages, the mesh pp={mesh.pp}")
        if len(chunks) != schedule.chunks:
            raise ValueError(f"Pipeline: {len(chunks)} model chunks on this rank, the schedule "
                             f"{schedule.name} expects {schedule.chunks}")
        check(schedule)  # a schedule that could deadlock or mismatch messages never runs
        self.chunks, self.mesh, self.schedule = chunks, mesh, schedule
        self.loss_fn, self.tensor_shape = loss_fn, tuple(tensor_shape)
        self.grad_shape = tuple(grad_shape) if grad_shape is not None else self.tensor_shape
        self.finalize = finalize
        self.dtype, self.device = dtype, device
        self.program = schedule.actions[mesh.pp_rank]
        last_backward = {}
        for i, action in enumerate(self.program):
            if isinstance(action, Backward):
                last_backward[action.vstage] = i
        self.last_backward = set(last_backward.values())
        self.timeline = []  # (start, end, action) of each computation of the last step

    def _chunk(self, vstage):
        return self.chunks[vstage // self.schedule.stages]

    def _peer(self, vstage):
        return self.mesh.pp_ranks[self.schedule.rank_of(vstage)]

    def step(self, inputs, targets):
        """One forward and backward of every micro-batch (inputs[i], targets[i]) through the pipeline,
        then the gradient reductions. Returns the mean loss over micro-batches on the last stage
        (None elsewhere). The optimizer step is the caller's."""
        m = self.schedule.microbatches
        if len(inputs) != m or len(targets) != m:
            raise ValueError(f"Pipeline.step: {len(inputs)} input and {len(targets)} target micro-batches, "
                             f"the schedule was built for {m}")
        last = self.schedule.vstages - 1
        acts_in, grads_in, outputs, losses = {}, {}, {}, []
        pending_sends = []
        self.timeline = []
        for i, action in enumerate(self.program):
            if isinstance(action, Comm):
                pending_sends += self._communicate(action, outputs, acts_in, grads_in)
                continue
            start = time.perf_counter()
            key = (action.microbatch, action.vstage)
            model = self._chunk(action.vstage)
            if isinstance(action, Forward):
                if action.vstage == 0:
                    x = inputs[action.microbatch]
                else:
                    x = acts_in.pop(key) if key in acts_in else self._local_input(outputs, key)
                    x.requires_grad_(True)
                y = model(x)
                if action.vstage == last:
                    y = self.loss_fn(y, targets[action.microbatch]) / m
                    losses.append(y.detach())
                outputs[key] = (x, y)
            else:
                x, y = outputs.pop(key)
                grad = None if action.vstage == last else (
                    grads_in.pop(key) if key in grads_in else self._local_grad(outputs, key))
                sync = i in self.last_backward or model.zero == 2
                with model.deferred_wait(), (model.no_sync() if not sync else _nothing()):
                    torch.autograd.backward(y, grad)
                if action.vstage > 0:
                    outputs[("grad",) + key] = x.grad
            self.timeline.append((start, time.perf_counter(), action))
        for w in pending_sends:
            w.wait()
        self.finalize(self.chunks, self.mesh)
        return torch.stack(losses).sum() if losses else None

    def _local_input(self, outputs, key):
        # The previous virtual stage is on this rank (a single pipeline rank): take its output.
        _, y = outputs[(key[0], key[1] - 1)]
        return y.detach()

    def _local_grad(self, outputs, key):
        return outputs.pop(("grad", key[0], key[1] + 1))

    def _communicate(self, step, outputs, acts_in, grads_in):
        ops = {ACTIVATION: [], "gradient": []}
        received = []
        for op in step.ops:
            group = self.mesh.pp_group if op.kind == ACTIVATION else self.mesh.pp_grad_group
            if isinstance(op, Send):
                if op.kind == ACTIVATION:
                    tensor = outputs[(op.microbatch, op.src)][1].detach()
                else:
                    tensor = outputs.pop(("grad", op.microbatch, op.src))
                ops[op.kind].append(dist.P2POp(dist.isend, tensor.contiguous(), self._peer(op.dst), group))
            else:
                shape = self.tensor_shape if op.kind == ACTIVATION else self.grad_shape
                buffer = torch.empty(shape, dtype=self.dtype, device=self.device)
                ops[op.kind].append(dist.P2POp(dist.irecv, buffer, self._peer(op.src), group))
                received.append((op, buffer))
        batches = [(dist.batch_isend_irecv(kind_ops), any(o.op is dist.irecv for o in kind_ops))
                   for kind_ops in ops.values() if kind_ops]
        sends = []
        for works, has_receive in batches:  # all posted before any wait
            if has_receive:  # one Loom group: its receives are done when all of it is
                for w in works:
                    w.wait()
            else:
                sends += works
        for op, buffer in received:
            (acts_in if op.kind == ACTIVATION else grads_in)[(op.microbatch, op.dst)] = buffer
        return sends


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
