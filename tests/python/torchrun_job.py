"""Run by torchrun (env://): every check, results written to $LOOM_TEST_OUT."""
import os
import sys
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import loom.torch  # noqa: E402,F401
from harness import Recorder  # noqa: E402
from jobs import run_all_checks  # noqa: E402

torch.set_num_threads(1)
dist.init_process_group("loom", timeout=timedelta(seconds=120))
rank, world = dist.get_rank(), dist.get_world_size()
assert int(os.environ["LOCAL_RANK"]) == rank
run_all_checks(Recorder(os.environ["LOOM_TEST_OUT"], rank), world, rank)
dist.destroy_process_group()
