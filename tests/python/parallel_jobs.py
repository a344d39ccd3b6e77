"""Job functions of the loom.parallel tests, run in spawned processes (importable by the children)."""
from datetime import timedelta

import torch
import torch.distributed as dist

from harness import Recorder


def init(rank, world, port):
    import loom.torch  # noqa: F401 - registers the backend

    torch.set_num_threads(1)
    dist.init_process_group("loom", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))
    return Recorder


def parity_job(rank, outdir, world, port):
    """Every layout of this world size (parallel_parity.run_world)."""
    import parallel_parity

    init(rank, world, port)
    parallel_parity.run_world(Recorder(outdir, rank), world, rank)
    dist.destroy_process_group()


def dp_job(rank, outdir, world, port):
    """DataParallel: overlap, gradients as bucket views, averaging, no_sync."""
    import parallel_dp_checks

    init(rank, world, port)
    rec = Recorder(outdir, rank)
    for name, fn in parallel_dp_checks.CHECKS.items():
        rec.run(name, fn, rank, world)
    dist.destroy_process_group()


def errors_job(rank, outdir, world, port):
    """Bad input raises on rank 0 alone while the other ranks wait at a barrier: a check that issued
    a collective would hang there (the job's time limit) instead of raising."""
    import parallel_error_checks

    init(rank, world, port)
    rec = Recorder(outdir, rank)
    if rank == 0:
        for name, fn in parallel_error_checks.CHECKS.items():
            rec.run(name, fn)
    rec.flush()
    dist.barrier()
    dist.destroy_process_group()
