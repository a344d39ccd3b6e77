"""Galvatron's decision-tree strategy space: the layouts one layer may take on N devices.

The pipeline degree is the outermost split (takeaway 1: PP moves the fewest bytes, so it spans the
slowest links); the devices of one stage are then split evenly by tensor parallelism (TP) and data
parallelism (DP), every degree a power of two, each used at most once in the tree. DP is either plain
or sharded (SDP, ZeRO-3): takeaway 3 says mixing the two in one tree never beats SDP alone, which
prunes the 34 trees of 8 devices to 22. When TP and DP are both present their nesting matters: the
inner one holds consecutive ranks (one host), the outer one strides over them.

A strategy's name lists its splits from the outermost to the innermost: `pp2-dp2-tp2` is two stages,
each two TP groups of consecutive ranks; `pp1-tp2-sdp4` strides TP over four consecutive SDP ranks.
A split of one is left out (`pp1-sdp8`, `pp8`); `+ckpt` marks activation checkpointing.
"""
import re
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Strategy:
    pp: int
    tp: int
    dp: int
    sdp: bool = False  # the data-parallel split is sharded (ZeRO-3)
    tp_inner: bool = True  # TP groups hold consecutive ranks (only meaningful when tp > 1 and dp > 1)
    checkpoint: bool = False  # activation checkpointing

    @property
    def devices(self):
        return self.pp * self.tp * self.dp

    @property
    def name(self):
        dp = f"{'sdp' if self.sdp else 'dp'}{self.dp}"
        tp = f"tp{self.tp}"
        splits = [dp, tp] if self.tp_inner else [tp, dp]  # outermost first
        splits = [x for x in splits if not x.endswith("p1")]  # a split of one is no split
        return "-".join([f"pp{self.pp}"] + splits) + ("+ckpt" if self.checkpoint else "")

    def __str__(self):
        return self.name

    def groups(self, axis, stage_ranks):
        """The rank groups of one axis ("tp" or "dp") inside a stage whose ranks are `stage_ranks`
        (tp * dp of them, in order)."""
        if len(stage_ranks) != self.tp * self.dp:
            raise ValueError(f"{self.name}: a stage has {self.tp * self.dp} ranks, got {len(stage_ranks)}")
        size = self.tp if axis == "tp" else self.dp
        inner = (axis == "tp") == self.tp_inner
        if inner:  # runs of consecutive ranks
            return [list(stage_ranks[i:i + size]) for i in range(0, len(stage_ranks), size)]
        stride = len(stage_ranks) // size
        return [list(stage_ranks[i::stride]) for i in range(stride)]

    def to_json(self):
        return {"name": self.name, "pp": self.pp, "tp": self.tp, "dp": self.dp, "sdp": self.sdp,
                "tp_inner": self.tp_inner, "checkpoint": self.checkpoint}


_NAME = re.compile(r"^pp(\d+)((?:-(?:s?dp|tp)\d+){0,2})(\+ckpt)?$")
_SPLIT = re.compile(r"-(s?dp|tp)(\d+)")


def parse(name):
    """The Strategy a name stands for (the inverse of Strategy.name)."""
    m = _NAME.match(name.strip())
    splits = _SPLIT.findall(m.group(2)) if m else []
    kinds = [k.lstrip("s") for k, _ in splits]
    if not m or len(set(kinds)) != len(kinds) or any(int(n) < 2 for _, n in splits):
        raise ValueError(f"not a strategy name: {name!r} (expected e.g. pp2-dp2-tp2, pp1-tp2-sdp4+ckpt, pp8)")
    degrees = {k.lstrip("s"): int(n) for k, n in splits}
    sdp = any(k == "sdp" for k, _ in splits)
    tp_inner = kinds != ["tp", "dp"]
    return Strategy(pp=int(m.group(1)), tp=degrees.get("tp", 1), dp=degrees.get("dp", 1), sdp=sdp,
                    tp_inner=tp_inner, checkpoint=bool(m.group(3)))


def _powers_of_two_dividing(n):
    d = 1
    while d <= n:
        if n % d == 0:
            yield d
        d *= 2


def strategies(devices, checkpointing=False, pp=None):
    """Every strategy for `devices` (a power of two), pipeline degree outermost; with checkpointing,
    each also with activation checkpointing. pp: only that pipeline degree."""
    if devices < 1 or devices & (devices - 1):
        raise ValueError(f"strategies: the device count must be a power of two, got {devices}")
    found = []
    for p in _powers_of_two_dividing(devices):
        if pp is not None and p != pp:
            continue
        for t in _powers_of_two_dividing(devices // p):
            d = devices // (p * t)
            nestings = (True, False) if t > 1 and d > 1 else (True,)
            shardings = (False, True) if d > 1 else (False,)
            for tp_inner in nestings:
                for sdp in shardings:
                    for ckpt in ((False, True) if checkpointing else (False,)):
                        found.append(Strategy(p, t, d, sdp, tp_inner, ckpt))
    return found
