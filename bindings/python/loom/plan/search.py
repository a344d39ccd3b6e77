"""Galvatron's search: for each pipeline degree and micro-batch count, a dynamic program per stage over
its layers and the device memory picks each layer's strategy; the fastest pipeline wins.

The dynamic program (Galvatron's C(L, E)): f[l][e][j] is the least cost of layers 0..l with layer l
under strategy j using at most e units of memory,
    f[l][e][j] = c(l, j) + min_i f[l-1][e - m(l, j)][i] + R(l, i, j),
in O(L * E * S^2) time (numpy over e and i). Memory is counted in units of budget / resolution, each
layer's rounded up, so a plan the program accepts fits.
"""
import itertools
import math
from dataclasses import replace

import numpy as np

from . import cost as costs
from .strategies import strategies

INF = float("inf")


def dynamic_program(layer_costs, layer_units, transitions, budget_units):
    """layer_costs[l][j], layer_units[l][j] (ints), transitions[l][i][j] (from strategy i at l-1 to j at
    l; transitions[0] is not used) -> (least total cost, [strategy index per layer]); (inf, None) when
    nothing fits budget_units."""
    c = np.asarray(layer_costs, dtype=float)
    units = np.asarray(layer_units, dtype=np.int64)
    n_layers, n_strategies = c.shape
    size = budget_units + 1
    f = np.full((size, n_strategies), INF)
    for j in range(n_strategies):
        if units[0, j] <= budget_units:
            f[units[0, j]:, j] = c[0, j]
    back = np.zeros((n_layers, size, n_strategies), dtype=np.int32)
    rows = np.arange(size)
    for layer in range(1, n_layers):
        g = np.full((size, n_strategies), INF)
        r = np.asarray(transitions[layer], dtype=float)
        for j in range(n_strategies):
            u = units[layer, j]
            if u > budget_units or not math.isfinite(c[layer, j]):
                continue
            shifted = np.full((size, n_strategies), INF)
            shifted[u:] = f[:size - u]
            candidates = shifted + r[:, j][None, :]
            best = np.argmin(candidates, axis=1)
            back[layer, :, j] = best
            g[:, j] = candidates[rows, best] + c[layer, j]
        f = g
    j = int(np.argmin(f[budget_units]))
    total = float(f[budget_units, j])
    if not math.isfinite(total):
        return INF, None
    chosen, e = [j], budget_units
    for layer in range(n_layers - 1, 0, -1):
        i = int(back[layer, e, j])
        e -= int(units[layer, j])
        chosen.append(i)
        j = i
    return total, chosen[::-1]


def brute_force(layer_costs, layer_units, transitions, budget_units):
    """What dynamic_program computes, by trying every assignment (for tests on small cases)."""
    n_layers, n_strategies = len(layer_costs), len(layer_costs[0])
    best, best_choice = INF, None
    for choice in itertools.product(range(n_strategies), repeat=n_layers):
        if sum(layer_units[l][j] for l, j in enumerate(choice)) > budget_units:
            continue
        total = sum(layer_costs[l][j] for l, j in enumerate(choice))
        total += sum(transitions[l][choice[l - 1]][choice[l]] for l in range(1, n_layers))
        if total < best:
            best, best_choice = total, list(choice)
    return best, best_choice


def split_even(n_layers, parts):
    base, extra = divmod(n_layers, parts)
    sizes = [base + (1 if i < extra else 0) for i in range(parts)]
    edges = [sum(sizes[:i]) for i in range(parts + 1)]
    return list(zip(edges, edges[1:]))


def stage_problem(spec, machine, candidates, ctx, layers, unit):
    """The dynamic program's inputs for the layers [start, end) of stage ctx.stage."""
    start, end = layers
    table = [[costs.layer_cost(spec, i, s, machine, ctx) for s in candidates] for i in range(start, end)]
    c = [[lc.search_cost(ctx) if lc is not None else INF for lc in row] for row in table]
    units = [[math.ceil(lc.memory_bytes / unit - 1e-9) if lc is not None else 0 for lc in row] for row in table]
    transitions = [None] + [[[costs.transition_cost(spec, i, a, b, machine, ctx) for b in candidates]
                             for a in candidates] for i in range(start + 1, end)]
    return table, c, units, transitions


