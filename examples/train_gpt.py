#!/usr/bin/env python3
"""Trains a small GPT with data, tensor and pipeline parallelism on Loom (loom.parallel).

    torchrun --nproc-per-node 8 examples/train_gpt.py --tp 2 --pp 2 --dp 2
    torchrun --nproc-per-node 4 examples/train_gpt.py --tp 2 --pp 2 --schedule gpipe --zero 1
    torchrun --nproc-per-node 8 examples/train_gpt.py --tp 1 --pp 4 --schedule interleaved --micro-batches 8
    python examples/train_gpt.py --describe gpt.json      # then: loom-plan --model gpt.json ... --output plan.json
    torchrun --nproc-per-node 4 examples/train_gpt.py --plan plan.json

The data is a language it makes itself: a seeded random bigram grammar in which every token is followed
by one of three tokens with probabilities 0.6, 0.3 and 0.1, so the loss falls from ln(vocab) towards
the grammar's entropy (0.90 nats). Rank 0 prints the layout and a progress bar with loss and tokens/s,
writes the loss curve (--plot) at the end, and every rank saves its part of a checkpoint (--save) that
--resume continues from (same layout).
"""
import argparse
import functools
import json
import math
import os
import time
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

import loom.torch  # noqa: F401 - registers the "loom" backend
from loom import parallel as lp
from loom.parallel import gpt
from toy_grammar import FOLLOWER_PROBS, grammar, make_batch

OPTIMIZERS = {"adamw": functools.partial(torch.optim.AdamW, weight_decay=0.0), "sgd": torch.optim.SGD}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tp", type=int, default=1, help="tensor-parallel size")
    ap.add_argument("--pp", type=int, default=1, help="pipeline stages")
    ap.add_argument("--dp", type=int, default=None, help="data-parallel size (default: world / (tp * pp))")
    ap.add_argument("--zero", type=int, choices=(0, 1, 2), default=0, help="ZeRO stage (0: plain data parallel)")
    ap.add_argument("--schedule", choices=("gpipe", "1f1b", "interleaved"), default="1f1b")
    ap.add_argument("--chunks", type=int, default=2, help="model chunks per stage (interleaved only)")
    ap.add_argument("--micro-batches", type=int, default=4, help="micro-batches per step on each pipeline")
    ap.add_argument("--micro-batch-size", type=int, default=4, help="sequences per micro-batch")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="adamw",
                    help="sgd: plain SGD, whose steps scale with the gradients (a parity check then sees a wrong "
                         "gradient scale, which Adam's normalisation hides)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=128)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--ffn-mults", type=lambda v: tuple(int(m) for m in v.split(",")),
                    help="each block's MLP width in hidden sizes, comma-separated (a model of unlike layers; "
                         "default 4 for every block)")
    ap.add_argument("--sequence-parallel", action="store_true")
    ap.add_argument("--checkpoint-activations", action="store_true", help="recompute each block in backward")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", default="gpt-checkpoint", help="checkpoint directory ('' to not save)")
    ap.add_argument("--save-every", type=int, default=50)
    ap.add_argument("--resume", action="store_true", help="continue from the checkpoint in --save")
    ap.add_argument("--plot", default="loss.png", help="loss curve written by rank 0 ('' for none)")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda (one GPU per local rank)")
    ap.add_argument("--cpu-bind", choices=lp.cpu_binding.POLICIES, default="none",
                    help="bind each CPU rank to a core (loom.parallel.bind_cpu); round-robin for more ranks than cores")
    ap.add_argument("--plan", metavar="FILE",
                    help="run loom-plan's plan: it sets the stages, every layer's TP/DP/SDP layout and checkpointing, "
                         "and the micro-batches (the model flags must be those it was planned for)")
    ap.add_argument("--timings", metavar="FILE", help="rank 0 writes each step's seconds here (JSON list)")
    ap.add_argument("--describe", metavar="FILE",
                    help="write the model's description for loom-plan (one profiled step of --micro-batch-size "
                         "sequences in this process) and exit")
    ap.add_argument("--describe-ranks", type=int, default=1,
                    help="with --describe: profile in this many processes at once (as many as will train)")
    args = ap.parse_args()
    args.order, args.boundaries, args.checkpoint_blocks, args.layered = "tp-dp-pp", None, None, None
    if args.plan:
        apply_plan(args)
    return args


