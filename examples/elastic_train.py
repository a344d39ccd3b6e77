#!/usr/bin/env python3
"""A data-parallel GPT training that survives a killed rank: the survivors shrink the job and go on.

    python3 examples/elastic_train.py                      # 4 ranks, rank 2 killed with SIGKILL at step 20
    python3 examples/elastic_train.py --nprocs 8 --kill 3@20,6@40 --steps 80
    scripts/hosts.sh up 2; scripts/hosts.sh exec loombed-h1 \
        python3 examples/elastic_train.py --hosts loombed-h1,loombed-h2 --kill 3@20   # across simulated hosts

N processes (started here, which serves their store: no torchrun; with --hosts, placed in blocks on the
simulated hosts of scripts/hosts.sh, this launcher running on the first) train the small GPT of loom.parallel on the bigram language of
train_gpt.py, each on its share of every step's global batch, averaging gradients with dist.all_reduce
over the loom backend. Each process of --kill (RANK@STEP: its rank as started) kills itself with SIGKILL at
that step, between backward and the gradient all_reduce. Every survivor's all_reduce then fails, naming
the rank whose process died; the survivors shrink the default group without it (dist.shrink_group with SHRINK_ABORT: what was in flight is revoked),
check that they all named the same rank, re-split the global batch over the ranks left and redo the
step from their in-memory state (model and optimizer are the same on every survivor: the interrupted
step changed neither). Rank 0 prints what happened and when, and the loss, which goes on falling; exits
non-zero when it does not. Any other error (not a lost process) ends the run.
"""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import SHRINK_ABORT

import loom.torch  # noqa: F401 - registers the "loom" backend
from loom.parallel import gpt
from toy_grammar import grammar, make_batch

def lost_ranks(error):
    """The ranks whose process an error says is gone: a peer of this host "died" ("rank 2 (host pid 123,
    shm) died ..."), a peer over the network "closed the connection" ("receive from rank 3: the
    connection was closed by the peer ...")."""
    text = str(error)
    died = re.findall(r"rank (\d+) \([^)]*\) died", text)
    closed = re.findall(r"(?:from|to) rank (\d+): (?:ucx: )?the connection was closed by the peer", text)
    return sorted({int(r) for r in died + closed})


def kill_plan(text):
    """{step: original rank} from "RANK@STEP,..."; one rank per step, so that every error names it."""
    plan = {}
    for item in filter(None, text.split(",")):
        rank, step = (int(v) for v in item.split("@"))
        if step in plan:
            raise SystemExit(f"elastic_train: two ranks killed at step {step}; kill them at different steps")
        plan[step] = rank
    return plan


def say(rank, start, text):
    if rank == 0:
        print(f"[{time.monotonic() - start:7.2f} s] {text}", flush=True)


HOSTS_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "hosts.sh")


