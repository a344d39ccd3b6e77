"""Every operation on CPU tensors of every dtype, world sizes 2-4 (torch.multiprocessing spawn;
tcp://, file:// and env:// rendezvous). One job per world size runs all checks; each test reads
one check's outcome."""
import functools
import os
import tempfile

import pytest

import jobs
from checklib import CHECKS
from harness import free_port, spawn_job

# World size -> how its job meets: every init method torch offers gets used.
INIT_METHODS = {2: "tcp", 3: "file", 4: "env"}
NAMES = list(CHECKS) + ["destroy_and_reinit"]


def init_method_for(world):
    kind = INIT_METHODS[world]
    if kind == "file":
        return "file://" + os.path.join(tempfile.mkdtemp(prefix="loom-store-"), "store")
    return f"{kind}://127.0.0.1:{free_port()}"


@functools.lru_cache(maxsize=None)
def collectives_result(world):
    return spawn_job(jobs.collectives_job, world, args=(world, init_method_for(world)), timeout=300)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("world", sorted(INIT_METHODS), ids=lambda w: f"{w}ranks-{INIT_METHODS[w]}")
def test_check(world, name):
    failure = collectives_result(world).failure(name)
    assert failure is None, failure
