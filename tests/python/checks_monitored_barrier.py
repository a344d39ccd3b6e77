"""monitored_barrier with Gloo's semantics: it waits for late ranks, rank 0 names the ranks that did
not arrive (the first, or all with wait_all_ranks), the others learn that rank 0 did not release
them, and a zero timeout is rank 0's own. Each failing case runs on a group of its own, since a rank
that stays away leaves its place in that group's sequence of barriers behind."""
import time
from datetime import timedelta

import torch.distributed as dist

from checklib import Failures, check, expect_runtime_error

SHORT = timedelta(milliseconds=500)


def late_rank_waited_for(n, r):
    # Compared with when the late rank entered (one clock: the ranks share a host), not with this
    # rank's own start: on a loaded machine a rank may reach this case after the late one's sleep.
    if r == n - 1:
        time.sleep(0.3)
    entered = time.time()
    dist.monitored_barrier(timeout=timedelta(seconds=30))
    left = time.time()
    times = [None] * n
    dist.all_gather_object(times, (entered, left))
    dist.monitored_barrier(timeout=timedelta(seconds=30), wait_all_ranks=True)
    late_entered = times[n - 1][0]
    assert left >= late_entered, f"left the barrier {late_entered - left:.3f} s before the late rank entered it"


def first_absent_rank_named(n, r):
    group = dist.new_group()
    if r == 0:
        expect_runtime_error(lambda: dist.monitored_barrier(group, SHORT),
                             f"[Rank 0]: Rank {n - 1} failed to pass monitoredBarrier in 500 ms")
    elif r != n - 1:  # arrived, but rank 0 never released it
        expect_runtime_error(lambda: dist.monitored_barrier(group, SHORT),
                             f"Rank {r} successfully reached monitoredBarrier, but received errors while waiting "
                             "for send/recv from rank 0")


def all_absent_ranks_named(n, r):
    group = dist.new_group()
    if r == 0:
        absent = ", ".join(str(q) for q in range(1, n))
        expect_runtime_error(lambda: dist.monitored_barrier(group, SHORT, wait_all_ranks=True),
                             f"[Rank 0]: Ranks {absent} failed to pass monitoredBarrier in 500 ms")


def zero_timeout_is_rank_0s(n, r):
    group = dist.new_group()
    if r == 0:
        expect_runtime_error(lambda: dist.monitored_barrier(group, timedelta(0)),
                             "Rank 0 timed out in monitoredBarrier after 0 ms")


@check("monitored_barrier")
def monitored_barrier(n, r):
    f = Failures()
    for case in (late_rank_waited_for, first_absent_rank_named, all_absent_ranks_named, zero_timeout_is_rank_0s):
        f.case(case.__name__, case, n, r)
        dist.barrier()  # ranks that stayed away wait here for the others' timeouts
    f.raise_if_any()
