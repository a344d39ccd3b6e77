"""loom.plan: picks data, sharded data, tensor and pipeline parallelism per layer (Galvatron's search)
with Loom's own cost model of collectives on the machine's topology.

    from loom.plan import strategies
    [s.name for s in strategies(8)]          # the 22 layouts of one layer on 8 devices
"""
from .strategies import Strategy, parse, strategies

__all__ = ["Strategy", "parse", "strategies"]
