#!/usr/bin/env python3
"""Writes the side-by-side table of perf/compare into a Markdown section.

usage: report.py OUT.md MACHINE_JSON COMMANDS_FILE PLOT_PNG loom.json mpich.json gloo.json [floor.json]

Like is compared with like: MPICH's benchmark calls MPI_Allreduce out of place, so loom's out-of-place
rows face it; torch.distributed's all_reduce (Gloo) only works in place, so loom's in-place rows face
Gloo."""
import json
import sys

from results import fmt_size, load, medians


def bound_lines(limits):
    """What the memory system allows an allreduce rank when every rank works at once (older
    machine.json files lack these figures)."""
    if "shared_dram_gbs" not in limits:
        return []
    return [
        f"With {limits['procs']} processes at once, each copies 64 MiB at {limits['shared_dram_gbs']:.1f} GB/s "
        f"(memcpy), {limits['stream_dram_gbs']:.1f} GB/s with non-temporal stores, and sums floats "
        f"(out = a + b) at {limits['sum_dram_gbs']:.1f} GB/s of output. An allreduce rank must at least read "
        f"its input and write its output, so beyond the caches its busbw cannot exceed "
        f"{limits['stream_dram_gbs']:.1f} GB/s here.",
        "",
    ]


def floor_lines(path):
    """The hand-written 2-rank allreduce (perf/shm_allreduce_floor.c) measured in the same run."""
    if not path:
        return []
    floor = json.load(open(path))
    return [
        f"A hand-written two-process shared-memory allreduce (`perf/shm_allreduce_floor.c`: pipelined "
        f"pairwise exchange, {floor['chunk_bytes'] // 1024} KiB chunks, streaming stores, no library around it) "
        f"takes {floor['median_ms']:.1f} ms for {fmt_size(floor['bytes'])} out of place here: "
        f"{floor['busbw_gbs']:.2f} GB/s busbw.",
        "",
    ]


def main():
    out, machine, commands, plot, *files = sys.argv[1:]
    floor = files[3] if len(files) > 3 else None
    rows = {}
    sources = [("loom", files[0], False), ("loom_inplace", files[0], True), ("mpich", files[1], False),
               ("gloo", files[2], False)]
    for key, path, inplace in sources:
        for r in medians(load(path, "loom" if key.startswith("loom") else key, inplace)):
            rows.setdefault((r["collective"], int(r["bytes"])), {})[key] = r
    limits = json.load(open(machine))
    repeats = max((r.get("repeats", 1) for by in rows.values() for r in by.values()), default=1)
    lines = [
        f"Each figure is the median of {repeats} interleaved run(s) of each benchmark.",
        "",
        f"Physical limit on this machine: single-thread memcpy {limits['dram_gbs']:.1f} GB/s from DRAM "
        f"(64 MiB), {limits['cache_gbs']:.1f} GB/s in cache (256 KiB).",
        "",
        *bound_lines(limits),
        *floor_lines(floor),
        "MPICH's benchmark runs out of place (separate send and receive buffers), as loom's first columns; "
        "torch.distributed's all_reduce with Gloo works in place only, so loom/gloo compares loom's "
        "in-place figures with it.",
        "",
        "p99: of the per-iteration times (each the slowest rank's), loom out of place and MPICH.",
        "",
        "| collective | size | loom us | loom in-place us | mpich us | gloo us | loom p99 us | mpich p99 us "
        "| loom busbw | loom in-place busbw | mpich busbw | gloo busbw | loom/mpich bw | loom/gloo bw (in place) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def cell(r, key, digits):
        return f"{r[key]:.{digits}f}" if r and key in r else "-"

    def ratio(a, b):
        # Bandwidth ratio of the same size = inverse time ratio; times stay exact where busbw rounds to 0.
        return f"{b['time_us'] / a['time_us']:.2f}x" if a and b and a["time_us"] > 0 else "-"

    for (coll, size), by in sorted(rows.items()):
        lo, li, mp, gl = (by.get(k) for k in ("loom", "loom_inplace", "mpich", "gloo"))
        lines.append(f"| {coll} | {fmt_size(size)} | {cell(lo, 'time_us', 1)} | {cell(li, 'time_us', 1)} | "
                     f"{cell(mp, 'time_us', 1)} | {cell(gl, 'time_us', 1)} | {cell(lo, 'p99_us', 1)} | "
                     f"{cell(mp, 'p99_us', 1)} | {cell(lo, 'busbw_gbs', 2)} | "
                     f"{cell(li, 'busbw_gbs', 2)} | {cell(mp, 'busbw_gbs', 2)} | {cell(gl, 'busbw_gbs', 2)} | "
                     f"{ratio(lo, mp)} | {ratio(li, gl)} |")
    lines += ["", f"![busbw and latency]({plot})", "", "Commands:", "", "```", open(commands).read().strip(), "```", ""]
    with open(out, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
