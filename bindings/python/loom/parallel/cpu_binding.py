"""Binding CPU ranks to cores, as `mpiexec -bind-to core` does for MPI jobs (torchrun binds nothing).

Where a host runs more ranks than it has cores, Linux balances them by moving them between cores while
they run; a rank moved onto the core of the peer it exchanges with waits for that peer's time slice.
On the 2-core machine of docs/PLANNER.md a two-stage pipeline of four ranks took 36 ms a step unbound
and 18 ms bound round-robin (and its time varied half as much). Policies, by local rank r of n ranks on
the c cores this process may use:

- "round-robin": rank r on core r mod c. Consecutive ranks (a TP group, a pipeline stage's ranks) run on
  different cores, and a core holds ranks of different stages, so a stage waiting in a pipeline bubble
  leaves its core to a busy one (what loom.plan's model of shared cores assumes).
- "block": rank r on core r * c // n: consecutive ranks share a core (each stage its own cores).
- "none": leave the affinity as it is.
"""
import os

POLICIES = ("none", "round-robin", "block")


def bind_cpu(policy, local_rank=None, local_ranks=None):
    """Bind this process to one core by `policy`; returns that core (None for "none"). local_rank and
    local_ranks default to torchrun's LOCAL_RANK and LOCAL_WORLD_SIZE."""
    if policy not in POLICIES:
        raise ValueError(f"bind_cpu: unknown policy {policy!r} (one of {', '.join(POLICIES)})")
    if policy == "none":
        return None
    if local_rank is None or local_ranks is None:
        missing = [v for v in ("LOCAL_RANK", "LOCAL_WORLD_SIZE") if v not in os.environ]
        if missing:
            raise ValueError(f"bind_cpu: {' and '.join(missing)} not set: pass local_rank and local_ranks, "
                             "or start the ranks with torchrun")
        local_rank = int(os.environ["LOCAL_RANK"]) if local_rank is None else local_rank
        local_ranks = int(os.environ["LOCAL_WORLD_SIZE"]) if local_ranks is None else local_ranks
    if not 0 <= local_rank < local_ranks:
        raise ValueError(f"bind_cpu: local rank {local_rank} is not in [0, {local_ranks})")
    cores = sorted(os.sched_getaffinity(0))
    index = local_rank % len(cores) if policy == "round-robin" else local_rank * len(cores) // local_ranks
    os.sched_setaffinity(0, {cores[index]})
    return cores[index]
