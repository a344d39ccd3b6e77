#!/usr/bin/env python3
"""The one-screen summary of a scripts/gpu-run.sh command, from its results folder (items.tsv and
rows.jsonl): each item's outcome (a suite's passing tests folded into one line), the copy limit,
loom-perf's bandwidths at a few sizes, 8 B latency, torch's rows, and the goals of issue 32 (1 GiB
all_reduce over 2 ranks >= 0.8 of the device-to-device copy limit; 8 B all_reduce <= 8 us). Ends with
"N passed, M failed, K skipped" over the items.

    python3 scripts/gpu_summary.py RESULTS_DIR
"""
import json
import os
import pathlib
import sys

GOAL_COPY_RATIO = 0.8
GOAL_LATENCY_US = 8.0
GOAL_GRAPH_LATENCY_US = 6.0  # the GPU latency issue: per operation of a replayed CUDA graph, 2 rank threads
SIZES = [8, 1 << 20, 64 << 20, 1 << 30]


def human(nbytes):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= div:
            return f"{nbytes / div:g} {unit}"
    return f"{nbytes} B"


def read_items(folder):
    items = []
    path = folder / "items.tsv"
    if path.exists():
        for line in path.read_text().splitlines():
            name, status, secs, detail = (line.split("\t") + ["", "", ""])[:4]
            items.append({"name": name, "status": status, "secs": int(secs or 0), "detail": detail})
    return items


def read_rows(folder):
    path = folder / "rows.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def item_lines(items):
    """Items in order; the passing tests of a suite (names 'suite.test') folded into the suite's line."""
    lines, folded = [], {}
    for it in items:
        suite = it["name"].split(".", 1)[0] if "." in it["name"] else None
        if suite and it["status"] == "PASS":
            f = folded.setdefault(suite, {"n": 0, "secs": 0, "tests": 0, "index": len(lines)})
            if f["n"] == 0:
                lines.append(None)  # the suite's line, filled in below
            f["n"] += 1
            f["secs"] += it["secs"]
            f["tests"] += int(it["detail"].split(" passed")[0].split(", ")[-1]) if " passed" in it["detail"] else 0
            continue
        lines.append(f"  {it['status']:<8}{it['name']:<30}{it['secs']:>5} s  {it['detail']}"[:200])
    for suite, f in folded.items():
        lines[f["index"]] = f"  {'PASS':<8}{suite + ' (' + str(f['n']) + ' groups)':<30}{f['secs']:>5} s  " \
                            f"{f['tests']} tests passed"
    return lines


def nearest(rows, size):
    return min(rows, key=lambda r: abs(r["bytes"] - size)) if rows else None


def perf_lines(rows, copy_limit):
    # Sweeps (latency runs, with percentiles, are latency_lines'; settings sweeps sweep_lines').
    perf = [r for r in rows if r["kind"] == "loom-perf" and not r.get("inplace") and "p50_us" not in r
            and "=" not in r.get("config", "") and "profile" not in r and not r.get("config", "").endswith("-graph")]
    if not perf:
        return []
    out = ["loom-perf, out of place (busbw GB/s; algbw for 1 rank, where busbw is 0):",
           "  " + f"{'':<28}" + "".join(f"{human(s):>11}" for s in SIZES)]
    keys = sorted({(r["collective"], r["config"]) for r in perf})
    for coll, config in keys:
        sel = [r for r in perf if r["collective"] == coll and r["config"] == config]
        cells = []
        for s in SIZES:
            r = nearest([x for x in sel if x["bytes"] <= s * 2], s)
            if r is None or abs(r["bytes"] - s) > s / 2:
                cells.append(f"{'-':>11}")
                continue
            bw = r["busbw_gbs"] if r["nranks"] > 1 else r["algbw_gbs"]
            cells.append(f"{bw:>11.2f}")
        out.append(f"  {coll + ' ' + config:<28}" + "".join(cells))
    goal = [r for r in perf if r["collective"] == "all_reduce" and r["config"] == "2threads"]
    big = max(goal, key=lambda r: r["bytes"]) if goal else None
    if big and copy_limit:
        ratio = big["busbw_gbs"] / copy_limit
        out.append(f"  goal: all_reduce 2 ranks at {human(big['bytes'])}: busbw {big['busbw_gbs']:.1f} GB/s = "
                   f"{ratio:.2f} of the copy limit (goal >= {GOAL_COPY_RATIO}): {'MET' if ratio >= GOAL_COPY_RATIO else 'not met'}")
    return out


def sweep_lines(rows):
    """The 2-thread all_reduce sweep's busbw at its sizes, one line per setting."""
    sweep = [r for r in rows if r["kind"] == "loom-perf" and "=" in r.get("config", "") and not r.get("inplace")]
    if not sweep:
        return []
    out = ["all_reduce 2 threads, busbw GB/s by setting (defaults: channels 32, slots 8, chunk 512K):"]
    for config in sorted({r["config"] for r in sweep}):
        cells = ", ".join(f"{human(r['bytes'])} {r['busbw_gbs']:.1f}" for r in sorted(
            (r for r in sweep if r["config"] == config), key=lambda r: r["bytes"]))
        out.append(f"  {config:<14} {cells}")
    return out


