#!/usr/bin/env python3
"""Writes the side-by-side table of perf/compare into a Markdown section.

usage: report.py OUT.md MACHINE_JSON COMMANDS_FILE PLOT_PNG loom.json mpich.json gloo.json"""
import json
import sys

from results import load, medians


def fmt_size(n):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(int(n))


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


def main():
    out, machine, commands, plot, *files = sys.argv[1:]
    libs = ["loom", "mpich", "gloo"]
    rows = {}
    for lib, path in zip(libs, files):
        for r in medians(load(path, lib)):
            rows.setdefault((r["collective"], int(r["bytes"])), {})[lib] = r
    limits = json.load(open(machine))
    repeats = max((r.get("repeats", 1) for by in rows.values() for r in by.values()), default=1)
    lines = [
        f"Each figure is the median of {repeats} interleaved run(s) of each benchmark.",
        "",
        f"Physical limit on this machine: single-thread memcpy {limits['dram_gbs']:.1f} GB/s from DRAM "
        f"(64 MiB), {limits['cache_gbs']:.1f} GB/s in cache (256 KiB).",
        "",
        *bound_lines(limits),
        "| collective | size | loom us | mpich us | gloo us | loom busbw | mpich busbw | gloo busbw | loom/mpich bw | loom/gloo bw |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def cell(r, key, digits):
        return f"{r[key]:.{digits}f}" if r else "-"

    def ratio(a, b):
        # Bandwidth ratio of the same size = inverse time ratio; times stay exact where busbw rounds to 0.
        return f"{b['time_us'] / a['time_us']:.2f}x" if a and b and a["time_us"] > 0 else "-"

    for (coll, size), by in sorted(rows.items()):
        lo, mp, gl = by.get("loom"), by.get("mpich"), by.get("gloo")
        lines.append(f"| {coll} | {fmt_size(size)} | {cell(lo, 'time_us', 1)} | {cell(mp, 'time_us', 1)} | "
                     f"{cell(gl, 'time_us', 1)} | {cell(lo, 'busbw_gbs', 2)} | {cell(mp, 'busbw_gbs', 2)} | "
                     f"{cell(gl, 'busbw_gbs', 2)} | {ratio(lo, mp)} | {ratio(lo, gl)} |")
    lines += ["", f"![busbw and latency]({plot})", "", "Commands:", "", "```", open(commands).read().strip(), "```", ""]
    with open(out, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
