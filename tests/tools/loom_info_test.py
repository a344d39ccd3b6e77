"""loom-info on this machine (text and --json, the algorithm registry and the network providers' table
among them), with LOOM_TOPO_FILE set to real machines' files (its rings are loom-topo's for the same
file), --settings (every declared setting, with its source, a settings file's line among them), and
with a broken topology file or a bad line of loom.conf (a clear error, exit status 1). It needs no GPU
and no network, and
answers in well under a second (the time is printed; the check allows for a loaded CI machine).

    python3 loom_info_test.py LOOM_INFO LOOM_TOPO SETTINGS_DEF [FIXTURES]
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

info, topo, settings_def = sys.argv[1:4]
fixtures = sys.argv[4] if len(sys.argv) > 4 else ""
failures = []
env = {k: v for k, v in os.environ.items() if not k.startswith("LOOM_")}
# The user's settings files stay out of it (/dev/null: an empty file); the checks below name their own.
env.update(LOOM_CONF_FILE="/dev/null", NCCL_CONF_FILE="/dev/null")


def run(binary, *args, extra=None, expect=0):
    started = time.monotonic()
    proc = subprocess.run([binary, *args], capture_output=True, text=True, timeout=60, env=dict(env, **(extra or {})))
    took = time.monotonic() - started
    if proc.returncode != expect:
        failures.append(f"{binary} {' '.join(args)} {extra or ''}: exit {proc.returncode}, expected {expect}: "
                        f"{proc.stderr[-2000:]}")
    return proc, took


# This machine, as text and as JSON.
text, took = run(info)
print(f"loom-info: {took * 1000:.0f} ms")
if took > 5:
    failures.append(f"loom-info took {took:.1f} s")
for section in ("Loom ", "Topology (", "Rings for ", "Algorithms (LOOM_ALGO", "Network providers (LOOM_NET",
                "Network provider between hosts:", "Calibration:", "Settings:"):
    if section not in text.stdout:
        failures.append(f"loom-info's text has no '{section}':\n{text.stdout}")
doc, _ = run(info, "--json")
try:
    facts = json.loads(doc.stdout)
except json.JSONDecodeError as e:
    facts = {}
    failures.append(f"loom-info --json is not JSON ({e}): {doc.stdout[:500]}")
for key in ("loom", "cuda", "topology", "rings", "algorithms", "providers", "network", "calibration", "settings"):
    if key not in facts:
        failures.append(f"loom-info --json has no '{key}'")


def text_section(title):
    """The lines of loom-info's text section whose heading starts with `title`."""
    match = re.search(rf"^{re.escape(title)}.*?\n((?:  .*\n)*)", text.stdout, re.M)
    return match.group(1) if match else ""


# The algorithm registry: every algorithm LOOM_ALGO names, with what it serves, in the text view too.
COLLECTIVES = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "gather", "scatter"}
algorithms = {a["name"]: a for a in facts.get("algorithms", [])}
if set(algorithms) != {"ring", "tree", "direct", "oneshot", "hier", "peer-oneshot", "peer"}:
    failures.append(f"loom-info's algorithms: {sorted(algorithms)}")
for name, a in algorithms.items():
    if not a["collectives"] or not set(a["collectives"]) <= COLLECTIVES or not a["description"]:
        failures.append(f"algorithm {name}: {a}")
    line = re.search(rf"^  {name} +(.*)$", text_section("Algorithms (LOOM_ALGO"), re.M)
    if not line or not all(c in line.group(1) for c in a["collectives"]):
        failures.append(f"loom-info's text does not list {name} with {a['collectives']}")
if algorithms:
    if set(algorithms["direct"]["collectives"]) != COLLECTIVES:
        failures.append(f"direct serves every collective: {algorithms['direct']}")
    if algorithms["tree"]["collectives"] != ["allreduce", "broadcast", "reduce"]:
        failures.append(f"tree: {algorithms['tree']}")
    if algorithms["oneshot"]["collectives"] != ["allreduce"] or not algorithms["oneshot"]["needs"]:
        failures.append(f"oneshot: {algorithms['oneshot']}")

