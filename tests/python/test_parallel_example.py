"""examples/train_gpt.py as a user runs it (torchrun): the loss falls, and a run stopped and resumed from
its checkpoint ends exactly where an uninterrupted one does."""
import os
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "train_gpt.py")
SMALL = ["--tp", "2", "--pp", "2", "--zero", "1", "--micro-batches", "2", "--layers", "2", "--hidden", "32",
         "--heads", "4", "--vocab", "64", "--seq-len", "16", "--lr", "1e-2", "--save-every", "4"]


def train(workdir, steps, *extra):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4", EXAMPLE,
           *SMALL, "--steps", str(steps), "--save", os.path.join(workdir, "ckpt"),
           "--plot", os.path.join(workdir, "loss.png"), *extra]
    proc = subprocess.run(cmd, cwd=workdir, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout, torch.load(os.path.join(workdir, "ckpt", "rank00000.pt"), weights_only=False)["history"]


def test_example_trains_and_resumes():
    straight, interrupted = tempfile.mkdtemp(prefix="gpt-a-"), tempfile.mkdtemp(prefix="gpt-b-")
    out, history = train(straight, 8)
    assert "layout: tp=2 pp=2 dp=1" in out and "final loss" in out, out
    assert os.path.getsize(os.path.join(straight, "loss.png")) > 0
    first, last = history[0][1], history[-1][1]
    assert last < first - 0.3, f"loss {first:.3f} -> {last:.3f} did not fall clearly"
    train(interrupted, 4)
    out, resumed = train(interrupted, 8, "--resume", "--cpu-bind", "round-robin")  # bound: the same numbers
    assert "resumed at step 4" in out, out
    assert resumed == history, f"resumed run {resumed} differs from the uninterrupted {history}"
