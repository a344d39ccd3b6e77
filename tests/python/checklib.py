"""Shared pieces of the per-operation checks that run inside the spawned / torchrun jobs.

A check is a function f(n, r) run on every rank (n = world size, r = rank) that issues
collectives on the default group and compares with answers computed by hand (closed formulas in
n, r and the element index i). Failures per dtype are collected, so one bad dtype does not
desynchronise the ranks' sequence of collectives.
"""
import torch

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int8, torch.uint8, torch.int32, torch.int64]
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
CHECKS = {}  # name -> function, in definition order
CUDA_CHECKS = {}  # the same for CUDA tensors (checks_cuda.py); run only where a GPU is present


def check(name, registry=CHECKS):
    def register(fn):
        registry[name] = fn
        return fn

    return register


def t(values, dtype):
    return torch.tensor(values, dtype=dtype)


def expect_equal(got, want, what):
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        raise AssertionError(f"{what}: got {got.tolist()} ({got.dtype}, {tuple(got.shape)}), "
                             f"want {want.tolist()} ({want.dtype}, {tuple(want.shape)})")


def expect_runtime_error(fn, text):
    """Calls fn, which must raise a RuntimeError whose message contains text."""
    try:
        fn()
    except RuntimeError as e:
        assert text in str(e), f"message {str(e)!r} lacks {text!r}"
        return
    raise AssertionError("no RuntimeError")


class Failures:
    """Collects failures per case, raises them together at the end of a check."""

    def __init__(self):
        self.items = []

    def case(self, what, fn, *args):
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - reported below with the case's name
            self.items.append(f"{what}: {type(e).__name__}: {e}")

    def raise_if_any(self):
        if self.items:
            raise AssertionError("\n".join(self.items))


def per_dtype(fn, dtypes=DTYPES):
    """Runs fn(dtype) for each dtype, then raises one error naming every dtype that failed."""
    f = Failures()
    for dt in dtypes:
        f.case(str(dt), fn, dt)
    f.raise_if_any()