# The network providers' table: LOOM_NET's words and a plugin's, the build's list its compiled-in ones.
providers = facts.get("providers", [])
if [p["name"] for p in providers if not p["by_plugin_name"]] != ["ib", "ucx", "socket"] or \
        [p["name"] for p in providers if p["by_plugin_name"]] != ["plugin"]:
    failures.append(f"loom-info's providers: {providers}")
elif facts["loom"]["net_providers"] != [p["name"] for p in providers if p["compiled_in"]]:
    failures.append(f"net_providers {facts['loom']['net_providers']} are not the table's compiled-in ones")
for p in providers:
    shown = re.search(rf"^  {p['name']} +(.*)$", text_section("Network providers (LOOM_NET"), re.M)
    expected = p["description"] if p["compiled_in"] else "not in this build: " + p["missing"]
    if not shown or shown.group(1) != expected:
        failures.append(f"loom-info's text for provider {p['name']}: {shown.group(0) if shown else None!r}")
if facts:
    if not facts["topology"]["numa"]:
        failures.append("no NUMA node found")
    if facts["network"].get("provider") not in ("socket", "ib", "ucx") and "error" not in facts["network"]:
        failures.append(f"network provider: {facts['network']}")
    if facts["rings"]["ranks"] != 2 or any(sorted(r) != [0, 1] for r in facts["rings"]["rings"]):
        failures.append(f"rings for 2 ranks of this host: {facts['rings']}")
    if not facts["calibration"].get("copy_gbs", 0) > 0:
        failures.append(f"calibration: {facts['calibration']}")
    if not os.path.exists("/dev/nvidia0") and facts["cuda"]["usable"]:
        failures.append("CUDA usable without a GPU")

# --settings: every declared setting, and where its value came from.
declared = re.findall(r'^LOOM_SETTING\(\w+,\s*"(LOOM_\w+)"', open(settings_def).read(), re.M)
listed, _ = run(info, "--settings", "--json", extra={"LOOM_NCHANNELS": "3"})
rows = {row["name"]: row for row in json.loads(listed.stdout or "[]")}
if sorted(rows) != sorted(declared):
    failures.append(f"--settings lists {sorted(set(rows) ^ set(declared))} differently from settings.def")
elif rows["LOOM_NCHANNELS"]["value"] != "3" or rows["LOOM_NCHANNELS"]["source"] != "environment" \
        or rows["LOOM_TIMEOUT_MS"]["source"] != "default":
    failures.append(f"--settings sources: {rows['LOOM_NCHANNELS']}, {rows['LOOM_TIMEOUT_MS']}")
plain, _ = run(info, extra={"LOOM_NCHANNELS": "3"})
if "LOOM_NCHANNELS=3" not in plain.stdout:
    failures.append("loom-info does not show a setting taken from the environment")

