"""loom.cost_model.CollectiveModel (include/loom_model.h through ctypes): the planner's collective times
are Loom's own (the same numbers loom-sim prints for the same machine), they depend on where a group's
ranks sit, and neither the model nor the planner needs torch."""
import json
import os
import subprocess

import pytest
import sys

from loom.cost_model import CollectiveModel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.environ.get("LOOM_FIXTURES", os.path.join(os.path.dirname(ROOT), "shared", "fixtures", "topology"))
HGX = os.path.join(FIXTURES, "nccl-hgx-8xA100-nvswitch-4xcx6.xml")
POWER8 = os.path.join(FIXTURES, "hwloc-power8-4xP100-nvlink.xml")
LOOM_SIM = os.path.join(os.environ.get("LOOM_BUILD_DIR", os.path.join(ROOT, "build")), "tools", "sim", "loom-sim")

needs_fixtures = pytest.mark.skipif(not os.path.exists(HGX), reason="topology fixtures not present")


def loom_sim(*args):
    out = subprocess.run([LOOM_SIM, *args, "--json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)[0]


@needs_fixtures
@pytest.mark.skipif(not os.path.exists(LOOM_SIM), reason="loom-sim not built")
@pytest.mark.parametrize("coll,ranks,size", [("all_reduce", 8, "64M"), ("all_gather", 8, "1M"),
                                             ("reduce_scatter", 16, "16M"), ("all_reduce", 16, "4K")])
def test_same_prediction_as_loom_sim(coll, ranks, size):
    sim = loom_sim(coll, "--ranks", str(ranks), "--topo", HGX, "-b", size)
    model = CollectiveModel(ranks, topology=HGX)
    got = model.collective(coll, sim["bytes"], list(range(ranks)), concurrent=False)
    assert got["algorithm"] == sim["algorithm"] and got["channels"] == sim["channels"]
    assert got["time_us"] == pytest.approx(sim["time_us"], rel=1e-9)


@needs_fixtures
def test_placement_matters():
    m = CollectiveModel(16, topology=HGX)  # two HGX nodes
    assert m.ranks_per_node == 8
    inside = m.collective("all_reduce", 64 << 20, [0, 1])["time_us"]
    across = m.collective("all_reduce", 64 << 20, [0, 8], concurrent=False)["time_us"]
    shared = m.collective("all_reduce", 64 << 20, [0, 8])["time_us"]  # 8 such pairs share the NICs
    assert inside < across < shared
    p8 = CollectiveModel(4, topology=POWER8)  # NVLink pairs (0,1) and (2,3)
    assert p8.collective("all_reduce", 64 << 20, [0, 1])["time_us"] < p8.collective("all_reduce", 64 << 20, [0, 2])["time_us"]
    assert m.p2p(16 << 20, [(0, 8)]) > m.p2p(16 << 20, [(0, 1)]) > 0


def test_modelled_machine_without_topology():
    fast = CollectiveModel(8, topology="none", machine={"intra_gbs": 100})
    slow = CollectiveModel(8, topology="none", machine={"intra_gbs": 10})
    assert fast.machine([0, 1])["intra_gbs"] == 100
    assert fast.collective("all_reduce", 64 << 20, list(range(8)))["time_us"] < \
        slow.collective("all_reduce", 64 << 20, list(range(8)))["time_us"]
    assert slow.collective("all_reduce", 64 << 20, [3])["time_us"] == 0  # one rank moves nothing
    with pytest.raises(ValueError, match="unknown machine field"):
        CollectiveModel(8, topology="none", machine={"intra_gb": 1})
    with pytest.raises(ValueError, match="unknown collective"):
        slow.collective("allreduce_please", 8, [0, 1])
    with pytest.raises(ValueError, match="outside the job"):
        slow.collective("all_reduce", 8, [0, 8])
    with pytest.raises((ValueError, RuntimeError), match="topology"):
        CollectiveModel(8, topology="/nonexistent.xml")
    with pytest.raises(ValueError, match="different numbers of ranks|ranks on node"):
        CollectiveModel(16, topology="none", ranks_per_node=8).collective("all_reduce", 64, [0, 1, 8])


def test_planner_without_torch():
    """loom.plan imports and times a layout's collectives with torch unimportable."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "import loom.plan\n"
            "from loom.plan.machine import Machine, collective_model\n"
            "m = Machine(devices=8, memory_bytes=1e9, flops_per_s=1e12,\n"
            "            collectives=collective_model(8, topology='none', intra_gbs=100))\n"
            "assert m.collective_s('all_reduce', 1 << 20, list(range(8))) > 0\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
