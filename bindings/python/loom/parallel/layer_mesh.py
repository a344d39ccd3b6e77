"""The process groups of a model whose layers have their own layouts (a loom-plan plan): the pipeline
stages' own sets of ranks, each layer's TP and DP groups inside its stage, the pipeline's groups across
stages and the group that sums the tied embedding's two copies.

torch wants every rank to take part in making every group, in the same order, so `init_layer_mesh`
makes all of them at once, at startup, walking the plan in one fixed order: per stage, the TP then DP
groups of each layout it meets (the previous stage's last layout first, since a stage's first
re-layout takes activations laid out that way); then the pipeline groups (one for activations, one for
gradients, as the Megatron-shaped mesh has); then the tie group. A set of ranks gets one group however
many layers use it (the pipeline's two excepted): its collectives are issued in program order on every
member, so sharing a communicator cannot reorder them.
"""
from dataclasses import dataclass, field

import torch.distributed as dist


def check_stages(stage_ranks, layouts, stage_starts, world):
    """ValueErrors naming what does not fit: stages of equal size that partition the world, each with at
    least one layer, and every layer's layout covering its stage."""
    if not stage_ranks:
        raise ValueError("layer mesh: no stages")
    size = len(stage_ranks[0])
    flat = [r for ranks in stage_ranks for r in ranks]
    if any(len(ranks) != size for ranks in stage_ranks):
        raise ValueError(f"layer mesh: stages of unequal sizes {[len(r) for r in stage_ranks]}")
    if sorted(flat) != list(range(world)):
        raise ValueError(f"layer mesh: the stages' ranks {stage_ranks} are not the world's {world} ranks, each once")
    if any(list(ranks) != sorted(ranks) for ranks in stage_ranks):
        # torch orders a group's members by rank number; positions must follow the same order, or a
        # layer's TP rank and a gather's order would not be its position's.
        raise ValueError(f"layer mesh: the ranks of each stage must ascend, got {stage_ranks}")
    if len(stage_starts) != len(stage_ranks) - 1:
        raise ValueError(f"layer mesh: {len(stage_starts)} stage starts for {len(stage_ranks)} stages")
    edges = [0] + list(stage_starts) + [len(layouts)]
    if any(not a < b for a, b in zip(edges, edges[1:])):
        raise ValueError(f"layer mesh: stages starting at layers {stage_starts} of {len(layouts)} leave a stage empty")
    for i, layout in enumerate(layouts):
        if layout.size != size:
            raise ValueError(f"layer mesh: layer {i} is laid out over {layout.size} ranks (tp {layout.tp} x dp "
                             f"{layout.dp}), its stage has {size}")


