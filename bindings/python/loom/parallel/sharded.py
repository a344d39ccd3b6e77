"""Sharded data parallelism (ZeRO-3, Galvatron's "SDP"): each rank keeps 1/dp of every parameter.

The module's children are its units (a Sequential's layers, a GPT chunk's layers). A unit's parameters
live flattened, padded to a multiple of the group size, as one shard per rank (`unit.shard`, the
Parameter the optimizer steps). Before a unit's forward its parameters are all-gathered and become
views of the gathered buffer; after it they are freed. A hook on the unit's output gathers them again
before its backward; once every gradient of the unit is in (or at the end of backward), the full
gradients are reduce-scattered, averaged, into `unit.shard.grad` and the full parameters and gradients
are freed. So at most the units running (and the one prefetched) hold whole parameters, and gradient
memory is a shard's.

With prefetch (the default, as FSDP's forward and backward prefetch), communication runs beside compute:
a unit's forward starts the gather of the unit that ran after it in the previous forward, a unit's
backward starts the gather of the unit that ran before it, and the reduce-scatters run in the background
until the end of that backward, where they are waited for and added to the shards' gradients. The order
is the previous forward's (the children's order before the first), the same on every rank, so every rank
issues the same collectives in the same order. prefetch=False runs each one where it is needed and waits.

Not yet: no_sync, parameters outside the children, checkpointing inside a unit.
"""
import torch
import torch.distributed as dist
from torch import nn


