"""Proves a pipeline schedule before it runs, as Loom's verifier proves a collective plan.

`check(schedule)` plays every rank's action list under the strictest rule a runtime could have:
blocking, rendezvous send/recv (a send ends only when its receive is posted; a communication step ends
when all its operations have met their partners), messages matched in order per (sender, receiver,
kind) as Loom and NCCL match them per peer (activations and gradients travel on communicators of
their own). It raises ScheduleError naming the first problem:

- a deadlock (no rank can move; each rank's blocked step is listed),
- a send never received or a receive never sent (the peer finished without it),
- a receive matched to a different message (it would read the wrong tensor),
- a forward whose input, or a backward whose output gradient, is not there yet,
- a backward before its forward, a micro-batch computed twice or never, or on the wrong rank,
- more activations stored at once on a rank than the schedule promised.

A schedule that passes runs without deadlock on a runtime whose sends are eager (they never wait),
since blocking sends only remove executions. Returns the peak stored activations per rank.
"""
from collections import defaultdict

from .schedules import ACTIVATION, Backward, Comm, Forward, Recv, Send


class ScheduleError(ValueError):
    pass


def check(schedule):
    p, k_last = schedule.stages, schedule.vstages - 1
    _check_coverage(schedule)
    pc = [0] * p
    posted = [False] * p
    done_ops = [set() for _ in range(p)]  # indices of the current step's finished operations
    # (src rank, dst rank, kind) -> (sends, recvs) in post order: the runtime sends activations and
    # gradients on communicators of their own, and each matches its messages in order per peer.
    queues = defaultdict(lambda: ([], []))
    matched = defaultdict(int)
    ran = [set() for _ in range(p)]  # computations done: (Forward|Backward, mb, vstage)
    received = [set() for _ in range(p)]  # (kind, mb, src, dst) of received messages
    stored = [0] * p
    peak = [0] * p
    programs = schedule.actions

    def finished(r):
        return pc[r] >= len(programs[r])

    while not all(finished(r) for r in range(p)):
        progress = False
        for r in range(p):
            while not finished(r) and not isinstance(programs[r][pc[r]], Comm):
                stored[r] += _compute(schedule, r, programs[r][pc[r]], ran[r], received[r], k_last)
                peak[r] = max(peak[r], stored[r])
                if peak[r] > schedule.promised_peak[r]:
                    raise ScheduleError(f"{schedule.name}: rank {r} stores {peak[r]} micro-batches' activations "
                                        f"at once, more than the {schedule.promised_peak[r]} promised")
                pc[r] += 1
                progress = True
            if not finished(r) and not posted[r]:
                for i, op in enumerate(programs[r][pc[r]].ops):
                    _post(schedule, r, i, op, queues)
                posted[r] = True
                progress = True
        for pair, (sends, recvs) in queues.items():
            while matched[pair] < min(len(sends), len(recvs)):
                (s_rank, s_i, send), (r_rank, r_i, recv) = sends[matched[pair]], recvs[matched[pair]]
                if (send.kind, send.microbatch, send.src, send.dst) != (recv.kind, recv.microbatch, recv.src, recv.dst):
                    raise ScheduleError(f"{schedule.name}: rank {r_rank}'s {recv} would receive rank {s_rank}'s {send}")
                done_ops[s_rank].add(s_i)
                done_ops[r_rank].add(r_i)
                received[r_rank].add((recv.kind, recv.microbatch, recv.src, recv.dst))
                matched[pair] += 1
                progress = True
        for r in range(p):
            if posted[r] and len(done_ops[r]) == len(programs[r][pc[r]].ops):
                pc[r] += 1
                posted[r] = False
                done_ops[r] = set()
                progress = True
        if not progress:
            raise ScheduleError(_stuck(schedule, pc, done_ops, finished))
    return peak


