"""Reductions: all_reduce (every ReduceOp), reduce, reduce_scatter (list and tensor)."""
import torch
import torch.distributed as dist

from checklib import FLOATS, check, expect_equal, per_dtype, t

L = 7  # elements per tensor: odd, so nothing divides evenly by accident


def sum_expected(n, i):
    # rank r holds (r + 1) + i % 3
    return n * (n + 1) // 2 + n * (i % 3)


@check("all_reduce_sum")
def all_reduce_sum(n, r):
    def case(dt):
        x = t([(r + 1) + i % 3 for i in range(L)], dt)
        dist.all_reduce(x, op=dist.ReduceOp.SUM)
        expect_equal(x, t([sum_expected(n, i) for i in range(L)], dt), "sum")

    per_dtype(case)


@check("all_reduce_product")
def all_reduce_product(n, r):
    def case(dt):
        x = t([1 + (r + i) % 2 for i in range(L)], dt)
        dist.all_reduce(x, op=dist.ReduceOp.PRODUCT)
        expect_equal(x, t([2 ** sum((q + i) % 2 for q in range(n)) for i in range(L)], dt), "product")

    per_dtype(case)


@check("all_reduce_min_max")
def all_reduce_min_max(n, r):
    def case(dt):
        lo = t([(r + 1) + i % 3 for i in range(L)], dt)
        hi = lo.clone()
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        expect_equal(lo, t([1 + i % 3 for i in range(L)], dt), "min")
        expect_equal(hi, t([n + i % 3 for i in range(L)], dt), "max")

    per_dtype(case)


@check("all_reduce_avg")
def all_reduce_avg(n, r):
    def case(dt):
        x = t([i % 3 + n * r for i in range(L)], dt)  # the sum is divisible by n: exact for integers
        dist.all_reduce(x, op=dist.ReduceOp.AVG)
        expect_equal(x, t([i % 3 + n * (n - 1) // 2 for i in range(L)], dt), "avg")

    per_dtype(case)


@check("all_reduce_premul_sum")
def all_reduce_premul_sum(n, r):
    def case(dt):
        x = t([(r + 1) + i % 3 for i in range(L)], dt)
        dist.all_reduce(x, op=dist._make_nccl_premul_sum(2.0))
        expect_equal(x, t([2 * sum_expected(n, i) for i in range(L)], dt), "premul_sum(2.0)")

    def tensor_factor(dt):
        x = t([2 * (r + 1) for _ in range(L)], dt)
        dist.all_reduce(x, op=dist._make_nccl_premul_sum(torch.tensor([0.5], dtype=dt)))
        expect_equal(x, t([n * (n + 1) // 2] * L, dt), "premul_sum(tensor 0.5)")

    per_dtype(case)
    per_dtype(tensor_factor, FLOATS)


@check("all_reduce_bool")
def all_reduce_bool(n, r):
    m = n + 1
    any_ = t([r == i % m for i in range(L)], torch.bool)
    all_ = t([r != i % m for i in range(L)], torch.bool)
    mx, mn = any_.clone(), all_.clone()
    dist.all_reduce(any_, op=dist.ReduceOp.SUM)
    dist.all_reduce(all_, op=dist.ReduceOp.PRODUCT)
    dist.all_reduce(mx, op=dist.ReduceOp.MAX)
    dist.all_reduce(mn, op=dist.ReduceOp.MIN)
    expect_equal(any_, t([i % m < n for i in range(L)], torch.bool), "bool sum")
    expect_equal(mx, t([i % m < n for i in range(L)], torch.bool), "bool max")
    expect_equal(all_, t([i % m == n for i in range(L)], torch.bool), "bool product")
    expect_equal(mn, t([i % m == n for i in range(L)], torch.bool), "bool min")


@check("all_reduce_large")
def all_reduce_large(n, r):
    # Bigger than Loom's chunks and FIFO slots: the pipelined path.
    count = (1 << 20) + 3
    x = torch.full((count,), float(r + 1))
    x[-1] = r
    dist.all_reduce(x)
    expect_equal(x[:-1], torch.full((count - 1,), float(n * (n + 1) // 2)), "large sum")
    expect_equal(x[-1:], torch.tensor([float(n * (n - 1) // 2)]), "large sum tail")


@check("reduce")
def reduce(n, r):
    dst = n - 1

    def case(dt):
        x = t([(r + 1) + i % 3 for i in range(L)], dt)
        y = x.clone()
        dist.reduce(x, dst=dst, op=dist.ReduceOp.SUM)
        dist.reduce(y, dst=0, op=dist.ReduceOp.MAX)
        if r == dst:
            expect_equal(x, t([sum_expected(n, i) for i in range(L)], dt), "reduce sum at dst")
        if r == 0:
            expect_equal(y, t([n + i % 3 for i in range(L)], dt), "reduce max at 0")

    per_dtype(case)


def reduce_scatter_input(n, r, dt):
    # chunk j of rank r: (r + 1) + j + i % 3; rank j receives the sum over r of chunk j
    return [t([(r + 1) + j + i % 3 for i in range(L)], dt) for j in range(n)]


def reduce_scatter_expected(n, r, dt):
    return t([n * (n + 1) // 2 + n * r + n * (i % 3) for i in range(L)], dt)


@check("reduce_scatter")
def reduce_scatter(n, r):
    def case(dt):
        out = torch.zeros(L, dtype=dt)
        dist.reduce_scatter(out, reduce_scatter_input(n, r, dt))
        expect_equal(out, reduce_scatter_expected(n, r, dt), "reduce_scatter")

    per_dtype(case)


@check("reduce_scatter_tensor")
def reduce_scatter_tensor(n, r):
    def case(dt):
        out = torch.zeros(L, dtype=dt)
        dist.reduce_scatter_tensor(out, torch.cat(reduce_scatter_input(n, r, dt)))
        expect_equal(out, reduce_scatter_expected(n, r, dt), "reduce_scatter_tensor")
        out2 = torch.zeros(L, dtype=dt)
        dist.reduce_scatter_tensor(out2, torch.cat(reduce_scatter_input(n, r, dt)), op=dist.ReduceOp.MAX)
        expect_equal(out2, t([n + r + i % 3 for i in range(L)], dt), "reduce_scatter_tensor max")

    per_dtype(case)
