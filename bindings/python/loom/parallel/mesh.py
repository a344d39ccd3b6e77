"""The device mesh: Megatron's rank layout and one process group per axis.

`init_mesh(tp=2, pp=2, dp=2)` after `torch.distributed.init_process_group("loom")`. The order string
lists axes from the fastest-varying to the slowest: with "tp-dp-pp" (Megatron's),
global rank = tp_rank + tp * (dp_rank + dp * pp_rank), so tensor-parallel groups are runs of adjacent
ranks and land on one host, where their frequent small collectives are cheapest; "dp-tp-pp" puts
data-parallel groups there instead (a layout loom-plan may choose).
"""
from dataclasses import dataclass

import torch.distributed as dist

AXES = ("tp", "dp", "pp")
ORDERS = ("tp-dp-pp", "tp-pp-dp", "dp-tp-pp")


def rank_groups(sizes, order="tp-dp-pp"):
    """{axis: [[global ranks of one group], ...]} for sizes {"tp": t, "dp": d, "pp": p}: a group along
    an axis is every rank whose other coordinates are equal (Megatron's RankGenerator)."""
    axes = _parse_order(order)
    strides, stride = {}, 1
    for axis in axes:
        strides[axis] = stride
        stride *= sizes[axis]
    groups = {}
    for axis in axes:
        others = [a for a in axes if a != axis]
        found = []
        for base in _coordinates(sizes, others):
            start = sum(base[a] * strides[a] for a in others)
            found.append([start + i * strides[axis] for i in range(sizes[axis])])
        groups[axis] = sorted(found)
    return groups


def _parse_order(order):
    if order not in ORDERS:
        raise ValueError(f"mesh order {order!r} is not supported; choose one of {', '.join(ORDERS)}")
    return order.split("-")


def _coordinates(sizes, axes):
    coords = [{}]
    for axis in axes:
        coords = [dict(c, **{axis: i}) for c in coords for i in range(sizes[axis])]
    return coords


def check_shape(world, tp, pp, dp):
    """(tp, pp, dp) with dp filled in when None; a ValueError naming the problem when the shape does
    not fit the world (checked on every rank before any group is made)."""
    for name, value in (("tp", tp), ("pp", pp)) + ((("dp", dp),) if dp is not None else ()):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"init_mesh: {name} must be a positive integer, got {value!r}")
    if dp is None:
        if world % (tp * pp):
            raise ValueError(f"init_mesh: tp * pp = {tp} * {pp} = {tp * pp} does not divide the world size {world}")
        dp = world // (tp * pp)
    if tp * pp * dp != world:
        raise ValueError(f"init_mesh: tp * pp * dp = {tp} * {pp} * {dp} = {tp * pp * dp} is not the world size {world}")
    return tp, pp, dp


@dataclass
class Mesh:
    tp: int
    pp: int
    dp: int
    order: str
    rank: int  # global
    tp_rank: int
    pp_rank: int
    dp_rank: int
    tp_group: object  # torch ProcessGroups this rank belongs to
    dp_group: object
    pp_group: object  # pipeline activations
    pp_grad_group: object  # pipeline gradients: their own communicator, so neither queues behind the other
    embedding_group: object  # first and last stage (tied input/output embedding); None on other stages
    tp_ranks: list
    dp_ranks: list
    pp_ranks: list
    embedding_ranks: list

    @property
    def is_first_stage(self):
        return self.pp_rank == 0

    @property
    def is_last_stage(self):
        return self.pp_rank == self.pp - 1

    def describe(self):
        return (f"tp={self.tp} pp={self.pp} dp={self.dp} ({self.order}): rank {self.rank} is tp {self.tp_rank}, "
                f"dp {self.dp_rank}, pp {self.pp_rank}; tp group {self.tp_ranks}, dp group {self.dp_ranks}, "
                f"pp group {self.pp_ranks}")

    def destroy(self):
        for group in {id(g): g for g in (self.tp_group, self.dp_group, self.pp_group, self.pp_grad_group,
                                         self.embedding_group)}.values():
            if group is not None:
                dist.destroy_process_group(group)


def init_mesh(tp=1, pp=1, dp=None, order="tp-dp-pp", backend=None):
    """Makes the mesh's process groups (every rank must call it with the same arguments). backend:
    that of the groups, by default the default group's."""
    if not dist.is_initialized():
        raise RuntimeError("init_mesh: call torch.distributed.init_process_group first")
    world, rank = dist.get_world_size(), dist.get_rank()
    tp, pp, dp = check_shape(world, tp, pp, dp)
    groups = rank_groups({"tp": tp, "dp": dp, "pp": pp}, order)
    first_last = [sorted({ranks[0], ranks[-1]}) for ranks in groups["pp"]]
    mine = {}

    def make(name, all_groups):
        # torch wants every rank to take part in making every group, in the same order.
        for ranks in all_groups:
            group = dist.new_group(ranks, backend=backend)
            if rank in ranks:
                mine[name] = (group, ranks)

    make("tp", groups["tp"])
    make("dp", groups["dp"])
    make("pp", groups["pp"])
    make("pp_grad", groups["pp"])
    make("embedding", first_last)
    pp_ranks = mine["pp"][1]
    embedding_group, embedding_ranks = mine.get("embedding", (None, []))
    return Mesh(tp=tp, pp=pp, dp=dp, order=order, rank=rank,
                tp_rank=mine["tp"][1].index(rank), pp_rank=pp_ranks.index(rank), dp_rank=mine["dp"][1].index(rank),
                tp_group=mine["tp"][0], dp_group=mine["dp"][0], pp_group=mine["pp"][0],
                pp_grad_group=mine["pp_grad"][0], embedding_group=embedding_group,
                tp_ranks=mine["tp"][1], dp_ranks=mine["dp"][1], pp_ranks=pp_ranks,
                embedding_ranks=embedding_ranks)
