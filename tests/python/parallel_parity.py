"""Parity of loom.parallel with a single process: one small GPT trained a few steps in every layout of a
world size, and on each rank, alongside, the same model whole (no tensor, pipeline or data
parallelism) on the whole batch. Losses and every parameter slice must agree within TOLERANCE.

Run inside spawned jobs (parallel_jobs.py); imported by the children.
"""
import itertools

import torch
import torch.distributed as dist

from loom import parallel as lp
from loom.parallel import gpt

# fp32, SGD with momentum, 3 steps: the runs differ only in summation order (all-reduces, split
# matmuls, micro-batches), which moves results by a few ulps of the largest term.
RTOL, ATOL = 1e-5, 1e-6
STEPS = 3
MICRO_BATCH = 2
LR, MOMENTUM = 0.5, 0.9


def layouts(world):
    """Every (tp, pp, dp) whose product is `world`."""
    return [(t, p, world // (t * p)) for t in range(1, world + 1) for p in range(1, world + 1)
            if world % (t * p) == 0]


def variants(tp, pp, dp):
    """(schedule, zero, sequence_parallel, checkpoint) for a layout: every schedule, ZeRO stage and
    sequence-parallel setting that applies to it appears at least once (zipped, not crossed, to keep
    the suite short; crossed for the example's layout 2 x 2 x 2), activation checkpointing on in half."""
    schedules = ["gpipe", "1f1b", "interleaved"] if pp > 1 else ["1f1b"]
    zeros = [0, 1, 2] if dp > 1 else [0]
    sps = [False, True] if tp > 1 else [False]
    if (tp, pp, dp) == (2, 2, 2):
        crossed = itertools.product(schedules, zeros, sps)
        return [(sched, zero, sp, i % 2 == 1) for i, (sched, zero, sp) in enumerate(crossed)]
    n = max(len(schedules), len(zeros), len(sps))
    return [(schedules[i % len(schedules)], zeros[i % len(zeros)], sps[i % len(sps)], i % 2 == 1) for i in range(n)]


def config_for(tp, pp, schedule, sp, ckpt):
    chunks = 2 if schedule == "interleaved" else 1
    return gpt.GPTConfig(vocab=8 * tp, seq_len=max(4, 2 * tp), hidden=8 * tp, heads=2 * tp, layers=2 * pp,
                         seed=7, sequence_parallel=sp, checkpoint=ckpt), chunks


def batches(config, global_batch):
    gen = torch.Generator().manual_seed(1234)
    for _ in range(STEPS):
        tokens = torch.randint(0, config.vocab, (global_batch, config.seq_len + 1), generator=gen)
        yield tokens[:, :-1], tokens[:, 1:]


def reference_run(config, global_batch):
    """The whole model in this process, the whole batch at once."""
    (model,) = gpt.build_chunks(config)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    loss_fn = gpt.gpt_loss(None)
    losses = []
    for x, y in batches(config, global_batch):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {p.global_name: p.detach() for p in model.parameters()}


def parallel_run(mesh, config, chunks, schedule_name, zero, microbatches):
    models = gpt.build_chunks(config, mesh.tp_group, mesh.pp, mesh.pp_rank, chunks)
    models = [lp.DataParallel(m, mesh.dp_group, bucket_mb=0.002, first_bucket_mb=0.0005, zero=zero) for m in models]
    if zero:
        opt = lp.ZeroOptimizer(models, torch.optim.SGD, lr=LR, momentum=MOMENTUM)
    else:
        params = list({id(p): p for m in models for p in m.parameters()}.values())
        opt = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)
    schedule = lp.build_schedule(schedule_name, mesh.pp, microbatches, chunks)
    shape = gpt.activation_shape(config, MICRO_BATCH, mesh.tp)
    pipe = lp.Pipeline(models, mesh, schedule, gpt.gpt_loss(mesh.tp_group), shape)
    per_rank = microbatches * MICRO_BATCH
    losses = []
    for x, y in batches(config, per_rank * mesh.dp):
        mine = slice(mesh.dp_rank * per_rank, (mesh.dp_rank + 1) * per_rank)
        xs, ys = x[mine].split(MICRO_BATCH), y[mine].split(MICRO_BATCH)
        for m in models:
            m.zero_grad()
        loss = pipe.step(list(xs), list(ys))
        opt.step()
        if loss is not None:  # last stage: the mean over data-parallel ranks is the global batch's
            loss = loss.clone()
            dist.all_reduce(loss, group=mesh.dp_group)
            losses.append(loss.item() / mesh.dp)
    return losses, models


def check_parity(mesh, schedule_name, zero, sp, ckpt):
    config, chunks = config_for(mesh.tp, mesh.pp, schedule_name, sp, ckpt)
    microbatches = mesh.pp if schedule_name == "interleaved" else mesh.pp + 1
    ref_losses, ref_params = reference_run(config, microbatches * MICRO_BATCH * mesh.dp)
    losses, models = parallel_run(mesh, config, chunks, schedule_name, zero, microbatches)
    if mesh.is_last_stage:
        for step, (a, b) in enumerate(zip(losses, ref_losses)):
            assert abs(a - b) <= RTOL * abs(b) + ATOL, f"step {step}: loss {a!r}, single process {b!r}"
        assert len(losses) == STEPS
    checked = 0
    for m in models:
        for p in m.module.parameters():
            full = ref_params[p.global_name]
            want = full if p.tp_split_dim is None else full.chunk(mesh.tp, dim=p.tp_split_dim)[mesh.tp_rank]
            torch.testing.assert_close(p.detach(), want, rtol=RTOL, atol=ATOL,
                                       msg=lambda text, name=p.global_name: f"{name}: {text}")
            checked += 1
    assert checked > 0


def run_world(recorder, world, rank, only=None):
    for tp, pp, dp in layouts(world):
        mesh = lp.init_mesh(tp=tp, pp=pp, dp=dp)
        for schedule_name, zero, sp, ckpt in variants(tp, pp, dp):
            name = case_name(tp, pp, dp, schedule_name, zero, sp, ckpt)
            if only is None or name in only:
                recorder.run(name, check_parity, mesh, schedule_name, zero, sp, ckpt)
        dist.barrier()
        mesh.destroy()


def case_name(tp, pp, dp, schedule_name, zero, sp, ckpt):
    return f"tp{tp}-pp{pp}-dp{dp}-{schedule_name}-zero{zero}-sp{int(sp)}-ckpt{int(ckpt)}"


def all_cases(world):
    return [case_name(t, p, d, *v) for t, p, d in layouts(world) for v in variants(t, p, d)]

