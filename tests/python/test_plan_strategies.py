"""loom.plan's strategy space: Galvatron's counts (11, 22, 37 strategies for 4, 8, 16 devices; twice as
many with checkpointing), names that parse back, groups that tile each stage, and loom-plan's listing."""
import subprocess
import sys

import pytest

from harness import package_env
from loom.plan import Strategy, parse, strategies


@pytest.mark.parametrize("devices,count", [(1, 1), (2, 4), (4, 11), (8, 22), (16, 37)])
def test_counts_are_galvatrons(devices, count):
    assert len(strategies(devices)) == count
    assert len(strategies(devices, checkpointing=True)) == 2 * count
    assert len(set(strategies(devices, checkpointing=True))) == 2 * count


def test_the_22_for_8_devices():
    by_shape = {}
    for s in strategies(8):
        by_shape.setdefault((s.pp, s.tp, s.dp), []).append(s)
    # (pp, tp, dp): variants (nesting x DP/SDP), as Galvatron's generate_dp_tp_pp_sdp enumerates them.
    assert {k: len(v) for k, v in by_shape.items()} == {
        (1, 1, 8): 2, (1, 2, 4): 4, (1, 4, 2): 4, (1, 8, 1): 1, (2, 1, 4): 2, (2, 2, 2): 4, (2, 4, 1): 1,
        (4, 1, 2): 2, (4, 2, 1): 1, (8, 1, 1): 1}
    assert all(s.devices == 8 for s in strategies(8))


def test_names_parse_back():
    for n in (1, 2, 4, 8, 16, 32):
        for s in strategies(n, checkpointing=True):
            assert parse(s.name) == s
    assert parse("pp2-tp2-sdp2+ckpt") == Strategy(2, 2, 2, sdp=True, tp_inner=False, checkpoint=True)
    for bad in ("pp2-dp1", "pp2-tp2-tp2", "pp2-sdp2-dp2", "dp8", "pp1-dp8+ck"):
        with pytest.raises(ValueError, match="not a strategy name"):
            parse(bad)


def test_groups_tile_a_stage_with_the_inner_split_consecutive():
    ranks = list(range(8, 16))
    s = parse("pp2-dp2-tp4")  # TP inner: consecutive
    assert s.groups("tp", ranks) == [[8, 9, 10, 11], [12, 13, 14, 15]]
    assert s.groups("dp", ranks) == [[8, 12], [9, 13], [10, 14], [11, 15]]
    s = parse("pp2-tp4-dp2")  # DP inner
    assert s.groups("dp", ranks) == [[8, 9], [10, 11], [12, 13], [14, 15]]
    assert s.groups("tp", ranks) == [[8, 10, 12, 14], [9, 11, 13, 15]]
    for s in strategies(16):
        stage = list(range(s.tp * s.dp))
        for axis in ("tp", "dp"):
            groups = s.groups(axis, stage)
            assert sorted(r for g in groups for r in g) == stage


def test_non_powers_of_two_are_refused():
    with pytest.raises(ValueError, match="power of two"):
        strategies(6)


def test_loom_plan_lists_them_one_per_line():
    out = subprocess.run([sys.executable, "-m", "loom.plan", "--list-strategies", "--devices", "8"],
                         capture_output=True, text=True, check=True, env=package_env()).stdout.split()
    assert out == [s.name for s in strategies(8)] and len(out) == 22
    out = subprocess.run([sys.executable, "-m", "loom.plan", "--list-strategies", "--devices", "16",
                          "--checkpointing"], capture_output=True, text=True, check=True, env=package_env()).stdout.split()
    assert len(out) == 74 and sum(name.endswith("+ckpt") for name in out) == 37
    bad = subprocess.run([sys.executable, "-m", "loom.plan", "--list-strategies", "--devices", "12"],
                         capture_output=True, text=True, env=package_env())
    assert bad.returncode == 1 and "power of two" in bad.stderr
