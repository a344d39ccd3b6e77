"""A small GPT (pre-LayerNorm, GPT-2 shaped) built from the tensor-parallel layers, cut into pipeline
chunks: the model the example trains and the parity tests compare with a single process.

Layers are [embedding, block 0 .. block L-1, head]; blocks are split over the virtual stages, the
embedding joins the first and the head the last. Every parameter is made from a generator seeded by
(config.seed, its name), so any layout holds slices of the same model. Input and output embeddings
are tied: one Parameter on a single stage; with a pipeline, a copy on the first and the last stage
whose gradients are summed over the mesh's embedding group (grads.finalize_grads).
"""
import zlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from .cross_entropy import vocab_parallel_cross_entropy
from .mappings import group_rank, group_size
from .pipeline import split_layers
from .tensor_parallel import (ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding,
                              column_parallel_linear, sharded_parameter)


@dataclass
class GPTConfig:
    vocab: int = 64
    seq_len: int = 16
    hidden: int = 32
    heads: int = 4
    layers: int = 2
    seed: int = 0
    sequence_parallel: bool = False
    checkpoint: bool = False  # recompute each block's activations in backward instead of storing them
    checkpoint_blocks: tuple = None  # only these blocks (indices) recompute; None: all or none, by checkpoint
    ffn_mults: tuple = None  # per block, its MLP's width in hiddens (a model of unlike layers); None: 4 each

    def ffn_width(self, block):
        return (self.ffn_mults[block] if self.ffn_mults is not None else 4) * self.hidden

    def recomputes(self, block):
        return block in self.checkpoint_blocks if self.checkpoint_blocks is not None else self.checkpoint

    def check(self, tp, pp=1, chunks=1, boundaries=None):
        """ValueErrors naming what does not fit the layout; raised before anything is communicated."""
        for name in ("vocab", "seq_len", "hidden", "heads", "layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"GPTConfig: {name} must be positive, got {getattr(self, name)}")
        if self.hidden % self.heads:
            raise ValueError(f"GPTConfig: hidden size {self.hidden} is not divisible by heads {self.heads}")
        if self.ffn_mults is not None and (len(self.ffn_mults) != self.layers
                                           or any(not isinstance(m, int) or m < 1 for m in self.ffn_mults)):
            raise ValueError(f"GPTConfig: ffn_mults needs a positive integer for each of the {self.layers} blocks, "
                             f"got {self.ffn_mults}")
        for name, value in (("hidden size", self.hidden), ("heads", self.heads), ("vocabulary", self.vocab)):
            if value % tp:  # MLP widths are multiples of the hidden size
                raise ValueError(f"GPTConfig: {name} {value} is not divisible by the tensor-parallel size {tp}")
        if self.sequence_parallel and self.seq_len % tp:
            raise ValueError(f"GPTConfig: sequence length {self.seq_len} is not divisible by the "
                             f"tensor-parallel size {tp} (sequence parallelism)")
        if pp == 1 and chunks > 1:
            raise ValueError("GPTConfig: interleaved chunks need a pipeline (pp >= 2)")
        try:
            split_layers(self.layers, pp * chunks, boundaries)
        except ValueError as e:
            if chunks == 1:
                raise
            raise ValueError(f"{e} ({pp} pipeline stages x {chunks} interleaved chunks each)") from None


def _init(config, name, std=0.02):
    gen = torch.Generator().manual_seed(zlib.crc32(f"{config.seed}/{name}".encode()))
    return lambda t: t.normal_(0.0, std, generator=gen)


def _layer_norm(config, hidden, name):
    ln = nn.LayerNorm(hidden)
    for p in ln.parameters():
        p.tp_split_dim = None
        p.sequence_parallel = config.sequence_parallel
    _name(ln, name)
    return ln


def _name(module, prefix):
    for n, p in module.named_parameters():
        p.global_name = f"{prefix}.{n}"


class Embedding(nn.Module):
    def __init__(self, config, group):
        super().__init__()
        self.config, self.group = config, group
        self.word = VocabParallelEmbedding(config.vocab, config.hidden, group, config.sequence_parallel,
                                           init_method=_init(config, "word"))
        self.word.weight.tied_embedding = True
        self.word.weight.own_bucket = True
        self.position = sharded_parameter((config.seq_len, config.hidden), None, group, _init(config, "position"))
        # Under sequence parallelism each rank adds only its slice: the slices' gradients are summed.
        self.position.sequence_parallel = config.sequence_parallel
        _name(self, "embedding")

    def forward(self, tokens):  # [batch, seq] -> [seq (/ tp with sequence parallelism), batch, hidden]
        if tokens.dim() != 2 or tokens.shape[1] != self.config.seq_len:
            raise ValueError(f"GPT: tokens must be [batch, {self.config.seq_len}], got {tuple(tokens.shape)}")
        x = self.word(tokens.t())  # with sequence parallelism: this rank's slice of the sequence
        position = self.position
        if self.config.sequence_parallel:
            position = position.chunk(group_size(self.group), dim=0)[group_rank(self.group)]
        return x + position.unsqueeze(1)


class Block(nn.Module):
    def __init__(self, config, group, index):
        super().__init__()
        h, sp = config.hidden, config.sequence_parallel
        self.config, self.heads_local = config, config.heads // group_size(group)
        name = f"block{index}"
        self.index = index
        self.ln1 = _layer_norm(config, h, f"{name}.ln1")
        # qkv rows are ordered per head (q, k, v of head 0, then head 1, ...), so a split by rows gives
        # each rank whole heads.
        self.qkv = ColumnParallelLinear(h, 3 * h, group, sequence_parallel=sp, init_method=_init(config, f"{name}.qkv"))
        self.proj = RowParallelLinear(h, h, group, sequence_parallel=sp, init_method=_init(config, f"{name}.proj"))
        self.ln2 = _layer_norm(config, h, f"{name}.ln2")
        w = config.ffn_width(index)
        self.fc1 = ColumnParallelLinear(h, w, group, sequence_parallel=sp, init_method=_init(config, f"{name}.fc1"))
        self.fc2 = RowParallelLinear(w, h, group, sequence_parallel=sp, init_method=_init(config, f"{name}.fc2"))
        _name(self, name)

    def forward(self, x):
        qkv = self.qkv(self.ln1(x))  # [seq, batch, heads_local * 3 * head_dim]
        s, b = qkv.shape[:2]
        q, k, v = qkv.view(s, b, self.heads_local, 3, -1).permute(3, 1, 2, 0, 4).unbind(0)  # [b, h, s, d]
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.permute(2, 0, 1, 3).reshape(s, b, -1))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Head(nn.Module):
    """Final LayerNorm and vocab-parallel logits [seq, batch, vocab / tp] with the tied embedding."""

    def __init__(self, config, group, tied_weight=None):
        super().__init__()
        self.config, self.group = config, group
        self.ln = _layer_norm(config, config.hidden, "head.ln")
        if tied_weight is None:  # the last stage's copy of the first stage's embedding
            tied_weight = VocabParallelEmbedding(config.vocab, config.hidden, group, init_method=_init(config, "word")).weight
            tied_weight.tied_embedding = True
            tied_weight.own_bucket = True
            tied_weight.global_name = "embedding.word.weight"
            self.weight = tied_weight
        else:
            self._tied = [tied_weight]  # shared with the embedding of this chunk; not registered twice

    def output_weight(self):
        return self.weight if hasattr(self, "weight") else self._tied[0]

    def forward(self, x):
        return column_parallel_linear(self.ln(x), self.output_weight(), None, self.group, self.config.sequence_parallel)