class _Unit:
    def __init__(self, index, module, size, rank):
        self.index, self.module = index, module
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.shapes = [p.shape for p in self.params]
        self.numels = [p.numel() for p in self.params]
        total = sum(self.numels)
        self.shard_size = -(-total // size) if total else 0
        flat = torch.zeros(self.shard_size * size, dtype=self.params[0].dtype if self.params else torch.float32)
        offset = 0
        for p, n in zip(self.params, self.numels):
            flat[offset:offset + n].copy_(p.data.reshape(-1))
            offset += n
        self.shard = nn.Parameter(flat[rank * self.shard_size:(rank + 1) * self.shard_size].clone())
        self.shard.grad = torch.zeros_like(self.shard)
        self.pending = 0  # gradients still to come in this backward
        self._full = self._work = None  # the gathered buffer; the gather still running into it
        self.free()  # sets gathered

    def free(self):
        if self._work is not None:  # a prefetch nobody used: the buffer is still being written
            self._work.wait()
        self._full = self._work = None
        for p in self.params:
            p.data = torch.empty(0, dtype=p.dtype, device=p.device)
        self.gathered = False

    def start_gather(self, group, size):
        """Starts gathering the whole parameters (a prefetch); gather() waits for it."""
        if self.gathered or self._full is not None or not self.params:
            return
        self._full = torch.empty(self.shard_size * size, dtype=self.shard.dtype, device=self.shard.device)
        if size > 1:
            self._work = dist.all_gather_into_tensor(self._full, self.shard.data, group=group, async_op=True)
        else:
            self._full.copy_(self.shard.data)

    def gather(self, group, size):
        if self.gathered or not self.params:
            return
        self.start_gather(group, size)
        if self._work is not None:
            self._work.wait()
            self._work = None
        offset = 0
        for p, shape, n in zip(self.params, self.shapes, self.numels):
            p.data = self._full[offset:offset + n].view(shape)
            offset += n
        self.gathered = True


class ShardedDataParallel(nn.Module):
    def __init__(self, module, group=None, broadcast=True, prefetch=True):
        super().__init__()
        self.module, self.group, self.prefetch = module, group, prefetch
        self.size, self.rank = dist.get_world_size(group), dist.get_rank(group)
        inside = {id(p) for child in module.children() for p in child.parameters()}
        outside = [n for n, p in module.named_parameters() if id(p) not in inside]
        if outside:
            raise ValueError(f"ShardedDataParallel: parameters outside the module's children are not "
                             f"supported ({', '.join(outside)})")
        if broadcast and self.size > 1:
            src = dist.get_global_rank(group, 0) if group is not None else 0
            for p in module.parameters():
                dist.broadcast(p.data, src=src, group=group)
        self.units = [_Unit(i, child, self.size, self.rank) for i, child in enumerate(module.children())
                      if any(p.requires_grad for p in child.parameters())]
        self.shards = nn.ParameterList([u.shard for u in self.units])
        self._unit_of = {p: u for u in self.units for p in u.params}
        self._callback_queued = False
        self._in_backward = False
        self._reducing = []  # (unit, work, shard-sized result, flat gradients) of reduce-scatters running
        self._order, self._ran = list(self.units), []  # forward order: the last complete one, this one's
        for u in self.units:
            u.module.register_forward_pre_hook(lambda m, args, u=u: self._before_forward(u))
            u.module.register_forward_hook(lambda m, args, out, u=u: self._after_forward(u, out))
            for p in u.params:
                p.register_post_accumulate_grad_hook(self._grad_ready)

    def sharded_parameters(self):
        """What the optimizer steps: this rank's shard of each unit."""
        return list(self.shards)

    def forward(self, *args, **kwargs):
        self._ran = []
        out = self.module(*args, **kwargs)
        if self._ran:
            self._order = self._ran
        return out

    def zero_grad(self, set_to_none=False):
        for u in self.units:
            u.shard.grad.zero_()

    def _neighbour(self, unit, step):
        """The unit `step` places after `unit` in the last forward's order, or None."""
        order = self._order
        k = next((i for i, v in enumerate(order) if v is unit), None)
        if k is None or not 0 <= k + step < len(order):
            return None
        return order[k + step]

    def _before_forward(self, unit):
        unit.gather(self.group, self.size)
        if not self._in_backward:
            self._ran.append(unit)
            following = self._neighbour(unit, +1) if self.prefetch else None
            if following is not None:
                following.start_gather(self.group, self.size)

    def _after_forward(self, unit, out):
        if torch.is_grad_enabled():
            tensors = [t for t in (out if isinstance(out, (tuple, list)) else [out])
                       if isinstance(t, torch.Tensor) and t.requires_grad]
            for t in tensors[:1]:
                t.register_hook(lambda grad, u=unit: self._before_backward(u, grad))
        unit.free()
        return None

    def _before_backward(self, unit, grad):
        if not self._callback_queued:
            self._callback_queued = True
            self._in_backward = True
            torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)
        unit.gather(self.group, self.size)
        unit.pending = len(unit.params)
        preceding = self._neighbour(unit, -1) if self.prefetch else None
        if preceding is not None:
            preceding.start_gather(self.group, self.size)
        return grad

    def _grad_ready(self, p):
        unit = self._unit_of[p]
        unit.pending -= 1
        if unit.pending == 0:
            self._reduce(unit)

    def _reduce(self, unit):
        flat = torch.zeros(unit.shard_size * self.size, dtype=unit.shard.dtype, device=unit.shard.device)
        offset = 0
        for p, n in zip(unit.params, unit.numels):
            if p.grad is not None:
                flat[offset:offset + n].copy_(p.grad.reshape(-1))
            p.grad = None
            offset += n
        unit.pending = 0
        unit.free()
        if self.size == 1:
            unit.shard.grad.add_(flat)
            return
        out = torch.empty_like(unit.shard)
        flat.div_(self.size)
        work = dist.reduce_scatter_tensor(out, flat, group=self.group, async_op=True)
        self._reducing.append((unit, work, out, flat))
        if not self.prefetch:
            self._finish_reductions()

    def _finish_reductions(self):
        for unit, work, out, _ in self._reducing:
            work.wait()
            unit.shard.grad.add_(out)
        self._reducing = []

    def _end_of_backward(self):
        self._callback_queued = False
        self._in_backward = False
        for u in self.units:  # units whose gradients did not all arrive (unused parameters)
            if u.gathered:
                self._reduce(u)
        self._finish_reductions()
        for u in self.units:  # prefetches a backward did not use (a unit without a gradient path)
            u.free()

    def parameter_shape(self, p):
        """p's shape when gathered (between uses its data is empty)."""
        unit = self._unit_of[p]
        return unit.shapes[_position(unit, p)]

    def shard_region(self, p):
        """(lo, hi, gradient): the elements [lo, hi) of p, flattened, that this rank's shard holds, and
        their reduced gradient (a view into the shard's gradient; empty when the shard holds none of p)."""
        unit = self._unit_of[p]
        k = _position(unit, p)
        offset, start = sum(unit.numels[:k]), self.rank * unit.shard_size
        lo, hi = max(offset, start), min(offset + unit.numels[k], start + unit.shard_size)
        if hi <= lo:
            return 0, 0, unit.shard.grad[:0]
        return lo - offset, hi - offset, unit.shard.grad[lo - start:hi - start]

    @torch.no_grad()
    def full_parameters(self):
        """Every parameter whole, as a list of tensors in module.parameters() order (all ranks call it)."""
        out = {}
        for u in self.units:
            u.gather(self.group, self.size)
            for p in u.params:
                out[id(p)] = p.data.clone()
            u.free()
        return [out[id(p)] for p in self.module.parameters() if id(p) in out]


def _position(unit, p):
    # By identity: list.index would compare tensors elementwise.
    return next(i for i, q in enumerate(unit.params) if q is p)
