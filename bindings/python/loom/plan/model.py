"""The planner's model description: a list of layers, each with what the cost model needs, as JSON.

    {"name": "gpt", "bytes_per_param": {"params": 4, "grads": 4, "optimizer": 8},
     "layers": [{"name": "block0", "params": 12672, "flops": 811008, "activation_bytes": 30720,
                 "output_bytes": 2048, "tp_comm_bytes": 4096}, ...]}

Per layer, all per sample (one sequence) of the forward pass:
- params: parameter count (split by TP, sharded by SDP);
- flops: forward floating-point operations (backward counts twice that, a recomputation once more);
- activation_bytes: what the forward keeps for backward, the layer's input included; with
  checkpointing only the input is kept (the previous layer's output_bytes) and the rest recomputed;
- output_bytes: the layer's output (what a pipeline stage boundary sends, in both directions);
- tp_comm_bytes: bytes all-reduced over the TP group per forward (Megatron's block: two all-reduces
  of its output, the default); backward all-reduces as much again; 0 with tensor_parallel false; a
  layer whose forward and backward all-reduce different amounts gives their mean;
- tp_calls: how many all-reduces forward and backward make together, sharing those bytes equally
  (default 2; Megatron's block makes 4): what a fixed cost per collective is charged for;
- tensor_parallel: whether the layer can be split by TP (default true).
- forward_s, forward_fixed_s (optional, measured): a forward's time is forward_fixed_s + forward_s *
  samples. The fixed part is what each call costs whatever its size (kernel launches, Python and
  torch dispatch); TP splits only the per-sample part. Without forward_fixed_s the time is linear.

Model-wide: bytes_per_param (parameter, gradient and optimizer-state bytes per parameter: fp32
Adam is 4 + 4 + 8, Galvatron's 16). The measured times of a profiled step (describe_module) also give
the compute speed the FLOPs imply (machine.calibrated_flops).
"""
import json
import statistics
import time
from dataclasses import asdict, dataclass, field

DEFAULT_BYTES_PER_PARAM = {"params": 4, "grads": 4, "optimizer": 8}


@dataclass
class Layer:
    name: str
    params: int
    flops: float
    activation_bytes: float
    output_bytes: float
    tp_comm_bytes: float = None  # None: 2 * output_bytes when tensor_parallel
    tensor_parallel: bool = True
    forward_s: float = None  # measured forward seconds per sample (describe_module), if any
    forward_fixed_s: float = None  # measured forward seconds per call whatever the batch, if any
    tp_calls: int = 2  # all-reduces of forward and backward together under TP

    def __post_init__(self):
        for key in ("params", "flops", "activation_bytes", "output_bytes"):
            value = getattr(self, key)
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"layer {self.name!r}: {key} must be a non-negative number, got {value!r}")
        if self.tp_comm_bytes is None:
            self.tp_comm_bytes = 2 * self.output_bytes if self.tensor_parallel else 0
        if not self.tensor_parallel:
            self.tp_comm_bytes = 0
        if not isinstance(self.tp_calls, int) or self.tp_calls < 1:
            raise ValueError(f"layer {self.name!r}: tp_calls must be a positive integer, got {self.tp_calls!r}")


@dataclass
class ModelSpec:
    layers: list
    name: str = "model"
    bytes_per_param: dict = field(default_factory=lambda: dict(DEFAULT_BYTES_PER_PARAM))

    def __post_init__(self):
        if not self.layers:
            raise ValueError(f"model {self.name!r} has no layers")
        missing = set(DEFAULT_BYTES_PER_PARAM) - set(self.bytes_per_param)
        if missing:
            raise ValueError(f"model {self.name!r}: bytes_per_param lacks {', '.join(sorted(missing))}")

    @property
    def state_bytes_per_param(self):
        return sum(self.bytes_per_param.values())

    def to_json(self):
        layers = []
        for layer in self.layers:
            d = asdict(layer)
            for key in ("forward_s", "forward_fixed_s"):
                if d[key] is None:
                    del d[key]
            layers.append(d)
        return {"name": self.name, "bytes_per_param": self.bytes_per_param, "layers": layers}

    @classmethod
    def from_json(cls, data):
        if not isinstance(data, dict) or not isinstance(data.get("layers"), list):
            raise ValueError("a model description is a JSON object with a list of layers")
        known = set(Layer.__dataclass_fields__)
        layers = []
        for i, d in enumerate(data["layers"]):
            unknown = set(d) - known
            if unknown:
                raise ValueError(f"layer {i} ({d.get('name', '?')}): unknown field(s) {', '.join(sorted(unknown))}")
            try:
                layers.append(Layer(**{"name": f"layer{i}", **d}))
            except TypeError as e:
                raise ValueError(f"layer {i}: {e}") from None
        return cls(layers=layers, name=data.get("name", "model"),
                   bytes_per_param=dict(data.get("bytes_per_param", DEFAULT_BYTES_PER_PARAM)))


