"""Calibration on the machine at hand: what a profile in one quiet process misses when N ranks run.

- concurrent_profile: the model description measured by N processes at once (each its own
  describe_module, started together), keeping each layer's slowest forward time: ranks that share
  cores, memory bandwidth or caches compute slower than one process alone.
- collective_overhead: a small all-reduce over N ranks of the "loom" backend, timed, against what
  Loom's model predicts for it; the difference is a per-collective cost the model does not have
  (Python and torch dispatch, ranks waiting to be scheduled on shared cores), which Machine adds to
  every collective and transfer (`collective_overhead_s`).
"""
import json
import os
import socket
import statistics
import tempfile
import time
from datetime import timedelta

import torch.multiprocessing as mp

from .model import ModelSpec


def _profile_worker(rank, describe, barrier, outdir):
    import torch

    torch.set_num_threads(1)
    barrier.wait()
    spec = describe()
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(spec.to_json(), f)


def concurrent_profile(describe, ranks):
    """describe() -> ModelSpec (a picklable callable), run by `ranks` processes at once; the result
    has each layer's largest forward time."""
    outdir = tempfile.mkdtemp(prefix="loom-plan-profile-")
    barrier = mp.get_context("spawn").Barrier(ranks)
    mp.spawn(_profile_worker, args=(describe, barrier, outdir), nprocs=ranks, join=True)
    specs = []
    for r in range(ranks):
        with open(os.path.join(outdir, f"rank{r}.json")) as f:
            specs.append(ModelSpec.from_json(json.load(f)))
    result = specs[0]
    for i, layer in enumerate(result.layers):
        times = [s.layers[i].forward_s for s in specs if s.layers[i].forward_s is not None]
        layer.forward_s = max(times) if times else None
    return result


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _collective_worker(rank, ranks, port, nbytes, iterations, outdir):
    import torch
    import torch.distributed as dist

    import loom.torch  # noqa: F401 - registers the backend

    torch.set_num_threads(1)
    dist.init_process_group("loom", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks,
                            timeout=timedelta(seconds=120))
    x = torch.zeros(max(1, nbytes // 4))
    for _ in range(5):
        dist.all_reduce(x)
    samples = []
    for _ in range(iterations):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(x)
        samples.append(time.perf_counter() - start)
    if rank == 0:
        with open(os.path.join(outdir, "seconds.json"), "w") as f:
            json.dump(samples, f)
    dist.destroy_process_group()


def measured_all_reduce_s(ranks, nbytes=4, iterations=50):
    """Median seconds of an all_reduce of nbytes over `ranks` processes of the loom backend."""
    outdir = tempfile.mkdtemp(prefix="loom-plan-collective-")
    mp.spawn(_collective_worker, args=(ranks, _free_port(), nbytes, iterations, outdir), nprocs=ranks, join=True)
    with open(os.path.join(outdir, "seconds.json")) as f:
        return statistics.median(json.load(f))


def collective_overhead(ranks, collectives, nbytes=4):
    """(measured, predicted, overhead) seconds of a small all-reduce over all `ranks`."""
    measured = measured_all_reduce_s(ranks, nbytes)
    predicted = collectives.collective("all_reduce", nbytes, list(range(ranks)))["time_us"] * 1e-6
    return measured, predicted, max(0.0, measured - predicted)