def apply_plan(args):
    """The layout of a loom-plan plan (loom.plan.runtime) on the command's arguments. The planner's layers
    are the model's: the embedding, the blocks, the head (what --describe writes). A plan of one layout
    whose every stage holds a block runs on the mesh (gradients of a stage bucketed together, one tied
    embedding where it can be); any other on per-layer groups (args.layered: loom.parallel.StageModel)."""
    from loom.plan.runtime import training_layout

    with open(args.plan) as f:
        plan = json.load(f)
    layout = training_layout(plan)
    planned = sum(len(stage["layers"]) for stage in plan["stages"])
    if planned != args.layers + 2:
        raise SystemExit(f"--plan: the plan has {planned} layers, this model {args.layers + 2} (embedding, "
                         f"{args.layers} blocks, head); give the model flags it was planned for")
    args.micro_batches, args.schedule, args.pp = layout["micro_batches"], "1f1b", layout["pp"]
    edges = [0] + layout["stage_starts"] + [planned]
    blocks_everywhere = all(max(a, 1) < min(b, args.layers + 1) for a, b in zip(edges, edges[1:]))
    if layout["mesh"] is None or not blocks_everywhere:
        if args.zero or args.sequence_parallel:
            raise SystemExit("--plan: this plan's layers have their own layouts, which run without --zero (the "
                             "plan's SDP layers are ZeRO-3) and without --sequence-parallel")
        args.layered, args.strategies = layout, [layer["strategy"] for st in plan["stages"] for layer in st["layers"]]
        args.micro_batch_size = layout["samples_per_micro_batch"]  # of a stage: each layer splits it its way
        return
    mesh = layout["mesh"]
    args.tp, args.dp, args.order = mesh["tp"], mesh["dp"], mesh["order"]
    args.micro_batch_size = mesh["micro_batch_size"]
    # Model layer i is block i - 1: a stage starting at layer i starts at block i - 1.
    args.boundaries = [start - 1 for start in layout["stage_starts"]]
    args.checkpoint_blocks = [i - 1 for i in layout["checkpoint"] if 1 <= i <= args.layers]


@dataclass
class Job:
    """What the training loop needs of a layout."""
    rank: int
    models: list
    opt: object
    pipe: object
    global_batch: int
    split: object  # (tokens, targets) of the global batch -> this rank's part of each micro-batch of both
    reports: bool  # this rank's loss is one replica's part of the reported loss
    replicas: int  # of the last layer: the reported loss is the mean of theirs
    layout: dict  # what a checkpoint must be resumed with
    summary: str
    title: str
    destroy: object


def mesh_job(args, device):
    """One layout for the whole model on the Megatron-shaped mesh (--tp/--pp/--dp, or a plan of one layout)."""
    mesh = lp.init_mesh(tp=args.tp, pp=args.pp, dp=args.dp, order=args.order)
    chunks = args.chunks if args.schedule == "interleaved" else 1
    config = config_of(args)
    schedule = lp.build_schedule(args.schedule, mesh.pp, args.micro_batches, chunks)
    models = [m.to(device) for m in gpt.build_chunks(config, mesh.tp_group, mesh.pp, mesh.pp_rank, chunks, args.boundaries)]
    models = [lp.DataParallel(m, mesh.dp_group, zero=args.zero) for m in models]
    if args.zero:
        opt = lp.ZeroOptimizer(models, OPTIMIZERS[args.optimizer], lr=args.lr)
    else:
        params = list({id(p): p for m in models for p in m.parameters()}.values())
        opt = OPTIMIZERS[args.optimizer](params, lr=args.lr)
    shape = gpt.activation_shape(config, args.micro_batch_size, mesh.tp)
    pipe = lp.Pipeline(models, mesh, schedule, gpt.gpt_loss(mesh.tp_group), shape, device=device)
    per_pipeline = args.micro_batches * args.micro_batch_size

    def split(x, y):
        mine = slice(mesh.dp_rank * per_pipeline, (mesh.dp_rank + 1) * per_pipeline)
        return x[mine].split(args.micro_batch_size), y[mine].split(args.micro_batch_size)

    summary = (f"tp={mesh.tp} pp={mesh.pp} dp={mesh.dp} on {dist.get_world_size()} ranks ({mesh.order}); "
               f"schedule {args.schedule}, {args.micro_batches} micro-batches of {args.micro_batch_size}; "
               f"ZeRO-{args.zero}; sequence parallel {'on' if args.sequence_parallel else 'off'}"
               + (f"; plan {args.plan}: order {args.order}, blocks cut at {args.boundaries}, recomputing "
                  f"{args.checkpoint_blocks}" if args.plan else ""))
    layout = {"tp": mesh.tp, "pp": mesh.pp, "dp": mesh.dp, "zero": args.zero, "schedule": args.schedule,
              "chunks": chunks}
    return Job(mesh.rank, models, opt, pipe, per_pipeline * mesh.dp, split, mesh.tp_rank == 0, mesh.dp, layout,
               summary, f"tp={mesh.tp} pp={mesh.pp} dp={mesh.dp}, {args.schedule}, ZeRO-{args.zero}", mesh.destroy)


