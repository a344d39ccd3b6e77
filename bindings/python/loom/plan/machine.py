"""The machine the planner plans for: Loom's collective model on a topology (loom.cost_model's
CollectiveModel: the tuner's choice and simulated plans, as loom-sim), the devices' memory and compute
speed.

CPU ranks may share cores (`cores` fewer than `devices`): then compute runs at cores / devices of a
core's speed while every rank is busy, which is charged through cost.Context.slots.

Job ranks are laid out with the pipeline outermost: stage s holds ranks [s * N/pp, (s+1) * N/pp), so
with several nodes the stages split between nodes before any TP or DP group does (Galvatron's
takeaway 1). Inside a stage, Strategy.groups places the TP and DP groups.
"""
import time
from dataclasses import dataclass, field

GB = 1e9


@dataclass
class Machine:
    devices: int
    memory_bytes: float  # per device, for the model's states and activations
    flops_per_s: float  # one device's compute speed for the model's layers (FLOPs of describe_module)
    collectives: object = None  # loom.cost_model.CollectiveModel over `devices` ranks; None: communication is free
    overlap_slowdown: float = 1.3  # compute and communication that overlap each run this much slower
    comm_elem_bytes: int = 4  # bytes per element of what is communicated (fp32)
    use_measured_compute: bool = True  # a layer's measured forward time, where the model has one
    # Added to every collective and transfer (calibrate.collective_overhead): seconds; or a table per
    # group size (a group takes the entry of the smallest size that holds it; "p2p": transfers, else
    # size 2's) of seconds or of [(gap, seconds), ...]: what it adds after `gap` seconds of compute since
    # the group's last collective, interpolated (on shared cores, the longer ranks compute between
    # collectives, the longer the first to arrive waits for the last to get a core back).
    collective_overhead_s: object = 0.0
    cores: float = None  # cores the devices share (CPU ranks); None: each device computes on its own
    # (per step, per micro-batch) seconds each rank spends in a training step beyond all the above: the
    # training loop's Python, the optimizer step, autograd's bookkeeping, the per-call work of its
    # collectives and transfers (calibrate.step_overhead measures it on a data-parallel run).
    rank_overhead_s: tuple = (0.0, 0.0)
    _cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        if self.devices < 1 or self.devices & (self.devices - 1):
            raise ValueError(f"Machine: the device count must be a power of two, got {self.devices}")
        if not self.memory_bytes > 0 or not self.flops_per_s > 0:
            raise ValueError("Machine: memory and compute speed must be positive")
        if self.cores is not None and not self.cores > 0:
            raise ValueError(f"Machine: cores must be positive, got {self.cores}")
        self.rank_overhead_s = tuple(float(x) for x in self.rank_overhead_s)
        if len(self.rank_overhead_s) != 2 or min(self.rank_overhead_s) < 0:
            raise ValueError(f"Machine: rank_overhead_s is (per step, per micro-batch) seconds, both >= 0, "
                             f"got {self.rank_overhead_s}")
        if isinstance(self.collective_overhead_s, dict):
            self.collective_overhead_s = {(k if k == "p2p" else int(k)): v if isinstance(v, (int, float))
                                          else sorted(map(tuple, v)) for k, v in self.collective_overhead_s.items()}
            if not self.collective_overhead_s:
                raise ValueError("Machine: collective_overhead_s is an empty table")
        if self.collectives is not None and self.collectives.world != self.devices:
            raise ValueError(f"Machine: the collective model has {self.collectives.world} ranks, "
                             f"the machine {self.devices}")

    @property
    def share(self):
        """How many ranks take turns on a core when all compute (1: none share)."""
        return max(1.0, self.devices / self.cores) if self.cores else 1.0

    def rank_overhead(self, micro_batches):
        """Seconds of one rank's step that rank_overhead_s adds with micro_batches micro-batches."""
        per_step, per_micro_batch = self.rank_overhead_s
        return per_step + micro_batches * per_micro_batch

    def overhead_s(self, group_size, gap_s=None):
        """collective_overhead_s for a group of group_size after gap_s seconds of one rank's compute
        (None: long; the largest measured)."""
        table = self.collective_overhead_s
        if not isinstance(table, dict):
            return table
        sizes = [n for n in table if n != "p2p"]
        if group_size == "p2p" and "p2p" in table:
            entry = table["p2p"]
        else:
            group_size = 2 if group_size == "p2p" else group_size
            if not sizes:
                return 0.0
            fitting = [n for n in sizes if n >= group_size]
            entry = table[min(fitting)] if fitting else table[max(sizes)]
        if isinstance(entry, (int, float)):
            return entry
        if gap_s is None:
            return entry[-1][1]
        gap_s *= self.share  # measured as wall time while every rank computes
        g0, e0 = entry[0]
        if gap_s <= g0:
            return e0 * gap_s / g0 if g0 > 0 else e0
        for (ga, ea), (gb, eb) in zip(entry, entry[1:]):
            if gap_s <= gb:
                return ea + (eb - ea) * (gap_s - ga) / (gb - ga)
        return entry[-1][1]

    def stage_ranks(self, pp, stage):
        g = self.devices // pp
        return list(range(stage * g, (stage + 1) * g))

    def collective_s(self, op, nbytes, ranks, gap_s=None):
        """Seconds of op over `ranks` moving nbytes (the whole buffer), all such groups at once, after
        gap_s seconds of compute (overhead_s)."""
        if len(ranks) < 2 or nbytes <= 0:
            return 0.0
        if self.collectives is None:
            return self.overhead_s(len(ranks), gap_s)
        key = (op, int(nbytes), tuple(ranks))
        if key not in self._cache:
            self._cache[key] = self.collectives.collective(op, int(nbytes), list(ranks), self.comm_elem_bytes)["time_us"] * 1e-6
        return self._cache[key] + self.overhead_s(len(ranks), gap_s)

    def p2p_s(self, nbytes, pairs, gap_s=None):
        if not pairs or nbytes <= 0:
            return 0.0
        if self.collectives is None:
            return self.overhead_s("p2p", gap_s)
        key = ("p2p", int(nbytes), tuple(pairs))
        if key not in self._cache:
            self._cache[key] = self.collectives.p2p(int(nbytes), list(pairs), self.comm_elem_bytes) * 1e-6
        return self._cache[key] + self.overhead_s("p2p", gap_s)

    def forward_s(self, layer, samples, tp):
        """One device's forward time of `layer` on `samples` samples split over tp devices (TP splits the
        work per sample, not what each call costs)."""
        if self.use_measured_compute and layer.forward_s is not None:
            return (layer.forward_fixed_s or 0.0) + layer.forward_s * samples / tp
        return layer.flops * samples / tp / self.flops_per_s

    def describe(self):
        d = {"devices": self.devices, "memory_gb": self.memory_bytes / GB, "tflops": self.flops_per_s / 1e12,
             "overlap_slowdown": self.overlap_slowdown}
        table = self.collective_overhead_s
        if isinstance(table, dict):
            d["collective_overhead_us"] = {str(n): v * 1e6 if isinstance(v, (int, float)) else
                                           [[gap * 1e6, extra * 1e6] for gap, extra in v]
                                           for n, v in sorted(table.items(), key=lambda kv: str(kv[0]))}
        else:
            d["collective_overhead_us"] = table * 1e6
        if self.cores:
            d["cores"] = self.cores
        if any(self.rank_overhead_s):
            d["rank_overhead_us"] = {"per_step": self.rank_overhead_s[0] * 1e6,
                                     "per_micro_batch": self.rank_overhead_s[1] * 1e6}
        if self.collectives is not None:
            d["topology"] = self.collectives.source
            d["ranks_per_node"] = self.collectives.ranks_per_node
            d["collective_model"] = self.collectives.machine(list(range(self.devices)))
        return d


