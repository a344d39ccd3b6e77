"""loom.plan's model of CPU ranks (what examples/plan_validation.py calibrates): a forward's fixed cost
per call that TP does not split, ranks sharing cores (a pipeline's bubbles cost only where the step is
longer than all ranks' compute over the cores), and a per-collective cost that grows with the compute
between collectives, interpolated from measured points, and each rank's time per step beyond all that
(calibrate.step_overhead). Without these settings the model is Galvatron's."""
import json
import subprocess
import sys

import pytest
import torch

from harness import package_env
from loom.plan import cost, search as S
from loom.plan.calibrate import step_overhead
from loom.plan.machine import Machine
from loom.plan.model import Layer, ModelSpec, describe_module
from loom.plan.strategies import parse, strategies


def spec(fixed=None, layers=4):
    return ModelSpec(layers=[Layer(name=f"l{i}", params=1000, flops=1e6, activation_bytes=1e3, output_bytes=1e3,
                                   forward_s=1e-4, forward_fixed_s=fixed, tp_calls=4) for i in range(layers)])


def strategy(name, devices=4, pp=1):
    return next(s for s in strategies(devices, pp=pp) if s.name == name)


def test_fixed_cost_per_call_is_not_split_by_tp():
    m = Machine(devices=4, memory_bytes=1e9, flops_per_s=1e9)
    layer = spec(fixed=5e-4).layers[0]
    assert m.forward_s(layer, 4, 1) == pytest.approx(5e-4 + 4e-4)
    assert m.forward_s(layer, 4, 4) == pytest.approx(5e-4 + 1e-4)
    assert m.forward_s(spec().layers[0], 4, 4) == pytest.approx(1e-4)  # without it: linear, as before


def test_shared_cores_charge_all_ranks_compute_over_the_cores():
    alone = Machine(devices=4, memory_bytes=1e9, flops_per_s=1e9)
    shared = Machine(devices=4, memory_bytes=1e9, flops_per_s=1e9, cores=2)
    assert alone.share == 1 and shared.share == 2
    model = spec()
    one = S.search(model, alone, 16, micro_batches=[4], pp_degrees=[1], sdp=False, one_layout=True)
    two = S.search(model, shared, 16, micro_batches=[4], pp_degrees=[1], sdp=False, one_layout=True)
    dp4 = {u["strategy"]: u["step_s"] for u in one["uniform"]}["pp1-dp4"]
    assert {u["strategy"]: u["step_s"] for u in two["uniform"]}["pp1-dp4"] == pytest.approx(2 * dp4)


def test_a_pipeline_bubble_is_free_while_shared_cores_are_the_limit():
    # pp2 with m micro-batches: Galvatron's (m + 1) slots of a stage; with 2 ranks per core the step is
    # bound by m * 2 slots of compute, which the bubble hides in.
    model, m = spec(), 4
    for cores, slots in ((4, m + 1), (2, 2 * m)):
        machine = Machine(devices=4, memory_bytes=1e9, flops_per_s=1e9, cores=cores)
        plan = S.search(model, machine, 16, micro_batches=[m], pp_degrees=[2], sdp=False, one_layout=True)
        micro = plan["stages"][0]["microbatch_s"]
        assert plan["predicted"]["step_s"] == pytest.approx(slots * micro, rel=0.05)


def test_light_stages_lend_their_cores_to_heavy_ones():
    stages = [{"time_s": 0, "microbatch_s": 1.0, "other_s": 0.0}, {"time_s": 0, "microbatch_s": 0.1, "other_s": 0.0}]
    ctx = cost.Context(global_batch=8, micro_batches=4, pp=2, stage=0, share=2.0)
    # all ranks' compute over the cores: 4 * 2 * 0.55 = 4.4 > the pipeline at full speed: 1.1 + 3 * 1.0
    assert S.pipeline_step_s(stages, ctx, 2.0) == pytest.approx(4.4)
    assert S.pipeline_step_s(stages, ctx, 1.0) == pytest.approx(4.1)
    stages[1]["microbatch_s"] = 1.0
    assert S.pipeline_step_s(stages, ctx, 2.0) == pytest.approx(8.0)