def worker(rank, args, store_address, start):
    torch.set_num_threads(1)
    # The job's store is served by the launcher (as torchrun's agent does), not by a rank that may die.
    host, port = store_address.rsplit(":", 1)
    store = dist.TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=args.timeout))
    dist.init_process_group("loom", store=store, rank=rank, world_size=args.nprocs,
                            timeout=timedelta(seconds=args.timeout))
    config = gpt.GPTConfig(vocab=args.vocab, seq_len=args.seq_len, hidden=args.hidden, heads=4, layers=args.layers,
                           seed=args.seed)
    model = gpt.build_chunks(config)[0]
    loss_fn = gpt.gpt_loss(None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    params = [p for p in model.parameters() if p.requires_grad]
    followers = grammar(args.vocab, args.seed)
    original = rank  # this process's rank in the job as started; dist.get_rank() is its rank now
    kills = kill_plan(args.kill)
    say(rank, start, f"{args.nprocs} ranks training; killed with SIGKILL: " +
        (", ".join(f"rank {r} at step {s}" for s, r in sorted(kills.items())) or "none"))
    losses, step = [], 0
    while step < args.steps:
        world, me = dist.get_world_size(), dist.get_rank()
        inputs, targets = make_batch(followers, args.batch, args.seq_len, step, args.seed)
        share = args.batch // world  # whole sequences per rank; the remainder is left out of the step
        mine = slice(me * share, (me + 1) * share)
        optimizer.zero_grad()
        loss = loss_fn(model(inputs[mine]), targets[mine])
        loss.backward()
        if kills.get(step) == original:
            os.kill(os.getpid(), signal.SIGKILL)  # mid-step: its gradients never arrive
        flat = torch.cat([p.grad.reshape(-1) for p in params] + [loss.detach().reshape(1)])
        failed_at = time.monotonic()
        try:
            dist.all_reduce(flat)
        except RuntimeError as error:
            lost = lost_ranks(error)
            noticed = time.monotonic() - failed_at
            if not lost:
                raise
            group = dist.shrink_group(lost, shrink_flags=SHRINK_ABORT)
            views = [None] * group.size()
            dist.all_gather_object(views, lost)
            if any(v != lost for v in views):
                raise RuntimeError(f"the survivors disagree on who is lost: {views}") from error
            say(dist.get_rank(), start, f"step {step}: lost rank(s) {lost} ({noticed:.2f} s after the all_reduce "
                f"began: {str(error).splitlines()[0][:160]}); shrank to {dist.get_world_size()} ranks in "
                f"{time.monotonic() - failed_at - noticed:.2f} s; continuing with {dist.get_world_size()} ranks "
                "from the same state")
            continue  # the same step again, on the ranks left
        flat /= world
        offset = 0
        for p in params:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        optimizer.step()
        losses.append(flat[-1].item())
        if step % args.log_every == 0 or step == args.steps - 1:
            say(dist.get_rank(), start, f"step {step:4d}  loss {losses[-1]:.3f}  ranks {world}")
        step += 1
    # The loss over five steps at the start, before the first kill, and at the end.
    first_kill = min(kills, default=len(losses))
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    before, at_kill, after = mean(losses[:5]), mean(losses[max(first_kill - 5, 0):max(first_kill, 5)]), mean(losses[-5:])
    ok = after < at_kill < before if kills else after < before
    say(dist.get_rank(), start, f"loss {before:.3f} at the start, {at_kill:.3f} before the first kill, {after:.3f} at "
        f"the end: {'the loss went on falling (OK)' if ok else 'the loss did not go on falling (FAILED)'}")
    dist.destroy_process_group()
    if not ok:
        raise SystemExit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nprocs", type=int, default=4)
    ap.add_argument("--kill", default="2@20", help="RANK@STEP,...: processes (by rank as started) killed with SIGKILL "
                    "at a step, one per step ('' for none)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=24, help="global batch in sequences")
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60, help="seconds: the process group's (and Loom's) timeout")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--hosts", default="", help="HOST,...: simulated hosts of scripts/hosts.sh to place the ranks on, "
                    "in blocks (run this launcher on the first)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # RANK,STORE_HOST:PORT,START: one rank
    args = ap.parse_args()
    if args.worker:
        rank, store_address, start = args.worker.split(",")
        worker(int(rank), args, store_address, float(start))
        return
    doomed = set(kill_plan(args.kill).values())
    hosts = [h for h in args.hosts.split(",") if h]
    # On simulated hosts the ranks reach the store at the first host's address (CLOCK_MONOTONIC, the
    # start, is one clock for every process of the machine).
    store_host = subprocess.check_output(["bash", HOSTS_SH, "addr", hosts[0]], text=True).strip() if hosts else "127.0.0.1"
    port, start = free_port(), time.monotonic()
    store = dist.TCPStore(store_host, port, is_master=True, wait_for_workers=False)  # noqa: F841 - serves the job
    per_host = -(-args.nprocs // len(hosts)) if hosts else args.nprocs
    procs = []
    for r in range(args.nprocs):
        cmd = [sys.executable, os.path.abspath(__file__), *sys.argv[1:], "--worker", f"{r},{store_host}:{port},{start!r}"]
        host = hosts[r // per_host] if hosts else None
        # This launcher runs on the first host: its ranks start here, the others through hosts.sh.
        procs.append(subprocess.Popen(["bash", HOSTS_SH, "exec", host, *cmd] if host and host != hosts[0] else cmd))
    codes = [p.wait() for p in procs]
    killed = (-signal.SIGKILL, 128 + signal.SIGKILL)  # 128 + 9: as the host's shell reports it
    bad = [(r, c) for r, c in enumerate(codes) if (c in killed) != (r in doomed) or (c not in killed and c != 0)]
    if bad:
        raise SystemExit(f"elastic_train: processes ended unexpectedly (rank, exit code): {bad}")
    print(f"elastic_train: {args.nprocs - len(doomed)} of {args.nprocs} ranks finished {args.steps} steps")


if __name__ == "__main__":
    main()
