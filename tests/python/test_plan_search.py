"""loom.plan's search: the dynamic program over layers and memory finds what brute force finds (random
tables, and the real cost tables of small models on a modelled machine), plans fit the memory, and the
choices move the way Galvatron's findings say (PP across a slow network, SDP or checkpointing when
memory is tight, plain DP when it is not)."""
import json
import random
import subprocess
import sys

import pytest

from harness import package_env
from loom.plan import cost, search as S
from loom.plan.machine import Machine, collective_model
from loom.plan.model import Layer, ModelSpec, describe_module, save
from loom.plan.strategies import strategies

INF = float("inf")


def random_case(rng):
    layers, n = rng.randint(1, 4), rng.randint(1, 4)
    costs = [[rng.choice([INF] + [rng.uniform(0, 10)] * 6) for _ in range(n)] for _ in range(layers)]
    units = [[rng.randint(0, 5) for _ in range(n)] for _ in range(layers)]
    transitions = [None] + [[[rng.choice([0.0, rng.uniform(0, 3)]) for _ in range(n)] for _ in range(n)]
                            for _ in range(layers - 1)]
    return costs, units, transitions, rng.randint(0, 14)


def test_dynamic_program_matches_brute_force_on_random_tables():
    rng = random.Random(7)
    feasible = 0
    for _ in range(400):
        costs, units, transitions, budget = random_case(rng)
        best, choice = S.dynamic_program(costs, units, transitions, budget)
        want, _ = S.brute_force(costs, units, transitions, budget)
        assert best == pytest.approx(want), (costs, units, transitions, budget)
        if choice is not None:
            feasible += 1
            assert sum(units[l][j] for l, j in enumerate(choice)) <= budget
            total = sum(costs[l][j] for l, j in enumerate(choice))
            total += sum(transitions[l][choice[l - 1]][choice[l]] for l in range(1, len(choice)))
            assert total == pytest.approx(best)
    assert 100 < feasible < 400  # both outcomes are exercised


def heterogeneous_model():
    """Layers unlike each other: a wide one with many parameters, one with large activations, one that
    cannot be split by TP."""
    return ModelSpec(name="mixed", layers=[
        Layer("wide", params=4_000_000, flops=2e9, activation_bytes=2e6, output_bytes=2e5),
        Layer("attention", params=500_000, flops=1e9, activation_bytes=3e7, output_bytes=2e5),
        Layer("norm", params=2_000, flops=1e6, activation_bytes=4e5, output_bytes=2e5, tensor_parallel=False),
    ])


def modelled(devices, memory, flops=1e12, **fields):
    return Machine(devices=devices, memory_bytes=memory, flops_per_s=flops,
                   collectives=collective_model(devices, "none", **fields))


@pytest.mark.parametrize("devices,checkpointing,memory", [(4, False, 2e9), (4, True, 2e8), (8, False, 1.5e8)])
def test_dynamic_program_matches_brute_force_on_cost_tables(devices, checkpointing, memory):
    spec = heterogeneous_model()
    machine = modelled(devices, memory, intra_gbs=10)
    for pp in (1, 2):
        candidates = strategies(devices, checkpointing, pp=pp)
        for m in S.micro_batch_choices(16, pp, limit=4):
            for ctx, layers, table, c, units, transitions in S.stage_problems(
                    spec, machine, candidates, pp, m, 16, memory / 64):
                best, choice = S.dynamic_program(c, units, transitions, 64)
                want, _ = S.brute_force(c, units, transitions, 64)
                assert best == pytest.approx(want)
                if choice is not None:  # what the program accepts fits the real memory
                    assert sum(table[k][j].memory_bytes for k, j in enumerate(choice)) <= memory


def test_plan_fits_and_beats_every_single_strategy():
    spec = heterogeneous_model()
    machine = modelled(8, 3e8, intra_gbs=10)
    plan = S.search(spec, machine, global_batch=16, checkpointing=True, resolution=512)
    assert plan["predicted"]["memory_bytes_per_device"] <= 3e8
    assert [layer["index"] for st in plan["stages"] for layer in st["layers"]] == [0, 1, 2]
    fitting = [u for u in plan["uniform"] if u["fits"]]
    assert fitting and plan["predicted"]["step_s"] <= min(u["step_s"] for u in fitting) * (1 + 1e-9)
    assert all(r["step_s"] >= plan["predicted"]["step_s"] for r in plan["runners_up"])
    chosen = (plan["pp"], plan["micro_batches"], [layer["strategy"] for st in plan["stages"] for layer in st["layers"]])
    seen = [chosen] + [(r["pp"], r["micro_batches"], r["strategies"]) for r in plan["runners_up"]]
    assert all(a != b for i, a in enumerate(seen) for b in seen[i + 1:])  # each plan once
    json.dumps(plan)  # plain JSON


def bert_like(layers=8, hidden=1024, seq=512):
    block = dict(params=12 * hidden * hidden, flops=24 * hidden * hidden * seq + 4 * seq * seq * hidden,
                 activation_bytes=34 * seq * hidden * 2 + 80 * seq * seq, output_bytes=seq * hidden * 4)
    return ModelSpec(name="bert-like", layers=[Layer(f"block{i}", **block) for i in range(layers)])


def used(plan):
    return {layer["strategy"] for st in plan["stages"] for layer in st["layers"]}


def test_pipeline_spans_a_slow_network():
    spec = bert_like()
    fast = modelled(16, 16e9, 100e12, ranks_per_node=8, intra_gbs=200, nic_gbs=50)
    slow = modelled(16, 16e9, 100e12, ranks_per_node=8, intra_gbs=200, nic_gbs=1.25)
    assert S.search(spec, fast, 64)["pp"] == 1
    plan = S.search(spec, slow, 64)
    assert plan["pp"] >= 2 and all(len(st["ranks"]) <= 8 for st in plan["stages"])


