"""CUDA tensors: every rank is a process on GPU 0 (Loom lets ranks share a GPU). Results are read back
to the CPU and compared element by element with answers computed on the CPU; non-contiguous tensors
exercise the staging copies, a created stream Loom's stream-ordered path (torch's default stream is
the legacy one, on which Loom runs a call synchronously)."""
import time

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _coalescing_manager

from checklib import CUDA_CHECKS, Failures, check, expect_equal, expect_runtime_error, per_dtype, t

DEV = torch.device("cuda", 0)
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int8, torch.uint8, torch.int32,
          torch.int64]
L = 7
# torch.cuda._sleep spins this many GPU clock cycles: about half a second at 2 GHz.
SLEEP_CYCLES = 1_000_000_000


def block(q, dt, length=L):
    """What rank q contributes: q * 10 + i % 5 (fits int8 for 4 ranks)."""
    return t([q * 10 + i % 5 for i in range(length)], dt)


def gpu(x):
    return x.to(DEV)


def host(x):
    """x on the CPU; the copy follows the work on the current stream."""
    return x.cpu()


@check("cuda_all_reduce", CUDA_CHECKS)
def cuda_all_reduce(n, r):
    def case(dt):
        x = gpu(t([(r + 1) + i % 3 for i in range(L)], dt))
        dist.all_reduce(x)
        expect_equal(host(x), t([n * (n + 1) // 2 + n * (i % 3) for i in range(L)], dt), "sum")
        lo = gpu(t([(r + 1) + i % 3 for i in range(L)], dt))
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        expect_equal(host(lo), t([1 + i % 3 for i in range(L)], dt), "min")

    per_dtype(case, DTYPES)
    x = gpu(torch.arange(12, dtype=torch.float32).reshape(3, 4) + r).t()  # transposed view
    assert not x.is_contiguous()
    dist.all_reduce(x)
    want = (n * torch.arange(12, dtype=torch.float32).reshape(3, 4) + n * (n - 1) // 2).t()
    expect_equal(host(x), want, "all_reduce transposed")


@check("cuda_all_gather", CUDA_CHECKS)
def cuda_all_gather(n, r):
    def case(dt):
        out = [gpu(torch.zeros(L, dtype=dt)) for _ in range(n)]
        dist.all_gather(out, gpu(block(r, dt)))
        for q in range(n):
            expect_equal(host(out[q]), block(q, dt), f"all_gather part {q}")
        flat = gpu(torch.zeros(n * L, dtype=dt))
        dist.all_gather_into_tensor(flat, gpu(block(r, dt)))
        expect_equal(host(flat), torch.cat([block(q, dt) for q in range(n)]), "all_gather_into_tensor")

    per_dtype(case, DTYPES)
    outs = [gpu(torch.zeros(4, 2)).t() for _ in range(n)]  # transposed outputs
    dist.all_gather(outs, gpu(torch.full((2, 4), float(r))))
    for q in range(n):
        expect_equal(host(outs[q]), torch.full((2, 4), float(q)), f"all_gather into transposed {q}")
    strided_in = gpu(torch.arange(2 * L, dtype=torch.float64) + 100 * r).reshape(L, 2)[:, 0]
    flat = gpu(torch.zeros(n * L, dtype=torch.float64))
    dist.all_gather_into_tensor(flat, strided_in)
    want = torch.cat([(torch.arange(2 * L, dtype=torch.float64) + 100 * q).reshape(L, 2)[:, 0] for q in range(n)])
    expect_equal(host(flat), want, "all_gather_into_tensor from strided")


@check("cuda_reduce_scatter", CUDA_CHECKS)
def cuda_reduce_scatter(n, r):
    def case(dt):
        inp = gpu(t([r + (i % 5) for i in range(n * L)], dt))  # rank q holds q + i % 5
        out = gpu(torch.zeros(L, dtype=dt))
        dist.reduce_scatter_tensor(out, inp)
        expect_equal(host(out), t([n * (n - 1) // 2 + n * ((r * L + i) % 5) for i in range(L)], dt), "tensor")
        parts = [gpu(torch.full((L,), r + 2 * q, dtype=dt)) for q in range(n)]  # to rank q: r + 2q
        got = gpu(torch.zeros(L, dtype=dt))
        dist.reduce_scatter(got, parts)
        expect_equal(host(got), torch.full((L,), n * (n - 1) // 2 + 2 * n * r, dtype=dt), "list")

    per_dtype(case, DTYPES)
    inp = gpu(torch.arange(n * L, dtype=torch.float32) * (r + 1))
    out = gpu(torch.zeros(L, 3))[:, 1]  # strided output
    dist.reduce_scatter_tensor(out, inp)
    want = torch.arange(r * L, (r + 1) * L, dtype=torch.float32) * (n * (n + 1) // 2)
    expect_equal(host(out), want, "reduce_scatter_tensor into strided")


@check("cuda_broadcast", CUDA_CHECKS)
def cuda_broadcast(n, r):
    def case(dt):
        root = n - 1
        want = t([3 + i % 7 for i in range(L)], dt)
        x = gpu(want) if r == root else gpu(torch.zeros(L, dtype=dt))
        dist.broadcast(x, src=root)
        expect_equal(host(x), want, "broadcast")

    per_dtype(case, DTYPES)
    base = gpu(torch.zeros(10, dtype=torch.int32))
    view = base[::2]  # strided; the odd elements must stay untouched
    if r == 0:
        view.copy_(gpu(torch.arange(5, dtype=torch.int32) + 1))
    dist.broadcast(view, src=0)
    expect_equal(host(base), torch.tensor([1, 0, 2, 0, 3, 0, 4, 0, 5, 0], dtype=torch.int32), "broadcast strided")


@check("cuda_send_recv", CUDA_CHECKS)
def cuda_send_recv(n, r):
    def case(dt):
        if r == 0:
            dist.send(gpu(block(0, dt)), dst=1)
            got = gpu(torch.zeros(L, dtype=dt))
            dist.recv(got, src=1)
            expect_equal(host(got), block(1, dt), "recv from 1")
        elif r == 1:
            got = gpu(torch.zeros(L, dtype=dt))
            dist.recv(got, src=0)
            dist.send(gpu(block(1, dt)), dst=0)
            expect_equal(host(got), block(0, dt), "recv from 0")

    per_dtype(case, DTYPES)
    # a ring of isend/irecv into strided buffers, then batch_isend_irecv (one coalesced Loom group)
    got = gpu(torch.zeros(L, 2))[:, 1]
    s = dist.isend(gpu(torch.full((L,), float(r))), dst=(r + 1) % n)
    q = dist.irecv(got, src=(r - 1) % n)
    s.wait()
    q.wait()
    expect_equal(host(got), torch.full((L,), float((r - 1) % n)), "isend/irecv ring into strided")
    nxt, prv = (r + 1) % n, (r - 1) % n
    from_prev, from_next = gpu(torch.zeros(1000)), gpu(torch.zeros(1000))
    ops = [dist.P2POp(dist.isend, gpu(torch.full((1000,), r + 1.0)), nxt),
           dist.P2POp(dist.isend, gpu(torch.full((1000,), r + 2.0)), prv),
           dist.P2POp(dist.irecv, from_prev, prv), dist.P2POp(dist.irecv, from_next, nxt)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    expect_equal(host(from_prev), torch.full((1000,), prv + 1.0), "batch from previous rank")
    expect_equal(host(from_next), torch.full((1000,), nxt + 2.0), "batch from next rank")


@check("cuda_other_ops", CUDA_CHECKS)
def cuda_other_ops(n, r):
    f = Failures()

    def reduce():
        x = gpu(torch.full((L,), r + 1.0))
        dist.reduce(x, dst=0)
        if r == 0:
            expect_equal(host(x), torch.full((L,), n * (n + 1) / 2), "reduce")

    def all_to_all_single():
        inp = gpu(torch.cat([torch.full((3,), float(r * 10 + j)) for j in range(n)]))
        out = gpu(torch.zeros(3 * n))
        dist.all_to_all_single(out, inp)
        expect_equal(host(out), torch.cat([torch.full((3,), float(q * 10 + r)) for q in range(n)]), "all_to_all_single")

    def coalesced():
        ts = [gpu(torch.full((3,), r + 1.0)), gpu(torch.full((2,), r + 1, dtype=torch.int32))]
        with _coalescing_manager(device=DEV):
            for x in ts:
                dist.all_reduce(x)
        expect_equal(host(ts[0]), torch.full((3,), n * (n + 1) / 2), "coalesced float")
        expect_equal(host(ts[1]), torch.full((2,), n * (n + 1) // 2, dtype=torch.int32), "coalesced int")
        outs = [gpu(torch.zeros(2 * n)), gpu(torch.zeros(3 * n, dtype=torch.int64))]
        with _coalescing_manager(device=DEV, async_ops=True) as cm:
            dist.all_gather_into_tensor(outs[0], gpu(torch.full((2,), float(r))))
            dist.all_gather_into_tensor(outs[1], gpu(torch.full((3,), r + 10, dtype=torch.int64)))
        cm.wait()
        expect_equal(host(outs[0]), torch.arange(n, dtype=torch.float32).repeat_interleave(2), "coalesced gather")
        expect_equal(host(outs[1]), (torch.arange(n) + 10).repeat_interleave(3), "coalesced gather int")

    f.case("reduce", reduce)
    f.case("all_to_all_single", all_to_all_single)
    f.case("coalesced", coalesced)
    f.raise_if_any()


@check("cuda_current_stream_order", CUDA_CHECKS)
def cuda_current_stream_order(n, r):
    """The operation runs where it was issued on the current stream: it reads a value a kernel writes
    there only after half a second of spinning, and work.wait() orders the stream, not the host."""
    f = Failures()
    total = n * (n + 1) // 2

    def on_stream(stream, shape_t):
        with torch.cuda.stream(stream):
            x = gpu(torch.zeros(shape_t))
            x = x.t() if x.dim() == 2 else x  # 2-D: a non-contiguous (transposed) view
            torch.cuda._sleep(SLEEP_CYCLES)
            x.fill_(r + 1.0)  # exists only after the sleep, on this stream
            work = dist.all_reduce(x, async_op=True)
            started = time.monotonic()
            work.wait()
            waited = time.monotonic() - started
            doubled = x * 2  # after the all_reduce on the stream
            torch.cuda.current_stream().synchronize()
        want = torch.full(tuple(x.shape), float(total))
        expect_equal(host(x), want, "result after wait() and synchronize()")
        expect_equal(host(doubled), want * 2, "work enqueued after wait()")
        assert waited < 0.2, f"wait() blocked the host for {waited:.3f} s"
        deadline = time.monotonic() + 30
        while not work.is_completed():  # the completion thread gets there after the stream did
            assert time.monotonic() < deadline, "the work never completed"
            time.sleep(0.001)
        assert work.exception() is None, work.exception()

    f.case("created stream", on_stream, torch.cuda.Stream(device=DEV), (1 << 20,))
    f.case("created stream, transposed", on_stream, torch.cuda.Stream(device=DEV), (4, 1 << 18))
    f.case("default stream", on_stream, torch.cuda.default_stream(DEV), (1 << 20,))
    f.raise_if_any()


@check("cuda_work_and_future", CUDA_CHECKS)
def cuda_work_and_future(n, r):
    xs = [gpu(torch.full((1000 + k,), float(r + k))) for k in range(4)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    for k in reversed(range(4)):  # waited out of order
        works[k].wait()
        expect_equal(host(xs[k]), torch.full((1000 + k,), float(n * (n - 1) // 2 + n * k)), f"async {k}")
    y = gpu(torch.ones(5))
    w = dist.all_reduce(y, async_op=True)
    doubled = w.get_future().then(lambda fut: fut.value()[0] * 2)
    expect_equal(host(doubled.wait()), torch.full((5,), 2.0 * n), "future then")
    expect_equal(host(w.get_future().wait()[0]), torch.full((5,), float(n)), "future value")
    assert w.is_completed() and w.exception() is None


@check("cuda_argument_errors", CUDA_CHECKS)
def cuda_argument_errors(n, r):
    f = Failures()

    def cpu_output_cuda_input():
        dist.all_gather_into_tensor(torch.zeros(2 * n), gpu(torch.ones(2)))

    def mixed_list():
        out = [gpu(torch.zeros(2)) for _ in range(n - 1)] + [torch.zeros(2)]
        dist.all_gather(out, gpu(torch.ones(2)))

    f.case("cpu output, cuda input", expect_runtime_error, cpu_output_cuda_input,
           "all tensors of one call must be on one device, got cpu and cuda:0")
    f.case("mixed output list", expect_runtime_error, mixed_list, "all tensors of one call must be on one device")
    y = gpu(torch.ones(2))
    dist.all_reduce(y)  # refused calls leave the communicator usable
    f.case("usable after errors", expect_equal, host(y), torch.full((2,), float(n)), "after errors")
    cpu = torch.ones(3)
    dist.all_reduce(cpu)  # and CPU tensors still work on the same group
    f.case("cpu on the same group", expect_equal, cpu, torch.full((3,), float(n)), "cpu all_reduce")
    dist.barrier()
    f.raise_if_any()
