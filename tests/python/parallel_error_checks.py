"""Bad input to loom.parallel: each raises a clear exception naming the problem, on rank 0 alone, before
any collective (parallel_jobs.errors_job runs them while the other ranks wait)."""
import pytest
import torch

from loom import parallel as lp
from loom.parallel import gpt
from loom.parallel.mesh import Mesh

CHECKS = {}


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


@check
def mesh_that_does_not_divide_the_world():
    with pytest.raises(ValueError, match="does not divide the world size 4"):
        lp.init_mesh(tp=3)
    with pytest.raises(ValueError, match=r"tp \* pp \* dp = 2 \* 2 \* 2 = 8 is not the world size 4"):
        lp.init_mesh(tp=2, pp=2, dp=2)
    with pytest.raises(ValueError, match="mesh order"):
        lp.init_mesh(tp=2, order="pp-tp-dp")


@check
def layers_that_cannot_be_split_into_stages():
    config = gpt.GPTConfig(layers=3)
    with pytest.raises(ValueError, match="cannot split 3 layers into 4 pipeline stages"):
        gpt.build_chunks(config, None, pp=4, pp_rank=0)
    with pytest.raises(ValueError, match="boundaries"):
        gpt.build_chunks(config, None, pp=2, pp_rank=0, boundaries=[3])


@check
def hidden_size_not_divisible_by_tp():
    with pytest.raises(ValueError, match="hidden size 30 is not divisible by the tensor-parallel size 4"):
        gpt.GPTConfig(hidden=30, heads=2).check(tp=4)
    with pytest.raises(ValueError, match="hidden size 30 is not divisible by heads 4"):
        gpt.GPTConfig(hidden=30, heads=4).check(tp=1)
    with pytest.raises(ValueError, match="sequence length 6 is not divisible"):
        gpt.GPTConfig(seq_len=6, hidden=32, heads=4, vocab=64, sequence_parallel=True).check(tp=4)


@check
def mismatched_microbatch_counts():
    mesh = Mesh(tp=1, pp=1, dp=1, order="tp-dp-pp", rank=0, tp_rank=0, pp_rank=0, dp_rank=0, tp_group=None,
                dp_group=None, pp_group=None, pp_grad_group=None, embedding_group=None, tp_ranks=[0],
                dp_ranks=[0], pp_ranks=[0], embedding_ranks=[0])

    class Chunk(torch.nn.Module):
        zero = 0

    schedule = lp.build_schedule("1f1b", 1, 4)
    pipe = lp.Pipeline([Chunk()], mesh, schedule, loss_fn=None, tensor_shape=(1,))
    tokens = [torch.zeros(2, 4, dtype=torch.long)] * 3
    with pytest.raises(ValueError, match="3 input and 3 target micro-batches, the schedule was built for 4"):
        pipe.step(tokens, tokens)
    with pytest.raises(ValueError, match="2 model chunks on this rank, the schedule 1f1b expects 1"):
        lp.Pipeline([Chunk(), Chunk()], mesh, schedule, loss_fn=None, tensor_shape=(1,))
    with pytest.raises(ValueError, match="the schedule has 2 stages, the mesh pp=1"):
        lp.Pipeline([Chunk()], mesh, lp.build_schedule("gpipe", 2, 4), loss_fn=None, tensor_shape=(1,))
    with pytest.raises(ValueError, match="micro-batches \\(6\\) must be a multiple of the pipeline stages \\(4\\)"):
        lp.build_schedule("interleaved", 4, 6)
    with pytest.raises(ValueError, match="unknown pipeline schedule 'zigzag'"):
        lp.build_schedule("zigzag", 2, 4)


@check
def bad_zero_stage_and_no_sync_under_zero2():
    with pytest.raises(ValueError, match="zero must be 0, 1 or 2"):
        lp.DataParallel(torch.nn.Linear(2, 2), zero=3)
