"""loom.parallel against a single process: every layout tp x pp x dp <= 8, each schedule, ZeRO stage
and sequence-parallel setting where it applies (parallel_parity.py says how). One spawned job per
world size runs all of that size's layouts, so 8 ranks on 2 cores stay affordable."""
import functools

import pytest

import parallel_jobs
import parallel_parity
from harness import free_port, spawn_job

WORLDS = range(1, 9)


@functools.lru_cache(maxsize=None)
def world_result(world):
    return spawn_job(parallel_jobs.parity_job, world, args=(world, free_port()), timeout=420)


@pytest.mark.parametrize("world,case", [(w, c) for w in WORLDS for c in parallel_parity.all_cases(w)])
def test_parity(world, case):
    failure = world_result(world).failure(case)
    assert failure is None, failure


def test_every_layout_is_covered():
    for world in WORLDS:
        for tp, pp, dp in parallel_parity.layouts(world):
            assert tp * pp * dp == world
    assert len([layout for w in WORLDS for layout in parallel_parity.layouts(w)]) == 38
