"""Tensor-parallel communication as autograd functions (Megatron's mappings.py): each moves a tensor
into or out of the tensor-parallel region in forward and does the matching collective in backward.

Activations are [sequence, batch, hidden], so sequence parallelism splits dim 0, the dimension that
all_gather_into_tensor and reduce_scatter_tensor work along, without a copy.
"""
import torch
import torch.distributed as dist


def group_size(group):
    """Ranks in a tensor-parallel group; None stands for no tensor parallelism (a whole layer)."""
    return 1 if group is None else dist.get_world_size(group)


def group_rank(group):
    return 0 if group is None else dist.get_rank(group)


_size = group_size


def _all_reduce(x, group):
    if _size(group) == 1:
        return x
    x = x.contiguous()
    dist.all_reduce(x, group=group)
    return x


def _gather_dim0(x, group):
    n = _size(group)
    if n == 1:
        return x
    out = torch.empty((n * x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(out, x.contiguous(), group=group)
    return out


def _check_sequence_divides(x, n):
    if x.shape[0] % n:
        raise ValueError(f"sequence parallel: sequence length {x.shape[0]} is not divisible by the "
                         f"tensor-parallel size {n}")


def _reduce_scatter_dim0(x, group):
    n = _size(group)
    if n == 1:
        return x
    _check_sequence_divides(x, n)
    out = torch.empty((x.shape[0] // n,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.reduce_scatter_tensor(out, x.contiguous(), group=group)
    return out


def _split_dim0(x, group):
    n = _size(group)
    if n == 1:
        return x
    _check_sequence_divides(x, n)
    return x.chunk(n, dim=0)[group_rank(group)].contiguous()


def _gather_last(x, group):
    n = _size(group)
    if n == 1:
        return x
    gathered = _gather_dim0(x.movedim(-1, 0), group)  # [n * last, ...]
    return gathered.movedim(0, -1).contiguous()


def _split_last(x, group):
    n = _size(group)
    if n == 1:
        return x
    return x.chunk(n, dim=-1)[group_rank(group)].contiguous()


class _CopyToRegion(torch.autograd.Function):
    """f: identity forward, all-reduce of the input gradient backward (before a column-parallel layer)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad, ctx.group), None


class _ReduceFromRegion(torch.autograd.Function):
    """g: all-reduce forward (after a row-parallel layer), identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        return _all_reduce(x.clone(), group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _GatherFromSequenceRegion(torch.autograd.Function):
    """All-gather along the sequence forward, reduce-scatter backward (before a column-parallel
    layer with sequence parallelism: each rank's slice gets the sum of every rank's gradient)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _gather_dim0(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _reduce_scatter_dim0(grad, ctx.group), None


class _ReduceScatterToSequenceRegion(torch.autograd.Function):
    """Reduce-scatter along the sequence forward, all-gather backward (after a row-parallel layer
    with sequence parallelism)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _reduce_scatter_dim0(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _gather_dim0(grad, ctx.group), None


class _ScatterToSequenceRegion(torch.autograd.Function):
    """Keep this rank's slice of the sequence forward, all-gather backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _split_dim0(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _gather_dim0(grad, ctx.group), None


class _GatherFromRegion(torch.autograd.Function):
    """All-gather the last dimension forward (a column-parallel layer's gathered output), keep this
    rank's slice backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _gather_last(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _split_last(grad, ctx.group), None


def copy_to_tensor_parallel(x, group):
    return _CopyToRegion.apply(x, group) if _size(group) > 1 else x


def reduce_from_tensor_parallel(x, group):
    return _ReduceFromRegion.apply(x, group) if _size(group) > 1 else x


def gather_from_sequence_parallel(x, group):
    return _GatherFromSequenceRegion.apply(x, group) if _size(group) > 1 else x


def reduce_scatter_to_sequence_parallel(x, group):
    return _ReduceScatterToSequenceRegion.apply(x, group) if _size(group) > 1 else x


def scatter_to_sequence_parallel(x, group):
    return _ScatterToSequenceRegion.apply(x, group) if _size(group) > 1 else x


def gather_from_tensor_parallel(x, group):
    return _GatherFromRegion.apply(x, group) if _size(group) > 1 else x
