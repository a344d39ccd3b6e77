"""One layer's layout inside a pipeline stage: its tensor-parallel (TP) and data-parallel (DP) degrees,
their nesting, whether DP is sharded (SDP, ZeRO-3) and whether the layer recomputes its activations
(Galvatron's per-layer strategy, loom.plan's `pp2-dp2-tp2+ckpt`).

A stage has N = tp * dp ranks, called positions 0..N-1 here (position k of every stage forms a pipeline
group). Each micro-batch is cut into dp contiguous slices; the ranks of data-parallel index d hold
slice d, whole and alike on the tp ranks of their TP group (the input a Megatron TP layer takes).
With `tp_inner` the TP groups are runs of consecutive positions ("dp2-tp2": TP on one host) and DP
strides over them; otherwise DP groups are the runs ("tp2-dp2"). loom.plan.strategies.Strategy.groups
makes the same groups.
"""
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class LayerLayout:
    tp: int = 1
    dp: int = 1
    sdp: bool = False  # gradients reduce-scattered into a shard, parameters gathered per use
    tp_inner: bool = True  # TP groups hold consecutive positions (meaningful only when tp > 1 and dp > 1)
    checkpoint: bool = False  # recompute the layer's activations in backward

    def __post_init__(self):
        if self.tp < 1 or self.dp < 1:
            raise ValueError(f"LayerLayout: tp and dp must be positive, got tp={self.tp} dp={self.dp}")
        if self.sdp and self.dp < 2:
            raise ValueError("LayerLayout: sharded data parallelism needs dp >= 2")

    @property
    def size(self):
        return self.tp * self.dp

    @property
    def placement(self):
        """What decides where samples and parameter slices live: layouts with equal placements need no
        re-layout between them (SDP and checkpointing change neither)."""
        return self.tp, self.dp, self.tp_inner or self.tp == 1 or self.dp == 1

    def dp_index(self, position):
        self._check(position)
        return position // self.tp if self.placement[2] else position % self.dp

    def tp_index(self, position):
        self._check(position)
        return position % self.tp if self.placement[2] else position // self.dp

    def groups(self, axis):
        """Positions of every group along "tp" or "dp", each ascending (so a group's rank is its index
        along the axis)."""
        if axis not in ("tp", "dp"):
            raise ValueError(f"LayerLayout.groups: axis must be 'tp' or 'dp', got {axis!r}")
        key = self.dp_index if axis == "tp" else self.tp_index  # a TP group shares its DP index, and v.v.
        found = {}
        for position in range(self.size):
            found.setdefault(key(position), []).append(position)
        return [found[k] for k in sorted(found)]

    def batch_slice(self, position):
        """[start, stop) of the micro-batch this position holds, as fractions of it."""
        d = self.dp_index(position)
        return Fraction(d, self.dp), Fraction(d + 1, self.dp)

    def _check(self, position):
        if not 0 <= position < self.size:
            raise ValueError(f"LayerLayout: position {position} outside a stage of {self.size} ranks")