def collective_model(devices, topology="", ranks_per_node=0, memory="auto", nvswitch_gbs=0.0, **fields):
    """Loom's model of collectives over `devices` ranks. topology: "" for LOOM_TOPO_FILE or the live
    machine, "none" for a modelled cluster given only by `fields` (loom-sim's flags: intra_gbs,
    nics_per_node, nic_gbs, latency_us, net_latency_us, step_us, launch_us, copy_gbs), else a topology
    file; nvswitch_gbs joins a file's GPUs by an NVSwitch (loom-sim --nvswitch-gbs)."""
    from ..cost_model import CollectiveModel

    return CollectiveModel(devices, ranks_per_node=ranks_per_node, topology=topology, memory=memory,
                           nvswitch_gbs=nvswitch_gbs or 0.0,
                           machine={k: float(v) for k, v in fields.items() if v is not None})


def measure_flops(seconds=0.2, n=256):
    """This process's matrix-multiply rate (FLOP/s), a quick calibration of the compute speed."""
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        runs += 1
    return 2 * n ** 3 * runs / (time.perf_counter() - start)


def calibrated_flops(spec):
    """The compute speed a profiled model description implies (its FLOPs over its measured time)."""
    timed = [layer for layer in spec.layers if layer.forward_s]
    seconds = sum(layer.forward_s for layer in timed)
    return sum(layer.flops for layer in timed) / seconds if seconds > 0 else None