def layered_job(args, device):
    """A plan whose layers have their own layouts: per-layer groups, one StageModel per rank."""
    plan = args.layered
    layouts, m, size = plan["layouts"], args.micro_batches, args.micro_batch_size
    last = len(layouts) - 1
    mesh = lp.init_layer_mesh(plan["stage_ranks"], layouts, plan["stage_starts"])
    config = config_of(args)
    stage = gpt.build_stage(config, mesh, device)
    opt = OPTIMIZERS[args.optimizer](stage.optimizer_parameters(), lr=args.lr)

    def shape(layer):  # the activation `layer` passes on for one micro-batch: its replica's part
        return gpt.activation_shape(config, size // layouts[layer].dp, 1)

    mine = mesh.my_layers
    pipe = lp.Pipeline([stage], mesh, lp.build_schedule("1f1b", mesh.pp, m),
                       gpt.gpt_loss(mesh.tp_group(last) if mesh.is_last_stage else None),
                       shape(max(mine[0] - 1, 0)), device=device, grad_shape=shape(mine[-1]),
                       finalize=lp.finalize_stage_grads)

    def split(x, y):
        return mesh.split_batch(x, m, 0), mesh.split_batch(y, m, last)

    summary = (f"per-layer layouts on {dist.get_world_size()} ranks, stages {mesh.stage_ranks}: "
               f"{', '.join(args.strategies)}; schedule 1f1b, {m} micro-batches of {size}; plan {args.plan}")
    reports = mesh.is_last_stage and layouts[last].tp_index(mesh.position) == 0
    layout = {"stages": mesh.stage_ranks, "layouts": [repr(x) for x in layouts], "schedule": "1f1b"}
    return Job(mesh.rank, [stage], opt, pipe, m * size, split, reports, layouts[last].dp, layout, summary,
               f"per-layer plan {os.path.basename(args.plan)}", mesh.destroy)


def checkpoint_path(args, rank):
    return os.path.join(args.save, f"rank{rank:05d}.pt")


def save(args, job, step, history):
    os.makedirs(args.save, exist_ok=True)
    state = {"step": step, "history": history, "layout": job.layout,
             "models": [m.module.state_dict() for m in job.models], "optimizer": job.opt.state_dict()}
    torch.save(state, checkpoint_path(args, job.rank) + ".tmp")
    os.replace(checkpoint_path(args, job.rank) + ".tmp", checkpoint_path(args, job.rank))
    dist.barrier()
    if job.rank == 0:
        with open(os.path.join(args.save, "meta.json"), "w") as f:
            json.dump({"step": step, "layout": job.layout, "world": dist.get_world_size()}, f)


def load(args, job):
    path = checkpoint_path(args, job.rank)
    if not os.path.exists(path):
        raise FileNotFoundError(f"--resume: no checkpoint at {path}")
    state = torch.load(path, weights_only=False)
    if state["layout"] != job.layout:
        raise ValueError(f"--resume: the checkpoint was written with {state['layout']}, this run is "
                         f"{job.layout}; resume with the same layout")
    for m, saved in zip(job.models, state["models"]):
        m.module.load_state_dict(saved)
    job.opt.load_state_dict(state["optimizer"])  # under ZeRO: this rank's shard, parameters and moments
    return state["step"], state["history"]


def plot(path, history, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([s for s, _ in history], [loss for _, loss in history])
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats/token)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def config_of(args):
    return gpt.GPTConfig(vocab=args.vocab, seq_len=args.seq_len, hidden=args.hidden, heads=args.heads,
                         layers=args.layers, seed=args.seed, sequence_parallel=args.sequence_parallel,
                         ffn_mults=args.ffn_mults,
                         checkpoint=args.checkpoint_activations,
                         checkpoint_blocks=tuple(args.checkpoint_blocks) if args.checkpoint_blocks is not None else None)


def measure_model(args):
    """The model's description measured in this process (loom.plan.model.describe_module)."""
    from loom.plan.model import describe_module

    torch.set_num_threads(1)
    config = config_of(args)
    config.checkpoint, config.checkpoint_blocks = False, None
    layers = gpt.build_chunks(config)[0].layers
    tokens = torch.randint(0, config.vocab, (args.micro_batch_size, config.seq_len))
    h = config.hidden * config.seq_len * 4  # bytes of one sequence's activation between layers
    # Megatron's all-reduces under TP, as (mean bytes of forward and backward, calls of both): the
    # embedding's output in forward; the block's two in each direction; the head's input gradient in
    # backward and the vocabulary-parallel cross-entropy's three (max, target logit, sum; seq floats each).
    comm = {"Embedding": (h / 2, 1), "Block": (2 * h, 4), "Head": ((h + 3 * config.seq_len * 4) / 2, 4)}

    def tp_comm(layer, output_bytes):
        return comm[type(layer).__name__]

    return describe_module(layers, tokens, name=f"gpt-{config.layers}x{config.hidden}", tp_comm=tp_comm,
                           small_sample=tokens[:1])


def describe(args):
    """The model's layers as loom-plan reads them (no process group): measured here, or by
    --describe-ranks processes at once (each layer's slowest time: what ranks sharing this machine see)."""
    from loom.plan.calibrate import concurrent_profile
    from loom.plan.model import save

    if args.describe_ranks > 1:
        spec = concurrent_profile(functools.partial(measure_model, args), args.describe_ranks, args.cpu_bind)
    else:
        spec = measure_model(args)
    save(spec, args.describe)
    print(f"wrote {args.describe}: {len(spec.layers)} layers, "
          f"{sum(layer.params for layer in spec.layers)} parameters")


def main():
    args = parse_args()
    if args.describe:
        describe(args)
        return
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(args.device, local_rank) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.set_num_threads(1)
    lp.bind_cpu(args.cpu_bind, local_rank, int(os.environ.get("LOCAL_WORLD_SIZE", 1)))
    dist.init_process_group("loom", timeout=timedelta(minutes=5))
    job = layered_job(args, device) if args.layered else mesh_job(args, device)
    config = config_of(args)
    followers = grammar(args.vocab, args.seed)
    start_step, history = (load(args, job) if args.resume else (0, []))
    rank0 = job.rank == 0
    if rank0:
        n_params = sum(p.numel() for m in job.models for p in m.module.parameters())
        print(f"layout: {job.summary}")
        print(f"model: {config.layers} layers, hidden {config.hidden}, {config.heads} heads, vocabulary "
              f"{config.vocab}, sequence {config.seq_len}; rank 0 holds {n_params} parameters; "
              f"loss floor (grammar entropy) {-(FOLLOWER_PROBS * FOLLOWER_PROBS.log()).sum():.3f}, "
              f"start ~ ln({config.vocab}) = {math.log(config.vocab):.3f}")
        if args.resume:
            print(f"resumed at step {start_step} from {args.save}")
    from tqdm import tqdm

    bar = tqdm(range(start_step, args.steps), disable=not rank0, unit="step", initial=start_step, total=args.steps)
    tokens_per_step = job.global_batch * config.seq_len
    step_seconds = []
    for step in bar:
        began = time.perf_counter()
        x, y = make_batch(followers, job.global_batch, config.seq_len, step, args.seed)
        xs, ys = job.split(x, y)
        xs, ys = [t.to(device) for t in xs], [t.to(device) for t in ys]
        for m in job.models:
            m.zero_grad()
        loss = job.pipe.step(xs, ys)
        job.opt.step()
        # Rank 0 reports the global batch's loss: the last stage's tensor-parallel rank 0 of each
        # data-parallel replica (of the last layer) contributes its replica's mean.
        report = torch.zeros(1, device=device)
        if loss is not None and job.reports:
            report += loss.detach() / job.replicas
        dist.all_reduce(report)
        history.append((step + 1, report.item()))
        step_seconds.append(time.perf_counter() - began)
        if rank0:
            bar.set_postfix(loss=f"{report.item():.3f}", tok_s=f"{tokens_per_step / (time.perf_counter() - began):.0f}")
        if args.save and ((step + 1) % args.save_every == 0 or step + 1 == args.steps):
            save(args, job, step + 1, history)
    if rank0 and args.timings:
        with open(args.timings, "w") as f:
            json.dump(step_seconds, f)
    if rank0 and history:
        first = history[0][1] if start_step == 0 else None
        print(f"final loss {history[-1][1]:.3f}" + (f" (first step {first:.3f})" if first is not None else ""))
        if args.plot:
            plot(args.plot, history, f"GPT on Loom: {job.title}")
            print(f"loss curve: {args.plot}")
    dist.barrier()
    job.destroy()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