def test_a_light_stage_does_not_slow_the_pipeline_as_the_slowest_does():
    # Alpa's latency of a 1F1B pipeline: one micro-batch through all stages, the rest behind the slowest.
    # Galvatron's (m + p - 1) slots of the slowest stage is that for equal stages only.
    ctx = cost.Context(global_batch=16, micro_batches=8, pp=4, stage=0)
    equal = [{"microbatch_s": 1.0, "other_s": 0.0}] * 4
    assert S.pipeline_step_s(equal, ctx, 1.0) == pytest.approx(8 + 4 - 1)
    uneven = [{"microbatch_s": t, "other_s": o} for t, o in ((2.0, 0.5), (0.5, 0.2), (0.5, 0.0), (0.5, 0.0))]
    assert S.pipeline_step_s(uneven, ctx, 1.0) == pytest.approx(3.5 + 7 * 2.0 + 0.5)


def test_collective_overhead_interpolates_over_the_compute_between_collectives():
    table = {2: [(1e-4, 5e-5), (1e-3, 3e-4)], 4: [(1e-4, 1e-4), (1e-3, 6e-4)], "p2p": [(1e-4, 2e-5), (1e-3, 1e-4)]}
    m = Machine(devices=8, memory_bytes=1e9, flops_per_s=1e9, collective_overhead_s=table, cores=4)  # share 2
    assert m.overhead_s(2, 2.75e-4) == pytest.approx(1.75e-4)  # 5.5e-4 s of wall time: halfway between the points
    assert m.overhead_s(2, 0.25e-4) == pytest.approx(2.5e-5)  # below the first point: towards zero
    assert m.overhead_s(4, 1.0) == pytest.approx(6e-4)  # beyond the last: the last
    assert m.overhead_s(8, None) == pytest.approx(6e-4)  # a larger group than measured: the largest's
    assert m.overhead_s(3, None) == pytest.approx(6e-4)  # the smallest measured group that holds it
    assert m.overhead_s("p2p", 5e-4) == pytest.approx(1e-4)
    assert m.p2p_s(100, [(0, 1)], 5e-4) == pytest.approx(1e-4)  # no collective model: the overhead alone
    constant = Machine(devices=4, memory_bytes=1e9, flops_per_s=1e9, collective_overhead_s=7e-5)
    assert constant.overhead_s(4, 1e-3) == constant.overhead_s("p2p") == 7e-5
    with pytest.raises(ValueError, match="empty"):
        Machine(devices=4, memory_bytes=1e9, flops_per_s=1e9, collective_overhead_s={})
    with pytest.raises(ValueError, match="cores"):
        Machine(devices=4, memory_bytes=1e9, flops_per_s=1e9, cores=0)


def test_tp_pays_the_overhead_once_per_all_reduce_call():
    table = {2: [(1e-3, 1e-3)], 4: [(1e-3, 1e-3)]}
    m = Machine(devices=4, memory_bytes=1e9, flops_per_s=1e9, collective_overhead_s=table)
    ctx = cost.Context(global_batch=16, micro_batches=4, pp=1, stage=0)
    model = spec()
    base = cost.layer_cost(model, 0, strategy("pp1-tp4"), Machine(devices=4, memory_bytes=1e9, flops_per_s=1e9), ctx)
    with_overhead = cost.layer_cost(model, 0, strategy("pp1-tp4"), m, ctx)
    gap = with_overhead.compute_s / 4  # compute between two of its 4 all-reduces
    assert with_overhead.microbatch_s - base.microbatch_s == pytest.approx(4 * 1e-3 * min(1.0, gap / 1e-3))


def test_describe_module_splits_a_fixed_cost_from_a_cost_per_sample():
    class Slow(torch.nn.Module):  # a fixed cost per call (many tiny ops) and a cost per sample
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(64, 64)

        def forward(self, x):
            for _ in range(50):
                x = x + 0
            return self.lin(x)

    torch.manual_seed(0)
    layers = [Slow(), torch.nn.Linear(64, 8)]
    spec = describe_module(layers, torch.randn(64, 64), small_sample=torch.randn(1, 64), repeats=7)
    slow = spec.layers[0]
    assert slow.forward_fixed_s is not None and slow.forward_fixed_s > 0
    # The fixed part is most of a one-sample call (50 additions against one small matrix product).
    assert slow.forward_fixed_s > 0.5 * (slow.forward_fixed_s + slow.forward_s)
    again = ModelSpec.from_json(spec.to_json())
    assert again.layers[0].forward_fixed_s == slow.forward_fixed_s and again.layers[0].tp_calls == 2
    with pytest.raises(ValueError, match="tp_calls"):
        Layer(name="x", params=1, flops=1, activation_bytes=1, output_bytes=1, tp_calls=0)


