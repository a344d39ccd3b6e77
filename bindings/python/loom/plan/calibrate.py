"""Calibration on the machine at hand: what a profile in one quiet process misses when N ranks run.

- concurrent_profile: the model description measured by N processes at once (each its own
  describe_module, started together), keeping each layer's slowest forward time: ranks that share
  cores, memory bandwidth or caches compute slower than one process alone.
- collective_overhead: a small all-reduce of the "loom" backend in groups of each size, timed while
  every rank also computes (as in a training step), against what Loom's model predicts for it; the
  difference is a per-collective cost the model does not have (Python and torch dispatch, ranks
  waiting to be scheduled on shared cores), which Machine adds to every collective and transfer of a
  group of that size (`collective_overhead_s`).
- overlap_slowdown: Galvatron's overlap coefficient measured: compute with an all-reduce of the whole
  job running beside it (async), against each alone; how much slower each runs while both do
  (`Machine.overlap_slowdown`, which prices gradient reductions and SDP's prefetched gathers).
- step_overhead: what a rank of a real distributed training run spends per step beyond all of the
  above (the training loop's Python, the optimizer, autograd's bookkeeping, the per-call work of its
  collectives, two processes taking turns on a core): the model's own data-parallel plan trained at
  two micro-batch counts, against the model's prediction for it (`Machine.rank_overhead_s`).
"""
import json
import math
import os
import socket
import statistics
import tempfile
import time
from datetime import timedelta

import torch.multiprocessing as mp

from .model import ModelSpec


def _run_ranks(worker, args, ranks, prefix):
    """Runs worker(rank, *args, outdir) in `ranks` spawned processes; each writes rank<r>.json into outdir.
    Returns what they wrote, by rank."""
    outdir = tempfile.mkdtemp(prefix=prefix)
    mp.spawn(worker, args=(*args, outdir), nprocs=ranks, join=True)
    per_rank = []
    for r in range(ranks):
        with open(os.path.join(outdir, f"rank{r}.json")) as f:
            per_rank.append(json.load(f))
    return per_rank


def _profile_worker(rank, ranks, describe, barrier, cpu_bind, outdir):
    import torch

    from loom.parallel.cpu_binding import bind_cpu

    torch.set_num_threads(1)
    bind_cpu(cpu_bind, rank, ranks)
    barrier.wait()
    spec = describe()
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(spec.to_json(), f)


def concurrent_profile(describe, ranks, cpu_bind="none"):
    """describe() -> ModelSpec (a picklable callable), run by `ranks` processes at once (bound to cores
    by loom.parallel.bind_cpu's `cpu_bind`, as the training run will be); the result has each layer's
    largest forward times (per sample and per call)."""
    barrier = mp.get_context("spawn").Barrier(ranks)
    specs = [ModelSpec.from_json(d) for d in
             _run_ranks(_profile_worker, (ranks, describe, barrier, cpu_bind), ranks, "loom-plan-profile-")]
    result = specs[0]
    for i, layer in enumerate(result.layers):
        for key in ("forward_s", "forward_fixed_s"):
            times = [getattr(s.layers[i], key) for s in specs if getattr(s.layers[i], key) is not None]
            setattr(layer, key, max(times) if times else None)
    return result


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _join(rank, ranks, port, cpu_bind):
    """A calibration process: one compute thread, bound as the training run binds its ranks, in a job of
    the loom backend."""
    import torch
    import torch.distributed as dist

    import loom.torch  # noqa: F401 - registers the backend
    from loom.parallel.cpu_binding import bind_cpu

    torch.set_num_threads(1)
    bind_cpu(cpu_bind, rank, ranks)
    dist.init_process_group("loom", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks,
                            timeout=timedelta(seconds=120))


