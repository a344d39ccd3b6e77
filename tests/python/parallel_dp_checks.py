"""Checks of loom.parallel.DataParallel, run on every rank of a spawned job (parallel_jobs.dp_job)."""
import time

import torch
import torch.distributed as dist
from torch import nn

from loom import parallel as lp

CHECKS = {}


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


def mlp(layers=6, width=256):
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.Tanh()) for _ in range(layers)])


def data(rank, width=256, batch=32):
    gen = torch.Generator().manual_seed(100 + rank)
    return torch.randn(batch, width, generator=gen), torch.randn(batch, width, generator=gen)


def expected_mean_grads(model, world, x, y):
    """Every rank's local gradients, averaged by hand (all_gather, not DataParallel's code path)."""
    model.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    local = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(gathered, local)
    return torch.stack(gathered).mean(0)


@check
def overlap_starts_before_backward_ends(rank, world):
    # 6 layers of 256 KiB of weights, 64 KiB buckets: each layer's bucket can start as soon as it is
    # done. The input's gradient is the last thing backward computes; at least one all-reduce must have
    # been issued before it (if all waited for the end of backward, none would be).
    model = lp.DataParallel(mlp(), bucket_mb=0.0625, first_bucket_mb=0.0625)
    assert len(model.buckets) >= 6, len(model.buckets)
    calls = []
    real = dist.all_reduce

    def recording(tensor, *args, **kwargs):
        calls.append(time.perf_counter())
        return real(tensor, *args, **kwargs)

    x, y = data(rank)
    x.requires_grad_(True)
    input_grad_at = []
    x.register_hook(lambda g: input_grad_at.append(time.perf_counter()))
    dist.all_reduce = recording
    try:
        nn.functional.mse_loss(model(x), y).backward()
    finally:
        dist.all_reduce = real
    assert len(calls) == len(model.buckets), (len(calls), len(model.buckets))
    early = [t for t in calls if t < input_grad_at[0]]
    assert len(early) >= len(model.buckets) - 2, f"only {len(early)} of {len(calls)} all-reduces began during backward"


@check
def gradients_are_bucket_views_and_averaged(rank, world):
    model = lp.DataParallel(mlp(layers=3, width=64), bucket_mb=0.01, first_bucket_mb=0.005)
    reference = mlp(layers=3, width=64)
    x, y = data(rank, width=64)
    want = expected_mean_grads(reference, world, x, y)
    for _ in range(2):  # the views survive zero_grad and a second step
        model.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        for b in model.buckets:
            lo, hi = b.grad.data_ptr(), b.grad.data_ptr() + b.grad.numel() * b.grad.element_size()
            for p in b.params:
                assert lo <= p.grad.data_ptr() < hi, "a gradient is not a view into its bucket"
        got = torch.cat([p.grad.reshape(-1) for p in model.module.parameters()])
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


@check
def buckets_run_in_reverse_parameter_order_with_a_small_first_one(rank, world):
    model = lp.DataParallel(mlp(layers=4, width=64), bucket_mb=0.04, first_bucket_mb=0.001)
    params = list(model.module.parameters())
    index = {id(p): i for i, p in enumerate(params)}
    order = [index[id(p)] for b in model.buckets for p in b.params]
    assert order == sorted(order, reverse=True), order
    first_bytes = sum(p.numel() * 4 for p in model.buckets[0].params)
    assert first_bytes < sum(p.numel() * 4 for p in model.buckets[1].params)


@check
def no_sync_accumulates_then_reduces_the_sum(rank, world):
    model = lp.DataParallel(mlp(layers=2, width=32), bucket_mb=0.002)
    reference = mlp(layers=2, width=32)
    x, y = data(rank, width=32)
    x2, y2 = data(rank + 50, width=32)
    with model.no_sync():
        nn.functional.mse_loss(model(x), y).backward()
    local = torch.cat([p.grad.reshape(-1).clone() for p in model.module.parameters()])
    reference.zero_grad()
    nn.functional.mse_loss(reference(x), y).backward()
    mine = torch.cat([p.grad.reshape(-1) for p in reference.parameters()])
    torch.testing.assert_close(local, mine, rtol=1e-6, atol=0)  # not reduced inside no_sync
    nn.functional.mse_loss(model(x2), y2).backward()
    nn.functional.mse_loss(reference(x2), y2).backward()
    total = torch.cat([p.grad.reshape(-1) for p in reference.parameters()])
    dist.all_reduce(total)
    got = torch.cat([p.grad.reshape(-1) for p in model.module.parameters()])
    torch.testing.assert_close(got, total / world, rtol=1e-5, atol=1e-7)


