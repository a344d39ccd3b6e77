#!/usr/bin/env python3
"""Plots bus bandwidth and latency against message size for one or more result files.

usage: plot.py OUT.png FILE[:LABEL[:inplace]] [...]
Files are loom-perf --json output or perf/mpi_bench / perf/gloo_bench JSON lines; a trailing
":inplace" plots loom-perf's in-place rows instead of its out-of-place ones."""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from results import load, medians  # noqa: E402


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    fig, (bw, lat) = plt.subplots(1, 2, figsize=(12, 4.5))
    for spec in sys.argv[2:]:
        path, _, rest = spec.partition(":")
        label, _, mode = rest.partition(":")
        rows = sorted(medians(load(path, label or None, inplace=mode == "inplace")), key=lambda r: r["bytes"])
        if not rows:
            continue
        name = label or rows[0]["library"]
        sizes = [r["bytes"] for r in rows]
        bw.plot(sizes, [r["busbw_gbs"] for r in rows], marker="o", label=name)
        lat.plot(sizes, [r["time_us"] for r in rows], marker="o", label=name)
    for ax, title, unit in ((bw, "bus bandwidth", "GB/s"), (lat, "time per operation", "us")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    lat.set_yscale("log")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
