"""ZeRO stages 1 and 2: the optimizer's state sharded over the data-parallel group.

Each rank steps only its shard of every bucket (a 1/dp slice of the flat parameters, with the
reduce-scattered gradient DataParallel left in `bucket.shard_grad`), so Adam's two moments take 1/dp
of the memory; then every bucket's parameters are all-gathered back into the flat buffer the model's
parameters are views of. Works with optimizers that treat each element on its own (SGD, Adam,
AdamW, ...): one that looks at a whole tensor (LAMB's trust ratio) would see a shard instead.
"""
import torch
import torch.distributed as dist
from torch import nn


class ZeroOptimizer:
    def __init__(self, models, optimizer_class, **optimizer_args):
        models = list(models) if isinstance(models, (list, tuple)) else [models]
        for m in models:
            if getattr(m, "zero", 0) not in (1, 2):
                raise ValueError("ZeroOptimizer: wrap the model in DataParallel(..., zero=1 or 2) first")
        self.models = models
        self.shards = []  # (model, bucket, master shard)
        for m in models:
            for b in m.buckets:
                start = b.shard_start
                master = nn.Parameter(b.params_flat[start:start + b.shard_size].clone())
                master.grad = b.shard_grad  # a view: the reduce-scatter's result, no copy
                self.shards.append((m, b, master))
        self.optimizer = optimizer_class([master for _, _, master in self.shards], **optimizer_args)

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def zero_grad(self, set_to_none=False):
        for m in self.models:
            m.zero_grad()

    @torch.no_grad()
    def step(self):
        for m in self.models:
            m.finish_grad_sync()
        self.optimizer.step()
        works = []
        for m, b, master in self.shards:
            if m.size > 1:
                works.append(dist.all_gather_into_tensor(b.params_flat, master.detach(), group=m.group, async_op=True))
            else:
                b.params_flat.copy_(master.detach())
        for w in works:
            w.wait()

    def state_dict(self):
        """This rank's shard of the optimizer state (a checkpoint keeps one per data-parallel rank)."""
        return {"optimizer": self.optimizer.state_dict(), "masters": [master.detach().clone() for _, _, master in self.shards]}

    def load_state_dict(self, state):
        if len(state["masters"]) != len(self.shards):
            raise ValueError(f"ZeroOptimizer.load_state_dict: {len(state['masters'])} shards saved, "
                             f"{len(self.shards)} here (a different model or layout)")
        with torch.no_grad():
            for (_, b, master), saved in zip(self.shards, state["masters"]):
                if saved.shape != master.shape:
                    raise ValueError(f"ZeroOptimizer.load_state_dict: shard of {tuple(saved.shape)} saved, "
                                     f"{tuple(master.shape)} here")
                master.copy_(saved)
        self.optimizer.load_state_dict(state["optimizer"])