@check
def sharded_data_parallel_matches_plain_data_parallel(rank, world):
    from loom.parallel.sharded import ShardedDataParallel

    plain = lp.DataParallel(mlp(layers=3, width=24), bucket_mb=0.002)
    sharded = ShardedDataParallel(mlp(layers=3, width=24))
    for u in sharded.units:  # each rank holds a shard only
        assert u.shard.numel() * world >= sum(u.numels) > u.shard.numel() * (world - 1)
        assert all(p.numel() == 0 for p in u.params)
    opt_plain = torch.optim.SGD(plain.parameters(), lr=0.1, momentum=0.9)
    opt_sharded = torch.optim.SGD(sharded.sharded_parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        x, y = data(rank + 10 * step, width=24, batch=8)
        plain.zero_grad()
        sharded.zero_grad()
        loss_plain = nn.functional.mse_loss(plain(x), y)
        loss_plain.backward()
        loss_sharded = nn.functional.mse_loss(sharded(x), y)
        loss_sharded.backward()
        torch.testing.assert_close(loss_sharded, loss_plain, rtol=1e-6, atol=1e-7)
        assert all(p.numel() == 0 and p.grad is None for u in sharded.units for p in u.params)
        opt_plain.step()
        opt_sharded.step()
    for got, want in zip(sharded.full_parameters(), plain.module.parameters()):
        torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-6)


def _collective_sequence(model, x, y):
    """The collectives model's forward and backward issue, in order: ('gather' | 'reduce', async_op)."""
    calls = []
    real_gather, real_reduce = dist.all_gather_into_tensor, dist.reduce_scatter_tensor

    def gather(*args, **kwargs):
        calls.append(("gather", kwargs.get("async_op", False)))
        return real_gather(*args, **kwargs)

    def reduce(*args, **kwargs):
        calls.append(("reduce", kwargs.get("async_op", False)))
        return real_reduce(*args, **kwargs)

    dist.all_gather_into_tensor, dist.reduce_scatter_tensor = gather, reduce
    try:
        out = model(x)
        forward = list(calls)
        nn.functional.mse_loss(out, y).backward()
    finally:
        dist.all_gather_into_tensor, dist.reduce_scatter_tensor = real_gather, real_reduce
    return forward, calls[len(forward):]


@check
def sharded_prefetch_runs_the_next_gather_beside_this_unit(rank, world):
    # Three units. With prefetch a unit's forward starts the next one's gather before it computes, and
    # a unit's backward starts the previous one's gather before its own reduce-scatter is issued; the
    # reduce-scatters run in the background until the end of backward. Without, each gather and
    # reduce-scatter is issued where it is needed. Both give plain DP's gradients.
    from loom.parallel.sharded import ShardedDataParallel

    x, y = data(rank, width=24, batch=8)
    want = expected_mean_grads(mlp(layers=3, width=24), world, x, y)
    for prefetch in (True, False):
        model = ShardedDataParallel(mlp(layers=3, width=24), prefetch=prefetch)
        first = model(x)  # the first forward records the order the next ones prefetch by
        nn.functional.mse_loss(first, y).backward()
        model.zero_grad()
        fwd, bwd = _collective_sequence(model, x, y)
        names = [name for name, _ in bwd]
        assert [n for n, _ in fwd] == ["gather"] * 3, fwd
        if prefetch:
            assert names == ["gather", "gather", "reduce", "gather", "reduce", "reduce"], bwd
            assert all(asynchronous for _, asynchronous in fwd[1:] + bwd), (fwd, bwd)
        else:
            assert names == ["gather", "reduce", "gather", "reduce", "gather", "reduce"], bwd
        assert all(p.numel() == 0 for u in model.units for p in u.params)
        assert not model._reducing
        got = torch.cat([u.shard.grad for u in model.units])
        whole = [torch.empty_like(got) for _ in range(world)]
        dist.all_gather(whole, got)
        offset, pieces = 0, []
        for u in model.units:  # each unit's shards in rank order, its padding cut off
            pieces.append(torch.cat([w[offset:offset + u.shard_size] for w in whole])[:sum(u.numels)])
            offset += u.shard_size
        torch.testing.assert_close(torch.cat(pieces), want, rtol=1e-5, atol=1e-7)
