#!/usr/bin/env python3
"""Predicted against measured: every layout of the example GPT that the training layer runs on N ranks
of this machine, timed by loom-plan's cost model (Loom's collective model on the live topology,
compute from the model's profiled layers) and by training it (train_gpt.py --plan).

    python examples/plan_validation.py --ranks 4 [--checkpointing] [--steps 12]

Prints a table (strategy, predicted and measured step time) with the Spearman rank correlation, and
how far the planner's first choice is from the fastest measured layout.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from loom.plan import model as model_desc
from loom.plan.machine import Machine, calibrated_flops, collective_model
from loom.plan.search import search

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "train_gpt.py")


def spearman(a, b):
    def ranks(x):
        order = sorted(range(len(x)), key=lambda i: x[i])
        r = [0.0] * len(x)
        for pos, i in enumerate(order):
            r[i] = pos
        return r
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    return cov / (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--checkpointing", action="store_true")
    ap.add_argument("--steps", type=int, default=12, help="steps per layout; the first two are not timed")
    ap.add_argument("--global-batch", type=int, default=16)
    ap.add_argument("--micro-batches", type=int, default=4)
    ap.add_argument("--calibrate", action="store_true",
                    help="profile the model in --ranks processes at once and add the measured per-collective "
                         "overhead of a small all-reduce (loom.plan.calibrate)")
    ap.add_argument("--model-args", default="--layers 4 --hidden 64 --heads 8 --vocab 128 --seq-len 32",
                    help="train_gpt.py's model flags")
    args = ap.parse_args()
    model_args = args.model_args.split()
    work = tempfile.mkdtemp(prefix="plan-validation-")
    spec_path = os.path.join(work, "model.json")
    mbs = args.global_batch // args.micro_batches
    concurrent = ["--describe-ranks", str(args.ranks)] if args.calibrate else []
    subprocess.run([sys.executable, TRAIN, *model_args, "--micro-batch-size", str(mbs), "--describe", spec_path,
                    *concurrent], check=True, capture_output=True)
    spec = model_desc.load(spec_path)
    collectives = collective_model(args.ranks)
    overhead = 0.0
    if args.calibrate:
        from loom.plan.calibrate import collective_overhead

        measured, predicted, overhead = collective_overhead(args.ranks, collectives)
        print(f"4-byte all_reduce on {args.ranks} ranks: measured {measured * 1e6:.1f} us, model "
              f"{predicted * 1e6:.1f} us; adding {overhead * 1e6:.1f} us to every collective", flush=True)
    machine = Machine(devices=args.ranks, memory_bytes=64e9, flops_per_s=calibrated_flops(spec) or 1e10,
                      collectives=collectives, collective_overhead_s=overhead)
    plan = search(spec, machine, args.global_batch, checkpointing=args.checkpointing,
                  micro_batches=[args.micro_batches], sdp=False, one_layout=True)
    rows = []
    for entry in plan["uniform"]:
        name = entry["strategy"]
        pp = int(name.split("-")[0][2:])
        plan_file = os.path.join(work, f"{name}.json")
        layers = [{"index": i, "strategy": name} for i in range(len(spec.layers))]
        per = [len(layers) // pp + (1 if s < len(layers) % pp else 0) for s in range(pp)]
        starts = [sum(per[:s]) for s in range(pp + 1)]
        with open(plan_file, "w") as f:
            json.dump({"pp": pp, "micro_batches": args.micro_batches, "global_batch": args.global_batch,
                       "stages": [{"layers": layers[starts[s]:starts[s + 1]]} for s in range(pp)]}, f)
        timings = os.path.join(work, f"{name}.timings.json")
        proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                               str(args.ranks), TRAIN, *model_args, "--plan", plan_file, "--steps", str(args.steps),
                               "--save", "", "--plot", "", "--timings", timings],
                              capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        if proc.returncode != 0:
            print(f"{name}: did not run: {proc.stderr.strip().splitlines()[-1]}", file=sys.stderr)
            continue
        with open(timings) as f:
            measured = statistics.median(json.load(f)[2:])
        rows.append((name, entry["step_s"], measured))
        print(f"{name:24s} predicted {entry['step_s'] * 1e3:8.2f} ms   measured {measured * 1e3:8.2f} ms", flush=True)
    predicted, measured = [r[1] for r in rows], [r[2] for r in rows]
    first = min(rows, key=lambda r: r[1])
    fastest = min(rows, key=lambda r: r[2])
    print(f"\n{len(rows)} layouts on {args.ranks} ranks, {args.micro_batches} micro-batches of {mbs}; "
          f"Spearman rank correlation {spearman(predicted, measured):.2f}; planner's first choice {first[0]} "
          f"measured {first[2] * 1e3:.2f} ms, fastest {fastest[0]} {fastest[2] * 1e3:.2f} ms "
          f"({(first[2] / fastest[2] - 1) * 100:+.0f}%)")


if __name__ == "__main__":
    main()