def test_rank_overhead_is_each_ranks_own_time_and_share_times_that_on_shared_cores():
    stages = [{"microbatch_s": 1.0, "other_s": 0.0}, {"microbatch_s": 0.1, "other_s": 0.0}]
    ctx = cost.Context(global_batch=8, micro_batches=4, pp=2, stage=0, share=2.0)
    assert S.pipeline_step_s(stages, ctx, 1.0, 0.5) == pytest.approx(4.6)  # a core per rank: 1.1 + 3 * 1.0 + 0.5
    four = [{"microbatch_s": t, "other_s": 0.0} for t in (2.0, 0.1, 0.1, 0.1)]
    ctx4 = cost.Context(global_batch=8, micro_batches=4, pp=4, stage=0, share=2.0)
    # the pipeline at full speed binds: 2.3 + 3 * 2.0 + 0.5 > all ranks' work over the cores: 2 * (4 * 0.575 + 0.5)
    assert S.pipeline_step_s(four, ctx4, 2.0, 0.5) == pytest.approx(8.8)
    stages[0]["microbatch_s"] = stages[1]["microbatch_s"] = 1.0  # all ranks' work over the cores: 2 * (4 * 1.0 + 0.5)
    assert S.pipeline_step_s(stages, ctx, 2.0, 0.5) == pytest.approx(9.0)
    m = Machine(devices=4, memory_bytes=1e9, flops_per_s=1e9, rank_overhead_s=(1e-3, 2e-4))
    assert m.rank_overhead(4) == pytest.approx(1.8e-3) and m.describe()["rank_overhead_us"]["per_step"] == 1e3
    with pytest.raises(ValueError, match="rank_overhead_s"):
        Machine(devices=4, memory_bytes=1e9, flops_per_s=1e9, rank_overhead_s=(-1e-3, 0.0))


def test_step_overhead_recovers_the_cost_per_step_and_per_micro_batch_from_the_data_parallel_plan():
    model = spec()
    for cores in (2, 4):  # shared cores (the measured difference is share times a rank's) and a core each
        truth = Machine(devices=4, memory_bytes=1e9, flops_per_s=1e9, cores=cores, rank_overhead_s=(3e-3, 5e-4))
        ran = []

        def measure(pp, names, m):  # stands in for a training run: the model with the true overhead
            ran.append((pp, names[0], m))
            return S.plan_cost(model, truth, 16, pp, m, [parse(n) for n in names])["step_s"]

        plain = Machine(devices=4, memory_bytes=1e9, flops_per_s=1e9, cores=cores)
        (per_step, per_mb), points = step_overhead(model, plain, 16, measure)
        assert ran == [(1, "pp1-dp4", 1), (1, "pp1-dp4", 2)]
        assert per_step == pytest.approx(3e-3) and per_mb == pytest.approx(5e-4)
        assert [p[0] for p in points] == [1, 2] and all(meas > pred for _, meas, pred in points)
    # A measurement that falls with more micro-batches: no negative cost per micro-batch, the mean per step.
    (per_step, per_mb), _ = step_overhead(model, plain, 16, lambda pp, names, m: 0.1 - 0.01 * m)
    assert per_mb == 0.0 and per_step > 0
    with pytest.raises(ValueError, match="two different"):
        step_overhead(model, plain, 16, measure, micro_batches=(2, 2))
    with pytest.raises(ValueError, match="does not split"):
        step_overhead(model, plain, 6, measure)


def test_loom_plan_takes_the_rank_overhead(tmp_path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(spec().to_json()))
    common = [sys.executable, "-m", "loom.plan", "--model", str(path), "--devices", "4", "--global-batch", "16",
              "--memory-gb", "1", "--topology", "none", "--cores", "2", "--pp", "1", "--micro-batches", "4"]
    plans = {}
    for overhead in ("0", "2000,500"):
        proc = subprocess.run(common + ["--rank-overhead-us", overhead], capture_output=True, text=True,
                              env=package_env(), timeout=300)
        assert proc.returncode == 0, proc.stderr
        plans[overhead] = json.loads(proc.stdout)
    assert plans["2000,500"]["machine"]["rank_overhead_us"] == {"per_step": 2000, "per_micro_batch": 500}
    # pp1 on 4 ranks sharing 2 cores: all ranks' work over the cores, each rank 2 ms + 4 * 0.5 ms more
    extra = plans["2000,500"]["predicted"]["step_s"] - plans["0"]["predicted"]["step_s"]
    assert extra == pytest.approx(2 * 4e-3)
    bad = subprocess.run(common + ["--rank-overhead-us", "1,2,3"], capture_output=True, text=True,
                         env=package_env(), timeout=300)
    assert bad.returncode == 1 and "--rank-overhead-us takes PER_STEP[,PER_MICRO_BATCH]" in bad.stderr
