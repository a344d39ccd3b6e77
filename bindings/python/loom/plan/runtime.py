"""From a plan to what loom.parallel runs: the stages' ranks and layer ranges, every layer's layout
(TP and DP degrees, their nesting, SDP, checkpointing), the micro-batches.

Any plan loom-plan writes runs: layers of different layouts in one stage are re-laid out between them
(loom.parallel.relayout), SDP layers are sharded each over its own DP group (loom.parallel.stage_model).
A plan that gives every layer one layout without SDP also runs on the Megatron-shaped mesh
(`"mesh"` below: one communicator per axis, gradients of a whole stage bucketed together). Refused, with
a ValueError saying why: plans whose stages or layers do not fit together (a layer's strategy over
another pipeline degree or stage size, stages that are not the world's ranks once each, a stage's ranks
not in ascending order, layers out of order, an empty stage) and global batches that a layer's data
parallelism cannot split evenly.
"""
from dataclasses import replace

from loom.parallel.layout import LayerLayout

from .strategies import parse


def layer_layout(strategy):
    """The loom.parallel layout of one layer under a loom.plan Strategy (within its stage)."""
    return LayerLayout(tp=strategy.tp, dp=strategy.dp, sdp=strategy.sdp, tp_inner=strategy.tp_inner,
                       checkpoint=strategy.checkpoint)


def training_layout(plan):
    """For a plan (loom-plan's JSON):
    {"pp", "micro_batches", "samples_per_micro_batch" (of the whole stage, before data parallelism splits
    it), "stage_ranks" (global ranks of each stage), "stage_starts" (the first layer index of stages
    1..pp-1), "layouts" (a LayerLayout per layer), "checkpoint" (sorted indices of recomputed layers),
    "mesh": {"tp", "dp", "order", "micro_batch_size"} when every layer has one layout without SDP and the
    stages are consecutive runs of ranks, else None}."""
    layers = [layer for stage in plan["stages"] for layer in stage["layers"]]
    if [layer["index"] for layer in layers] != list(range(len(layers))):
        raise ValueError("plan: the stages do not list the layers in order")
    pp = plan["pp"]
    if len(plan["stages"]) != pp:
        raise ValueError(f"plan: pp={pp} with {len(plan['stages'])} stages")
    if any(not stage["layers"] for stage in plan["stages"]):
        raise ValueError("plan: a stage without layers")
    strategies = [parse(layer["strategy"]) for layer in layers]
    for layer, s in zip(layers, strategies):
        if s.pp != pp:
            raise ValueError(f"plan: layer {layer['index']} has strategy {s.name}, of another pipeline degree "
                             f"than pp={pp}")
    sizes = {s.tp * s.dp for s in strategies}
    if len(sizes) != 1:
        raise ValueError(f"plan: its layers' strategies cover stages of different sizes {sorted(sizes)}")
    size = sizes.pop()
    stage_ranks = [list(stage.get("ranks", range(k * size, (k + 1) * size))) for k, stage in enumerate(plan["stages"])]
    if sorted(r for ranks in stage_ranks for r in ranks) != list(range(pp * size)) or \
            any(len(ranks) != size for ranks in stage_ranks):
        raise ValueError(f"plan: stages of ranks {stage_ranks} are not {pp} stages of {size} covering ranks "
                         f"0..{pp * size - 1} once")
    if any(ranks != sorted(ranks) for ranks in stage_ranks):
        raise ValueError(f"plan: stages of ranks {stage_ranks}: the training layer needs each stage's ranks in "
                         f"ascending order (its groups' members are ordered by rank)")
    m, batch = plan["micro_batches"], plan["global_batch"]
    per_micro, rest = divmod(batch, m)
    for layer, s in zip(layers, strategies):
        if rest or per_micro % s.dp or per_micro < s.dp:
            raise ValueError(f"plan: a global batch of {batch} does not split into {m} micro-batches on the "
                             f"{s.dp} replicas of layer {layer['index']} ({s.name})")
    mesh = None
    consecutive = stage_ranks == [list(range(k * size, (k + 1) * size)) for k in range(pp)]  # the mesh's pp-outer order
    if len({replace(s, checkpoint=False) for s in strategies}) == 1 and not strategies[0].sdp and consecutive:
        s = strategies[0]
        mesh = {"tp": s.tp, "dp": s.dp, "order": "tp-dp-pp" if s.tp_inner else "dp-tp-pp",
                "micro_batch_size": per_micro // s.dp}
    return {"pp": pp, "micro_batches": m, "samples_per_micro_batch": per_micro, "stage_ranks": stage_ranks,
            "stage_starts": [stage["layers"][0]["index"] for stage in plan["stages"][1:]],
            "layouts": [layer_layout(s) for s in strategies],
            "checkpoint": [layer["index"] for layer, s in zip(layers, strategies) if s.checkpoint],
            "mesh": mesh}
