"""loom.parallel: data, tensor and pipeline parallelism for torch over the "loom" backend.

    import torch.distributed as dist, loom.torch, loom.parallel as lp
    dist.init_process_group("loom")
    mesh = lp.init_mesh(tp=2, pp=2, dp=2)

One module per concept: mesh (rank layout, groups), data_parallel + buckets + zero (DP, ZeRO-1/2),
sharded (ZeRO-3), mappings + tensor_parallel + cross_entropy (TP, sequence parallelism), schedules + schedule_check +
schedule_sim + pipeline (PP), grads (sums across groups after backward), layout + relayout + layer_mesh +
stage_model (layers with their own TP/DP/SDP layouts, loom-plan's per-layer plans), gpt (the example's model),
cpu_binding (CPU ranks bound to cores).
"""
from .cpu_binding import bind_cpu
from .cross_entropy import vocab_parallel_cross_entropy
from .data_parallel import DataParallel
from .grads import finalize_grads
from .layer_mesh import LayerMesh, init_layer_mesh
from .layout import LayerLayout
from .mesh import Mesh, init_mesh, rank_groups
from .pipeline import Pipeline, split_layers
from .relayout import Relayout, plan_relayout
from .schedule_check import ScheduleError, check
from .schedule_sim import simulate
from .schedules import build as build_schedule
from .sharded import ShardedDataParallel
from .stage_model import StageModel, finalize_stage_grads
from .tensor_parallel import ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding
from .zero import ZeroOptimizer

__all__ = ["ColumnParallelLinear", "DataParallel", "LayerLayout", "LayerMesh", "Mesh", "Pipeline", "Relayout",
           "RowParallelLinear", "ScheduleError", "ShardedDataParallel", "StageModel", "VocabParallelEmbedding",
           "ZeroOptimizer", "bind_cpu", "build_schedule", "check", "finalize_grads", "finalize_stage_grads", "init_layer_mesh",
           "init_mesh", "plan_relayout", "rank_groups", "simulate", "split_layers", "vocab_parallel_cross_entropy"]
