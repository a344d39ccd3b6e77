#!/usr/bin/env python3
"""Predicted against measured: the layouts loom-plan considers for the example GPT on N ranks of this
machine, timed by its cost model (Loom's collective model on the live topology, compute from the
model's profiled layers, calibrated on this machine) and by training each (train_gpt.py --plan).

    python examples/plan_validation.py --ranks 4 [--heterogeneous] [--rounds 2] [--no-calibrate]

Runs every one-layout plan (each layer the same strategy: the baselines in the plan's "uniform") and
the planner's per-layer plans (its choice and runners-up), `--rounds` times each, interleaved so that
slow spells of a shared machine do not fall on one layout. Prints a table (plan, predicted and measured
step time), the Spearman rank correlation, and how far the planner's first choice is from the fastest
measured plan.

Calibration (loom.plan.calibrate, on by default): each layer's forward is profiled at two batch sizes
(a fixed cost per call and a cost per sample), ranks sharing cores (--cores, default the CPUs this
process may use) compute at cores / ranks of a core's speed while all are busy, and a small all-reduce
is timed in groups of each size while every rank computes: what it takes beyond Loom's model is added
to every collective of such a group, and the overlap slowdown (compute beside an all-reduce, against
each alone) is measured rather than taken as Galvatron's 1.3. Last, the data-parallel plan is trained
at 1 and 2 micro-batches: what its steps take beyond the prediction is each rank's CPU time per step
that nothing else prices (the training loop, optimizer, autograd, per-call work), added to every plan
(loom.plan.calibrate.step_overhead). Every process (calibration and training) is bound to a core,
round-robin by default (--cpu-bind, loom.parallel.bind_cpu): unbound, the kernel moves ranks between
shared cores mid-step, and the times move with it.
"""
import argparse
import dataclasses
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from loom.parallel.cpu_binding import POLICIES
from loom.plan import model as model_desc
from loom.plan.machine import Machine, calibrated_flops, collective_model
from loom.plan.search import layer_strategies, plan_cost, search, split_even
from loom.plan.strategies import parse

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "train_gpt.py")
GPT = "--layers 4 --hidden 64 --heads 8 --vocab 128 --seq-len 32"
# Blocks of MLP widths 1 to 16 hiddens: compute and parameters differ by layer, so the layouts that suit
# the wide blocks (TP splits their work) differ from those that suit the narrow ones.
HETEROGENEOUS = GPT + " --ffn-mults 1,2,8,16"


