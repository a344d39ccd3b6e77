"""Job functions run in spawned processes (importable by the children) and by torchrun_job.py."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

import checks_cuda  # noqa: F401 - registers checks
import checks_debug_mode  # noqa: F401
import checks_gather  # noqa: F401
import checks_misc  # noqa: F401
import checks_monitored_barrier  # noqa: F401
import checks_p2p  # noqa: F401
import checks_profiler  # noqa: F401
import checks_reduce  # noqa: F401
import checks_sparse  # noqa: F401
from checklib import CHECKS, CUDA_CHECKS
from harness import Recorder, free_port, leave_job_process


def run_all_checks(recorder, n, r, checks=CHECKS):
    only = os.environ.get("LOOM_TEST_ONLY")  # comma-separated check names, for debugging
    for name, fn in checks.items():
        if only and name not in only.split(","):
            continue
        recorder.run(name, fn, n, r)


def collectives_job(rank, outdir, world, init_method):
    """Every registered check on a Loom default group made through init_method (env:// uses
    MASTER_ADDR/MASTER_PORT, given here as 'env://host:port')."""
    import loom.torch  # noqa: F401 - registers the backend

    torch.set_num_threads(1)
    kwargs = {"init_method": init_method}
    if init_method.startswith("env://") and init_method != "env://":
        host, port = init_method[len("env://"):].split(":")
        os.environ.update(MASTER_ADDR=host, MASTER_PORT=port)
        kwargs["init_method"] = "env://"
    dist.init_process_group("loom", rank=rank, world_size=world, timeout=timedelta(seconds=120), **kwargs)
    rec = Recorder(outdir, rank)
    assert dist.get_backend() == "loom"
    run_all_checks(rec, world, rank)
    rec.run("destroy_and_reinit", reinit, world, rank, init_method)
    dist.destroy_process_group()


def cuda_job(rank, outdir, world, port):
    """The CUDA checks; every rank is a process on GPU 0."""
    import loom.torch  # noqa: F401

    torch.set_num_threads(1)
    torch.cuda.set_device(0)
    dist.init_process_group("loom", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))
    run_all_checks(Recorder(outdir, rank), world, rank, CUDA_CHECKS)
    dist.destroy_process_group()


def reinit(world, rank, init_method):
    # A second default group in the same processes: group names repeat, ids must not. Its store needs a
    # port that is free now (the first port + 1 may be taken by any of this job's connections): rank 0
    # finds one and tells the others over the group that is about to go.
    port = torch.tensor([free_port() if rank == 0 else 0])
    dist.broadcast(port, 0)
    port = int(port.item())
    dist.destroy_process_group()
    if init_method.startswith("file://"):
        init_method += ".2"
    elif init_method.startswith("tcp://"):
        host = init_method[len("tcp://"):].split(":")[0]
        init_method = f"tcp://{host}:{port}"
    else:
        init_method = "env://"
        os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("loom", init_method=init_method, rank=rank, world_size=world)
    x = torch.ones(3)
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((3,), float(world))), x


def ddp_job(rank, outdir, world, port, steps):
    """Trains one small model with DDP over Loom and over Gloo from the same start and data."""
    import loom.torch  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("loom", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")
    rec = Recorder(outdir, rank)
    rec.run("ddp_matches_gloo", ddp_matches_gloo, rank, gloo, steps)
    dist.destroy_process_group()
    leave_job_process()  # the Gloo group outlives destroy_process_group: see there


def train(rank, group, steps):
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    if rank != 0:  # DDP must broadcast rank 0's parameters
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)
    ddp = DDP(model, process_group=group, bucket_cap_mb=0.001)  # several buckets
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x, y = torch.randn(16, 8, generator=gen), torch.randn(16, 4, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def ddp_matches_gloo(rank, gloo, steps):
    with_loom = train(rank, None, steps)
    with_gloo = train(rank, gloo, steps)
    for a, b in zip(with_loom, with_gloo):
        diff = (a - b).abs().max().item()
        assert diff <= 1e-5, f"parameters differ by {diff}"
    # and the ranks agree with each other
    flat = torch.cat([p.reshape(-1) for p in with_loom])
    first = flat.clone()
    dist.broadcast(first, src=0)
    assert torch.equal(flat, first), "ranks hold different parameters"


def timeout_job(rank, outdir, port):
    """The process group's timeout is Loom's: rank 1 joins an all_reduce 6 s late, the group
    timeout is 2 s, so rank 0's wait fails with Loom's timeout, and rank 1 learns of it."""
    import time

    import loom.torch  # noqa: F401

    dist.init_process_group("loom", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=timedelta(seconds=2))
    rec = Recorder(outdir, rank)

    def late_peer():
        if rank == 1:
            time.sleep(6)
        try:
            dist.all_reduce(torch.ones(4))
        except RuntimeError as e:
            text = str(e)
            if rank == 0:  # Loom's own timeout message, from config.timeoutMs = 2000, worded as Gloo's
                assert "no progress for 2000 ms" in text, text
                assert "all_reduce (operation 1) failed: Timed out " in text, text
            assert "Loom" in text, text
            return
        raise AssertionError("all_reduce succeeded although the peer was 6 s late")

    rec.run("timeout_maps_to_loom", late_peer)
    dist.destroy_process_group()


def shrink_job(rank, outdir, port, abort):
    """dist.shrink_group on the loom backend: 4 ranks; rank 3 dies without a word (abort: while the
    others loop on all_reduces, which must fail naming it, then SHRINK_ABORT) or leaves in order
    (SHRINK_DEFAULT); ranks 0-2 shrink the default group without it and check an all_reduce on it."""
    import loom.torch  # noqa: F401
    from torch.distributed.distributed_c10d import SHRINK_ABORT, SHRINK_DEFAULT

    dist.init_process_group("loom", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=4,
                            timeout=timedelta(seconds=60))
    dist.all_reduce(torch.ones(4))  # all four ranks are up
    if rank == 3:
        if abort:
            os._exit(0)  # gone: no destroy, no goodbye to the peers
        dist.destroy_process_group()
        return
    rec = Recorder(outdir, rank)

    def shrink():
        if abort:
            try:
                for _ in range(100000):
                    dist.all_reduce(torch.ones(1024))
            except RuntimeError as e:
                assert "rank 3" in str(e), str(e)
            else:
                raise AssertionError("all_reduces went on after rank 3 died")
        group = dist.shrink_group([3], shrink_flags=SHRINK_ABORT if abort else SHRINK_DEFAULT)
        assert (group.size(), group.rank()) == (3, rank), (group.size(), group.rank())
        pattern = torch.arange(1003) % 7
        x = (pattern + rank + 1).float()
        dist.all_reduce(x, group=group)
        assert torch.equal(x, (pattern * 3 + 6).float()), x
        y = torch.ones(5)  # the shrunk group is the default one now
        dist.all_reduce(y)
        assert y.tolist() == [3.0] * 5, y

    rec.run("shrink_group", shrink)
    dist.destroy_process_group()
