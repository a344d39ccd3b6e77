"""Reads benchmark results: loom-perf --json arrays and the JSON lines of mpi_bench / gloo_bench."""
import json
import statistics


def fmt_size(n):
    """8, 1K, 64M: sizes as the tables print them."""
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(int(n))


def load(path, library=None, inplace=False):
    """Rows as dicts with at least library, collective, bytes, time_us, busbw_gbs: the out-of-place
    rows, or with inplace=True the in-place ones (loom-perf writes both)."""
    with open(path) as f:
        text = f.read().strip()
    if not text:
        return []
    rows = json.loads(text) if text.startswith("[") else [json.loads(line) for line in text.splitlines() if line]
    out = []
    for row in rows:
        if "error" in row or bool(row.get("inplace")) != inplace:
            continue
        row.setdefault("library", library or "loom")
        if library:
            row["library"] = library
        out.append(row)
    return out


def medians(rows):
    """One row per (library, collective, nranks, bytes): the repeat with the median time, so that one
    disturbed run (another process took the core) does not decide the figure. Adds "repeats"."""
    groups = {}
    for row in rows:
        key = (row["library"], row["collective"], row.get("nranks"), int(row["bytes"]))
        groups.setdefault(key, []).append(row)
    out = []
    for group in groups.values():
        ordered = sorted(group, key=lambda r: r["time_us"])
        middle = dict(ordered[(len(ordered) - 1) // 2])
        middle["time_us"] = statistics.median(r["time_us"] for r in ordered)
        middle["busbw_gbs"] = statistics.median(r["busbw_gbs"] for r in ordered)
        if all("p99_us" in r for r in ordered):
            middle["p99_us"] = statistics.median(r["p99_us"] for r in ordered)
        middle["repeats"] = len(ordered)
        out.append(middle)
    return out
