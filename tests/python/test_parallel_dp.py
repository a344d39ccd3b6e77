"""Data parallelism (overlap, bucket views, averaging, no_sync) and bad input (clear errors before any
collective), in spawned jobs."""
import functools

import pytest

import parallel_dp_checks
import parallel_error_checks
import parallel_jobs
from harness import free_port, spawn_job


@functools.lru_cache(maxsize=None)
def dp_result():
    return spawn_job(parallel_jobs.dp_job, 2, args=(2, free_port()), timeout=180)


@functools.lru_cache(maxsize=None)
def errors_result():
    return spawn_job(parallel_jobs.errors_job, 4, args=(4, free_port()), timeout=120)


@pytest.mark.parametrize("name", list(parallel_dp_checks.CHECKS))
def test_data_parallel(name):
    failure = dp_result().failure(name)
    assert failure is None, failure


@pytest.mark.parametrize("name", list(parallel_error_checks.CHECKS))
def test_bad_input(name):
    result = errors_result()
    assert name in result.per_rank[0], f"did not run (job: {result.error}; in progress: {result.current[0]})"
    assert result.per_rank[0][name] is None, result.per_rank[0][name]