def profile_lines(rows):
    """LOOM_DEVICE_PROFILE's rows: per size, where a lane's first thread spent a step (loom-perf's profile)."""
    prof = [r for r in rows if r["kind"] == "loom-perf" and "profile" in r and not r.get("inplace")]
    out = []
    for r in sorted(prof, key=lambda r: r["bytes"]):
        p = r["profile"]
        if not p.get("steps"):
            continue
        steps = p["steps"]
        parts = p["wait_ns"] + p["data_ns"] + p["publish_ns"]
        cells = ", ".join(f"{name} {p[key] / steps / 1e3:.2f} us ({100 * p[key] / parts if parts else 0:.0f}%)"
                          for name, key in (("wait", "wait_ns"), ("data", "data_ns"), ("publish", "publish_ns")))
        out.append(f"  {human(r['bytes']):>6} busbw {r['busbw_gbs']:.1f}: {p['lanes'] / p['launches']:.0f} lanes, "
                   f"{p['bytes'] / steps / 1024:.0f} KiB a step; per step {cells}")
    return ["all_reduce 2 threads, profiled (LOOM_DEVICE_PROFILE=1):"] + out if out else []


def latency_lines(rows):
    lat = [r for r in rows if r["kind"] == "loom-perf" and "p50_us" in r and r["bytes"] <= 8 and not r.get("inplace")]
    out = []
    for r in lat:
        verdict = "MET" if r["p50_us"] <= GOAL_LATENCY_US else "not met"
        out.append(f"  8 B all_reduce, {r['config']}: mean {r['time_us']:.2f} us, p50 {r['p50_us']:.2f}, "
                   f"p99 {r['p99_us']:.2f}, max {r['max_us']:.2f} (goal p50 <= {GOAL_LATENCY_US:g} us: {verdict})")
    for r in rows:
        if r["kind"] == "loom-perf" and r.get("config", "").endswith("-graph") and r["bytes"] <= 8 and not r.get("inplace"):
            verdict = "MET" if r["time_us"] <= GOAL_GRAPH_LATENCY_US else "not met"
            out.append(f"  8 B all_reduce, {r['config']}: {r['time_us']:.2f} us per operation replayed in a CUDA graph "
                       f"(goal <= {GOAL_GRAPH_LATENCY_US:g} us: {verdict})")
    return ["latency:"] + out if out else []


def copy_lines(rows):
    copies = [r for r in rows if r["kind"] == "copy"]
    if not copies:
        return [], None
    parts, limit = [], None
    for kind in ("d2d", "h2d", "d2h"):
        sel = [r for r in copies if r["copy"] == kind]
        if sel:
            best = max(sel, key=lambda r: r["bytes"])
            parts.append(f"{kind} {best['gbs']:.1f} GB/s at {human(best['bytes'])}")
            if kind == "d2d":
                limit = best["gbs"]
    return ["copy limits (bytes counted once): " + "; ".join(parts)], limit


def torch_lines(rows):
    torch_rows = [r for r in rows if r["kind"] == "torch"]
    if not torch_rows:
        return []
    out = ["torch dist.all_reduce (float32, sum, in place; time of the slowest rank):"]
    for np_ in sorted({r["nprocs"] for r in torch_rows}):
        sel = [r for r in torch_rows if r["nprocs"] == np_]
        for s in (SIZES[0], SIZES[-1]):
            r = nearest(sel, s)
            if r is None:
                continue
            peer = f", {r['peer']} {r['peer_us']:.1f} us ({r['peer_GBps']:.2f} GB/s)" if r.get("peer_us") else ""
            out.append(f"  {np_} rank(s), {r['device']}, {human(r['bytes'])}: loom {r['loom_us']:.1f} us "
                       f"({r['loom_GBps']:.2f} GB/s){peer}")
    return out


def dropin_lines(rows):
    dropin = [r for r in rows if r["kind"] == "dropin"]
    if not dropin:
        return []
    out = ["torch's own backend over the libnccl.so.2 bound (checked all_reduce and DDP step passed):"]
    for item in sorted({r["item"] for r in dropin}):
        sel = [r for r in dropin if r["item"] == item]
        parts = []
        for s in (SIZES[0], SIZES[-1]):
            r = nearest(sel, s)
            if r is not None:
                parts.append(f"{human(r['bytes'])} {r['time_us']:.1f} us ({r['algbw_GBps']:.2f} GB/s)")
        lib = os.path.basename(sel[0]["library"] or "none")
        out.append(f"  {item} ({sel[0]['backend']}, {lib} {sel[0]['version']}): " + "; ".join(parts))
    return out


def main():
    folder = pathlib.Path(sys.argv[1])
    items = read_items(folder)
    rows = read_rows(folder)
    log = folder / "log.txt"
    heads = [line for line in log.read_text().splitlines() if line.startswith("## gpu-run")] if log.exists() else []
    lines = ["=" * 24 + " gpu-run summary " + "=" * 24] + heads
    probe = [r for r in rows if r["kind"] == "probe"]
    if probe and probe[-1].get("gpu"):
        lines.append(f"device: {probe[-1]['gpu']}")
    lines.append("items:")
    lines += item_lines(items)
    if os.environ.get("LOOM_GPU_DRY_RUN") == "1":
        lines.append("(a dry run: FakeCuda's figures are host threads', the goals say nothing here)")
    copy, limit = copy_lines(rows)
    lines += (copy + perf_lines(rows, limit) + latency_lines(rows) + torch_lines(rows) + dropin_lines(rows)
              + profile_lines(rows) + sweep_lines(rows))
    passed = sum(it["status"] == "PASS" for it in items)
    failed = sum(it["status"] in ("FAIL", "TIMEOUT") for it in items)
    skipped = sum(it["status"] == "SKIP" for it in items)
    lines.append(f"{passed} passed, {failed} failed, {skipped} skipped")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
