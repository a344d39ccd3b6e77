"""loom-perf --percentiles: per-size p50/p99/max columns in the table and in --json, ordered
p50 <= p99 <= max, each a time of one operation; without the flag neither appears."""
import json
import subprocess
import sys
import tempfile

perf = sys.argv[1]
failures = []


def run(*extra):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [perf, "all_reduce", "-b", "8", "-e", "4096", "-f", "8", "-np", "2", "-n", "200", "-w", "5",
               "-J", f.name, *extra]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            failures.append(f"{' '.join(cmd)} exited {out.returncode}: {out.stderr}")
            return out.stdout, []
        return out.stdout, json.load(open(f.name))


text, rows = run("--percentiles")
if not rows:
    failures.append("no JSON rows with --percentiles")
for row in rows:
    p50, p99, mx = row.get("p50_us"), row.get("p99_us"), row.get("max_us")
    where = f"{row['bytes']} B {'in' if row['inplace'] else 'out of'} place"
    if None in (p50, p99, mx):
        failures.append(f"{where}: p50/p99/max missing from {row}")
    elif not (0 < p50 <= p99 <= mx):
        failures.append(f"{where}: expected 0 < p50 <= p99 <= max, got {p50}, {p99}, {mx}")
    elif mx < row["time_us"] * 0.5:
        failures.append(f"{where}: max {mx} us is far below the mean {row['time_us']} us")
header = [line for line in text.splitlines() if line.startswith("#") and "p99" in line]
if not header:
    failures.append("the table has no p99 column:\n" + text)
# one data line: 5 leading columns, then 7 per placement (time algbw busbw #wrong p50 p99 max)
data = [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]
if any(len(fields) != 5 + 2 * 7 for fields in data):
    failures.append("table rows do not have 19 columns:\n" + text)

text, rows = run()
if any("p99_us" in row for row in rows) or "p99" in text:
    failures.append("percentiles reported without --percentiles")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("loom-perf --percentiles: ok")
