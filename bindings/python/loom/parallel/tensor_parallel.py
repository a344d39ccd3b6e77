"""Tensor-parallel layers (Megatron's 1-D tensor parallelism) on [sequence, batch, hidden] tensors.

`group` is the tensor-parallel process group; None means no tensor parallelism (the layer is whole).
Every layer makes its full weight with `init_method` and keeps this rank's slice, so a model has the
same parameters whatever its tensor-parallel size (the single-process model is the same model). Each
parameter records how it is split (`tp_split_dim`: 0, 1 or None for a copy on every rank), and a copy
whose gradient differs between ranks under sequence parallelism is marked `sequence_parallel`, so its
gradient is summed over the tensor-parallel group after backward (grads.finalize_grads).
"""
import torch
import torch.nn.functional as F
from torch import nn

from . import mappings


def tp_size_and_rank(group):
    return mappings.group_size(group), mappings.group_rank(group)


def check_divisible(what, value, group, layer):
    size = mappings.group_size(group)
    if value % size:
        raise ValueError(f"{layer}: {what} ({value}) is not divisible by the tensor-parallel size ({size})")
    return value // size


def sharded_parameter(shape, split_dim, group, init_method, dtype=None, device=None):
    """A Parameter holding this rank's slice (along split_dim; None: all of it) of a full tensor of
    `shape` filled by init_method."""
    full = torch.empty(shape, dtype=dtype or torch.get_default_dtype())
    init_method(full)
    if split_dim is not None:
        size, rank = tp_size_and_rank(group)
        full = full.chunk(size, dim=split_dim)[rank]
    param = nn.Parameter(full.contiguous().to(device) if device is not None else full.contiguous())
    param.tp_split_dim = split_dim
    param.sequence_parallel = False
    return param


def _zeros(tensor):
    with torch.no_grad():
        tensor.zero_()


def column_parallel_linear(x, weight, bias, group, sequence_parallel):
    """y_i = x A_i (+ b_i): the input enters the tensor-parallel region (all-gathered along the sequence
    with sequence parallelism, else copied with an all-reduce of its gradient)."""
    if sequence_parallel:
        x = mappings.gather_from_sequence_parallel(x, group)
    else:
        x = mappings.copy_to_tensor_parallel(x, group)
    return F.linear(x, weight, bias)


class ColumnParallelLinear(nn.Module):
    """Y = XA + b with A split by columns (output features): rank i computes Y_i = X A_i + b_i."""

    def __init__(self, in_features, out_features, group, bias=True, gather_output=False, sequence_parallel=False,
                 init_method=nn.init.xavier_normal_, dtype=None, device=None):
        super().__init__()
        local_out = check_divisible("out_features", out_features, group, "ColumnParallelLinear")
        self.in_features, self.out_features, self.local_out = in_features, out_features, local_out
        self.group, self.gather_output, self.sequence_parallel = group, gather_output, sequence_parallel
        # nn.Linear's layout: weight is [out, in], so splitting the columns of A splits dim 0.
        self.weight = sharded_parameter((out_features, in_features), 0, group, init_method, dtype, device)
        self.bias = sharded_parameter((out_features,), 0, group, _zeros, dtype, device) if bias else None

    def forward(self, x):
        y = column_parallel_linear(x, self.weight, self.bias, self.group, self.sequence_parallel)
        return mappings.gather_from_tensor_parallel(y, self.group) if self.gather_output else y


class RowParallelLinear(nn.Module):
    """Y = XA + b with A split by rows (input features) and X already split by its last dimension
    (a column-parallel layer's output): partial products are summed by an all-reduce (or
    reduce-scattered along the sequence with sequence parallelism); the bias is added once, after."""

    def __init__(self, in_features, out_features, group, bias=True, sequence_parallel=False,
                 init_method=nn.init.xavier_normal_, dtype=None, device=None):
        super().__init__()
        check_divisible("in_features", in_features, group, "RowParallelLinear")
        self.in_features, self.out_features = in_features, out_features
        self.group, self.sequence_parallel = group, sequence_parallel
        self.weight = sharded_parameter((out_features, in_features), 1, group, init_method, dtype, device)
        self.bias = sharded_parameter((out_features,), None, group, _zeros, dtype, device) if bias else None
        if self.bias is not None:
            self.bias.sequence_parallel = sequence_parallel

    def forward(self, x):
        partial = F.linear(x, self.weight)
        if self.sequence_parallel:
            y = mappings.reduce_scatter_to_sequence_parallel(partial, self.group)
        else:
            y = mappings.reduce_from_tensor_parallel(partial, self.group)
        return y + self.bias if self.bias is not None else y


class VocabParallelEmbedding(nn.Module):
    """An embedding table split by rows (vocabulary): each rank looks up the ids it owns, zeros the
    others, and the partial results are summed (all-reduce, or reduce-scatter along the sequence when
    `sequence_parallel`). `weight` also serves as the vocab-parallel output layer of a tied model."""

    def __init__(self, num_embeddings, embedding_dim, group, sequence_parallel=False,
                 init_method=nn.init.normal_, dtype=None, device=None):
        super().__init__()
        local = check_divisible("num_embeddings (vocabulary)", num_embeddings, group, "VocabParallelEmbedding")
        _, rank = tp_size_and_rank(group)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.vocab_start, self.vocab_end = rank * local, (rank + 1) * local
        self.group, self.sequence_parallel = group, sequence_parallel
        self.weight = sharded_parameter((num_embeddings, embedding_dim), 0, group, init_method, dtype, device)

    def forward(self, ids):
        if ids.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"VocabParallelEmbedding: token ids must be integers, got {ids.dtype}")
        outside = (ids < self.vocab_start) | (ids >= self.vocab_end)
        local = (ids - self.vocab_start).masked_fill(outside, 0)
        partial = F.embedding(local, self.weight).masked_fill(outside.unsqueeze(-1), 0.0)
        if self.sequence_parallel:
            return mappings.reduce_scatter_to_sequence_parallel(partial, self.group)
        return mappings.reduce_from_tensor_parallel(partial, self.group)
