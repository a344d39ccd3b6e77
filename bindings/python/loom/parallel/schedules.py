"""Pipeline schedules as data: one builder per schedule, each rank's ordered list of actions.

A model is cut into K = stages * chunks virtual stages; virtual stage k lives on pipeline rank
k % stages as that rank's chunk k // stages (Megatron's interleaved layout; chunks = 1 is the plain
pipeline). An action is a forward or backward of one micro-batch on one virtual stage, or a
communication step: sends and receives posted together (one Loom group), so that a stage can hand its
output on and take its next input in one step, as Megatron's send_forward_recv_backward does.

The builders only choose the order of computation; `_with_communication` derives every message from
it, so each schedule's messages follow the same rule. `schedule_check.check` proves a built schedule
and `schedule_sim.simulate` times it.
"""
from dataclasses import dataclass

ACTIVATION = "activation"  # a virtual stage's output, sent forward to the next one
GRADIENT = "gradient"  # the gradient of a virtual stage's input, sent back to the previous one


@dataclass(frozen=True)
class Forward:
    microbatch: int
    vstage: int


@dataclass(frozen=True)
class Backward:
    microbatch: int
    vstage: int


@dataclass(frozen=True)
class Send:
    kind: str  # ACTIVATION or GRADIENT
    microbatch: int
    src: int  # virtual stage that produced it
    dst: int  # virtual stage that consumes it


@dataclass(frozen=True)
class Recv:
    kind: str
    microbatch: int
    src: int
    dst: int


@dataclass(frozen=True)
class Comm:
    """Sends and receives posted together; the step ends when all of them are done."""
    ops: tuple


@dataclass
class Schedule:
    name: str
    stages: int  # pipeline ranks
    microbatches: int
    chunks: int  # virtual stages per rank (1 unless interleaved)
    actions: list  # actions[rank]: that rank's ordered list of actions
    promised_peak: list  # promised_peak[rank]: most micro-batch activations stored at once

    @property
    def vstages(self):
        return self.stages * self.chunks

    def rank_of(self, vstage):
        return vstage % self.stages


def _check_shape(stages, microbatches, chunks=1):
    for name, value in (("stages", stages), ("microbatches", microbatches), ("chunks", chunks)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"pipeline schedule: {name} must be a positive integer, got {value!r}")


def gpipe(stages, microbatches):
    """Every forward, then every backward (last micro-batch first): bubble (p-1)/(m+p-1) of the step,
    all m micro-batches' activations stored at once."""
    _check_shape(stages, microbatches)
    orders = []
    for r in range(stages):
        forwards = [Forward(i, r) for i in range(microbatches)]
        backwards = [Backward(i, r) for i in reversed(range(microbatches))]
        orders.append([[a] for a in forwards + backwards])
    return _with_communication("gpipe", stages, microbatches, 1, orders, [microbatches] * stages)


def one_f_one_b(stages, microbatches):
    """1F1B (PipeDream-flush, Megatron's default): stage r runs p-r-1 warm-up forwards, then one
    forward and one backward in turn, then the remaining backwards. The same bubble as GPipe, but
    stage r stores at most p-r micro-batches' activations instead of m."""
    _check_shape(stages, microbatches)
    orders, peaks = [], []
    for r in range(stages):
        warmup = min(stages - r - 1, microbatches)
        fwd = [Forward(i, r) for i in range(microbatches)]
        bwd = [Backward(i, r) for i in range(microbatches)]
        orders.append(_warmup_steady_cooldown(fwd, bwd, warmup, pair_steady=False))
        peaks.append(min(warmup + 1, microbatches))
    return _with_communication("1f1b", stages, microbatches, 1, orders, peaks)