# Settings files: a value from loom.conf or NCCL's file names the file and line as its source; a bad line
# of loom.conf is named on stderr, with exit status 1, after the report.
with tempfile.TemporaryDirectory() as conf_dir:
    loom_conf, nccl_conf = os.path.join(conf_dir, "loom.conf"), os.path.join(conf_dir, "nccl.conf")
    with open(loom_conf, "w") as f:
        f.write("# mine\nLOOM_NCHANNELS=5\n")
    with open(nccl_conf, "w") as f:
        f.write("NCCL_SOCKET_IFNAME=lo\nNCCL_NCHANNELS=9\n")
    files = {"LOOM_CONF_FILE": loom_conf, "NCCL_CONF_FILE": nccl_conf}
    listed, _ = run(info, "--settings", "--json", extra=files)
    rows = {row["name"]: row for row in json.loads(listed.stdout or "[]")}
    if rows.get("LOOM_NCHANNELS", {}).get("source") != f"{loom_conf}:2" or rows["LOOM_NCHANNELS"]["value"] != "5":
        failures.append(f"--settings with LOOM_CONF_FILE: {rows.get('LOOM_NCHANNELS')}")
    if rows.get("LOOM_SOCKET_IFNAME", {}).get("source") != f"{nccl_conf}:1 (NCCL_SOCKET_IFNAME)":
        failures.append(f"--settings with NCCL_CONF_FILE: {rows.get('LOOM_SOCKET_IFNAME')}")
    text, _ = run(info, "--settings", extra=files)
    if f"{loom_conf}:2" not in text.stdout or f"{loom_conf}  LOOM_* names, named by LOOM_CONF_FILE: 1 value(s)" \
            not in text.stdout:
        failures.append(f"--settings does not show the file:\n{text.stdout[-1500:]}")
    plain, _ = run(info, "--no-network", extra=files)
    found = next((line for line in plain.stdout.splitlines() if line.startswith("Settings files: ")), "")
    if f"LOOM_NCHANNELS=5 ({loom_conf}:2)" not in plain.stdout or loom_conf not in found or nccl_conf not in found:
        failures.append(f"loom-info does not show a setting from a file:\n{plain.stdout[-1500:]}")
    with open(loom_conf, "a") as f:
        f.write("LOOM_NCHANNELS=99\n")
    bad, _ = run(info, "--settings", extra=files, expect=1)
    if f"loom-info: {loom_conf}:3: LOOM_NCHANNELS=99 is out of range" not in bad.stderr or "LOOM_NCHANNELS" not in bad.stdout:
        failures.append(f"a bad line of loom.conf: {bad.stderr!r}")

# Real machines' files: the rings for one rank per GPU are loom-topo's.
checked = 0
for name in ("nccl-hgx-8xA100-nvswitch-4xcx6.xml", "hwloc-dgx2-16xV100-nvswitch.xml", "hwloc-2xP100-pcie-switch-cx5.xml"):
    path = os.path.join(fixtures, name)
    if not fixtures or not os.path.exists(path):
        continue
    checked += 1
    mine, took = run(info, "--json", "--no-network", extra={"LOOM_TOPO_FILE": path})
    theirs, _ = run(topo, "--json", "--topo", path)
    if mine.returncode or theirs.returncode:
        continue
    mine, theirs = json.loads(mine.stdout), json.loads(theirs.stdout)
    if mine["rings"]["rings"] != theirs["rings"]:
        failures.append(f"{name}: loom-info's rings {mine['rings']['rings']} are not loom-topo's {theirs['rings']}")
    if len(mine["topology"]["gpus"]) != len(theirs["gpus"]) or len(mine["topology"]["nics"]) != len(theirs["nics"]):
        failures.append(f"{name}: GPUs/NICs differ from loom-topo's")
    print(f"{name}: {len(mine['rings']['rings'])} rings, as loom-topo's ({took * 1000:.0f} ms)")
if not checked:
    print(f"SKIP the fixture comparisons: no topology fixtures in '{fixtures}' (LOOM_FIXTURES)")

# A broken topology file: a clear error naming it, exit status 1.
with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as broken:
    broken.write("<topology><cpu numaid=")
proc, _ = run(info, extra={"LOOM_TOPO_FILE": broken.name}, expect=1)
if broken.name not in proc.stderr or not proc.stderr.startswith("loom-info: "):
    failures.append(f"broken topology file: {proc.stderr!r}")
proc, _ = run(info, extra={"LOOM_TOPO_FILE": "/nonexistent-loom-dir/topo.xml"}, expect=1)
if "/nonexistent-loom-dir/topo.xml" not in proc.stderr:
    failures.append(f"missing topology file: {proc.stderr!r}")
os.unlink(broken.name)

for f in failures:
    print("FAIL:", f)
print("loom-info:", "OK" if not failures else f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