def test_tight_memory_brings_sdp_or_checkpointing():
    spec = bert_like()
    roomy = S.search(spec, modelled(8, 40e9, intra_gbs=100), 16, checkpointing=True, pp_degrees=[1],
                     micro_batches=[1])
    assert all(s.startswith("pp1-dp8") and "+ckpt" not in s for s in used(roomy))
    need = roomy["predicted"]["memory_bytes_per_device"]
    tight = S.search(spec, modelled(8, 0.5 * need, intra_gbs=100), 16, checkpointing=True, pp_degrees=[1],
                     micro_batches=[1])
    assert tight["predicted"]["memory_bytes_per_device"] <= 0.5 * need
    assert any("sdp" in s or "+ckpt" in s or "tp" in s for s in used(tight))
    assert tight["predicted"]["step_s"] > roomy["predicted"]["step_s"]
    with pytest.raises(ValueError, match="no plan fits"):
        S.search(spec, modelled(8, 1e6, intra_gbs=100), 16, checkpointing=True)


def test_sdp_is_priced_as_sharded_data_parallel_runs_it():
    # ShardedDataParallel prefetches: the gather runs beside the forward, the backward's gather and the
    # reduce-scatter beside the backward, each pair slowed by the overlap coefficient k while both run;
    # nothing waits for the step's end; a recomputation reuses the backward's gather and gives it more
    # compute to hide behind.
    from loom.plan.strategies import parse
    spec, machine = bert_like(layers=1), modelled(8, 40e9, intra_gbs=100)
    ctx = cost.Context(global_batch=16, micro_batches=2, pp=1, stage=0)
    layer, ranks, k = spec.layers[0], list(range(8)), machine.overlap_slowdown
    fwd = machine.forward_s(layer, 1, 1)
    nbytes = layer.params * spec.bytes_per_param["params"]
    gather = machine.collective_s("all_gather", nbytes, ranks, fwd)
    reduce = machine.collective_s("reduce_scatter", layer.params * spec.bytes_per_param["grads"], ranks, 2 * fwd)
    assert gather > 0 and reduce > 0 and k > 1

    def beside(compute, comm):
        return max(compute, comm) + (k - 1) * min(compute, comm)

    plain = cost.layer_cost(spec, 0, parse("pp1-sdp8"), machine, ctx)
    assert plain.microbatch_s == pytest.approx(beside(fwd, gather) + beside(2 * fwd, gather + reduce))
    assert plain.sync_s == 0
    recomputed = cost.layer_cost(spec, 0, parse("pp1-sdp8+ckpt"), machine, ctx)
    assert recomputed.microbatch_s == pytest.approx(beside(fwd, gather) + beside(3 * fwd, gather + reduce))
    slow = modelled(8, 40e9, intra_gbs=1)  # communication far longer than compute: it sets the time
    exposed = cost.layer_cost(spec, 0, parse("pp1-sdp8"), slow, ctx)
    assert exposed.microbatch_s > 2 * slow.collective_s("all_gather", nbytes, ranks, fwd)


def test_relayout_moves_only_what_a_rank_lacks():
    from loom.plan.strategies import parse
    stage = list(range(4))
    assert cost.relayout_pairs(parse("pp1-dp2-tp2"), parse("pp1-dp4"), stage) == []  # slices nest
    moves = cost.relayout_pairs(parse("pp1-dp4"), parse("pp1-dp2-tp2"), stage)
    assert sorted((s, d) for s, d, _ in moves) == [(0, 1), (1, 0), (2, 3), (3, 2)]
    assert cost.relayout_pairs(parse("pp1-tp2-dp2"), parse("pp1-dp4"), stage)  # DP inner: slices cross


def test_describe_module_and_loom_plan_command(tmp_path):
    import torch
    from torch import nn

    torch.manual_seed(0)
    layers = [nn.Linear(16, 32), nn.Linear(32, 8)]
    spec = describe_module(layers, torch.randn(4, 16), name="mlp")
    assert [l.params for l in spec.layers] == [16 * 32 + 32, 32 * 8 + 8]
    assert [l.flops for l in spec.layers] == [2 * 16 * 32, 2 * 32 * 8]  # per sample
    assert [l.output_bytes for l in spec.layers] == [32 * 4, 8 * 4]
    assert [l.activation_bytes for l in spec.layers] == [16 * 4, 32 * 4]  # the inputs Linear keeps
    assert all(l.forward_s > 0 for l in spec.layers)
    assert ModelSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    with pytest.raises(ValueError, match="unknown field"):
        ModelSpec.from_json({"layers": [{"name": "x", "params": 1, "flops": 1, "activation_bytes": 1,
                                         "output_bytes": 1, "parms": 2}]})
    path = tmp_path / "mlp.json"
    save(heterogeneous_model(), path)
    out = tmp_path / "plan.json"
    subprocess.run([sys.executable, "-m", "loom.plan", "--model", str(path), "--devices", "4",
                    "--topology", "none", "--intra-gbs", "10", "--memory-gb", "2", "--tflops", "1",
                    "--global-batch", "8", "--checkpointing", "--output", str(out)],
                   check=True, capture_output=True, text=True, env=package_env())
    plan = json.loads(out.read_text())
    assert plan["devices"] == 4 and len([l for st in plan["stages"] for l in st["layers"]]) == 3
    assert plan["predicted"]["memory_bytes_per_device"] <= 2e9
