"""After backward: gradients that other groups than data parallelism must sum (Megatron's
finalize_model_grads).

- Copies of a parameter on every tensor-parallel rank that saw different parts of the sequence
  (LayerNorm, row-parallel biases and position embeddings under sequence parallelism,
  `p.sequence_parallel`) are summed over the tensor-parallel group.
- A tied embedding (`p.tied_embedding`), the input embedding on the first stage and the output layer
  on the last, is summed over the embedding group (first + last stage).

Both sums commute with the data-parallel average, so they run on whatever part of the reduced
gradient this rank holds (all of it, or its ZeRO shard: the same elements on every rank of the group,
since tensor-parallel ranks have identical bucket layouts and a tied embedding has a bucket of its own).
"""
import torch
import torch.distributed as dist


def _sum_over(regions, group):
    regions = [r for r in regions if r.numel()]
    if not regions or dist.get_world_size(group) == 1:
        return
    flat = torch.cat([r.reshape(-1) for r in regions])
    dist.all_reduce(flat, group=group)
    offset = 0
    for r in regions:
        r.copy_(flat[offset:offset + r.numel()].view_as(r))
        offset += r.numel()


@torch.no_grad()
def finalize_grads(models, mesh):
    """Waits for the data-parallel reductions of every model chunk (DataParallel), then sums the
    gradients named above. Call before the optimizer step (Pipeline.step does)."""
    for m in models:
        m.finish_grad_sync()
    sequence_parallel, tied = [], []
    for m in models:
        for p in m.module.parameters():
            if getattr(p, "sequence_parallel", False):
                sequence_parallel.append(m.reduced_grad(p))
            if getattr(p, "tied_embedding", False):
                tied.append(m.reduced_grad(p))
    # Every rank of a group must make the same calls: tensor-parallel peers hold the same parameters;
    # embedding-group peers (first and last stage) both hold exactly one tied embedding.
    _sum_over(sequence_parallel, mesh.tp_group)
    if len(mesh.embedding_ranks) > 1:
        _sum_over(tied, mesh.embedding_group)
