"""PyTorch's own distributed test suite (DistributedTest._DistTestBase, world size 2) passes on Loom:
every test Gloo passes, but for the exclusions listed with their reasons in
tests/torch_suite/exclusions.py. The driver is tests/torch_suite/run.py (see its README)."""
import importlib.util
import os
import subprocess
import sys

import pytest

DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch_suite", "run.py")


def why_not_importable():
    """None when torch's suite imports; else why not (torch wheels ship it, but its helpers import
    packages torch does not depend on, such as expecttest). Tried in a child: the module reads its
    configuration from the environment when imported."""
    if importlib.util.find_spec("torch.testing._internal.distributed") is None:
        return "torch.testing._internal.distributed is not installed"
    env = dict(os.environ, BACKEND="gloo", WORLD_SIZE="2")
    probe = subprocess.run([sys.executable, "-c", "import torch.testing._internal.distributed.distributed_test"],
                           capture_output=True, text=True, env=env, timeout=300)
    if probe.returncode == 0:
        return None
    return (probe.stderr.strip().splitlines() or ["import failed"])[-1]


def test_torch_distributed_suite_on_loom():
    why_not = why_not_importable()
    if why_not is not None:
        pytest.skip(f"torch's distributed test suite cannot be imported: {why_not}")
    # The driver bounds each test (120 s) and the run (600 s); this bound only catches a driver hang.
    run = subprocess.run([sys.executable, DRIVER, "--backend", "loom"], capture_output=True, text=True, timeout=900)
    lines = run.stdout.strip().splitlines()
    summary = lines[-1] if lines else "(no output)"
    failed = [ln for ln in run.stdout.splitlines() if ln.startswith("FAILED")]
    assert run.returncode == 0, f"{summary}\n" + "\n".join(failed) + f"\n\n{run.stdout[-20000:]}\n{run.stderr[-5000:]}"