def _loaded_worker(rank, ranks, port, sizes, works, nbytes, iterations, rounds, cpu_bind, outdir):
    import torch
    import torch.distributed as dist

    _join(rank, ranks, port, cpu_bind)
    groups = {}
    for g in sizes:  # consecutive ranks, as TP groups and pipeline stages are laid out
        for first in range(0, ranks, g):
            group = dist.new_group(list(range(first, first + g)))
            if first <= rank < first + g:
                groups[g] = group
    a, b = torch.randn(128, 128), torch.randn(128, 128)
    x = torch.zeros(max(1, nbytes // 4))

    def phase(group, work):
        n = max(10, iterations // work)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(n):
            for _ in range(work):  # compute between collectives, so that ranks compete for cores as in a step
                torch.mm(a, b)
            if group is not None:
                dist.all_reduce(x, group=group)
        return (time.perf_counter() - start) / n

    def pipeline(work):
        """Two pipeline stages (the first and second half of the ranks) in a 1F1B-like steady state: the
        first computes micro-batch i while the second computes i - 1, then the activation goes forward
        and the gradient of i - 1 comes back. All ranks compute at once, as in a pipelined step; what
        the two boundary crossings add to an iteration is the waiting for a rank to get a core back.
        Transfers are posted as loom.parallel's pipeline posts them (batch_isend_irecv, async: the
        engine thread moves them; a receive is waited for, a send only before the step ends), which
        costs about twice a blocking send/recv pair here."""
        n, half = max(10, iterations // work), ranks // 2
        partner, first = (rank + half) % ranks, rank < half
        y = torch.zeros_like(x)
        sends = []

        def transfer(tensor, op):
            works = dist.batch_isend_irecv([dist.P2POp(op, tensor, partner)])
            if op is dist.irecv:
                for w in works:
                    w.wait()
            else:
                sends.extend(works)

        dist.barrier()
        start = time.perf_counter()
        for i in range(n):
            if not first:
                transfer(x, dist.irecv)
            for _ in range(work):
                torch.mm(a, b)
            transfer(x if first else y, dist.isend)
            if first and i > 0:
                transfer(y, dist.irecv)  # the gradient of micro-batch i - 1
        if first:
            transfer(y, dist.irecv)  # the last one's
        for w in sends:
            w.wait()
        return (time.perf_counter() - start) / n

    for g in sizes:  # warm up every group's connections
        phase(groups[g], 1)
    if ranks > 1:
        pipeline(1)
    samples = {}
    for _ in range(rounds):
        for work in works:
            samples.setdefault(f"compute{work}", []).append(phase(None, work))
            for g in sizes:
                samples.setdefault(f"{g}/{work}", []).append(phase(groups[g], work))
            if ranks > 1:
                samples.setdefault(f"p2p/{work}", []).append(pipeline(work))
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(samples, f)
    dist.destroy_process_group()


def loaded_collective_s(ranks, sizes=None, works=(1, 4, 16), nbytes=4, iterations=160, rounds=3, cpu_bind="none"):
    """{group size: [(gap, seconds), ...], "p2p": [...]}: what a small all-reduce adds to a loop of
    compute when all `ranks` processes of the loom backend run such loops at once, each in groups of
    consecutive ranks of that size, after `gap` seconds of compute (wall time, every rank computing: 1,
    4 and 16 small matrix products): the dispatch, and on shared cores the wait for the group's other
    ranks to be scheduled. Medians over rounds of the slowest rank's time per iteration, with the
    all-reduce minus without. "p2p": what one crossing of a pipeline boundary (a send and its receive
    between the two halves of the ranks, both computing) adds, at the same gaps. cpu_bind: how the
    processes are bound to cores (loom.parallel.bind_cpu), as the training run binds them."""
    sizes = sizes or [g for g in (2 ** k for k in range(1, 16)) if g <= ranks]
    per_rank = _run_ranks(_loaded_worker, (ranks, _free_port(), sizes, works, nbytes, iterations, rounds, cpu_bind),
                          ranks, "loom-plan-collective-")
    slowest = {key: [max(p[key][i] for p in per_rank) for i in range(rounds)] for key in per_rank[0]}

    def points(key, crossings):  # [(gap, seconds one collective or crossing adds)] for each amount of compute
        result = []
        for work in works:
            compute = slowest[f"compute{work}"]
            extra = statistics.median((w - c) / crossings for w, c in zip(slowest[f"{key}/{work}"], compute))
            result.append((statistics.median(compute), max(0.0, extra)))
        return sorted(result)

    out = {g: points(g, 1) for g in sizes}
    if ranks > 1:
        out["p2p"] = points("p2p", 2)  # an activation forward and a gradient back per iteration
    return out


def collective_overhead(ranks, collectives, nbytes=4, cpu_bind="none"):
    """{group size or "p2p": [(gap, measured, predicted), ...]} seconds of a small all-reduce (a pipeline
    boundary's send and receive) under load (loaded_collective_s) and Loom's model of it. Machine's
    collective_overhead_s takes {g: [(gap, measured - predicted), ...]}: what the model lacks."""
    out = {}
    half = ranks // 2
    for g, points in loaded_collective_s(ranks, nbytes=nbytes, cpu_bind=cpu_bind).items():
        if g == "p2p":
            predicted = collectives.p2p(nbytes, [(r, r + half) for r in range(half)]) * 1e-6
        else:
            predicted = collectives.collective("all_reduce", nbytes, list(range(g)))["time_us"] * 1e-6
        out[g] = [(gap, seconds, predicted) for gap, seconds in points]
    return out


def _overlap_worker(rank, ranks, port, sizes, work, iterations, rounds, cpu_bind, outdir):
    import torch
    import torch.distributed as dist

    _join(rank, ranks, port, cpu_bind)
    a, b = torch.randn(128, 128), torch.randn(128, 128)
    buffers = {n: torch.ones(max(1, n // 4)) for n in sizes}

    def compute():
        for _ in range(work):
            torch.mm(a, b)

    def timed(fn):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iterations):
            fn()
        return (time.perf_counter() - start) / iterations

    def both(x):
        pending = dist.all_reduce(x, async_op=True)
        compute()
        pending.wait()

    for x in buffers.values():  # connections and buffers warmed
        dist.all_reduce(x)
    samples = {}
    for _ in range(rounds):
        samples.setdefault("compute", []).append(timed(compute))
        for n, x in buffers.items():
            samples.setdefault(f"comm{n}", []).append(timed(lambda x=x: dist.all_reduce(x)))
            samples.setdefault(f"both{n}", []).append(timed(lambda x=x: both(x)))
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(samples, f)
    dist.destroy_process_group()


def overlap_slowdown(ranks, sizes=(16 << 10, 128 << 10, 1 << 20, 4 << 20, 16 << 20), work=16, iterations=8,
                     rounds=3, cpu_bind="none"):
    """(k, [(bytes, compute s, all-reduce s, both s, k at that size), ...]): Galvatron's overlap
    coefficient on this machine for `ranks` processes of the loom backend (bound by `cpu_bind`): every
    rank runs `work` small matrix products while an all-reduce over all ranks runs beside them (issued
    async before, waited after), against each alone. With both = max(c, m) + (k - 1) * min(c, m) (the
    planner's model of overlap, cost._overlapped), k = 1 + (both - max) / min; 1 when they overlap
    perfectly, 2 when they take turns, more when running together costs extra. The k reported is the
    median over the sizes whose all-reduce takes a third to three times the compute's time, where it
    matters most (else the size closest to it); slowest rank's times, medians over rounds."""
    per_rank = _run_ranks(_overlap_worker, (ranks, _free_port(), list(sizes), work, iterations, rounds, cpu_bind),
                          ranks, "loom-plan-overlap-")

    def slowest(key):
        return statistics.median(max(p[key][i] for p in per_rank) for i in range(rounds))

    c = slowest("compute")
    points = []
    for n in sizes:
        m, t = slowest(f"comm{n}"), slowest(f"both{n}")
        k = 1.0 + max(0.0, t - max(c, m)) / min(c, m)
        points.append((n, c, m, t, k))
    alike = [p[4] for p in points if abs(math.log(p[2] / p[1])) <= math.log(3)]
    if alike:
        return statistics.median(alike), points
    return min(points, key=lambda p: abs(math.log(p[2] / p[1])))[4], points


def step_overhead(spec, machine, global_batch, measure, micro_batches=(1, 2)):
    """((per step, per micro-batch) seconds, [(m, measured s, predicted s), ...]): the CPU time each rank
    of a distributed training run spends beyond what `machine` prices, for Machine.rank_overhead_s.

    measure(pp, strategy names per layer, m) -> seconds per step trains that plan (the user's own
    training command, e.g. train_gpt.py --plan) and times it. This runs the plan that needs nothing but
    data parallelism (every layer pp1-dpN over all the machine's ranks) at each micro-batch count and
    compares each with what `machine` predicts for it without a rank overhead: where ranks share cores
    the whole difference is all ranks' extra CPU over the cores (share times each rank's), else one
    rank's. The per-step and per-micro-batch parts are the line through the two counts (one part alone
    where the line would make the other negative). One plan suffices because this cost is per rank and
    step: profiled per rank on 4 CPU ranks, it was the same within 20% under data parallelism, a
    pipeline, and both."""
    from dataclasses import replace

    from .search import plan_cost
    from .strategies import strategies

    if len(set(micro_batches)) != 2:
        raise ValueError(f"step_overhead needs two different micro-batch counts, got {micro_batches}")
    base = replace(machine, rank_overhead_s=(0.0, 0.0), _cache={})
    data_parallel = next(s for s in strategies(machine.devices, pp=1)
                         if s.dp == machine.devices and not s.sdp and not s.checkpoint)
    name, layout = data_parallel.name, [data_parallel] * len(spec.layers)
    points = []
    for m in micro_batches:
        predicted = plan_cost(spec, base, global_batch, 1, m, layout)
        if predicted is None:
            raise ValueError(f"a global batch of {global_batch} does not split into {m} micro-batches over "
                             f"{machine.devices} replicas")
        points.append((m, measure(1, [name] * len(spec.layers), m), predicted["step_s"]))
    (m1, meas1, pred1), (m2, meas2, pred2) = sorted(points)
    extra1, extra2 = ((meas - pred) / machine.share for meas, pred in ((meas1, pred1), (meas2, pred2)))
    per_mb = (extra2 - extra1) / (m2 - m1)
    per_step = extra1 - m1 * per_mb
    if per_mb < 0:
        per_step, per_mb = max(0.0, (extra1 + extra2) / 2), 0.0
    elif per_step < 0:
        per_step, per_mb = 0.0, max(0.0, (extra1 / m1 + extra2 / m2) / 2)
    return (per_step, per_mb), points
