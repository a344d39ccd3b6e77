"""Registers Loom as the torch.distributed backend "loom" for CPU and CUDA tensors.

    import loom.torch
    torch.distributed.init_process_group("loom", ...)
"""
from datetime import timedelta

import torch.distributed as dist

from loom import _C

LoomBackend = _C.LoomBackend
BACKEND_NAME = "loom"


def _create_backend(opts, backend_options=None):
    # opts is torch's _DistributedBackendOptions; its store is already prefixed by group and device.
    timeout = opts.timeout if isinstance(opts.timeout, timedelta) else timedelta(seconds=float(opts.timeout))
    return LoomBackend(opts.store, opts.group_rank, opts.group_size, timeout, str(opts.group_id))


def _register():
    if BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=["cpu", "cuda"])


_register()
