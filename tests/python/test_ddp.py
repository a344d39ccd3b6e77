"""DDP over Loom trains a small model to the same parameters as DDP over Gloo (within 1e-5)."""
import jobs
from harness import free_port, spawn_job


def test_ddp_matches_gloo():
    result = spawn_job(jobs.ddp_job, 2, args=(2, free_port(), 5), timeout=240)
    failure = result.failure("ddp_matches_gloo")
    assert failure is None, failure