def _check_coverage(schedule):
    p = schedule.stages
    for r, program in enumerate(schedule.actions):
        seen = set()
        for action in program:
            if isinstance(action, Comm):
                if not action.ops:
                    raise ScheduleError(f"{schedule.name}: rank {r} has an empty communication step")
                continue
            if not isinstance(action, (Forward, Backward)):
                raise ScheduleError(f"{schedule.name}: rank {r} has an unknown action {action!r}")
            if not (0 <= action.vstage < schedule.vstages) or schedule.rank_of(action.vstage) != r:
                raise ScheduleError(f"{schedule.name}: rank {r} runs {action}, which belongs to rank "
                                    f"{schedule.rank_of(action.vstage) if 0 <= action.vstage < schedule.vstages else '(none)'}")
            if not 0 <= action.microbatch < schedule.microbatches:
                raise ScheduleError(f"{schedule.name}: rank {r} runs {action}, but there are "
                                    f"{schedule.microbatches} micro-batches")
            if action in seen:
                raise ScheduleError(f"{schedule.name}: rank {r} runs {action} twice")
            seen.add(action)
        for k in range(r, schedule.vstages, p):
            for i in range(schedule.microbatches):
                for kind in (Forward, Backward):
                    if kind(i, k) not in seen:
                        raise ScheduleError(f"{schedule.name}: rank {r} never runs {kind(i, k)}")


def _compute(schedule, r, action, ran, received, k_last):
    """Checks that a computation's inputs are there; returns the change of stored activations."""
    i, k, p = action.microbatch, action.vstage, schedule.stages
    if isinstance(action, Forward):
        if k > 0:
            needed = ("local", Forward, i, k - 1) if (k - 1) % p == r else (ACTIVATION, i, k - 1, k)
            _require(schedule, r, action, needed, ran, received)
        ran.add((Forward, i, k))
        return 1
    if (Forward, i, k) not in ran:
        raise ScheduleError(f"{schedule.name}: rank {r} runs {action} before Forward({i}, {k})")
    if k < k_last:
        needed = ("local", Backward, i, k + 1) if (k + 1) % p == r else ("gradient", i, k + 1, k)
        _require(schedule, r, action, needed, ran, received)
    ran.add((Backward, i, k))
    return -1


def _require(schedule, r, action, needed, ran, received):
    if needed[0] == "local":
        if needed[1:] not in ran:
            raise ScheduleError(f"{schedule.name}: rank {r} runs {action} before "
                                f"{needed[1].__name__}({needed[2]}, {needed[3]}) that it needs")
    elif needed not in received:
        raise ScheduleError(f"{schedule.name}: rank {r} runs {action} before receiving its {needed[0]} "
                            f"(micro-batch {needed[1]}, from virtual stage {needed[2]})")


def _post(schedule, r, index, op, queues):
    if not isinstance(op, (Send, Recv)):
        raise ScheduleError(f"{schedule.name}: rank {r} posts {op!r}, which is neither a Send nor a Recv")
    for vstage in (op.src, op.dst):
        if not 0 <= vstage < schedule.vstages:
            raise ScheduleError(f"{schedule.name}: rank {r}'s {op} names virtual stage {vstage}, which does not exist")
    src, dst = schedule.rank_of(op.src), schedule.rank_of(op.dst)
    own, peer = (src, dst) if isinstance(op, Send) else (dst, src)
    if own != r:
        raise ScheduleError(f"{schedule.name}: rank {r} posts {op}, which belongs to rank {own}")
    if peer == r:
        raise ScheduleError(f"{schedule.name}: rank {r} posts {op} to itself")
    queues[(src, dst, op.kind)][0 if isinstance(op, Send) else 1].append((r, index, op))


def _stuck(schedule, pc, done_ops, finished):
    lines = []
    for r in range(schedule.stages):
        if finished(r):
            continue
        step = schedule.actions[r][pc[r]]
        waiting = [op for i, op in enumerate(step.ops) if i not in done_ops[r]]
        for op in waiting:
            src, dst = schedule.rank_of(op.src), schedule.rank_of(op.dst)
            peer = dst if isinstance(op, Send) else src
            if finished(peer):
                what = "receive" if isinstance(op, Send) else "send"
                return (f"{schedule.name}: missing {what}: rank {r}'s {op} is never matched "
                        f"(rank {peer} has finished)")
        lines.append(f"rank {r} waits on {', '.join(map(str, waiting))}")
    return f"{schedule.name}: deadlock: " + "; ".join(lines)
