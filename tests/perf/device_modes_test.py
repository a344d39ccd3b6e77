"""loom-perf's device modes on FakeCuda (2 rank threads sharing GPU 0, plan kernels): -G N captures each
size's timed loop into a CUDA graph launched N times (nccl-tests' -G), with every result still checked;
LOOM_DEVICE_PROFILE=1 adds a profile line per size and placement and a `profile` object to the JSON rows;
-G N beside --percentiles, and a -G that is neither host, cuda nor a number, are refused (exit 2)."""
import json
import os
import subprocess
import sys
import tempfile

perf = sys.argv[1]
failures = []
ENV = dict(os.environ, LOOM_DEVICE_PLANS="1", LOOM_TIMEOUT_MS="60000")


def run(*args, env=None):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [perf, "all_reduce", "-t", "2", "-b", "1K", "-e", "256K", "-f", "16", "-n", "3", "-w", "1",
               "-J", f.name, *args]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env or ENV)
        rows = json.load(open(f.name)) if out.returncode == 0 and os.path.getsize(f.name) else []
        return out, rows, " ".join(cmd)


out, rows, cmd = run("-G", "3")
if out.returncode != 0 or "Out of bounds values : 0 OK" not in out.stdout:
    failures.append(f"{cmd}: exit {out.returncode}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
elif len(rows) != 6 or any(r["wrong"] != 0 or not r["time_us"] > 0 for r in rows):
    failures.append(f"{cmd}: expected 3 sizes x 2 placements checked and timed, got {rows}")

out, rows, cmd = run("-G", "cuda", env=dict(ENV, LOOM_DEVICE_PROFILE="1"))
lines = [line for line in out.stdout.splitlines() if line.startswith("#   profile ")]
if out.returncode != 0:
    failures.append(f"{cmd}: exit {out.returncode}\n{out.stderr[-2000:]}")
elif len(lines) != 6:
    failures.append(f"{cmd}: expected a profile line per size and placement, got:\n{out.stdout}")
else:
    for r in rows:
        p = r.get("profile", {})
        if not (p.get("launches", 0) >= 3 and p["steps"] >= p["lanes"] > 0 and p["bytes"] > 0
                and p["wait_ns"] + p["data_ns"] + p["publish_ns"] == p["lane_ns"]):
            failures.append(f"{cmd}: a row's profile does not add up: {r}")

out, rows, cmd = run("-G", "cuda")
if out.returncode != 0 or any("profile" in r for r in rows) or "#   profile" in out.stdout:
    failures.append(f"{cmd}: without LOOM_DEVICE_PROFILE a profile was printed, or the run failed (exit {out.returncode})")

for bad, says in ((["-G", "3", "--percentiles"], "--percentiles"), (["-G", "x"], "'x'")):
    out, _, cmd = run(*bad)
    if out.returncode != 2 or says not in out.stderr:
        failures.append(f"{cmd}: expected exit 2 naming {says}, got {out.returncode}: {out.stderr[-500:]}")

print("\n".join(failures) if failures else "loom-perf device modes: ok")
sys.exit(1 if failures else 0)
