#!/usr/bin/env python3
"""loom-plan's choices for BERT-, T5-, ViT- and Swin-like models on modelled machines, under several
memory budgets: a markdown table (docs/PLANNER.md records one).

    python examples/plan_modelled_machines.py [--fixtures DIR] [--budgets 8,12,16,20] [--machines pcie8,a100x8]

Machines: 8 GPUs over PCIe (like Galvatron's RTX TITAN server: a loom-sim cluster, 12 GB/s per GPU,
16 TFLOP/s), one 8 x A100 NVSwitch node and 2 and 8 of them (the HGX fixture topology, 4 NICs per node,
100 TFLOP/s). The layers' sizes are the models' (hidden, sequence, heads), per sample, fp32 Adam.
"""
import argparse
import os

from loom.plan.machine import Machine, collective_model
from loom.plan.model import Layer, ModelSpec
from loom.plan.search import layer_strategies, search

HERE = os.path.dirname(os.path.abspath(__file__))


def block(name, hidden, seq, heads, ffn=4, cross=False, window=None):
    """A transformer block (Megatron's counts, fp32): parameters, forward FLOPs and activations per sample;
    attention over `window` tokens (Swin) or the whole sequence."""
    span = min(seq, window or seq)
    params = (4 + 2 * ffn) * hidden * hidden + (4 * hidden * hidden if cross else 0)
    flops = 2 * params * seq + 4 * seq * span * hidden * (2 if cross else 1)
    act = (10 + 8 * ffn + (12 if cross else 0)) * seq * hidden + 5 * heads * seq * span * (2 if cross else 1)
    return Layer(name, params=params, flops=flops, activation_bytes=2 * act, output_bytes=4 * seq * hidden)


def models():
    bert = ModelSpec(name="bert-huge-32", layers=[block(f"enc{i}", 1280, 512, 16) for i in range(32)])
    t5 = ModelSpec(name="t5-large-32", layers=[block(f"enc{i}", 1024, 512, 16) for i in range(16)]
                   + [block(f"dec{i}", 1024, 512, 16, cross=True) for i in range(16)])
    vit = ModelSpec(name="vit-huge-32", layers=[block(f"enc{i}", 1280, 197, 16) for i in range(32)])
    swin = ModelSpec(name="swin-huge-like", layers=[
        block(f"s{stage}.{i}", 320 * 2 ** stage, 3136 // 4 ** stage, 10 * 2 ** stage, window=49)
        for stage, depth in enumerate((2, 2, 18, 2)) for i in range(depth)])
    return [bert, t5, vit, swin]


def machines(fixtures):
    hgx = os.path.join(fixtures, "nccl-hgx-8xA100-nvswitch-4xcx6.xml")
    return {
        "pcie8": (lambda: collective_model(8, "none", intra_gbs=12, latency_us=5.7), 8, 16e12),
        "a100x8": (lambda: collective_model(8, hgx), 8, 100e12),
        "a100x16": (lambda: collective_model(16, hgx), 16, 100e12),
        "a100x64": (lambda: collective_model(64, hgx), 64, 100e12),
    }


def runs(plan):
    names, out = layer_strategies(plan), []
    start = 0
    for i in range(1, len(names) + 1):
        if i == len(names) or names[i] != names[start]:
            out.append(f"{names[start]}" + (f" x{i - start}" if i - start > 1 else ""))
            start = i
    return ", ".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixtures", default=os.environ.get("LOOM_FIXTURES", os.path.join(
        HERE, "..", "..", "shared", "fixtures", "topology")))
    ap.add_argument("--budgets", default="8,12,16,20")
    ap.add_argument("--machines", default="pcie8,a100x8,a100x16,a100x64")
    ap.add_argument("--global-batch", type=int, default=64)
    ap.add_argument("--resolution", type=int, default=512)
    args = ap.parse_args()
    table = machines(args.fixtures)
    print("| machine | model | GB | pp | m | per-layer strategies | samples/s | best single strategy |")
    print("|---|---|---|---|---|---|---|---|")
    for key in args.machines.split(","):
        make, devices, flops = table[key]
        collectives = make()
        for spec in models():
            for gb in (float(x) for x in args.budgets.split(",")):
                machine = Machine(devices=devices, memory_bytes=gb * 1e9, flops_per_s=flops, collectives=collectives)
                try:
                    plan = search(spec, machine, args.global_batch, checkpointing=True, resolution=args.resolution,
                                  micro_batches=[m for m in (1, 2, 4, 8, 16, 32, 64) if m <= args.global_batch])
                except ValueError:
                    print(f"| {key} | {spec.name} | {gb:g} | | | does not fit | | |", flush=True)
                    continue
                single = [u for u in plan["uniform"] if u["fits"]]
                best = (f"{single[0]['strategy']} (m={single[0]['micro_batches']}) "
                        f"{args.global_batch / single[0]['step_s']:.1f}") if single else "none fits"
                print(f"| {key} | {spec.name} | {gb:g} | {plan['pp']} | {plan['micro_batches']} | {runs(plan)} | "
                      f"{plan['predicted']['samples_per_s']:.1f} | {best} |", flush=True)


if __name__ == "__main__":
    main()
