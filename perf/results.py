"""Reads benchmark results: loom-perf --json arrays and the JSON lines of mpi_bench / gloo_bench."""
import json


def load(path, library=None):
    """Rows as dicts with at least library, collective, bytes, time_us, busbw_gbs (out-of-place only)."""
    with open(path) as f:
        text = f.read().strip()
    if not text:
        return []
    rows = json.loads(text) if text.startswith("[") else [json.loads(line) for line in text.splitlines() if line]
    out = []
    for row in rows:
        if "error" in row or row.get("inplace"):
            continue
        row.setdefault("library", library or "loom")
        if library:
            row["library"] = library
        out.append(row)
    return out
