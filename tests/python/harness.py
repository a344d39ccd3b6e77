"""Runs a job function in N processes (torch.multiprocessing, forked from a server that imported torch
once) and collects per-check results.

A job reports through files in `outdir`: rank<r>.json maps each check it ran to None (passed) or
the failure text; rank<r>.current names the check in progress, so a hang can be pinned down.
"""
import json
import os
import socket
import sys
import tempfile
import time
import traceback

import torch.multiprocessing as mp


def package_env(**extra):
    """The environment for a child Python: the loom package this test imported first on its path
    (the installed one, or a PYTHONPATH's)."""
    import loom

    here = os.path.dirname(os.path.dirname(loom.__file__))
    path = os.pathsep.join([here] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    return dict(os.environ, PYTHONPATH=path, **extra)


def leave_job_process():
    """Ends a rank process whose records are written, without the interpreter's teardown: for jobs with
    a DDP model over Gloo. torch (2.15) keeps a group that a DDP model used alive after
    destroy_process_group, with its worker threads; a tensor one of them releases while the interpreter
    exits aborts the process ("terminate called without an active exception", pytorch issue 190489)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Recorder:
    """Used inside a job: runs checks, records their outcome for the parent."""

    def __init__(self, outdir, rank):
        self.outdir, self.rank, self.results = outdir, rank, {}

    def run(self, name, fn, *args):
        with open(os.path.join(self.outdir, f"rank{self.rank}.current"), "w") as f:
            f.write(name)
        try:
            fn(*args)
            self.results[name] = None
        except Exception:  # noqa: BLE001 - every failure is reported, the job goes on
            self.results[name] = traceback.format_exc()
        self.flush()

    def flush(self):
        path = os.path.join(self.outdir, f"rank{self.rank}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(self.results, f)
        os.replace(path + ".tmp", path)


class JobResult:
    def __init__(self, outdir, nprocs, error):
        self.outdir = outdir  # the job's files: each rank's records, and whatever else its function wrote
        self.error = error  # why the job as a whole failed (timeout, crash), or None
        self.per_rank = []
        self.current = []
        for r in range(nprocs):
            path = os.path.join(outdir, f"rank{r}.json")
            self.per_rank.append(json.load(open(path)) if os.path.exists(path) else {})
            cur = os.path.join(outdir, f"rank{r}.current")
            self.current.append(open(cur).read() if os.path.exists(cur) else None)

    def failure(self, name):
        """None if check `name` passed on every rank, else a text saying where and why."""
        problems = []
        for r, results in enumerate(self.per_rank):
            if name not in results:
                problems.append(f"rank {r}: did not run (job: {self.error}; in progress: {self.current[r]})")
            elif results[name] is not None:
                problems.append(f"rank {r}:\n{results[name]}")
        return "\n".join(problems) or None

    def names(self):
        return sorted(set().union(*[set(r) for r in self.per_rank]))


# Rank processes are forked from multiprocessing's fork server, which imports torch once: a spawned
# process would import it anew (seconds of CPU each, for jobs of up to 8 ranks on 2 cores). The server
# is a fresh process of its own (not this one, whose threads a fork would copy), started at the first job.
mp.set_forkserver_preload(["torch", "torch.distributed"])


def _in_environment(rank, env, fn, *args):
    """A rank process: the environment of the test that started the job (the fork server's is that of
    the first job), then the job function."""
    os.environ.clear()
    os.environ.update(env)
    fn(rank, *args)


def spawn_job(fn, nprocs, args=(), timeout=240):
    """Runs fn(rank, outdir, *args) in nprocs processes; returns a JobResult."""
    outdir = tempfile.mkdtemp(prefix="loom-job-")
    ctx = mp.start_processes(_in_environment, args=(dict(os.environ), fn, outdir, *args), nprocs=nprocs, join=False,
                             start_method="forkserver")
    deadline = time.monotonic() + timeout
    error = None
    try:
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                error = f"timed out after {timeout} s"
                break
    except Exception as e:  # noqa: BLE001 - a rank crashed; its records say what it finished
        error = f"{type(e).__name__}: {e}"
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
                p.join()
    return JobResult(outdir, nprocs, error)
