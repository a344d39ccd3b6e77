"""The Python examples (examples/README.md) run as a user runs them, from a scratch directory, each
checking its own result: DDP and FSDP2 over loom against one process, the planner on modelled published
machines and on this one. train_gpt.py is run by test_parallel_example.py and the test_plan_train tests.
The C examples are meson tests (tests/examples)."""
import os
import subprocess
import sys
import tempfile

import pytest

from harness import package_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
FIXTURES = os.environ.get("LOOM_FIXTURES", os.path.join(ROOT, "..", "shared", "fixtures", "topology"))


def run(args, timeout=300):
    proc = subprocess.run(args, cwd=tempfile.mkdtemp(prefix="loom-example-"), env=package_env(OMP_NUM_THREADS="1"),
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def torchrun(example, nproc, *args):
    return run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
                os.path.join(EXAMPLES, example), *args])


def test_ddp():
    out = torchrun("ddp.py", 2, "--steps", "10")
    assert "DDP over loom on 2 ranks" in out and "(OK)" in out, out


def test_fsdp2():
    out = torchrun("fsdp2.py", 2, "--steps", "6")
    assert "FSDP2 over loom on 2 ranks" in out and "(OK)" in out, out


def test_plan_modelled_machines():
    if not os.path.exists(os.path.join(FIXTURES, "nccl-hgx-8xA100-nvswitch-4xcx6.xml")):
        pytest.skip(f"no topology fixtures in {FIXTURES} (LOOM_FIXTURES)")
    out = run([sys.executable, os.path.join(EXAMPLES, "plan_modelled_machines.py"), "--fixtures", FIXTURES,
               "--machines", "a100x8", "--budgets", "16"])
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) >= 2 and "samples/s" in rows[0], out


def test_plan_validation():
    out = run([sys.executable, os.path.join(EXAMPLES, "plan_validation.py"), "--ranks", "2", "--steps", "3",
               "--rounds", "1", "--per-layer", "1", "--no-calibrate"], timeout=600)
    assert "Spearman" in out or "spearman" in out, out


def test_elastic_train():
    """Two processes killed with SIGKILL at different steps (the first is rank 0, the shrink's leader and
    the first store's host in a torchrun-less job): the others shrink twice and the loss goes on falling."""
    out = run([sys.executable, os.path.join(EXAMPLES, "elastic_train.py"), "--steps", "40", "--kill", "0@10,3@25"])
    assert "step 10: lost rank(s) [0]" in out and "continuing with 3 ranks" in out, out
    assert "step 25: lost rank(s) [2]" in out and "continuing with 2 ranks" in out, out
    assert "the loss went on falling (OK)" in out and "2 of 4 ranks finished 40 steps" in out, out


def test_elastic_train_across_hosts():
    """The same across two simulated hosts (scripts/hosts.sh), two ranks on each: the process killed is
    rank 3, on the second host; the ranks left shrink across the hosts and the loss goes on falling."""
    hosts_sh = os.path.join(ROOT, "scripts", "hosts.sh")
    check = subprocess.run(["bash", hosts_sh, "check"], capture_output=True, text=True)
    if check.returncode != 0:
        pytest.skip(f"no simulated hosts here: {check.stdout.strip()} {check.stderr.strip()}")
    bed = f"el{os.getpid() % 100000}"
    subprocess.run(["bash", hosts_sh, "gc"], capture_output=True)
    up = subprocess.run(["bash", hosts_sh, "up", "2", "--bed", bed, "--owner", str(os.getpid())], capture_output=True,
                        text=True)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        out = run(["bash", hosts_sh, "exec", f"{bed}-h1", sys.executable, os.path.join(EXAMPLES, "elastic_train.py"),
                   "--hosts", f"{bed}-h1,{bed}-h2", "--steps", "30", "--kill", "3@10"])
    finally:
        subprocess.run(["bash", hosts_sh, "down", "--bed", bed], capture_output=True)
    assert "step 10: lost rank(s) [3]" in out and "continuing with 3 ranks" in out, out
    assert "the loss went on falling (OK)" in out and "3 of 4 ranks finished 30 steps" in out, out
