"""Data parallelism: gradients averaged over the data-parallel group in buckets, each bucket's
collective started from an autograd hook as soon as its last gradient is in, so communication
overlaps the rest of backward (PyTorch DDP's Reducer, Megatron's DDP).

- Gradients are views into the buckets (no copy): autograd accumulates into them in place.
- Buckets are issued in index order on every rank, whatever order their gradients arrive in, so all
  ranks call the same collectives in the same order.
- `no_sync()` skips the reduction for gradient accumulation; the next synced backward reduces the sum.
- zero=0: all-reduce, p.grad holds the average. zero=1: reduce-scatter into this rank's shard of each
  bucket (`bucket.shard_grad`), for ZeroOptimizer; p.grad keeps this rank's own (pre-divided)
  contribution. zero=2: also the full gradients are not kept: each bucket's buffer is released once
  its reduce-scatter is done and p.grad stays None; gradients are reduced in every backward (as
  DeepSpeed's stage 2, so no_sync is refused).
- Parameters become views into one flat buffer per bucket under ZeRO, so the optimizer's all-gather
  writes them without a copy.
"""
import contextlib
import time

import torch
import torch.distributed as dist
from torch import nn

from .buckets import Bucket, assign_buckets


class DataParallel(nn.Module):
    def __init__(self, module, group=None, bucket_mb=25.0, first_bucket_mb=1.0, zero=0, broadcast=True):
        super().__init__()
        if zero not in (0, 1, 2):
            raise ValueError(f"DataParallel: zero must be 0, 1 or 2, got {zero!r}")
        self.module, self.group, self.zero = module, group, zero
        self.size, self.rank = dist.get_world_size(group), dist.get_rank(group)
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise ValueError("DataParallel: the module has no parameters that require gradients")
        indices = assign_buckets(params, int(first_bucket_mb * 2**20), int(bucket_mb * 2**20))
        self.buckets = [Bucket(i, [params[j] for j in idx], self.size, self.rank) for i, idx in enumerate(indices)]
        self._bucket_of = {p: b for b in self.buckets for p in b.params}
        if broadcast and self.size > 1:  # every replica starts from the first one's parameters
            src = dist.get_global_rank(group, 0) if group is not None else 0
            for p in params:
                dist.broadcast(p.data, src=src, group=group)
        for b in self.buckets:
            if zero:
                b.params_flat = torch.zeros(b.padded, dtype=b.dtype, device=b.device)
                for p in b.params:
                    b.view(b.params_flat, p).copy_(p.data)
                    p.data = b.view(b.params_flat, p)
                b.shard_grad = torch.zeros(b.shard_size, dtype=b.dtype, device=b.device)
            if zero < 2:
                b.new_grad_buffer()
                for p in b.params:
                    p.grad = b.view(b.grad, p)
            p_hooks = [p.register_post_accumulate_grad_hook(self._grad_ready) for p in b.params]
            b.hooks = p_hooks
        self._sync = True
        self._defer_wait = False
        self._callback_queued = False
        self._next = 0  # next bucket to issue in this backward
        self._inflight = []  # (bucket, work, reduced output, gradient buffer)
        self.launch_log = []  # (bucket index, time.perf_counter()) of each collective issued

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate gradients locally; the next one outside reduces them."""
        if self.zero == 2:
            raise ValueError("DataParallel.no_sync: ZeRO-2 keeps only a shard of the gradients, so it "
                             "reduces them in every backward; accumulate with zero=0 or 1")
        previous, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = previous

    @contextlib.contextmanager
    def deferred_wait(self):
        """Backward passes inside issue their collectives but do not wait for them at the end (a
        pipeline waits once, in finish_grad_sync, after its whole schedule)."""
        previous, self._defer_wait = self._defer_wait, True
        try:
            yield
        finally:
            self._defer_wait = previous

    def zero_grad(self, set_to_none=False):
        """Zeros the buckets in place, which keeps the gradients' views (set_to_none is ignored)."""
        self.finish_grad_sync()
        for b in self.buckets:
            if b.grad is not None:
                b.grad.zero_()
            if self.zero:
                b.shard_grad.zero_()

    def _grad_ready(self, p):
        if not self._sync:
            return
        b = self._bucket_of[p]
        if not self._callback_queued:
            self._callback_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)
            self._retire_completed()
        if b.grad is None:
            b.new_grad_buffer()
        view = b.view(b.grad, p)
        if self.zero == 2:
            view.add_(p.grad)
            p.grad = None
        elif p.grad.data_ptr() != view.data_ptr():  # a fresh tensor (e.g. after grad = None): adopt it
            view.copy_(p.grad)
            p.grad = view
        b.ready += 1
        self._issue_ready()

    def _issue_ready(self, everything=False):
        while self._next < len(self.buckets):
            b = self.buckets[self._next]
            if not everything and b.ready < len(b.params):
                return
            self._issue(b)
            self._next += 1

    def _issue(self, b):
        if b.grad is None:  # no gradient of this bucket arrived in this backward
            b.new_grad_buffer()
        for p in b.params:
            if self.zero < 2 and p.grad is None:
                p.grad = b.view(b.grad, p)
        grad = b.grad
        if self.size > 1:
            grad.div_(self.size)
        self.launch_log.append((b.index, time.perf_counter()))
        if self.zero == 0:
            work = dist.all_reduce(grad, group=self.group, async_op=True) if self.size > 1 else None
            out = grad
        else:
            out = torch.empty(b.shard_size, dtype=grad.dtype, device=grad.device)
            if self.size > 1:
                work = dist.reduce_scatter_tensor(out, grad, group=self.group, async_op=True)
            else:
                work = None
                out.copy_(grad)
        self._inflight.append((b, work, out, grad))
        if self.zero == 2:
            b.grad = None  # the next backward accumulates into a new buffer; this one lives until reduced
        b.ready = 0

    def _end_of_backward(self):
        self._issue_ready(everything=True)
        self._next = 0
        self._callback_queued = False
        if not self._defer_wait:
            self.finish_grad_sync()

    def finish_grad_sync(self):
        """Waits for every collective issued; afterwards the reduced gradients are in place."""
        for item in self._inflight:
            self._retire(item)
        self._inflight = []

    def _retire_completed(self):
        # Under ZeRO-2 each backward (micro-batch) leaves its buffers in flight; those already reduced
        # are folded into the shards and freed without waiting, so memory stays near one pass's worth.
        pending = []
        for item in self._inflight:
            if item[1] is None or item[1].is_completed():
                self._retire(item)
            else:
                pending.append(item)
        self._inflight = pending

    def _retire(self, item):
        b, work, out, _ = item
        if work is not None:
            work.wait()
        if self.zero == 1:
            b.shard_grad.copy_(out)
        elif self.zero == 2:
            b.shard_grad.add_(out)

    def reduced_grad(self, p):
        """The part of p's reduced gradient this rank holds: all of p.grad without ZeRO, else the
        slice of its bucket's shard that falls in p (flat, possibly empty)."""
        b = self._bucket_of[p]
        if self.zero == 0:
            return p.grad
        lo, hi = b.shard_region(p)
        return b.shard_grad[lo:hi]