@dataclass
class LayerMesh:
    rank: int
    stage_ranks: list  # global ranks of every stage, in stage order
    layouts: list  # LayerLayout of every model layer
    stage_starts: list  # first layer of stages 1..pp-1
    groups: dict = field(repr=False)  # sorted global ranks -> ProcessGroup, for the groups holding this rank
    pp_group: object = None  # pipeline activations (None without a pipeline)
    pp_grad_group: object = None  # pipeline gradients
    tie_group: object = None  # ranks of the first and last stage (None on other stages)

    @property
    def pp(self):
        return len(self.stage_ranks)

    @property
    def pp_rank(self):
        return next(s for s, ranks in enumerate(self.stage_ranks) if self.rank in ranks)

    @property
    def position(self):
        return self.stage_ranks[self.pp_rank].index(self.rank)

    @property
    def pp_ranks(self):
        """This position's rank in every stage (whom the pipeline passes activations to)."""
        return [ranks[self.position] for ranks in self.stage_ranks]

    @property
    def is_first_stage(self):
        return self.pp_rank == 0

    @property
    def is_last_stage(self):
        return self.pp_rank == self.pp - 1

    def layers_of(self, stage):
        edges = [0] + list(self.stage_starts) + [len(self.layouts)]
        return range(edges[stage], edges[stage + 1])

    @property
    def my_layers(self):
        return self.layers_of(self.pp_rank)

    def input_layout(self):
        """How this stage's input arrives: the previous stage's last layer's layout (position k receives
        from position k); None on the first stage, which takes its inputs as its first layer's."""
        return self.layouts[self.layers_of(self.pp_rank - 1)[-1]] if self.pp_rank > 0 else None

    def group(self, positions):
        """The process group of these positions of this rank's stage (None for a single rank)."""
        if len(positions) == 1:
            return None
        ranks = tuple(sorted(self.stage_ranks[self.pp_rank][p] for p in positions))
        if ranks not in self.groups:
            raise KeyError(f"layer mesh: no group of ranks {list(ranks)} was made")
        return self.groups[ranks]

    def _axis_group(self, layer, axis):
        layout = self.layouts[layer]
        return self.group(next(g for g in layout.groups(axis) if self.position in g))

    def tp_group(self, layer):
        return self._axis_group(layer, "tp")

    def dp_group(self, layer):
        return self._axis_group(layer, "dp")

    def split_batch(self, batch, micro_batches, layer):
        """This rank's part of each of `micro_batches` equal micro-batches of `batch` (cut along dim 0),
        as `layer`'s layout holds it: the first layer's inputs, the last layer's targets."""
        size, rest = divmod(batch.shape[0], micro_batches)
        start, stop = self.layouts[layer].batch_slice(self.position)
        if rest or (start * size).denominator != 1:
            raise ValueError(f"layer mesh: a batch of {batch.shape[0]} does not split into {micro_batches} "
                             f"micro-batches for layer {layer}'s {self.layouts[layer].dp} replicas")
        return [mb[int(start * size):int(stop * size)] for mb in batch.split(size)]

    def describe(self):
        return f"stages {self.stage_ranks}, rank {self.rank} is position {self.position} of stage {self.pp_rank}"

    def destroy(self):
        for group in {id(g): g for g in [*self.groups.values(), self.pp_group, self.pp_grad_group,
                                         self.tie_group] if g is not None}.values():
            dist.destroy_process_group(group)


def init_layer_mesh(stage_ranks, layouts, stage_starts, tie=True, backend=None):
    """Makes every group the plan needs (every rank calls it with the same arguments). stage_ranks: the
    global ranks of each stage; layouts: a LayerLayout per model layer; stage_starts: the first layer of
    stages 1..; tie: make the group of the first and last stage (a tied input/output embedding)."""
    if not dist.is_initialized():
        raise RuntimeError("init_layer_mesh: call torch.distributed.init_process_group first")
    world, rank = dist.get_world_size(), dist.get_rank()
    stage_ranks = [list(r) for r in stage_ranks]
    check_stages(stage_ranks, layouts, stage_starts, world)
    edges = [0] + list(stage_starts) + [len(layouts)]
    made, mine = {}, {}

    def make(key, ranks):
        ranks = tuple(sorted(ranks))
        if len(ranks) < 2 or key + ranks in made:
            return made.get(key + ranks)
        group = dist.new_group(list(ranks), backend=backend)
        made[key + ranks] = group
        if rank in ranks:
            mine[key + ranks] = group
        return group

    for s, ranks in enumerate(stage_ranks):
        met = ([layouts[edges[s] - 1]] if s > 0 else []) + layouts[edges[s]:edges[s + 1]]
        for layout in met:
            for axis in ("tp", "dp"):
                for positions in layout.groups(axis):
                    make((), [ranks[p] for p in positions])
    pp_group = pp_grad_group = tie_group = None
    for kind in ("pp", "pp_grad"):
        for k in range(len(stage_ranks[0])):
            group = make((kind,), [ranks[k] for ranks in stage_ranks])
            if rank in [ranks[k] for ranks in stage_ranks]:
                pp_group, pp_grad_group = (group, pp_grad_group) if kind == "pp" else (pp_group, group)
    if tie:
        ends = set(stage_ranks[0]) | set(stage_ranks[-1])
        group = make((), ends)
        if rank in ends:
            tie_group = group
    return LayerMesh(rank=rank, stage_ranks=stage_ranks, layouts=list(layouts), stage_starts=list(stage_starts),
                     groups={key: g for key, g in mine.items() if not isinstance(key[0], str)},
                     pp_group=pp_group, pp_grad_group=pp_grad_group, tie_group=tie_group)
