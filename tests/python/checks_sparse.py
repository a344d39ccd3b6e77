"""all_reduce of sparse COO tensors (sum): ranks with different numbers of entries (none, too),
overlapping indices, dense dimensions, asynchronously; other operators and ranks that disagree on
the shape are refused on every rank, and the group stays usable."""
import torch
import torch.distributed as dist

from checklib import Failures, check, expect_equal, expect_runtime_error


def contribution(q, n, entries, dense=()):
    """Rank q's tensor of shape (n, 3, *dense): `entries` entries at rows 0.. and column q % 3 (rows
    overlap between ranks, so the sum adds entries up), valued q + 1."""
    idx = torch.stack([torch.arange(entries), torch.full((entries,), q % 3)])
    values = torch.full((entries, *dense), float(q + 1))
    return torch.sparse_coo_tensor(idx, values, (n, 3, *dense))


def summed(n, entries_of, dense=()):
    return sum(contribution(q, n, entries_of(q), dense).to_dense() for q in range(n))


def sums(n, r):
    for entries_of, dense in ((lambda q: q + 1, ()), (lambda q: 0 if q == 0 else n, (2,)), (lambda q: 0, ())):
        x = contribution(r, n, entries_of(r), dense)
        dist.all_reduce(x)
        assert x.is_sparse and x.is_coalesced(), "the result is a coalesced sparse tensor"
        expect_equal(x.to_dense(), summed(n, entries_of, dense), f"sum, dense dims {dense}")


def asynchronous(n, r):
    x = contribution(r, n, 2)
    work = dist.all_reduce(x, async_op=True)
    work.wait()
    expect_equal(work.get_future().value()[0].to_dense(), summed(n, lambda q: 2), "future value")


def refusals(n, r):
    expect_runtime_error(lambda: dist.all_reduce(contribution(r, n, 1), op=dist.ReduceOp.MAX),
                         "sparse tensors can only be summed")
    odd = torch.sparse_coo_tensor(torch.zeros(1, 1, dtype=torch.int64), torch.ones(1), (n + (r == 0),))
    expect_runtime_error(lambda: dist.all_reduce(odd), "passed a sparse tensor of another dtype, shape")


@check("sparse_all_reduce")
def sparse_all_reduce(n, r):
    f = Failures()
    f.case("sums", sums, n, r)
    f.case("asynchronous", asynchronous, n, r)
    f.case("refusals", refusals, n, r)
    y = torch.ones(2)
    dist.all_reduce(y)
    f.case("usable afterwards", expect_equal, y, torch.full((2,), float(n)), "dense all_reduce")
    f.raise_if_any()