def spearman(a, b):
    def ranks(x):  # average ranks for ties
        order = sorted(range(len(x)), key=lambda i: x[i])
        r = [0.0] * len(x)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    return cov / (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5


def plan_file(work, name, pp, strategies, micro_batches, global_batch):
    """A plan train_gpt.py --plan runs: the layers' strategies in pp even stages."""
    stages = [{"layers": [{"index": i, "strategy": strategies[i]} for i in range(a, b)]}
              for a, b in split_even(len(strategies), pp)]
    path = os.path.join(work, f"{name}.json")
    with open(path, "w") as f:
        json.dump({"pp": pp, "micro_batches": micro_batches, "global_batch": global_batch, "stages": stages}, f)
    return path


def candidates(plan, n_layers, per_layer):
    """(name, pp, strategies per layer, predicted seconds, fits the memory) of the one-layout plans and up
    to per_layer plans of mixed layouts (the planner's choice first, then its runners-up); the first
    name returned is the planner's choice."""
    out = []
    for entry in plan["uniform"]:
        pp = int(re.match(r"pp(\d+)", entry["strategy"]).group(1))
        out.append((entry["strategy"], pp, [entry["strategy"]] * n_layers, entry["step_s"], entry["fits"]))
    best = layer_strategies(plan)
    mixed = [(plan["pp"], best, plan["predicted"]["step_s"])]
    mixed += [(r["pp"], r["strategies"], r["step_s"]) for r in plan["runners_up"]]
    seen = {tuple(c[2]): c[0] for c in out}
    for pp, strategies, step_s in mixed:
        if tuple(strategies) in seen or len(out) >= len(plan["uniform"]) + per_layer:
            continue
        name = f"mixed{len(out) - len(plan['uniform']) + 1}"
        seen[tuple(strategies)] = name
        out.append((name, pp, strategies, step_s, True))
    return seen[tuple(best)], out


def train(args, model_args, path, timings, steps=None):
    """The step times (seconds) of steps 3.. of one training run of a plan (args.steps steps unless
    `steps`), or the error's last line."""
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                           str(args.ranks), TRAIN, *model_args, "--plan", path, "--steps", str(steps or args.steps),
                           "--cpu-bind", args.cpu_bind,
                           "--save", "", "--plot", "", "--timings", timings],
                          capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    with open(timings) as f:
        return json.load(f)[2:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--heterogeneous", action="store_true",
                    help=f"the GPT with blocks of unlike MLP widths ({HETEROGENEOUS.split('--ffn-mults ')[1]})")
    ap.add_argument("--checkpointing", action="store_true")
    ap.add_argument("--sdp", action="store_true", help="let the planner use sharded data parallelism too")
    ap.add_argument("--steps", type=int, default=12, help="steps per run; the first two are not timed")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each plan, interleaved")
    ap.add_argument("--per-layer", type=int, default=3, help="plans of mixed layouts to run besides the one-layout ones")
    ap.add_argument("--memory-mb", type=float, default=64e3,
                    help="device memory the planner plans for (MB; a small one makes it mix layouts per layer)")
    ap.add_argument("--global-batch", type=int, default=16)
    ap.add_argument("--micro-batches", type=int, default=4)
    ap.add_argument("--cores", type=float, default=len(os.sched_getaffinity(0)),
                    help="cores the ranks share (default: the CPUs this process may run on)")
    ap.add_argument("--cpu-bind", choices=POLICIES, default="round-robin",
                    help="how ranks are bound to cores, in the calibration and the training runs "
                         "(loom.parallel.bind_cpu; round-robin is what the model of shared cores assumes)")
    ap.add_argument("--no-calibrate", action="store_true",
                    help="linear compute from one profile, no core sharing, no measured per-collective cost")
    ap.add_argument("--model-args", help=f"train_gpt.py's model flags (default: {GPT})")
    args = ap.parse_args()
    model_args = (args.model_args or (HETEROGENEOUS if args.heterogeneous else GPT)).split()
    work = tempfile.mkdtemp(prefix="plan-validation-")
    spec_path = os.path.join(work, "model.json")
    mbs = args.global_batch // args.micro_batches
    subprocess.run([sys.executable, TRAIN, *model_args, "--micro-batch-size", str(mbs), "--describe", spec_path],
                   check=True, capture_output=True)
    spec = model_desc.load(spec_path)
    collectives = collective_model(args.ranks)
    overhead, cores, slowdown = 0.0, None, Machine.overlap_slowdown  # Galvatron's 1.3 uncalibrated
    if args.no_calibrate:
        for layer in spec.layers:  # what one profile at the micro-batch size gives: a time per sample
            layer.forward_s += (layer.forward_fixed_s or 0.0) / mbs
            layer.forward_fixed_s = None
    else:
        from loom.plan.calibrate import collective_overhead, overlap_slowdown

        cores = args.cores
        overhead = {}
        for g, points in collective_overhead(args.ranks, collectives, cpu_bind=args.cpu_bind).items():
            overhead[g] = [(gap, max(0.0, measured - predicted)) for gap, measured, predicted in points]
            what = "a pipeline boundary's send and receive" if g == "p2p" else f"4-byte all_reduce in groups of {g}"
            print(f"{what} while {args.ranks} ranks compute on {cores:g} cores, "
                  f"us after compute of " + ", ".join(f"{gap * 1e6:.0f}: {measured * 1e6:.0f}"
                                                       for gap, measured, _ in points)
                  + f" (model {points[0][2] * 1e6:.1f})", flush=True)
        slowdown, points = overlap_slowdown(args.ranks, cpu_bind=args.cpu_bind)
        print(f"overlap slowdown {slowdown:.2f}; compute {points[0][1] * 1e6:.0f} us beside an all_reduce of "
              f"{args.ranks} ranks, us:", flush=True)
        for n, _, m, t, k in points:  # the all-reduce alone is also a check of the model at real sizes
            model_us = collectives.collective("all_reduce", n, list(range(args.ranks)))["time_us"]
            print(f"  {n >> 10:5d} KiB: alone {m * 1e6:7.0f} (model {model_us:7.0f}), with the compute "
                  f"{t * 1e6:7.0f}, k {k:.2f}", flush=True)
    machine = Machine(devices=args.ranks, memory_bytes=args.memory_mb * 1e6, flops_per_s=calibrated_flops(spec) or 1e10,
                      collectives=collectives, collective_overhead_s=overhead, cores=cores, overlap_slowdown=slowdown)
    if not args.no_calibrate:
        from loom.plan.calibrate import step_overhead

        def measure(pp, strategies, m):  # 3 runs of 20 steps: a calibration must not carry one run's noise
            path = plan_file(work, f"calibration-m{m}", pp, strategies, m, args.global_batch)
            result = []
            for _ in range(3):
                got = train(args, model_args, path, os.path.join(work, f"calibration-m{m}.timings.json"), steps=20)
                if isinstance(got, str):
                    raise SystemExit(f"the calibration run {path} failed: {got}")
                result += got
            return statistics.median(result)

        machine.rank_overhead_s, points = step_overhead(spec, machine, args.global_batch, measure)
        print(f"rank overhead {machine.rank_overhead_s[0] * 1e6:.0f} us per step + "
              f"{machine.rank_overhead_s[1] * 1e6:.0f} us per micro-batch, from the data-parallel plan: "
              + ", ".join(f"{m} micro-batches measured {meas * 1e3:.2f} ms, predicted {pred * 1e3:.2f}"
                          for m, meas, pred in points), flush=True)
    plan = search(spec, machine, args.global_batch, checkpointing=args.checkpointing,
                  micro_batches=[args.micro_batches], sdp=args.sdp)
    chosen, runs = candidates(plan, len(spec.layers), args.per_layer)
    samples = {name: [] for name, *_ in runs}
    failed = {}
    for _ in range(args.rounds):
        for name, pp, strategies, _, _ in runs:
            if name in failed:
                continue
            path = plan_file(work, name, pp, strategies, args.micro_batches, args.global_batch)
            result = train(args, model_args, path, os.path.join(work, f"{name}.timings.json"))
            if isinstance(result, str):
                failed[name] = result
                print(f"{name}: did not run: {result}", file=sys.stderr)
            else:
                samples[name] += result
    rows = [(name, step_s, statistics.median(samples[name]), strategies, fits)
            for name, _, strategies, step_s, fits in runs if name not in failed]
    plain = dataclasses.replace(machine, rank_overhead_s=(0.0, 0.0), _cache={})
    without = {name: plan_cost(spec, plain, args.global_batch, pp, args.micro_batches, [parse(s) for s in strategies])
               for name, pp, strategies, _, _ in runs}
    for name, predicted, measured, strategies, fits in rows:
        layout = "" if len(set(strategies)) == 1 else "  " + " ".join(strategies)
        print(f"{name:24s} predicted {predicted * 1e3:8.2f} ms ({without[name]['step_s'] * 1e3:6.2f} without the "
              f"rank overhead)   measured {measured * 1e3:8.2f} ms{'' if fits else '  (over the memory budget)'}{layout}")
    with open(os.path.join(work, "results.json"), "w") as f:  # for a later look at the model's terms
        json.dump({"machine": machine.describe(), "rows": [
            {"name": name, "predicted_s": predicted, "measured_s": measured, "fits": fits, "strategies": strategies,
             "stages": without[name]["stages"], "samples_s": samples[name]}
            for name, predicted, measured, strategies, fits in rows]}, f, indent=1)
    print(f"plans, timings and results.json in {work}")
    predicted, measured = [r[1] for r in rows], [r[2] for r in rows]
    first = next((r for r in rows if r[0] == chosen), None)
    fastest = min((r for r in rows if r[4]), key=lambda r: r[2])  # of the plans that fit
    print(f"\n{len(rows)} plans on {args.ranks} ranks ({' '.join(model_args)}), {args.micro_batches} micro-batches "
          f"of {mbs}, {args.rounds} runs each; Spearman rank correlation {spearman(predicted, measured):.2f}")
    if first is None:
        print(f"the planner's first choice {chosen} did not run")
    else:
        print(f"planner's first choice {first[0]} measured {first[2] * 1e3:.2f} ms, fastest that fits {fastest[0]} "
              f"{fastest[2] * 1e3:.2f} ms ({(first[2] / fastest[2] - 1) * 100:+.0f}%)")


if __name__ == "__main__":
    main()
