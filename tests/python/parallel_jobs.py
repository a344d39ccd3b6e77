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
