"""dist.shrink_group on the loom backend, with and without SHRINK_ABORT (jobs.shrink_job)."""
import pytest

import jobs
from harness import free_port, spawn_job


@pytest.mark.parametrize("abort", [True, False], ids=["abort-after-death", "default-after-leave"])
def test_shrink_group(abort):
    result = spawn_job(jobs.shrink_job, 4, args=(free_port(), abort), timeout=120)
    assert result.error is None, result.error
    for r in range(3):
        assert result.per_rank[r].get("shrink_group", "did not run") is None, f"rank {r}: {result.per_rank[r]}"