def interleaved_1f1b(stages, microbatches, chunks=2):
    """Interleaved 1F1B (Megatron's virtual pipeline): each rank holds `chunks` model chunks; forwards
    go through the chunks in groups of `stages` micro-batches, which cuts the bubble to about
    (p-1)/(v*m) at the cost of v times as many messages. Warm-up on rank r is 2(p-r-1) + (v-1)p
    chunk-forwards (Megatron's get_pp_rank_microbatches).

    Micro-batches must come in whole groups of `stages` (Megatron's rule): a short last group leaves
    too little time for its chunk-0 outputs to come round to rank 0 before rank 0 needs them, and the
    schedule checker finds a deadlock for such counts."""
    _check_shape(stages, microbatches, chunks)
    if microbatches % stages:
        raise ValueError(f"interleaved schedule: micro-batches ({microbatches}) must be a multiple of the "
                         f"pipeline stages ({stages})")
    table = []  # (micro-batch, chunk) in the order every rank runs its forwards
    for start in range(0, microbatches, stages):
        group = range(start, min(start + stages, microbatches))
        table += [(i, c) for c in range(chunks) for i in group]
    total = microbatches * chunks
    orders, peaks = [], []
    for r in range(stages):
        fwd = [Forward(i, c * stages + r) for i, c in table]
        bwd = [Backward(i, (chunks - 1 - c) * stages + r) for i, c in table]
        warmup = min(2 * (stages - r - 1) + (chunks - 1) * stages, total)
        orders.append(_warmup_steady_cooldown(fwd, bwd, warmup, pair_steady=True))
        peaks.append(min(warmup + 1, total))
    return _with_communication("interleaved", stages, microbatches, chunks, orders, peaks)


BUILDERS = {"gpipe": gpipe, "1f1b": one_f_one_b, "interleaved": interleaved_1f1b}


def build(name, stages, microbatches, chunks=2):
    """The schedule called `name` (gpipe, 1f1b, interleaved); chunks only applies to interleaved."""
    if name not in BUILDERS:
        raise ValueError(f"unknown pipeline schedule {name!r}; choose one of {', '.join(BUILDERS)}")
    if name == "interleaved":
        return interleaved_1f1b(stages, microbatches, chunks)
    return BUILDERS[name](stages, microbatches)


def _warmup_steady_cooldown(forwards, backwards, warmup, pair_steady):
    """Slots (computations between two communication steps): warm-up forwards, then forward and
    backward in turn (one slot per pair when `pair_steady`, as Megatron's interleaved schedule
    exchanges both directions at once), then the remaining backwards."""
    slots = [[f] for f in forwards[:warmup]]
    steady = len(forwards) - warmup
    for i in range(steady):
        pair = [forwards[warmup + i], backwards[i]]
        slots += [pair] if pair_steady else [[a] for a in pair]
    return slots + [[b] for b in backwards[steady:]]


def _with_communication(name, stages, microbatches, chunks, slots_per_rank, peaks):
    """Puts one communication step between consecutive slots: the previous slot's outputs go out and
    the next slot's inputs come in, posted together, so that no rank blocks on a send while its peer
    blocks on another. Neighbouring virtual stages on one rank (a single pipeline rank) hand over in
    memory, without a message."""
    last = stages * chunks - 1

    def remote(a, b):
        return a % stages != b % stages

    def inputs(action):
        k = action.vstage
        if isinstance(action, Forward) and k > 0 and remote(k - 1, k):
            return [Recv(ACTIVATION, action.microbatch, k - 1, k)]
        if isinstance(action, Backward) and k < last and remote(k + 1, k):
            return [Recv(GRADIENT, action.microbatch, k + 1, k)]
        return []

    def outputs(action):
        k = action.vstage
        if isinstance(action, Forward) and k < last and remote(k, k + 1):
            return [Send(ACTIVATION, action.microbatch, k, k + 1)]
        if isinstance(action, Backward) and k > 0 and remote(k, k - 1):
            return [Send(GRADIENT, action.microbatch, k, k - 1)]
        return []

    actions = []
    for slots in slots_per_rank:
        program, previous = [], []
        for slot in slots:
            ops = [op for a in previous for op in outputs(a)] + [op for a in slot for op in inputs(a)]
            if ops:
                program.append(Comm(tuple(ops)))
            program += slot
            previous = slot
        ops = [op for a in previous for op in outputs(a)]
        if ops:
            program.append(Comm(tuple(ops)))
        actions.append(program)
    return Schedule(name, stages, microbatches, chunks, actions, peaks)
