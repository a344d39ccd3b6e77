"""Time and memory of one layer under one strategy (Galvatron's cost model, with communication priced
by Loom's collective model on the topology instead of profiled bandwidths).

A pipeline of p stages runs m micro-batches with 1F1B; within a stage, a layer is charged (m + p - 1)
micro-batch slots of its micro-batch time (Galvatron's), plus the gradient synchronisation its last
backward does not hide; where ranks share cores (Machine.share = ranks per core when all compute, CPU
ranks), the m micro-batches take m * share slots of a rank's own speed, and a pipeline's bubbles are
only a cost where they make the step longer than that (the idle stages' cores serve the busy ones):
max(m + p - 1, m * share) slots. The step itself combines the stages as search.pipeline_step_s does
(Alpa's latency: one micro-batch through every stage, the rest behind the slowest).

Per layer l and strategy s (tp, dp, sdp, checkpointing), with b = global batch / (m * dp) samples per
micro-batch on each replica:

- forward F = compute(l, b / tp) (measured: a fixed part per call + a part per sample * b / tp; else
  FLOPs / speed), backward 2F, recomputation F more;
- TP: tp_comm_bytes * b all-reduced over the TP group in forward, again in backward (and in the
  recomputation), in the layer's tp_calls all-reduces (each paying the per-collective overhead);
- SDP (ZeRO-3) as loom.parallel.ShardedDataParallel runs it, with prefetch: the layer's parameters
  all-gathered beside the forward (the previous layer's forward starts it) and again beside the
  backward, with its gradients' reduce-scatter, each slowed by the overlap coefficient; priced against
  the layer's own compute (the first layer's gather, which nothing hides, is not told apart); a
  recomputation reuses the backward's gather and adds compute for them to hide behind;
- DP: gradients all-reduced once per step, behind the last micro-batch's backward;
- memory: parameters, gradients and optimizer states / tp (/ dp with SDP); activations of the
  micro-batches in flight (1F1B: p - stage of them), per micro-batch activation_bytes * b with the
  layer's input replicated over TP and the rest split, or only the input with checkpointing.

A layer's cost in the search is its slots * its micro-batch time + its exposed synchronisation, so a
stage's cost is the sum over its layers; changing layout between layers adds the moves of samples
between ranks it needs (priced as point-to-point transfers), per micro-batch both ways.
"""
import functools
from dataclasses import dataclass


# Any change of strategy between layers costs at least this much (a nanosecond), so that among plans of
# equal time the one with fewer changes wins (Galvatron biases its ties too): alike layers stay together.
TIE_BREAK_S = 1e-9


@dataclass(frozen=True)
class Context:
    """Where a layer runs: global batch, micro-batches, pipeline degree and stage."""
    global_batch: int
    micro_batches: int
    pp: int
    stage: int
    share: float = 1.0  # ranks per core when all compute (Machine.share)

    @property
    def slots(self):
        return max(self.micro_batches + self.pp - 1, self.micro_batches * self.share)

    @property
    def in_flight(self):  # 1F1B: stage s keeps at most p - s micro-batches' activations
        return min(self.micro_batches, self.pp - self.stage)


@dataclass(frozen=True)
class LayerCost:
    microbatch_s: float  # one micro-batch's forward + backward (+ recomputation) with TP and SDP comm
    sync_s: float  # gradient synchronisation the last backward does not hide
    memory_bytes: float
    states_bytes: float
    activation_bytes: float  # of all micro-batches in flight
    compute_s: float = 0.0  # one micro-batch's compute (forward, backward, recomputation) without communication

    def search_cost(self, ctx):
        return ctx.slots * self.microbatch_s + self.sync_s


def local_batch(strategy, ctx):
    """Samples per micro-batch on one replica, or None when the batch does not split evenly."""
    per_mb, rest = divmod(ctx.global_batch, ctx.micro_batches * strategy.dp)
    return per_mb if rest == 0 and per_mb > 0 else None


def _overlapped(compute, comm, slowdown):
    """Time of compute with comm running beside it: while both run each goes `slowdown` times slower,
    then the longer one finishes alone (Galvatron's overlap coefficient)."""
    return max(compute, comm) + min(compute, comm) * (slowdown - 1)


