"""loom.parallel.bind_cpu: each policy puts a local rank on the core it promises, in a child process (a
binding is the process's for good), and bad input is refused with the problem named."""
import ast
import os

import pytest

from loom.parallel.cpu_binding import bind_cpu

CORES = sorted(os.sched_getaffinity(0))


def bound(policy, *where, env=None):
    """(core returned, affinity after) of bind_cpu(policy, *where) in a forked child (a fresh Python
    would spend seconds importing the package for a call that takes microseconds)."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: binds itself, reports, and leaves without running anything of the parent's
        try:
            os.close(reader)
            os.environ.update(env or {})
            core = bind_cpu(policy, *where)
            os.write(writer, repr((core, sorted(os.sched_getaffinity(0)))).encode())
        except BaseException as e:  # noqa: BLE001 - the parent reports it
            os.write(writer, repr(("error", f"{type(e).__name__}: {e}")).encode())
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as f:
        answer = f.read()
    os.waitpid(pid, 0)
    core, affinity = ast.literal_eval(answer)
    assert core != "error", f"bind_cpu({policy!r}, {where}) in the child: {affinity}"
    return core, affinity


@pytest.mark.parametrize("ranks", [len(CORES), 2 * len(CORES), 2 * len(CORES) + 1])
def test_round_robin_and_block_place_ranks(ranks):
    for rank in range(ranks):
        core, affinity = bound("round-robin", rank, ranks)
        assert core == CORES[rank % len(CORES)] and affinity == [core]
        core, affinity = bound("block", rank, ranks)
        assert core == CORES[rank * len(CORES) // ranks] and affinity == [core]


def test_none_leaves_the_affinity_and_torchrun_variables_are_read():
    assert bound("none", 0, 4) == (None, CORES)
    core, _ = bound("round-robin", env={"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"})
    assert core == CORES[1 % len(CORES)]


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="unknown policy 'spread'"):
        bind_cpu("spread", 0, 2)
    with pytest.raises(ValueError, match=r"local rank 2 is not in \[0, 2\)"):
        bind_cpu("block", 2, 2)
    saved = {k: os.environ.pop(k) for k in ("LOCAL_RANK", "LOCAL_WORLD_SIZE") if k in os.environ}
    try:
        with pytest.raises(ValueError, match="LOCAL_RANK and LOCAL_WORLD_SIZE not set"):
            bind_cpu("round-robin")
    finally:
        os.environ.update(saved)
    assert sorted(os.sched_getaffinity(0)) == CORES  # nothing bound by a refusal
