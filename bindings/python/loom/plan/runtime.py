"""From a plan to what loom.parallel runs: mesh shape and rank order, micro-batches, where the stages
cut the layers, which layers recompute their activations.

loom.parallel runs one TP/DP layout for a whole model (per-layer layouts with re-layouts between
them are not built), so a plan must give every layer the same layout, checkpointing aside
(`loom-plan --one-layout`); SDP layers need ShardedDataParallel, which the pipeline and the TP
layers do not take yet. Anything else is refused with a message saying so.
"""
from dataclasses import replace

from .strategies import parse


def training_layout(plan):
    """{"tp", "pp", "dp", "order", "micro_batches", "micro_batch_size", "stage_starts" (the first
    layer index of stages 1..pp-1), "checkpoint" (sorted layer indices)} for a plan (loom-plan's JSON)."""
    layers = [layer for stage in plan["stages"] for layer in stage["layers"]]
    if [layer["index"] for layer in layers] != list(range(len(layers))):
        raise ValueError("plan: the stages do not list the layers in order")
    strategies = [parse(layer["strategy"]) for layer in layers]
    layouts = sorted({replace(s, checkpoint=False).name for s in strategies})
    if len(layouts) > 1:
        raise ValueError(f"plan: its layers use {len(layouts)} layouts ({', '.join(layouts)}); the training layer "
                         f"runs one layout per model (plan with loom-plan --one-layout)")
    s = strategies[0]
    if s.sdp:
        raise ValueError(f"plan: {s.name} shards data parallelism (SDP), which the training layer's pipeline "
                         f"and TP layers do not run yet (plan with loom-plan --no-sdp)")
    if s.pp != plan["pp"] or len(plan["stages"]) != plan["pp"]:
        raise ValueError(f"plan: pp={plan['pp']} with {len(plan['stages'])} stages of {s.name} layers")
    m = plan["micro_batches"]
    size, rest = divmod(plan["global_batch"], m * s.dp)
    if rest or size < 1:
        raise ValueError(f"plan: a global batch of {plan['global_batch']} does not split into {m} micro-batches "
                         f"on {s.dp} replicas")
    return {"tp": s.tp, "pp": s.pp, "dp": s.dp, "order": "tp-dp-pp" if s.tp_inner else "dp-tp-pp",
            "micro_batches": m, "micro_batch_size": size,
            "stage_starts": [stage["layers"][0]["index"] for stage in plan["stages"][1:]],
            "checkpoint": [layer["index"] for layer, st in zip(layers, strategies) if st.checkpoint]}
