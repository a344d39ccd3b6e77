"""loom.plan.calibrate's probes with real processes of the loom backend: the overlap slowdown (compute
beside an async all-reduce, against each alone) and what `loom-plan --measure-overlap` plans with; the
cost of a small all-reduce and of a pipeline crossing while every rank computes."""
import json
import subprocess
import sys

import pytest

from harness import package_env
from loom.plan.calibrate import loaded_collective_s, overlap_slowdown
from loom.plan.model import Layer, ModelSpec


def test_overlap_slowdown_follows_the_planners_model_of_overlap():
    sizes = (4 << 10, 256 << 10)
    k, points = overlap_slowdown(2, sizes=sizes, work=4, iterations=4, rounds=1, cpu_bind="round-robin")
    assert [p[0] for p in points] == list(sizes)
    for _, compute, comm, both, at_size in points:
        assert compute > 0 and comm > 0 and both > 0
        # both = max + (k - 1) * min: k is 1 for perfect overlap, 2 for taking turns
        assert at_size == pytest.approx(1 + max(0.0, both - max(compute, comm)) / min(compute, comm))
    assert min(p[4] for p in points) <= k <= max(p[4] for p in points)


def test_loom_plan_plans_with_the_measured_overlap(tmp_path):
    spec = ModelSpec(name="two", layers=[Layer(f"l{i}", params=1e5, flops=1e8, activation_bytes=1e4, output_bytes=1e3)
                                         for i in range(2)])
    path = tmp_path / "model.json"
    path.write_text(json.dumps(spec.to_json()))
    proc = subprocess.run([sys.executable, "-m", "loom.plan", "--model", str(path), "--devices", "2",
                           "--global-batch", "4", "--memory-gb", "1", "--topology", "none", "--measure-overlap",
                           "--output", str(tmp_path / "plan.json")],
                          capture_output=True, text=True, env=package_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "overlap slowdown measured" in line]
    assert said, proc.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert f"{plan['machine']['overlap_slowdown']:.2f}" == said[0].split()[-1]
    both = subprocess.run([sys.executable, "-m", "loom.plan", "--model", str(path), "--devices", "2",
                           "--global-batch", "4", "--memory-gb", "1", "--measure-overlap", "--overlap-slowdown", "2"],
                          capture_output=True, text=True, env=package_env())
    assert both.returncode != 0 and "not allowed with" in both.stderr


def test_loaded_collectives_and_pipeline_crossings_are_timed_at_each_gap():
    table = loaded_collective_s(2, works=(1, 4), iterations=20, rounds=1, cpu_bind="round-robin")
    assert set(table) == {2, "p2p"}
    for points in table.values():
        gaps = [gap for gap, _ in points]
        assert len(points) == 2 and gaps == sorted(gaps) and gaps[0] > 0
        assert all(extra >= 0 for _, extra in points)
