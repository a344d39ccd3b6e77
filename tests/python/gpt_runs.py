"""Runs examples/train_gpt.py under torch.distributed.run for the plan tests and returns its losses."""
import os
import subprocess
import sys

import torch

from harness import package_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "train_gpt.py")


def train(workdir, name, nproc, *args):
    """(stdout, [loss of each step]) of train_gpt.py on nproc ranks with `args`, run in workdir."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), EXAMPLE,
           "--save", os.path.join(workdir, name), "--plot", "", *args]
    proc = subprocess.run(cmd, cwd=workdir, env=package_env(OMP_NUM_THREADS="1"), capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    history = torch.load(os.path.join(workdir, name, "rank00000.pt"), weights_only=False)["history"]
    return proc.stdout, [loss for _, loss in history]