def micro_batch_choices(global_batch, pp, limit=64):
    m, out = 1, []
    while m <= min(global_batch, limit):
        if global_batch % m == 0 and (pp == 1 or m >= pp):
            out.append(m)
        m *= 2
    return out


def stage_problems(spec, machine, candidates, pp, micro_batches, global_batch, unit):
    out = []
    for s, layers in enumerate(split_even(len(spec.layers), pp)):
        ctx = costs.Context(global_batch, micro_batches, pp, s, machine.share)
        out.append((ctx, layers) + stage_problem(spec, machine, candidates, ctx, layers, unit))
    return out


def evaluate(spec, machine, candidates, problems, resolution, assignment=None):
    """The best plan for one pipeline degree and micro-batch count (stage_problems), or the cost of
    `assignment` (one Strategy per layer): {"pp", "micro_batches", "step_s", "stages"}, None when the
    program finds nothing that fits (an assignment is costed whether it fits or not)."""
    stages = []
    for ctx, layers, table, c, units, transitions in problems:
        if assignment is None:
            total, choice = dynamic_program(c, units, transitions, resolution)
            if choice is None:
                return None
        else:
            choice = [candidates.index(assignment[i]) for i in range(*layers)]
            if any(table[k][j] is None for k, j in enumerate(choice)):
                return None
            total = sum(c[k][j] for k, j in enumerate(choice))
            total += sum(transitions[k][choice[k - 1]][choice[k]] for k in range(1, len(choice)))
        compute = sum(table[k][j].compute_s for k, j in enumerate(choice))
        boundary = costs.boundary_cost(spec, layers[1] - 1, machine, ctx, compute)
        memory = sum(table[k][j].memory_bytes for k, j in enumerate(choice))
        micro = sum(table[k][j].microbatch_s for k, j in enumerate(choice))
        stages.append({"stage": ctx.stage, "ranks": machine.stage_ranks(ctx.pp, ctx.stage),
                       "layer_range": list(layers), "time_s": total + boundary, "memory_bytes": memory,
                       "microbatch_s": micro, "other_s": total + boundary - ctx.slots * micro,
                       "fits": memory <= machine.memory_bytes,
                       "layers": [{"index": layers[0] + k, "name": spec.layers[layers[0] + k].name,
                                   "strategy": candidates[j].name,
                                   "microbatch_s": table[k][j].microbatch_s, "sync_s": table[k][j].sync_s,
                                   "memory_bytes": table[k][j].memory_bytes}
                                  for k, j in enumerate(choice)]})
    ctx = problems[0][0]
    step_s = pipeline_step_s(stages, ctx, machine.share, machine.rank_overhead(ctx.micro_batches))
    return {"pp": ctx.pp, "micro_batches": ctx.micro_batches, "step_s": step_s, "stages": stages}


def pipeline_step_s(stages, ctx, share, rank_overhead_s=0.0):
    """A step of the pipeline, plus the time every rank spends beyond its layers (Machine.rank_overhead).
    A 1F1B pipeline whose stages' micro-batches take t_s runs sum_s t_s + (m - 1) * max_s t_s (Alpa's
    pipeline latency: one micro-batch through every stage, the others behind the slowest), plus the
    slowest stage's exposed synchronisation and transfers; for equal stages that is Galvatron's
    (m + p - 1) slots, and a light stage no longer counts as a slow one. Where ranks share cores
    (share > 1) the step is also at least the work of all ranks over the cores: stages that wait
    (bubbles, light stages) give their cores to the busy ones, so it is at least share * (m * the mean
    stage's micro-batch + the rank overhead)."""
    micro = [st["microbatch_s"] for st in stages]
    through = sum(micro) + (ctx.micro_batches - 1) * max(micro) + max(st["other_s"] for st in stages)
    if share <= 1:
        return through + rank_overhead_s
    shared = share * (ctx.micro_batches * sum(micro) / len(stages) + rank_overhead_s)
    return max(through + rank_overhead_s, shared + sum(st["other_s"] for st in stages) / len(stages))


def layer_strategies(plan):
    """The strategy name of every layer, in order, of a plan (loom-plan's JSON or evaluate's result)."""
    return [layer["strategy"] for st in plan["stages"] for layer in st["layers"]]


