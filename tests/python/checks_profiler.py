"""Every operation records a profiler event "loom:<op>" (as Gloo records "gloo:<op>"): asynchronous,
once per call, with the shapes of the tensors the rank contributes; a coalesced block records its
operations, not itself."""
import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _coalescing_manager

from checklib import Failures, check


def events(prof, name):
    return [e for e in prof.function_events if e.name == name]


def expect_events(prof, name, count, shapes=None):
    found = events(prof, name)
    assert len(found) == count, f"{name}: {len(found)} events, expected {count} " \
                                f"(all: {sorted({e.name for e in prof.function_events if ':' in e.name})})"
    for e in found:
        assert e.is_async, f"{name}: not recorded as asynchronous"
        if shapes is not None:
            assert e.input_shapes == shapes, f"{name}: input shapes {e.input_shapes}, expected {shapes}"


def profiled(fn):
    with torch.autograd.profiler.profile(record_shapes=True) as prof:
        fn()
    return prof


@check("profiler_events")
def profiler_events(n, r):
    f = Failures()

    def collectives():
        x = torch.ones(3, 4)
        out = torch.zeros(n * 5)
        prof = profiled(lambda: (dist.all_reduce(x), dist.all_reduce(x, async_op=True).wait(),
                                 dist.broadcast(x, src=0), dist.all_gather_into_tensor(out, torch.ones(5)),
                                 dist.barrier()))
        expect_events(prof, "loom:all_reduce", 2, [[3, 4]])
        expect_events(prof, "loom:broadcast", 1, [[3, 4]])
        expect_events(prof, "loom:all_gather_into_tensor", 1, [[5]])
        expect_events(prof, "loom:barrier", 1)

    def point_to_point():
        if r > 1:
            return
        t = torch.full((2, 3), float(r))
        prof = profiled(lambda: dist.send(t, 1) if r == 0 else dist.recv(t, 0))
        expect_events(prof, "loom:send" if r == 0 else "loom:recv", 1, [[2, 3]])

    def coalesced():
        x, y = torch.ones(2), torch.ones(3)

        def block(mixed):
            with _coalescing_manager(device=torch.device("cpu")):
                dist.all_reduce(x)  # torch holds these back and issues them as one all_reduce_coalesced
                # a broadcast is issued at once, into the backend's open block (async: an operation of
                # an open Loom group cannot be waited for)
                dist.broadcast(y, src=0, async_op=True) if mixed else dist.all_reduce(y)

        prof = profiled(lambda: block(True))
        expect_events(prof, "loom:all_reduce_coalesced", 1, [[2]])
        expect_events(prof, "loom:broadcast", 1, [[3]])
        expect_events(prof, "loom:coalesced", 0)
        expect_events(profiled(lambda: block(False)), "loom:all_reduce_coalesced", 1, [[2], [3]])

    f.case("collectives", collectives)
    f.case("point to point", point_to_point)
    f.case("coalesced", coalesced)
    f.raise_if_any()
