"""Runs examples/train_gpt.py on N ranks for the plan tests and returns its losses.

The ranks are the harness's processes (forked from a server that imported torch once), each given the
environment torchrun gives its workers (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR...) and running the
example's file as `python train_gpt.py ARGS` would: a torchrun per run imported torch in the launcher and
every worker anew, about 4 CPU-s each, which was most of these tests' time on 2 cores. How a user starts
the example (torchrun) is tested by test_parallel_example.py."""
import os
import runpy
import sys

import torch

from harness import free_port, spawn_job

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "train_gpt.py")


def example_rank(rank, outdir, nproc, port, workdir, argv):
    """One rank: torchrun's worker environment, stdout and stderr into outdir, the example as __main__."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc),
                      GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    os.chdir(workdir)
    for stream, name in ((sys.stdout, "stdout"), (sys.stderr, "stderr")):
        stream.flush()
        with open(os.path.join(outdir, f"rank{rank}.{name}"), "w") as f:
            os.dup2(f.fileno(), stream.fileno())
    sys.argv = [EXAMPLE, *argv]
    sys.path.insert(0, os.path.dirname(EXAMPLE))  # as `python train_gpt.py` has it: its own folder's modules
    try:
        runpy.run_path(EXAMPLE, run_name="__main__")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def train(workdir, name, nproc, *args):
    """(rank 0's stdout, [loss of each step]) of train_gpt.py on nproc ranks with `args`, run in workdir."""
    argv = ["--save", os.path.join(workdir, name), "--plot", "", *args]
    result = spawn_job(example_rank, nproc, args=(nproc, free_port(), workdir, argv), timeout=240)
    logs = {}
    for rank in range(nproc):
        for stream in ("stdout", "stderr"):
            path = os.path.join(result.outdir, f"rank{rank}.{stream}")
            logs[rank, stream] = open(path).read() if os.path.exists(path) else ""
    assert result.error is None, f"{result.error}\n" + "\n".join(
        f"--- rank {r} {s}:\n{text[-3000:]}" for (r, s), text in logs.items() if text)
    history = torch.load(os.path.join(workdir, name, "rank00000.pt"), weights_only=False)["history"]
    return logs[0, "stdout"], [loss for _, loss in history]
