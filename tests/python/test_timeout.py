"""The process group timeout becomes Loom's timeout, and its failure a Python exception."""
import jobs
from harness import free_port, spawn_job


def test_timeout_maps_to_loom():
    result = spawn_job(jobs.timeout_job, 2, args=(free_port(),), timeout=120)
    failure = result.failure("timeout_maps_to_loom")
    assert failure is None, failure
