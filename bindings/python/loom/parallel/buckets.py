"""Gradient buckets for data parallelism: which parameters share one flat buffer and one collective.

Parameters are taken in reverse order, the order backward produces their gradients, so the first
bucket fills first and its all-reduce starts while backward goes on. The first bucket is kept small
(PyTorch DDP's 1 MiB) so that communication starts early. A parameter marked `own_bucket` (a tied
embedding, whose gradient is later summed with another stage's copy) gets a bucket to itself, so its
place in the buffer, and in a ZeRO shard, is the same on every stage.
"""
import math

import torch


def assign_buckets(params, first_bucket_bytes, bucket_bytes):
    """Lists of indices into `params`, in the order their collectives will be issued."""
    if first_bucket_bytes <= 0 or bucket_bytes <= 0:
        raise ValueError(f"bucket sizes must be positive, got first {first_bucket_bytes} B and {bucket_bytes} B")
    buckets, open_by_kind = [], {}
    for i in reversed(range(len(params))):
        p = params[i]
        if getattr(p, "own_bucket", False):
            buckets.append([i])
            continue
        kind = (p.dtype, p.device)
        if kind not in open_by_kind:
            open_by_kind[kind] = [[], 0]
        members = open_by_kind[kind]
        members[0].append(i)
        members[1] += p.numel() * p.element_size()
        limit = first_bucket_bytes if not buckets else bucket_bytes
        if members[1] >= limit:
            buckets.append(members[0])
            del open_by_kind[kind]
    buckets += [members for members, _ in open_by_kind.values()]
    return buckets


class Bucket:
    """A flat gradient buffer for some parameters, padded to a multiple of the data-parallel size so
    that it splits into equal ZeRO shards (shard r is elements [r * S, (r + 1) * S))."""

    def __init__(self, index, params, dp_size, dp_rank):
        self.index, self.params = index, params
        self.numel = sum(p.numel() for p in params)
        self.padded = math.ceil(self.numel / dp_size) * dp_size
        self.shard_size = self.padded // dp_size
        self.shard_start = dp_rank * self.shard_size
        self.dtype, self.device = params[0].dtype, params[0].device
        self.offsets = {}
        offset = 0
        for p in params:
            self.offsets[p] = (offset, offset + p.numel())
            offset += p.numel()
        self.grad = None  # flat gradients, allocated by new_grad_buffer
        self.ready = 0  # gradients of this backward pass already in the buffer

    def new_grad_buffer(self):
        self.grad = torch.zeros(self.padded, dtype=self.dtype, device=self.device)
        return self.grad

    def view(self, flat, p):
        start, end = self.offsets[p]
        return flat[start:end].view_as(p)

    def shard_region(self, p):
        """(start, end) of p's elements within this rank's shard, in shard coordinates (may be empty)."""
        start, end = self.offsets[p]
        lo, hi = max(start, self.shard_start), min(end, self.shard_start + self.shard_size)
        return (lo - self.shard_start, hi - self.shard_start) if lo < hi else (0, 0)
