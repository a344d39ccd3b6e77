"""The same checks under torchrun (python -m torch.distributed.run, env:// rendezvous)."""
import functools
import os
import subprocess
import sys
import tempfile

import pytest

import jobs  # noqa: F401 - registers every check
from checklib import CHECKS
from harness import JobResult

HERE = os.path.dirname(os.path.abspath(__file__))


@functools.lru_cache(maxsize=None)
def torchrun_result():
    out = tempfile.mkdtemp(prefix="loom-torchrun-")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           os.path.join(HERE, "torchrun_job.py")]
    env = dict(os.environ, LOOM_TEST_OUT=out, OMP_NUM_THREADS="1")
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        error = None if proc.returncode == 0 else f"torchrun exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    except subprocess.TimeoutExpired:
        error = "torchrun timed out after 300 s"
    return JobResult(out, 2, error)


def test_torchrun_exit():
    assert torchrun_result().error is None, torchrun_result().error


@pytest.mark.parametrize("name", list(CHECKS))
def test_check_torchrun(name):
    failure = torchrun_result().failure(name)
    assert failure is None, failure
