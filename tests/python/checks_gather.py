"""Data movement: broadcast, all_gather (list, tensor), gather, scatter, all_to_all (single, list)."""
import torch
import torch.distributed as dist

from checklib import check, expect_equal, per_dtype, t

L = 5


def block(q, dt, length=L):
    """What rank q contributes: q * 10 + i % 5 (fits int8 for 4 ranks)."""
    return t([q * 10 + i % 5 for i in range(length)], dt)


@check("broadcast")
def broadcast(n, r):
    def case(dt):
        root = n - 1
        x = t([3 + i % 7 for i in range(L)], dt) if r == root else torch.zeros(L, dtype=dt)
        dist.broadcast(x, src=root)
        expect_equal(x, t([3 + i % 7 for i in range(L)], dt), "broadcast")

    per_dtype(case)
    flags = torch.tensor([True, False, True]) if r == 0 else torch.zeros(3, dtype=torch.bool)
    dist.broadcast(flags, src=0)
    expect_equal(flags, torch.tensor([True, False, True]), "broadcast bool")


@check("all_gather")
def all_gather(n, r):
    def case(dt):
        out = [torch.zeros(L, dtype=dt) for _ in range(n)]
        dist.all_gather(out, block(r, dt))
        for q in range(n):
            expect_equal(out[q], block(q, dt), f"all_gather part {q}")

    per_dtype(case)


@check("all_gather_into_tensor")
def all_gather_into_tensor(n, r):
    def case(dt):
        out = torch.zeros(n * L, dtype=dt)
        dist.all_gather_into_tensor(out, block(r, dt))
        expect_equal(out, torch.cat([block(q, dt) for q in range(n)]), "all_gather_into_tensor")
        out2 = torch.zeros(n, L, dtype=dt)  # stacked form
        dist.all_gather_into_tensor(out2, block(r, dt))
        expect_equal(out2, torch.stack([block(q, dt) for q in range(n)]), "all_gather_into_tensor (stacked)")

    per_dtype(case)


@check("gather")
def gather(n, r):
    def case(dt):
        out = [torch.zeros(L, dtype=dt) for _ in range(n)] if r == 0 else None
        dist.gather(block(r, dt), gather_list=out, dst=0)
        if r == 0:
            for q in range(n):
                expect_equal(out[q], block(q, dt), f"gather part {q}")

    per_dtype(case)


@check("scatter")
def scatter(n, r):
    def case(dt):
        src = n - 1
        out = torch.zeros(L, dtype=dt)
        dist.scatter(out, scatter_list=[block(q, dt) for q in range(n)] if r == src else None, src=src)
        expect_equal(out, block(r, dt), "scatter")

    per_dtype(case)


@check("all_to_all_single_equal")
def all_to_all_single_equal(n, r):
    def case(dt):
        # chunk j of rank r (3 elements) goes to rank j: r * 10 + j, then + i % 2
        inp = torch.cat([t([r * 10 + j + i % 2 for i in range(3)], dt) for j in range(n)])
        out = torch.zeros(3 * n, dtype=dt)
        dist.all_to_all_single(out, inp)
        expect_equal(out, torch.cat([t([q * 10 + r + i % 2 for i in range(3)], dt) for q in range(n)]), "a2a equal")

    per_dtype(case)


def rows(q, j):
    """Rows rank q sends to rank j in the unequal all-to-all: none when q == j == 0."""
    return 0 if q == j == 0 else q + j + 1


@check("all_to_all_single_unequal")
def all_to_all_single_unequal(n, r):
    def case(dt):
        width = 2
        in_splits = [rows(r, j) for j in range(n)]
        out_splits = [rows(q, r) for q in range(n)]
        inp = torch.cat([torch.full((rows(r, j), width), r * 10 + j, dtype=dt) for j in range(n)])
        out = torch.zeros(sum(out_splits), width, dtype=dt)
        dist.all_to_all_single(out, inp, out_splits, in_splits)
        want = torch.cat([torch.full((rows(q, r), width), q * 10 + r, dtype=dt) for q in range(n)])
        expect_equal(out, want, "a2a unequal")

    per_dtype(case)


@check("all_to_all_list")
def all_to_all_list(n, r):
    def case(dt):
        inp = [torch.full((4,), r * 10 + j, dtype=dt) for j in range(n)]
        out = [torch.zeros(4, dtype=dt) for _ in range(n)]
        dist.all_to_all(out, inp)
        for q in range(n):
            expect_equal(out[q], torch.full((4,), q * 10 + r, dtype=dt), f"a2a list part {q}")
        # unequal sizes: rank r sends r + j + 1 elements to rank j
        inp = [torch.full((r + j + 1,), r * 10 + j, dtype=dt) for j in range(n)]
        out = [torch.zeros(q + r + 1, dtype=dt) for q in range(n)]
        dist.all_to_all(out, inp)
        for q in range(n):
            expect_equal(out[q], torch.full((q + r + 1,), q * 10 + r, dtype=dt), f"a2a list unequal part {q}")

    per_dtype(case)
