"""Async work and futures, coalesced calls, non-contiguous and empty tensors, subgroups, errors."""
import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _coalescing_manager, _get_default_group

from checklib import Failures, check, expect_equal, expect_runtime_error

CPU = torch.device("cpu")


@check("async_ops")
def async_ops(n, r):
    xs = [torch.full((1000 + k,), float(r + k)) for k in range(4)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    for k in reversed(range(4)):  # waited out of order
        works[k].wait()
        expect_equal(xs[k], torch.full((1000 + k,), float(n * (n - 1) // 2 + n * k)), f"async {k}")
    for w in works:
        assert w.is_completed() and w.exception() is None
    # futures: the value is the output tensor list; then() callbacks run when it completes
    y = torch.ones(5)
    w = dist.all_reduce(y, async_op=True)
    doubled = w.get_future().then(lambda fut: fut.value()[0] * 2)
    expect_equal(doubled.wait(), torch.full((5,), 2.0 * n), "future then")
    expect_equal(w.get_future().value()[0], torch.full((5,), float(n)), "future value")
    # other ops asynchronously
    out = torch.zeros(n * 3, dtype=torch.int64)
    w1 = dist.all_gather_into_tensor(out, torch.full((3,), r, dtype=torch.int64), async_op=True)
    b = torch.full((2,), 7.0) if r == 0 else torch.zeros(2)
    w2 = dist.broadcast(b, src=0, async_op=True)
    w2.wait()
    w1.wait()
    expect_equal(out, torch.arange(n).repeat_interleave(3), "async all_gather")
    expect_equal(b, torch.full((2,), 7.0), "async broadcast")


@check("coalesced")
def coalesced(n, r):
    f = Failures()

    def all_reduce_coalesced():
        ts = [torch.full((3,), r + 1.0), torch.full((2,), r + 1, dtype=torch.int32)]
        with _coalescing_manager(device=CPU):
            for x in ts:
                dist.all_reduce(x)
        expect_equal(ts[0], torch.full((3,), n * (n + 1) / 2), "float")
        expect_equal(ts[1], torch.full((2,), n * (n + 1) // 2, dtype=torch.int32), "int")
        ts = [torch.full((3,), float(r)), torch.full((4,), float(r))]
        dist.all_reduce_coalesced(ts, op=dist.ReduceOp.MAX)
        expect_equal(ts[1], torch.full((4,), float(n - 1)), "all_reduce_coalesced max")

    def all_gather_into_tensor_coalesced():
        ins = [torch.full((2,), float(r)), torch.full((3,), r + 10, dtype=torch.int64)]
        outs = [torch.zeros(2 * n), torch.zeros(3 * n, dtype=torch.int64)]
        with _coalescing_manager(device=CPU, async_ops=True) as cm:
            for o, i in zip(outs, ins):
                dist.all_gather_into_tensor(o, i)
        cm.wait()
        expect_equal(outs[0], torch.arange(n, dtype=torch.float32).repeat_interleave(2), "float")
        expect_equal(outs[1], (torch.arange(n) + 10).repeat_interleave(3), "int")

    def reduce_scatter_tensor_coalesced():
        ins = [torch.arange(2 * n, dtype=torch.float32) + r, torch.arange(n, dtype=torch.int64) * (r + 1)]
        outs = [torch.zeros(2), torch.zeros(1, dtype=torch.int64)]
        with _coalescing_manager(device=CPU):
            for o, i in zip(outs, ins):
                dist.reduce_scatter_tensor(o, i)
        base = n * (n - 1) / 2
        expect_equal(outs[0], torch.tensor([n * 2 * r + base, n * (2 * r + 1) + base]), "float")
        expect_equal(outs[1], torch.tensor([r * n * (n + 1) // 2]), "int")

    def all_gather_coalesced():
        # torch's layout: outs[q][i] is rank q's input i. With as many inputs as ranks and equal
        # sizes, a transposed reading ([i][q]) would fill every tensor and go unnoticed but for values.
        for sizes in ([2, 1], [3] * n):
            ins = [torch.full((s,), float(r * 10 + i)) for i, s in enumerate(sizes)]
            outs = [[torch.zeros(s) for s in sizes] for _ in range(n)]
            dist.all_gather_coalesced(outs, ins)
            for q in range(n):
                for i, s in enumerate(sizes):
                    expect_equal(outs[q][i], torch.full((s,), float(q * 10 + i)), f"sizes {sizes}: rank {q} input {i}")
        # the other layout, [input][rank], is refused with a message naming the expected one
        if n != 2:
            wrong = [[torch.zeros(2) for _ in range(n)], [torch.zeros(1) for _ in range(n)]]
            expect_runtime_error(lambda: dist.all_gather_coalesced(wrong, [torch.zeros(2), torch.zeros(1)]),
                                 "one per rank")

    f.case("all_reduce_coalesced", all_reduce_coalesced)
    f.case("all_gather_into_tensor_coalesced", all_gather_into_tensor_coalesced)
    f.case("reduce_scatter_tensor_coalesced", reduce_scatter_tensor_coalesced)
    f.case("all_gather_coalesced", all_gather_coalesced)
    f.raise_if_any()


@check("non_contiguous")
def non_contiguous(n, r):
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()  # transposed view
    assert not x.is_contiguous()
    dist.all_reduce(x)
    expect_equal(x, n * torch.arange(12, dtype=torch.float32).reshape(3, 4).t(), "all_reduce transposed")
    base = torch.zeros(10, dtype=torch.int32)
    view = base[::2]  # strided; the odd elements must stay untouched
    if r == 0:
        view.copy_(torch.arange(5, dtype=torch.int32) + 1)
    dist.broadcast(view, src=0)
    expect_equal(base, torch.tensor([1, 0, 2, 0, 3, 0, 4, 0, 5, 0], dtype=torch.int32), "broadcast strided")
    outs = [torch.zeros(4, 2).t() for _ in range(n)]
    dist.all_gather(outs, torch.full((2, 4), float(r)))
    for q in range(n):
        expect_equal(outs[q], torch.full((2, 4), float(q)), f"all_gather into transposed {q}")
    inp = torch.arange(2 * n * 2, dtype=torch.float64).reshape(2 * n, 2)[:, :1]  # column slice
    out = torch.zeros(2 * n, 2, dtype=torch.float64)[:, 1:]
    dist.all_to_all_single(out, inp * (r + 1))
    want = torch.cat([torch.arange(2 * n * 2, dtype=torch.float64).reshape(2 * n, 2)[2 * r:2 * r + 2, :1] * (q + 1)
                      for q in range(n)])
    expect_equal(out.contiguous(), want, "all_to_all_single strided")


@check("empty_tensors")
def empty_tensors(n, r):
    x = torch.zeros(0)
    dist.all_reduce(x)
    dist.broadcast(torch.zeros(0, dtype=torch.int64), src=0)
    out = [torch.zeros(0) for _ in range(n)]
    dist.all_gather(out, torch.zeros(0))
    y = torch.ones(3)
    dist.all_reduce(y)  # still in step afterwards
    expect_equal(y, torch.full((3,), float(n)), "after empty ops")


@check("subgroups")
def subgroups(n, r):
    # Every rank calls new_group; members get a Loom communicator of their own.
    pair = [0, n - 1]
    g_pair = dist.new_group(pair)
    shifted = list(range(1, n))  # group rank = r - 1
    g_shifted = dist.new_group(shifted)
    g_odd = dist.new_group([r2 for r2 in range(n) if r2 % 2 == 1])  # odd ranks
    f = Failures()

    def pair_ops():
        if r not in pair:
            return
        x = torch.full((4,), float(r))
        dist.all_reduce(x, group=g_pair)
        expect_equal(x, torch.full((4,), float(n - 1)), "pair all_reduce")
        b = torch.full((2,), 5.0) if r == n - 1 else torch.zeros(2)
        dist.broadcast(b, group=g_pair, group_src=1)
        expect_equal(b, torch.full((2,), 5.0), "pair broadcast")

    def shifted_ops():
        if r == 0:
            return
        assert dist.get_rank(g_shifted) == r - 1, dist.get_rank(g_shifted)
        out = [torch.zeros(1, dtype=torch.int64) for _ in range(n - 1)]
        dist.all_gather(out, torch.tensor([r * 10]), group=g_shifted)
        expect_equal(torch.cat(out), torch.arange(1, n) * 10, "shifted all_gather")
        x = torch.zeros(1)
        dist.scatter(x, [torch.tensor([float(q)]) for q in range(n - 1)] if r == n - 1 else None,
                     group=g_shifted, group_src=n - 2)
        expect_equal(x, torch.tensor([float(r - 1)]), "shifted scatter")

    def odd_ops():
        if r % 2 == 0:
            return
        x = torch.ones(3, dtype=torch.int32)
        dist.all_reduce(x, group=g_odd)
        expect_equal(x, torch.full((3,), n // 2, dtype=torch.int32), "odd ranks all_reduce")

    f.case("pair", pair_ops)
    f.case("shifted", shifted_ops)
    f.case("odd", odd_ops)
    y = torch.ones(2)
    dist.all_reduce(y)  # the default group still works in between
    f.case("default after subgroups", expect_equal, y, torch.full((2,), float(n)), "default group")
    f.raise_if_any()


@check("errors")
def errors(n, r):
    pg = _get_default_group()
    f = Failures()

    def bad_root():
        opts = dist.BroadcastOptions()
        opts.rootRank = n + 3
        pg.broadcast([torch.zeros(2)], opts).wait()

    def bad_peer():
        pg.send([torch.zeros(2)], n + 1, 0).wait()

    def bitwise():
        dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.BAND)

    # torch sends meta tensors to its own no-op kernels, so these go to the backend directly.
    backend = pg._get_backend(CPU)

    def meta_tensor():
        backend.allreduce([torch.ones(3, device="meta")]).wait()

    def cpu_and_meta():
        backend._allgather_base(torch.zeros(2 * n), torch.ones(2, device="meta")).wait()

    def devices_registered():
        types = {d.type for d in pg._device_types}
        assert types == {"cpu", "cuda"}, f"the backend serves {sorted(types)}"

    f.case("bad root", expect_runtime_error, bad_root, f"root {n + 3} is outside 0..{n - 1}")
    f.case("meta tensor", expect_runtime_error, meta_tensor,
           "Loom allreduce: tensors on meta are not supported (Loom serves CPU and CUDA tensors)")
    f.case("cpu and meta", expect_runtime_error, cpu_and_meta,
           "Loom allgather_into_tensor: tensors on meta are not supported")
    f.case("cpu and cuda registered", devices_registered)
    f.case("bad peer", expect_runtime_error, bad_peer, f"peer {n + 1} is outside 0..{n - 1}")
    f.case("bitwise", expect_runtime_error, bitwise, "Loom does not support ReduceOp.BAND")
    y = torch.ones(2)
    dist.all_reduce(y)  # refused calls leave the communicator usable
    f.case("usable after errors", expect_equal, y, torch.full((2,), float(n)), "after errors")
    f.raise_if_any()
