#!/usr/bin/env python3
"""Writes the tables and the goals of perf/net_compare as Markdown on stdout.

usage: net_report.py OUT_DIR PLOT_PNG

Like is compared with like: MPICH's MPI_Allreduce and iperf3 face Loom's out-of-place rows;
torch.distributed's all_reduce (Gloo) works in place, so Loom's in-place rows face Gloo."""
import statistics
import sys

from results import fmt_size, load

LOOMS = [("loom-socket", "loom socket"), ("loom-ucx", "loom ucx"), ("loom-plugin", "loom plugin")]
SIZES = [8, 1024, 65536, 1 << 20, 16 << 20, 64 << 20, 256 << 20]


def by_size(rows):
    """bytes -> (median, lowest, highest) of busbw and of time over the repeats."""
    groups = {}
    for r in rows:
        groups.setdefault(int(r["bytes"]), []).append(r)
    out = {}
    for size, group in groups.items():
        bw = [r["busbw_gbs"] for r in group]
        us = [r["time_us"] for r in group]
        out[size] = dict(bw=(statistics.median(bw), min(bw), max(bw)), us=(statistics.median(us), min(us), max(us)))
    return out


def cell(stats, key, digits):
    if not stats:
        return "-"
    mid, lo, hi = stats[key]
    return f"{mid:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def main():
    out, plot = sys.argv[1], sys.argv[2]
    series = {}
    for file, name in LOOMS:
        series[name] = by_size(load(f"{out}/{file}.json", name))
        series[name + " in place"] = by_size(load(f"{out}/{file}.json", name, inplace=True))
    series["gloo"] = by_size(load(f"{out}/gloo.json", "gloo"))
    series["mpich"] = by_size(load(f"{out}/mpich.json", "mpich"))
    iperf = {}
    for line in open(f"{out}/iperf.txt"):
        streams, gbs = line.split()
        iperf.setdefault(streams, []).append(float(gbs))
    p1, p4, bidir = (statistics.median(iperf.get(k, [0])) for k in ("P1", "P4", "P4bidir"))
    spread = {k: f"{min(v):.2f}-{max(v):.2f}" for k, v in iperf.items()}
    floors = {}
    for row in load(f"{out}/exchange.json", None):
        floors.setdefault(row["library"], []).append(row["time_us"])
    one, two = (statistics.median(floors.get(k, [0])) for k in ("tcp one connection", "tcp two connections"))

    lines = [f"iperf3 between the same hosts in the same run (median, spread): one stream {p1:.2f} GB/s "
             f"({spread.get('P1', '-')}), four streams {p4:.2f} GB/s ({spread.get('P4', '-')}), four streams each "
             f"way at once (`--bidir`) {bidir:.2f} GB/s in all ({spread.get('P4bidir', '-')}). A raw exchange of "
             f"16 bytes each way (`perf/tcp_exchange.c`) takes {one:.1f} us over one TCP connection and {two:.1f} us "
             f"over two one-way connections.", "",
             "Bus bandwidth in GB/s, median of the repeats (lowest-highest):", "",
             "| size | " + " | ".join(series) + " |", "|---" * (len(series) + 1) + "|"]
    for size in SIZES:
        lines.append(f"| {fmt_size(size)} | " + " | ".join(cell(s.get(size), "bw", 2) for s in series.values()) + " |")
    lines += ["", "Time per allreduce in microseconds, small sizes:", "",
              "| size | " + " | ".join(series) + " |", "|---" * (len(series) + 1) + "|"]
    for size in (8, 64, 1024):
        lines.append(f"| {fmt_size(size)} | " + " | ".join(cell(s.get(size), "us", 1) for s in series.values()) + " |")
    lines += ["", f"![allreduce across 2 hosts]({plot})", "", "### Goals", ""]

    socket, socket_ip, gloo, mpich = (series["loom socket"], series["loom socket in place"], series["gloo"],
                                      series["mpich"])
    large = [s for s in SIZES if s >= 16 << 20 and s in socket]
    if large and p4 > 0:
        worst = min(socket[s]["bw"][0] for s in large)
        verdict = "met" if worst >= 0.9 * p4 else "missed"
        best = max(socket[s]["bw"][0] for s in large)
        lines.append(f"- Large messages, busbw >= 0.9 x iperf3 -P 4: {verdict}. From 16 MiB on the socket provider "
                     f"moves {worst:.2f}-{best:.2f} GB/s, {worst / p4:.2f} of iperf3's {p4:.2f} GB/s. What limits it: "
                     f"a 2-rank allreduce sends and receives its whole size on every rank, so 2 x busbw = "
                     f"{2 * worst:.1f}-{2 * best:.1f} GB/s cross the link, both ways at once, where iperf3 -P 4 moves "
                     f"{p4:.2f} GB/s one way and {bidir:.2f} GB/s both ways. On these 2 cores the kernel's copies into "
                     f"and out of the sockets (`_copy_from_iter`, `_copy_to_iter`: the largest items of `perf record`, "
                     f"ahead of the reduction) are the bound; no user-space change moves fewer bytes through them.")
    common = [s for s in large if s in gloo]
    if common:
        ratio = min(socket_ip[s]["bw"][0] / gloo[s]["bw"][0] for s in common)
        lines.append(f"- Large messages, >= 3 x Gloo: {'met' if ratio >= 3 else 'missed'}. In place against Gloo, "
                     f"the lowest ratio from 16 MiB on is {ratio:.2f}"
                     + ("." if ratio >= 3 else f"; 3 x Gloo's {min(gloo[s]['bw'][0] for s in common):.2f} GB/s would "
                        f"be more than the link carries both ways at once here (above)."))
    if 8 in socket and 8 in mpich:
        lo, hi = socket[8]["us"][0], mpich[8]["us"][0]
        lines.append(f"- 8 B allreduce <= MPICH's latency: {'met' if lo <= hi else 'missed'}: {lo:.1f} us against "
                     f"MPICH's {hi:.1f} us."
                     + ("" if lo <= hi else f" What limits it: the raw exchange over one TCP connection (what "
                        f"Loom's paired control streams and MPICH's UCX both use) takes {one:.1f} us; Loom adds "
                        f"{lo - one:.1f} us of its own (the call, the plan, the provider) and MPICH {hi - one:.1f} us."))
    try:
        counters = open(f"{out}/counters.txt").read().strip()
    except OSError:
        counters = ""
    if counters:
        lines.append(f"- No staging copy on the send side: rank 0's counter over the whole run (sizes 8 B..max, "
                     f"in and out of place, with `LOOM_DEBUG=INFO`): `{counters.split('LOOM INFO ')[-1]}`.")
    lines += ["", "Commands (`build/perf-net/commands.txt`):", "", "```"]
    lines += [l.rstrip() for l in open(f"{out}/commands.txt")]
    lines += ["```"]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
