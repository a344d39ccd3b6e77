"""Point-to-point: send/recv, isend/irecv, batch_isend_irecv (large, both directions), barrier; recv from
any source refused; a wait that times out."""
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from checklib import DTYPES, check, expect_equal, expect_runtime_error, per_dtype, t

L = 5


def block(q, dt, length=L):
    return t([q * 10 + i % 5 for i in range(length)], dt)


@check("send_recv")
def send_recv(n, r):
    # Blocking pair 0 <-> 1: rank 0 sends first, rank 1 receives first.
    def case(dt):
        if r == 0:
            dist.send(block(0, dt), dst=1)
            got = torch.zeros(L, dtype=dt)
            dist.recv(got, src=1)
            expect_equal(got, block(1, dt), "recv from 1")
        elif r == 1:
            got = torch.zeros(L, dtype=dt)
            dist.recv(got, src=0)
            dist.send(block(1, dt), dst=0)
            expect_equal(got, block(0, dt), "recv from 0")

    per_dtype(case)


@check("isend_irecv_ring")
def isend_irecv_ring(n, r):
    # Every rank sends before it receives: only works because a send never waits for a recv.
    def case(dt):
        got = torch.zeros(L, dtype=dt)
        s = dist.isend(block(r, dt), dst=(r + 1) % n)
        q = dist.irecv(got, src=(r - 1) % n)
        s.wait()
        q.wait()
        expect_equal(got, block((r - 1) % n, dt), "ring")

    per_dtype(case)


@check("isend_irecv_large")
def isend_irecv_large(n, r):
    # A lone isend of 32 MiB to the next rank, then the irecv from the previous one.
    count = 8 << 20
    got = torch.zeros(count)
    s = dist.isend(torch.full((count,), float(r)), dst=(r + 1) % n)
    q = dist.irecv(got, src=(r - 1) % n)
    q.wait()
    s.wait()
    expect_equal(got, torch.full((count,), float((r - 1) % n)), "large ring")


@check("batch_isend_irecv")
def batch_isend_irecv(n, r):
    def exchange(dt, count):
        nxt, prv = (r + 1) % n, (r - 1) % n
        to_next = torch.full((count,), r + 1, dtype=dt)
        to_prev = torch.full((count,), r + 2, dtype=dt)
        from_prev, from_next = torch.zeros(count, dtype=dt), torch.zeros(count, dtype=dt)
        ops = [dist.P2POp(dist.isend, to_next, nxt), dist.P2POp(dist.isend, to_prev, prv),
               dist.P2POp(dist.irecv, from_prev, prv), dist.P2POp(dist.irecv, from_next, nxt)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        expect_equal(from_prev, torch.full((count,), prv + 1, dtype=dt), "from previous rank")
        expect_equal(from_next, torch.full((count,), nxt + 2, dtype=dt), "from next rank")

    per_dtype(lambda dt: exchange(dt, 9), DTYPES)
    exchange(torch.float32, 4 << 20)  # 16 MiB each way


@check("barrier")
def barrier(n, r):
    # Rank 0 arrives late; nobody may leave before it arrived.
    stamp = torch.zeros(1, dtype=torch.float64)
    if r == 0:
        time.sleep(0.3)
        stamp[0] = time.time()
    dist.barrier()
    left = time.time()
    dist.broadcast(stamp, src=0)
    assert left >= stamp.item(), f"left the barrier {stamp.item() - left:.3f} s before rank 0 arrived"


@check("recv_any_source")
def recv_any_source(n, r):
    # dist.recv without src takes each message from whichever rank sends first and returns that rank;
    # rank 0 receives one message of every other rank (each rank's own values), in any order. Then the
    # last rank, told to go, sends one more, which irecv without src takes (the Work names the sender).
    if r == 0:
        seen = set()
        for _ in range(n - 1):
            got = torch.zeros(3)
            src = dist.recv(got)
            assert 0 < src < n and src not in seen, f"source {src} (seen {sorted(seen)})"
            seen.add(src)
            expect_equal(got, torch.full((3,), float(src)), f"message of rank {src}")
        if n > 1:
            dist.send(torch.ones(1), dst=n - 1)
            got = torch.zeros(2)
            work = dist.irecv(got)
            work.wait()
            assert work._source_rank() == n - 1, f"irecv source {work._source_rank()}"
            expect_equal(got, torch.full((2,), float(n - 1) * 10), "irecv message")
    else:
        dist.send(torch.full((3,), float(r)), dst=0)
        if r == n - 1:
            dist.recv(torch.zeros(1), src=0)
            dist.send(torch.full((2,), float(r) * 10), dst=0)
    y = torch.ones(2)
    dist.all_reduce(y)
    expect_equal(y, torch.full((2,), float(n)), "after the receives")


@check("wait_timeout")
def wait_timeout(n, r):
    # Work.wait(timeout) that runs out says so as Gloo does, and the operation still completes later.
    # Rank 1 sends only once rank 0's wait timed out (told through the store, not by a sleep).
    store = dist.distributed_c10d._get_default_store()
    if r == 0:
        got = torch.zeros(3)
        work = dist.irecv(got, src=1)
        expect_runtime_error(lambda: work.wait(timeout=timedelta(milliseconds=50)),
                             "Timed out waiting 50ms for the operation to complete")
        store.set("wait_timeout/released", "1")
        work.wait()
        expect_equal(got, torch.full((3,), 7.0), "received after the timed-out wait")
    elif r == 1:
        store.wait(["wait_timeout/released"])
        dist.send(torch.full((3,), 7.0), dst=0)
    dist.barrier()