def load(path):
    with open(path) as f:
        return ModelSpec.from_json(json.load(f))


def save(spec, path):
    with open(path, "w") as f:
        json.dump(spec.to_json(), f, indent=1)
        f.write("\n")


def describe_module(layers, sample, name="model", tp_comm=None, bytes_per_param=None, warmup=1,
                    small_sample=None, repeats=5):
    """A ModelSpec measured from a torch model run as a sequence of layers on `sample` (a batch whose
    first dimension is the batch, or the tokens [batch, seq] of a language model): one forward and
    backward per layer, recording parameters, forward FLOPs (torch's FlopCounterMode), the bytes
    autograd saves for backward (parameters excluded), the output's bytes, and the forward time (the
    median of `repeats`). Everything is divided by the batch size. With small_sample (the same kind
    of input with fewer samples) the layers are timed on it too, and each forward time is split into
    a fixed part per call and a part per sample (the line through the two). tp_comm(layer module,
    output_bytes) -> bytes all-reduced per forward under TP, or (bytes, all-reduce calls of forward and
    backward together), or None for the default; return 0 for a layer that stays whole."""
    layers = list(layers)
    batch = sample.shape[0]
    result = _profile(layers, sample, tp_comm, warmup, repeats)
    if small_sample is not None and small_sample.shape[0] != batch:
        small, n = _profile(layers, small_sample, None, warmup, repeats), small_sample.shape[0]
        for layer, other in zip(result, small):
            big_call, small_call = layer.forward_s * batch, other.forward_s * n
            per_sample = max(0.0, (big_call - small_call) / (batch - n))
            layer.forward_s, layer.forward_fixed_s = per_sample, max(0.0, big_call - per_sample * batch)
    return ModelSpec(layers=result, name=name, bytes_per_param=dict(bytes_per_param or DEFAULT_BYTES_PER_PARAM))


def _profile(layers, sample, tp_comm, warmup, repeats):
    """describe_module's measurement on one input: a Layer per module, times per sample."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    batch = sample.shape[0]
    if warmup:  # first calls allocate and pick kernels; they are not what a step costs
        with torch.no_grad():
            for _ in range(warmup):
                x = sample
                for layer in layers:
                    x = layer(x)
    result, x = [], sample
    for i, layer in enumerate(layers):
        params = {p.data_ptr() for p in layer.parameters()}
        saved = {}

        def pack(t):
            if t.data_ptr() not in params:
                saved[(t.data_ptr(), t.dtype, tuple(t.shape))] = t.numel() * t.element_size()
            return t

        inp = x.detach().requires_grad_(x.is_floating_point())
        with FlopCounterMode(display=False) as counter:
            layer(inp)
        times = []
        for _ in range(max(1, repeats)):
            saved.clear()
            start = time.perf_counter()
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                out = layer(inp)
            times.append(time.perf_counter() - start)
            out.float().sum().backward()  # the saved tensors are used, so the graph is real
        out_bytes = out.numel() * out.element_size() / batch
        comm = tp_comm(layer, out_bytes) if tp_comm is not None else None
        comm, calls = comm if isinstance(comm, tuple) else (comm, 2)
        result.append(Layer(name=getattr(layer, "plan_name", f"{type(layer).__name__.lower()}{i}"),
                            params=sum(p.numel() for p in layer.parameters()),
                            flops=counter.get_total_flops() / batch,
                            activation_bytes=sum(saved.values()) / batch, output_bytes=out_bytes,
                            tp_comm_bytes=comm, tensor_parallel=comm != 0, tp_calls=calls,
                            forward_s=statistics.median(times) / batch))
        x = out.detach()
    return result