def layer_cost(spec, index, strategy, machine, ctx):
    layer = spec.layers[index]
    b = local_batch(strategy, ctx)
    if b is None:
        return None
    if strategy.tp > 1 and not layer.tensor_parallel:
        return None
    stage = machine.stage_ranks(ctx.pp, ctx.stage)
    tp_group = strategy.groups("tp", stage)[0]
    dp_group = strategy.groups("dp", stage)[0]
    k = machine.overlap_slowdown
    param_bytes = layer.params / strategy.tp * spec.bytes_per_param["params"]
    grad_bytes = layer.params / strategy.tp * spec.bytes_per_param["grads"]

    fwd = machine.forward_s(layer, b, strategy.tp)
    bwd = 2 * fwd
    compute = fwd + bwd + (fwd if strategy.checkpoint else 0.0)
    tp_ar = 0.0  # forward's all-reduces (backward's the same)
    if strategy.tp > 1:
        calls = layer.tp_calls / 2
        gap = compute / (layer.tp_calls * (1.5 if strategy.checkpoint else 1))  # compute between two of them
        tp_ar = calls * machine.collective_s("all_reduce", layer.tp_comm_bytes * b / calls, tp_group, gap)
    recompute_s = (fwd + tp_ar) if strategy.checkpoint else 0.0
    if strategy.sdp:
        # Prefetched gathers and background reduce-scatters run beside the compute (sharded.py).
        gather = machine.collective_s("all_gather", param_bytes, dp_group, fwd)
        reduce = machine.collective_s("reduce_scatter", grad_bytes, dp_group, bwd)
        fwd_t = _overlapped(fwd, gather, k)
        bwd_t = _overlapped(bwd + recompute_s, gather + reduce, k) - recompute_s
        sync = 0.0
    else:
        fwd_t, bwd_t = fwd, bwd
        grad_sync = machine.collective_s("all_reduce", grad_bytes, dp_group)
        sync = _overlapped(bwd, grad_sync, k) - bwd
    micro = fwd_t + bwd_t + 2 * tp_ar + recompute_s

    states = layer.params / strategy.tp * spec.state_bytes_per_param / (strategy.dp if strategy.sdp else 1)
    input_bytes = spec.layers[index - 1].output_bytes if index > 0 else 0
    if strategy.checkpoint:
        act = input_bytes * b
    else:
        replicated = min(layer.activation_bytes, input_bytes)
        act = (replicated + (layer.activation_bytes - replicated) / strategy.tp) * b
    act *= ctx.in_flight
    return LayerCost(micro, sync, states + act, states, act, compute)


def replica_of(strategy, stage):
    """rank -> its data-parallel index (which slice of the micro-batch it works on)."""
    index = {}
    for group in strategy.groups("dp", stage):
        for d, rank in enumerate(group):
            index[rank] = d
    return index


def relayout_pairs(prev, cur, stage):
    """(source, destination, fraction of the stage's micro-batch) moves that ranks need so that every
    rank holds the samples of `cur`'s replica after computing `prev`'s: none when each rank's new slice
    lies inside its old one."""
    old, new = replica_of(prev, stage), replica_of(cur, stage)
    holders = {}
    for rank, d in old.items():
        holders.setdefault(d, []).append(rank)
    moves = []
    for rank in stage:
        a, b = new[rank] / cur.dp, (new[rank] + 1) / cur.dp
        for d in range(prev.dp):
            lo, hi = max(a, d / prev.dp), min(b, (d + 1) / prev.dp)
            if hi <= lo or old[rank] == d:
                continue
            sources = holders[d]
            moves.append((sources[rank % len(sources)], rank, hi - lo))
    return moves


def transition_cost(spec, index, prev, cur, machine, ctx):
    """Cost (as search_cost counts it) of switching from `prev` (layer index - 1) to `cur` (layer index)."""
    if prev == cur or index == 0:
        return 0.0
    fraction, pairs = _relayout(prev, cur, tuple(machine.stage_ranks(ctx.pp, ctx.stage)))
    if not pairs:
        return TIE_BREAK_S
    nbytes = spec.layers[index - 1].output_bytes * ctx.global_batch / ctx.micro_batches * fraction
    gap = machine.forward_s(spec.layers[index], local_batch(cur, ctx) or 1, cur.tp)  # a layer's forward or backward
    return TIE_BREAK_S + ctx.slots * 2 * machine.p2p_s(nbytes, pairs, gap)


@functools.lru_cache(maxsize=65536)
def _relayout(prev, cur, stage):
    """(largest fraction of the micro-batch one move carries, the (source, destination) pairs)."""
    moves = relayout_pairs(prev, cur, list(stage))
    if not moves:
        return 0.0, ()
    return max(f for _, _, f in moves), tuple(sorted({(s, d) for s, d, _ in moves}))  # activations forward, their gradients back


def boundary_cost(spec, last_index, machine, ctx, stage_compute_s=None):
    """Per-step cost of stage ctx.stage's sends to the next stage (activations) and the returning
    gradients: each rank of the stage passes its share of the micro-batch to the rank at the same
    place in the next stage. stage_compute_s: the stage's compute per micro-batch (between a forward's
    send and the next backward's, half of it)."""
    if ctx.stage >= ctx.pp - 1:
        return 0.0
    here = machine.stage_ranks(ctx.pp, ctx.stage)
    there = machine.stage_ranks(ctx.pp, ctx.stage + 1)
    nbytes = spec.layers[last_index].output_bytes * ctx.global_batch / ctx.micro_batches / len(here)
    gap = stage_compute_s / 2 if stage_compute_s is not None else None
    return ctx.slots * 2 * machine.p2p_s(nbytes, list(zip(here, there)), gap)
