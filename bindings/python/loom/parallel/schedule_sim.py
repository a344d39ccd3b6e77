"""Times a pipeline schedule from per-stage compute costs and link times, as loom-sim times a plan.

The model is the runtime's (pipeline.py): a rank runs its actions in order; a communication step posts
its sends, which never wait (Loom's nonblocking communicator), and ends when each of its receives has
arrived, `link_time` after the matching send was posted. Compute takes the given cost per virtual
stage. The result says when each rank was busy, the step's length and its bubble: the share of
rank-time spent idle, 1 - busy / (ranks * step time).
"""
from dataclasses import dataclass, field

from .schedules import Comm, Forward, Send


@dataclass
class Timeline:
    step_time: float
    busy: list  # busy[rank]: seconds computing
    finish: list  # finish[rank]: when the rank ran its last action
    events: list = field(default_factory=list)  # (rank, start, end, action) of every computation

    @property
    def bubble(self):
        return 1.0 - sum(self.busy) / (len(self.busy) * self.step_time) if self.step_time > 0 else 0.0


def _per_vstage(costs, schedule, what):
    if isinstance(costs, (int, float)):
        return [float(costs)] * schedule.vstages
    costs = [float(c) for c in costs]
    if len(costs) == schedule.stages and schedule.chunks > 1:  # one cost per rank: every chunk alike
        return [costs[k % schedule.stages] for k in range(schedule.vstages)]
    if len(costs) != schedule.vstages:
        raise ValueError(f"simulate: {what} needs one cost per rank ({schedule.stages}) or per virtual stage "
                         f"({schedule.vstages}), got {len(costs)}")
    return costs


def simulate(schedule, forward, backward, link_time=0.0):
    """forward/backward: seconds per micro-batch, one number, one per rank or one per virtual stage;
    link_time: seconds from a send being posted to its data being at the receiver."""
    fwd = _per_vstage(forward, schedule, "forward")
    bwd = _per_vstage(backward, schedule, "backward")
    p = schedule.stages
    clock = [0.0] * p
    busy = [0.0] * p
    pc = [0] * p
    posted = {}  # message (kind, mb, src, dst) -> time its send was posted
    events = []
    programs = schedule.actions
    while any(pc[r] < len(programs[r]) for r in range(p)):
        moved = False
        for r in range(p):
            while pc[r] < len(programs[r]):
                action = programs[r][pc[r]]
                if isinstance(action, Comm):
                    for op in action.ops:  # sends go out as soon as the step begins
                        if isinstance(op, Send):
                            posted.setdefault((op.kind, op.microbatch, op.src, op.dst), clock[r])
                    arrivals = [posted.get((op.kind, op.microbatch, op.src, op.dst)) for op in action.ops
                                if not isinstance(op, Send)]
                    if any(a is None for a in arrivals):
                        break  # a receive whose send is not posted yet: wait for its rank
                    clock[r] = max([clock[r]] + [a + link_time for a in arrivals])
                else:
                    cost = (fwd if isinstance(action, Forward) else bwd)[action.vstage]
                    events.append((r, clock[r], clock[r] + cost, action))
                    clock[r] += cost
                    busy[r] += cost
                pc[r] += 1
                moved = True
        if not moved:
            raise ValueError(f"simulate: {schedule.name} cannot proceed (run schedule_check.check on it)")
    return Timeline(step_time=max(clock), busy=busy, finish=clock, events=events)