class Chunk(nn.Module):
    """Consecutive layers of the model: one virtual pipeline stage."""

    def __init__(self, layers, config):
        super().__init__()
        self.layers, self.config = nn.ModuleList(layers), config

    def forward(self, x):
        for layer in self.layers:
            if isinstance(layer, Block) and self.config.recomputes(layer.index) and torch.is_grad_enabled():
                x = checkpoint(layer, x, use_reentrant=False)
            else:
                x = layer(x)
        return x


def build_chunks(config, tp_group=None, pp=1, pp_rank=0, chunks=1, boundaries=None):
    """This rank's model chunks: chunk c is virtual stage c * pp + pp_rank of pp * chunks.
    boundaries: where the blocks are cut (split_layers), default by count."""
    config.check(group_size(tp_group), pp, chunks, boundaries)
    ranges = split_layers(config.layers, pp * chunks, boundaries)
    last = pp * chunks - 1
    result = []
    for c in range(chunks):
        k = c * pp + pp_rank
        layers = []
        if k == 0:
            embedding = Embedding(config, tp_group)
            layers.append(embedding)
        layers += [Block(config, tp_group, i) for i in range(*ranges[k])]
        if k == last:
            layers.append(Head(config, tp_group, embedding.word.weight if k == 0 else None))
        result.append(Chunk(layers, config))
    return result


def build_layer(config, index, tp_group=None):
    """Model layer `index` of [embedding, block 0 .. block L-1, head] on its own TP group (a model whose
    layers have their own layouts, stage_model.StageModel). The head keeps its own copy of the tied
    embedding, whatever stage it is on: the two copies may be split over different TP groups, and
    stage_model sums their gradients."""
    if config.sequence_parallel:
        raise ValueError("GPT: sequence parallelism with per-layer layouts is not supported (a re-layout "
                         "moves whole sequences)")
    config.check(group_size(tp_group))
    if not 0 <= index <= config.layers + 1:
        raise ValueError(f"GPT: layer {index} of {config.layers + 2} (embedding, {config.layers} blocks, head)")
    if index == 0:
        return Embedding(config, tp_group)
    if index == config.layers + 1:
        return Head(config, tp_group)
    return Block(config, tp_group, index - 1)


def build_stage(config, mesh, device=None):
    """This rank's pipeline stage of a model whose layers have their own layouts (mesh: a
    layer_mesh.LayerMesh over the model's layers): a stage_model.StageModel."""
    from .stage_model import StageModel

    layers = [build_layer(config, i, mesh.tp_group(i)) for i in mesh.my_layers]
    return StageModel([layer.to(device) if device is not None else layer for layer in layers], mesh)


def gpt_loss(tp_group):
    """loss_fn(logits [seq, batch, vocab / tp], targets [batch, seq]) -> mean cross-entropy."""
    def loss_fn(logits, targets):
        return vocab_parallel_cross_entropy(logits, targets.t(), tp_group).mean()
    return loss_fn


def activation_shape(config, micro_batch, tp):
    """The tensor passed between pipeline stages for one micro-batch."""
    seq = config.seq_len // tp if config.sequence_parallel else config.seq_len
    return (seq, micro_batch, config.hidden)
