"""A plan from loom-plan trains through examples/train_gpt.py --plan with the losses of a single process:
the planner's own plan for the example GPT (its description measured with describe_module), and a plan with
TP, data-parallel groups on consecutive ranks and one block recomputed (both of one layout: they run on the
mesh). What training_layout makes of plans, and the plans it refuses with a message saying why. Plans whose
layers have their own layouts: test_plan_train_layers.py."""
import copy
import json

import pytest
import torch

from gpt_runs import train
from loom.parallel import LayerLayout, gpt
from loom.plan.machine import Machine, collective_model
from loom.plan.model import describe_module
from loom.plan.runtime import training_layout
from loom.plan.search import search

# Plain SGD with a large step: a wrong gradient scale moves the losses far beyond the tolerance (AdamW
# normalizes most of it away).
MODEL = ["--layers", "2", "--hidden", "32", "--heads", "4", "--vocab", "64", "--seq-len", "16", "--optimizer", "sgd",
         "--lr", "0.5"]
STEPS = 2


def run(workdir, name, nproc, *extra):
    return train(workdir, name, nproc, *MODEL, "--steps", str(STEPS), *extra)


def test_plans_train_with_single_process_losses(tmp_path):
    work = str(tmp_path)
    config = gpt.GPTConfig(layers=2, hidden=32, heads=4, vocab=64, seq_len=16)  # MODEL's
    spec = describe_module(gpt.build_chunks(config)[0].layers, torch.randint(0, 64, (4, 16)), name="gpt")
    machine = Machine(devices=4, memory_bytes=1e9, flops_per_s=1e10,
                      collectives=collective_model(4, "none", intra_gbs=10))
    planned = search(spec, machine, 16, checkpointing=True, pp_degrees=[2], micro_batches=[4], sdp=False,
                     one_layout=True)
    with open(tmp_path / "plan.json", "w") as f:
        json.dump(planned, f)
    assert planned["pp"] == 2 and planned["micro_batches"] == 4
    # The same model on other layouts the planner may choose: TP over strided ranks with DP inner, a block
    # recomputed.
    other = copy.deepcopy(planned)
    layers = [layer for stage in planned["stages"] for layer in stage["layers"]]
    for layer in layers:
        layer["strategy"] = "pp1-tp2-dp2" + ("+ckpt" if layer["index"] == 1 else "")
    other.update(pp=1, micro_batches=2, stages=[dict(planned["stages"][0], ranks=[0, 1, 2, 3], layers=layers)])
    with open(tmp_path / "other.json", "w") as f:
        json.dump(other, f)
    assert training_layout(other)["mesh"]["order"] == "dp-tp-pp"

    _, reference = run(work, "single", 1, "--micro-batches", "4", "--micro-batch-size", "4")
    out, losses = run(work, "planned", 4, "--plan", "plan.json")
    assert "pp=2" in out and "plan plan.json" in out, out
    assert losses == pytest.approx(reference, rel=1e-5)
    out, losses = run(work, "other", 4, "--plan", "other.json")
    assert "tp=2 pp=1 dp=2" in out and "(dp-tp-pp)" in out and "recomputing [0]" in out, out
    assert losses == pytest.approx(reference, rel=1e-5)


def plan_of(strategies, pp=1, micro_batches=1, global_batch=8):
    layers = [{"index": i, "strategy": s} for i, s in enumerate(strategies)]
    per_stage = len(layers) // pp
    return {"pp": pp, "micro_batches": micro_batches, "global_batch": global_batch,
            "stages": [{"layers": layers[s * per_stage:(s + 1) * per_stage]} for s in range(pp)]}


def test_training_layout():
    got = training_layout(plan_of(["pp2-dp2-tp2+ckpt", "pp2-dp2-tp2", "pp2-dp2-tp2", "pp2-dp2-tp2+ckpt"], pp=2,
                                  micro_batches=2))
    assert got["mesh"] == {"tp": 2, "dp": 2, "order": "tp-dp-pp", "micro_batch_size": 2}
    assert (got["pp"], got["micro_batches"], got["samples_per_micro_batch"]) == (2, 2, 4)
    assert (got["stage_ranks"], got["stage_starts"], got["checkpoint"]) == ([[0, 1, 2, 3], [4, 5, 6, 7]], [2], [0, 3])
    # Layers of their own layouts, SDP among them: per-layer layouts, no mesh.
    mixed = training_layout(plan_of(["pp1-dp4", "pp1-dp2-tp2", "pp1-sdp4", "pp1-tp2-sdp2+ckpt"]))
    assert mixed["mesh"] is None and mixed["checkpoint"] == [3]
    assert mixed["layouts"] == [LayerLayout(dp=4), LayerLayout(tp=2, dp=2), LayerLayout(dp=4, sdp=True),
                                LayerLayout(tp=2, dp=2, sdp=True, tp_inner=False, checkpoint=True)]
    assert training_layout(plan_of(["pp1-sdp4", "pp1-sdp4"]))["mesh"] is None
    # What cannot run, refused with the reason.
    with pytest.raises(ValueError, match="does not split"):
        training_layout(plan_of(["pp1-dp4"], global_batch=6))
    with pytest.raises(ValueError, match="stages of different sizes"):
        training_layout(plan_of(["pp1-dp4", "pp1-dp2"]))
    with pytest.raises(ValueError, match="another pipeline degree"):
        training_layout(plan_of(["pp2-dp2", "pp1-dp4"], pp=1))
    overlapping = plan_of(["pp2-dp2", "pp2-dp2"], pp=2)
    overlapping["stages"][0]["ranks"], overlapping["stages"][1]["ranks"] = [0, 1], [1, 2]
    with pytest.raises(ValueError, match="covering ranks 0..3 once"):
        training_layout(overlapping)
    overlapping["stages"][0]["ranks"], overlapping["stages"][1]["ranks"] = [2, 0], [1, 3]  # unordered
    with pytest.raises(ValueError, match="ascending order"):
        training_layout(overlapping)
    with pytest.raises(ValueError, match="not list the layers in order"):
        training_layout({"pp": 1, "micro_batches": 1, "global_batch": 4,
                         "stages": [{"layers": [{"index": 1, "strategy": "pp1-dp4"}]}]})