def plan_cost(spec, machine, global_batch, pp, micro_batches, assignment):
    """evaluate's result for one plan: `assignment` (one Strategy per layer) in pp even stages; None when
    the global batch does not split over its micro-batches and replicas."""
    candidates = list(dict.fromkeys(assignment))
    problems = stage_problems(spec, machine, candidates, pp, micro_batches, global_batch, machine.memory_bytes / 2048)
    return evaluate(spec, machine, candidates, problems, 2048, assignment=assignment)


def restrict(problems, keep):
    """stage_problems limited to the candidates at indices `keep`."""
    out = []
    for ctx, layers, table, c, units, transitions in problems:
        out.append((ctx, layers, [[row[j] for j in keep] for row in table], [[row[j] for j in keep] for row in c],
                    [[row[j] for j in keep] for row in units],
                    [None] + [[[t[i][j] for j in keep] for i in keep] for t in transitions[1:]]))
    return out


def search(spec, machine, global_batch, checkpointing=False, pp_degrees=None, micro_batches=None,
           resolution=2048, runners_up=5, sdp=True, one_layout=False):
    """The plan (a JSON-ready dict) for `spec` on `machine` with `global_batch` samples per step.
    sdp: consider sharded data parallelism; one_layout: every layer takes the same TP/DP/SDP layout
    (only checkpointing varies by layer): with sdp=False, a plan loom.parallel's mesh runs (any plan runs
    with per-layer groups, loom.parallel.StageModel)."""
    budget = machine.memory_bytes
    found, uniform = [], []
    for pp in (pp_degrees or [p for p in (2 ** k for k in range(16)) if p <= machine.devices]):
        if pp > len(spec.layers) or machine.devices % pp:
            continue
        candidates = [s for s in strategies(machine.devices, checkpointing, pp=pp) if sdp or not s.sdp]
        for m in (micro_batches or micro_batch_choices(global_batch, pp)):
            problems = stage_problems(spec, machine, candidates, pp, m, global_batch, budget / resolution)
            if one_layout:
                for base in [s for s in candidates if not s.checkpoint]:
                    keep = [j for j, s in enumerate(candidates) if s == base or s == replace(base, checkpoint=True)]
                    subset = [candidates[j] for j in keep]
                    result = evaluate(spec, machine, subset, restrict(problems, keep), resolution)
                    if result is not None:
                        found.append(result)
            else:
                result = evaluate(spec, machine, candidates, problems, resolution)
                if result is not None:
                    found.append(result)
            for s in candidates:  # one strategy for every layer: the baselines a plan is compared with
                single = evaluate(spec, machine, candidates, problems, resolution, assignment=[s] * len(spec.layers))
                if single is not None:
                    fits = all(st["fits"] for st in single["stages"])
                    uniform.append({"strategy": s.name, "micro_batches": m, "step_s": single["step_s"],
                                    "memory_bytes": max(st["memory_bytes"] for st in single["stages"]),
                                    "fits": fits})
                    if fits:  # the program minimises each stage alone; the step weighs stages unequally
                        found.append(single)
    if not found:
        raise ValueError(f"no plan fits {budget / 1e9:.3g} GB per device for a global batch of {global_batch}")
    distinct = {}
    for r in found:  # the program's plan may also be a one-strategy plan
        key = (r["pp"], r["micro_batches"], tuple(layer_strategies(r)))
        distinct.setdefault(key, r)
    found = sorted(distinct.values(), key=lambda r: r["step_s"])
    best = found[0]
    uniform.sort(key=lambda r: (not r["fits"], r["step_s"]))
    return {
        "format": "loom-plan/1",
        "model": spec.name,
        "devices": machine.devices,
        "global_batch": global_batch,
        "pp": best["pp"],
        "micro_batches": best["micro_batches"],
        "schedule": "1f1b",
        "predicted": {"step_s": best["step_s"], "samples_per_s": global_batch / best["step_s"],
                      "memory_bytes_per_device": max(st["memory_bytes"] for st in best["stages"]),
                      "memory_limit_bytes": budget},
        "stages": best["stages"],
        "runners_up": [{"pp": r["pp"], "micro_batches": r["micro_batches"], "step_s": r["step_s"],
                        "strategies": layer_strategies(r)}
                       for r in found[1:1 + runners_up]],
        "uniform": uniform,
        "machine": machine.describe(),
    }
