"""loom-plan: lists Galvatron's strategy space, or searches it for a model on a machine.

    loom-plan --list-strategies --devices 8 [--checkpointing]
    loom-plan --model model.json --devices 8 --global-batch 32 --memory-gb 16 [--topology FILE|none]
              [--ranks-per-node K] [--intra-gbs X --nic-gbs Y ...] [--tflops T] [--output plan.json]
"""
import argparse
import json
import sys

from . import model as model_desc
from .machine import GB, Machine, calibrated_flops, collective_model, measure_flops
from .search import search
from .strategies import strategies

MACHINE_FIELDS = ("intra_gbs", "nics_per_node", "nic_gbs", "latency_us", "net_latency_us", "step_us", "launch_us",
                  "copy_gbs")


def parser():
    ap = argparse.ArgumentParser(prog="loom-plan", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n")[1])
    ap.add_argument("--list-strategies", action="store_true",
                    help="print the strategies a layer may take on --devices devices, one per line")
    ap.add_argument("--devices", type=int, help="devices (ranks) of the job; a power of two")
    ap.add_argument("--checkpointing", action="store_true",
                    help="also consider activation checkpointing (doubles the strategies)")
    ap.add_argument("--model", help="the model description (JSON, loom.plan.model)")
    ap.add_argument("--global-batch", type=int, help="samples per training step")
    ap.add_argument("--memory-gb", type=float, help="device memory for the model (GB = 1e9 bytes)")
    ap.add_argument("--tflops", type=float,
                    help="one device's compute speed (default: from the model's measured times, else a "
                         "matrix multiply measured here)")
    ap.add_argument("--topology", default="",
                    help="topology XML of one node, 'none' for a cluster given by the flags below only "
                         "(loom-sim without --topo); default: LOOM_TOPO_FILE or this machine")
    ap.add_argument("--ranks-per-node", type=int, default=0,
                    help="ranks per node (default: the topology's GPUs when they divide --devices, else one node)")
    ap.add_argument("--memory-kind", choices=("auto", "host", "device"), default="auto",
                    help="what collectives move: device memory over the GPU fabric, or host memory as CPU ranks "
                         "do (default: device, unless the topology has no GPUs)")
    ap.add_argument("--nvswitch-gbs", type=float, default=0.0,
                    help="join the topology file's GPUs by an NVSwitch at this GB/s per GPU, for files that leave "
                         "NVLink out (as loom-sim's flag)")
    for name in MACHINE_FIELDS:
        ap.add_argument("--" + name.replace("_", "-"), type=float, help="as loom-sim's flag of that name")
    overlap = ap.add_mutually_exclusive_group()
    overlap.add_argument("--overlap-slowdown", type=float, default=1.3,
                         help="how much slower compute and communication run while overlapping (default 1.3, "
                              "Galvatron's)")
    overlap.add_argument("--measure-overlap", action="store_true",
                         help="measure the overlap slowdown here, with --devices CPU ranks bound to cores "
                              "round-robin (loom.plan.calibrate.overlap_slowdown; a few seconds)")
    ap.add_argument("--collective-overhead-us", type=float, default=0.0,
                    help="added to every collective and transfer: what a small real all-reduce takes beyond "
                         "the model's prediction (loom.plan.calibrate.collective_overhead)")
    ap.add_argument("--rank-overhead-us", default="0",
                    help="PER_STEP[,PER_MICRO_BATCH]: each rank's time per step (and per micro-batch) beyond what "
                         "the model prices: the training loop, optimizer, per-call work "
                         "(loom.plan.calibrate.step_overhead)")
    ap.add_argument("--cores", type=float,
                    help="cores the devices share (CPU ranks: fewer cores than ranks slows compute while all "
                         "compute; default: each device its own)")
    ap.add_argument("--pp", type=int, action="append", help="only this pipeline degree (repeatable)")
    ap.add_argument("--micro-batches", type=int, action="append", help="only this micro-batch count (repeatable)")
    ap.add_argument("--no-sdp", action="store_true", help="leave sharded data parallelism out")
    ap.add_argument("--one-layout", action="store_true",
                    help="the same TP/DP/SDP layout for every layer, checkpointing per layer (with --no-sdp, "
                         "what examples/train_gpt.py --plan runs on the mesh; other plans run per layer)")
    ap.add_argument("--resolution", type=int, default=2048, help="memory steps of the dynamic program")
    ap.add_argument("--output", help="write the plan here (default: print it)")
    return ap


def plan_command(args):
    for flag in ("devices", "global_batch", "memory_gb"):
        if getattr(args, flag) is None:
            raise ValueError(f"--model needs --{flag.replace('_', '-')}")
    spec = model_desc.load(args.model)
    flops = args.tflops * 1e12 if args.tflops else (calibrated_flops(spec) or measure_flops())
    fields = {name: getattr(args, name) for name in MACHINE_FIELDS}
    if args.measure_overlap:
        from .calibrate import overlap_slowdown

        args.overlap_slowdown, _ = overlap_slowdown(args.devices, cpu_bind="round-robin")
        print(f"overlap slowdown measured with {args.devices} ranks: {args.overlap_slowdown:.2f}", file=sys.stderr)
    try:
        rank_overhead = [float(x) * 1e-6 for x in args.rank_overhead_us.split(",")]
    except ValueError:
        rank_overhead = []
    if len(rank_overhead) not in (1, 2):
        raise ValueError(f"--rank-overhead-us takes PER_STEP[,PER_MICRO_BATCH] microseconds, got "
                         f"{args.rank_overhead_us!r}")
    collectives = collective_model(args.devices, args.topology, args.ranks_per_node, args.memory_kind,
                                   nvswitch_gbs=args.nvswitch_gbs, **fields)
    machine = Machine(devices=args.devices, memory_bytes=args.memory_gb * GB, flops_per_s=flops,
                      collectives=collectives, overlap_slowdown=args.overlap_slowdown,
                      collective_overhead_s=args.collective_overhead_us * 1e-6, cores=args.cores,
                      rank_overhead_s=(rank_overhead + [0.0])[:2])
    plan = search(spec, machine, args.global_batch, checkpointing=args.checkpointing, pp_degrees=args.pp,
                  micro_batches=args.micro_batches, resolution=args.resolution, sdp=not args.no_sdp,
                  one_layout=args.one_layout)
    text = json.dumps(plan, indent=1)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
        print(summary(plan))
    else:
        print(text)


def summary(plan):
    p = plan["predicted"]
    lines = [f"{plan['model']} on {plan['devices']} devices, global batch {plan['global_batch']}: "
             f"pp={plan['pp']}, {plan['micro_batches']} micro-batches, predicted step {p['step_s'] * 1e3:.3g} ms "
             f"({p['samples_per_s']:.4g} samples/s), memory {p['memory_bytes_per_device'] / GB:.3g} of "
             f"{p['memory_limit_bytes'] / GB:.3g} GB per device"]
    for st in plan["stages"]:
        names = [layer["strategy"] for layer in st["layers"]]
        runs, start = [], 0
        for i in range(1, len(names) + 1):
            if i == len(names) or names[i] != names[start]:
                first, last = st["layers"][start]["index"], st["layers"][i - 1]["index"]
                runs.append(f"{first}-{last}: {names[start]}" if last > first else f"{first}: {names[start]}")
                start = i
        lines.append(f"  stage {st['stage']} (ranks {st['ranks'][0]}-{st['ranks'][-1]}): " + ", ".join(runs))
    fitting = [u for u in plan["uniform"] if u["fits"]]
    if fitting:
        u = fitting[0]
        lines.append(f"  best single strategy: {u['strategy']} with {u['micro_batches']} micro-batches, "
                     f"{u['step_s'] * 1e3:.3g} ms")
    return "\n".join(lines)


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        if args.list_strategies:
            if args.devices is None:
                raise ValueError("--list-strategies needs --devices")
            for s in strategies(args.devices, args.checkpointing):
                print(s.name)
            return 0
        if args.model:
            plan_command(args)
            return 0
        parser().print_usage(sys.stderr)
        return 2
    except (ValueError, OSError, RuntimeError) as e:
        print(f"loom-plan: {e}", file=sys.stderr)
        return 1
