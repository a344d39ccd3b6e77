"""Sequence numbers count a group's collectives alike on every rank (point-to-point operations do not
count), so TORCH_DISTRIBUTED_DEBUG=DETAIL works: its wrapper checks each collective's sequence
number and kind across the ranks, and names a mismatch."""
import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _get_default_group

from checklib import Failures, check, expect_equal, expect_runtime_error


def sequence_numbers(n, r):
    pg = _get_default_group()
    start = pg._get_sequence_number_for_group()
    dist.all_reduce(torch.ones(2))
    dist.broadcast(torch.ones(2), src=0)
    after_collectives = pg._get_sequence_number_for_group()
    if r < 2:
        t = torch.zeros(1)
        dist.send(t, 1) if r == 0 else dist.recv(t, 0)
    after_p2p = pg._get_sequence_number_for_group()
    seen = [torch.zeros(1, dtype=torch.int64) for _ in range(n)]
    dist.all_gather(seen, torch.tensor([after_p2p]))
    assert after_collectives == start + 2, f"two collectives counted as {after_collectives - start}"
    assert after_p2p == after_collectives, "a send or recv counted"
    expect_equal(torch.cat(seen), torch.full((n,), after_p2p, dtype=torch.int64), "every rank's count")


def detail_mode(n, r):
    level = dist.get_debug_level()
    dist.set_debug_level(dist.DebugLevel.DETAIL)
    try:
        group = dist.new_group()  # wrapped in torch's checking wrapper, which asks for sequence numbers
    finally:
        dist.set_debug_level(level)
    x = torch.ones(3)
    dist.all_reduce(x, group=group)
    expect_equal(x, torch.full((3,), float(n)), "all_reduce under DETAIL")
    # Different collectives on different ranks: found before anything reaches Loom.
    if r == 0:
        expect_runtime_error(lambda: dist.all_reduce(torch.ones(3), group=group), "Detected mismatch")
    else:
        expect_runtime_error(lambda: dist.broadcast(torch.ones(3), src=0, group=group), "Detected mismatch")


@check("debug_mode")
def debug_mode(n, r):
    f = Failures()
    f.case("sequence numbers", sequence_numbers, n, r)
    f.case("DETAIL", detail_mode, n, r)
    f.raise_if_any()
