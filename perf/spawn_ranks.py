"""Runs a benchmark's worker on N local rank processes (torch.multiprocessing, spawn) and returns what
rank 0 put on the queue. The worker is called as worker(rank, nranks, port, *args, queue), with a free
TCP port on 127.0.0.1 for its process group's rendezvous."""
import os
import socket
import sys

import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_ranks(worker, nranks, *args):
    queue = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(worker, args=(nranks, free_port(), *args, queue), nprocs=nranks, start_method="spawn")
    return queue.get()


def leave_rank_process(code=0):
    """Ends a rank process that has reported, without the interpreter's teardown. torch (2.15) keeps a
    group that a DDP model used alive after destroy_process_group, with its worker threads; a tensor one
    of them releases while the interpreter exits aborts the process ("terminate called without an
    active exception", pytorch issue 190489), about once in 50 runs here beside busy processes."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
