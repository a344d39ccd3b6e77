"""Cross-entropy over vocabulary-parallel logits, without ever gathering them (Megatron's
_VocabParallelCrossEntropy): three all-reduces of one number per token (the max, the target's logit,
the sum of exponentials) instead of an all-gather of batch * sequence * vocabulary logits. Backward
is local: softmax minus one-hot on this rank's slice of the vocabulary.
"""
import torch
import torch.distributed as dist

from .mappings import group_rank, group_size


def _all_reduce(x, op, group):
    if group_size(group) > 1:
        dist.all_reduce(x, op=op, group=group)
    return x


class _VocabParallelCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target, group):
        rank = group_rank(group)
        local_vocab = logits.shape[-1]
        start = rank * local_vocab
        logits = logits.float()
        # Subtract the global max so exp() cannot overflow; every rank subtracts the same number.
        top = _all_reduce(logits.max(dim=-1).values.contiguous(), dist.ReduceOp.MAX, group)
        shifted = logits - top.unsqueeze(-1)
        outside = (target < start) | (target >= start + local_vocab)
        local_target = (target - start).masked_fill(outside, 0)
        picked = shifted.gather(-1, local_target.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0)
        picked = _all_reduce(picked.contiguous(), dist.ReduceOp.SUM, group)
        exp = shifted.exp()
        total = _all_reduce(exp.sum(dim=-1), dist.ReduceOp.SUM, group)
        ctx.save_for_backward(exp.div_(total.unsqueeze(-1)), outside, local_target)
        return total.log() - picked

    @staticmethod
    def backward(ctx, grad_loss):
        softmax, outside, local_target = ctx.saved_tensors
        grad = softmax.clone()
        one_hot = (~outside).to(grad.dtype).unsqueeze(-1)
        grad.scatter_add_(-1, local_target.unsqueeze(-1), -one_hot)
        return grad.mul_(grad_loss.unsqueeze(-1)), None, None


def vocab_parallel_cross_entropy(logits, target, group):
    """Per-token loss from logits split along the vocabulary over `group` ([..., vocab / tp], this
    rank's slice) and integer targets [...] over the whole vocabulary."""
    if logits.shape[:-1] != target.shape:
        raise ValueError(f"vocab_parallel_cross_entropy: logits {tuple(logits.shape)} and targets "
                         f"{tuple(target.shape)} differ before the vocabulary dimension")
    return _VocabParallelCrossEntropy.apply(logits, target, group)
