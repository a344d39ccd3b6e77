"""Loom: collective communication for CPU processes (and GPUs).

``import loom.torch`` registers the "loom" torch.distributed backend; ``loom.capi`` and
``loom.comm`` are a thin binding of the C API for numpy arrays.
"""

__version__ = "0.1.0"
