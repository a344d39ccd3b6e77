"""PyTorch's distributed test suite (torch/testing/_internal/distributed/distributed_test.py, class
DistributedTest._DistTestBase: the tests behind torch's test_distributed_spawn.py) as one unittest
class that runs under a chosen backend, with the suite's backend gates evaluated as for Gloo.

The backend under test comes from the environment variable LOOM_SUITE_BACKEND ("loom" or "gloo");
run.py sets it. This module is imported by the driver and by every rank process the suite starts.

How "loom" is made to take Gloo's gates (everything the suite decides by the backend's name):

1. The suite's decorators (skip_but_pass_in_sandcastle_if(BACKEND != "gloo", ...),
   require_backend_is_available(...), DistTestCases.skip_collective[...], ...) read the module
   global BACKEND when the module is imported. It is imported with BACKEND=gloo in the environment,
   so every test is kept or skipped exactly as in a Gloo run.
2. Afterwards the module's BACKEND is set to the backend under test: it is what _run passes to
   init_process_group, and what test_get_backend / test_Backend_enum_class compare names with.
3. Inside test bodies the suite compares the name only with "nccl" (same answer for Gloo and Loom)
   and in one helper with "gloo": _test_accumulate_gradients_no_sync builds its CPU model only
   `if BACKEND == "mpi" or BACKEND == "gloo"`. That helper runs with BACKEND = "gloo" in its own
   view of the module's globals (patch_gloo_only_helper), and no other function is changed.
4. Profiling checks run only for backends in the suite's lists PROFILING_SUPPORTED_BACKENDS and
   SEND_RECV_PROFILING_SUPPORTED_BACKENDS (Gloo is in both): the backend under test is added, so
   Loom must record the same "<backend>:<op>" profiler events as Gloo.

Rank processes come from a forkserver that imported this module once (run.py preloads it), so a
test starts its two ranks without importing torch again; CUDA is hidden (CUDA_VISIBLE_DEVICES=""),
so a machine with a GPU runs the same CPU tests as one without.
"""
import inspect
import os
import tempfile
import types
import unittest

TARGET = os.environ.get("LOOM_SUITE_BACKEND", "loom")
WORLD_SIZE = 2

# The environment the suite reads at import time (distributed_test and common_distributed).
os.environ["CUDA_VISIBLE_DEVICES"] = ""
os.environ["WORLD_SIZE"] = str(WORLD_SIZE)
# file:// for the whole run, as torch CI's "with init file" configuration: test_barrier_timeout_global
# re-initialises the default group from INIT_METHOD (the suite refuses to do it over a TCP store).
if "LOOM_SUITE_INIT_DIR" not in os.environ:
    os.environ["LOOM_SUITE_INIT_DIR"] = tempfile.mkdtemp(prefix="loom-torch-suite-")
os.environ["INIT_METHOD"] = "file://" + os.path.join(os.environ["LOOM_SUITE_INIT_DIR"], "shared_init_file")
os.environ.setdefault("TEMP_DIR", os.environ["LOOM_SUITE_INIT_DIR"])  # replaced per test by setUp
os.environ["BACKEND"] = "gloo"  # step 1: the gates are evaluated for gloo

import torch.multiprocessing  # noqa: E402
from torch.testing._internal.distributed import distributed_test as dt  # noqa: E402

if TARGET == "loom":
    import loom.torch  # noqa: F401,E402 - registers the backend in every process

dt.BACKEND = TARGET  # step 2
os.environ["BACKEND"] = TARGET
for allowlist in (dt.PROFILING_SUPPORTED_BACKENDS, dt.SEND_RECV_PROFILING_SUPPORTED_BACKENDS):  # step 4
    if TARGET not in allowlist:
        allowlist.append(TARGET)


def patch_gloo_only_helper():
    """Step 3: the one helper that branches on BACKEND == "gloo" at run time sees "gloo"."""
    base = dt.DistributedTest._DistTestBase
    fn = base._test_accumulate_gradients_no_sync
    # If torch changes the helper, this patch must be looked at again rather than go stale silently.
    assert 'BACKEND == "mpi" or BACKEND == "gloo"' in inspect.getsource(fn), "helper changed upstream"
    if TARGET == "gloo":
        return
    view = dict(fn.__globals__, BACKEND="gloo")
    patched = types.FunctionType(fn.__code__, view, fn.__name__, fn.__defaults__, fn.__closure__)
    patched.__kwdefaults__ = fn.__kwdefaults__
    base._test_accumulate_gradients_no_sync = patched


patch_gloo_only_helper()

# Environment a rank needs from the test that starts it: setUp makes TEMP_DIR (and INIT_METHOD) per
# test in the parent, and a forkserver child has the server's environment, not the parent's.
_PER_TEST_ENV = ("TEMP_DIR", "INIT_METHOD", "TORCH_DISTRIBUTED_DEBUG", "LOOM_SUITE_LOG_DIR")


class TorchDistributedSuite(dt.TestDistBackend, dt.DistributedTest._DistTestBase):
    """One test of the suite per method; each starts WORLD_SIZE rank processes."""

    def setUp(self):
        super().setUp()
        self._start_processes(torch.multiprocessing.get_context("forkserver").Process)

    def _start_processes(self, proc):
        env = {k: os.environ[k] for k in _PER_TEST_ENV if k in os.environ}
        real = proc

        def with_env(*args, **kwargs):
            kwargs["kwargs"] = dict(kwargs.get("kwargs") or {}, rank_env=env)
            return real(*args, **kwargs)

        super()._start_processes(with_env)

    @classmethod
    def _run(cls, rank, test_name, file_name, pipe, rank_env=None, **kwargs):
        os.environ.update(rank_env or {})
        log_dir = os.environ.get("LOOM_SUITE_LOG_DIR")
        if log_dir:  # the ranks' own output (warnings, profiler notes, logged errors): a file per rank
            path = os.path.join(log_dir, f"{test_name}.rank{rank}.log")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.close(fd)
        super()._run(rank, test_name, file_name, pipe, **kwargs)


def test_names():
    """Every test of the suite, in name order (unittest's order)."""
    return sorted(n for n in dir(TorchDistributedSuite) if n.startswith("test_"))


def exclude(names_and_reasons):
    """Skips the given tests in the parent process (no rank is started), with their reasons."""
    for name, reason in names_and_reasons.items():
        fn = getattr(TorchDistributedSuite, name)
        setattr(TorchDistributedSuite, name, unittest.skip(f"excluded: {reason}")(fn))
