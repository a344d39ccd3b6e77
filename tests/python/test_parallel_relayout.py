"""Layouts of one layer in a stage and the re-layouts between them (loom.parallel.layout, relayout):
the moves chosen, checked on symbolic samples for every pair of layouts of 4, 8 and 16 ranks, and the
real re-layouts on 4 ranks, forward and backward, against slices of one full micro-batch."""
import itertools
import json
import os
import subprocess
import sys

import pytest

from loom.parallel import LayerLayout, plan_relayout
from loom.plan import strategies

HERE = os.path.dirname(os.path.abspath(__file__))


def layouts(devices):
    """Every placement of one stage of `devices` ranks (the planner's strategies with pp 1, SDP and
    checkpointing aside)."""
    found = {}
    for s in strategies(devices, pp=1):
        layout = LayerLayout(tp=s.tp, dp=s.dp, tp_inner=s.tp_inner)
        found.setdefault(layout.placement, layout)
    return list(found.values())


def run_moves(src, moves, atoms):
    """What each position holds after the moves, on symbolic data: every position starts with the
    atoms (samples) of its src slice; a move concatenates its group's holdings and keeps a range."""
    held = []
    for p in range(src.size):
        start, stop = src.batch_slice(p)
        held.append(list(range(int(start * atoms), int(stop * atoms))))
    out = []
    for move in moves:
        gathered = [a for q in move.group for a in held[q]]
        n = len(gathered)
        out.append(gathered[int(move.start * n):int(move.stop * n)])
    return out


def wanted(dst, atoms):
    return [list(range(int(a * atoms), int(b * atoms))) for a, b in map(dst.batch_slice, range(dst.size))]


@pytest.mark.parametrize("devices", [4, 8, 16])
def test_every_relayout_delivers_each_rank_its_slice(devices):
    for src, dst in itertools.product(layouts(devices), repeat=2):
        for a, b in ((src, dst), (dst, src)):
            moves = plan_relayout(a, b)
            assert run_moves(a, moves, devices) == wanted(b, devices), (a, b, moves)
            for move in moves:  # a group is a real group: every member gathers over the same one
                assert all(moves[q].group == move.group for q in move.group), (a, b, moves)


def test_moves_follow_galvatron():
    dp4, tp4 = LayerLayout(dp=4), LayerLayout(tp=4)
    tp_consecutive, tp_strided = LayerLayout(tp=2, dp=2), LayerLayout(tp=2, dp=2, tp_inner=False)
    # More DP: each rank keeps part of what it holds, nothing moves.
    for src, dst in ((tp4, dp4), (tp_consecutive, dp4), (tp4, tp_consecutive), (tp4, tp_strided)):
        assert all(len(m.group) == 1 for m in plan_relayout(src, dst)), (src, dst)
    # ... when the new slice lies in the old one: under tp2-dp2 rank 1 holds half 1, under dp4 it needs
    # quarter 1, which its old DP group {0, 1} holds.
    assert [m.group for m in plan_relayout(tp_strided, dp4)] == [(0, 1), (0, 1), (2, 3), (2, 3)]
    # Less DP, more TP: an all-gather within the new TP group.
    assert [m.group for m in plan_relayout(dp4, tp_consecutive)] == [(0, 1), (0, 1), (2, 3), (2, 3)]
    assert [m.group for m in plan_relayout(dp4, tp4)] == [(0, 1, 2, 3)] * 4
    # Same degrees, the other nesting: the new TP groups ({0, 2}, {1, 3}) hold both halves.
    assert [m.group for m in plan_relayout(tp_consecutive, tp_strided)] == [(0, 2), (1, 3), (0, 2), (1, 3)]
    # dp4 -> tp2-dp2: the new TP group {0, 2} holds quarters 0 and 2, not half 0; the old DP group (all)
    # gathers the micro-batch and each rank keeps its half.
    assert [m.group for m in plan_relayout(dp4, tp_strided)] == [(0, 1, 2, 3)] * 4


def test_layout_groups_are_the_planners():
    for s in strategies(8, pp=1):
        layout = LayerLayout(tp=s.tp, dp=s.dp, tp_inner=s.tp_inner)
        for axis in ("tp", "dp"):
            assert layout.groups(axis) == s.groups(axis, list(range(8))), (s.name, axis)
        for group in layout.groups("dp"):  # a DP group's rank is the slice index
            assert [layout.dp_index(p) for p in group] == list(range(s.dp))


def test_relayouts_on_four_ranks(tmp_path):
    here = os.path.dirname(HERE)
    import loom

    path = os.pathsep.join([os.path.dirname(os.path.dirname(loom.__file__))] +
                           ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
           os.path.join(HERE, "relayout_job.py")]
    proc = subprocess.run(cmd, cwd=here, capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1", LOOM_TEST_OUT=str(tmp_path)))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for rank in range(4):
        with open(tmp_path / f"rank{rank}.json") as f:
            assert json.load(f) == [], f"rank {rank}"
