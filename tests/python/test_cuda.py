"""CUDA tensors through the backend (checks_cuda.py): 2 ranks as processes sharing GPU 0."""
import functools

import pytest
import torch

import jobs
from checklib import CUDA_CHECKS
from harness import free_port, spawn_job

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU: torch.cuda.is_available() is False")


@functools.lru_cache(maxsize=None)
def cuda_result():
    return spawn_job(jobs.cuda_job, 2, args=(2, free_port()), timeout=300)


@pytest.mark.parametrize("name", list(CUDA_CHECKS))
def test_cuda_check(name):
    failure = cuda_result().failure(name)
    assert failure is None, failure


def test_cuda_tensors_refused_when_the_library_has_no_cuda():
    """With CUDA turned off in libloom (LOOM_CUDA=0, as a build without CUDA), a CUDA tensor is refused
    with a clear error instead of its device pointer being read as host memory."""
    import os
    import subprocess
    import sys

    script = f"""
import torch, torch.distributed as dist
import loom.torch
dist.init_process_group("loom", init_method="tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
try:
    dist.all_reduce(torch.ones(4, device="cuda"))
except RuntimeError as e:
    print("REFUSED:", e)
dist.destroy_process_group()
"""
    env = dict(os.environ, LOOM_CUDA="0", PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert "REFUSED:" in out.stdout and "serves host memory only" in out.stdout, out.stdout + out.stderr
