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
