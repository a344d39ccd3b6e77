"""A plan from loom-plan trains through examples/train_gpt.py --plan with the losses of a single process:
the planner's own plan for the example GPT (its description measured with describe_module), and a plan with
TP, data-parallel groups on consecutive ranks and one block recomputed. Plans the training layer cannot
run yet are refused with a message saying why."""
import copy
import json
import os
import subprocess
import sys

import pytest
import torch

import loom
from loom.parallel import gpt
from loom.plan.machine import Machine, collective_model
from loom.plan.model import describe_module
from loom.plan.runtime import training_layout
from loom.plan.search import search

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "train_gpt.py")
MODEL = ["--layers", "2", "--hidden", "32", "--heads", "4", "--vocab", "64", "--seq-len", "16", "--lr", "1e-2"]
STEPS = 2


def package_env(**extra):
    """The environment for a child Python: this test's loom package first on its path, whatever a .pth
    file in site-packages points at."""
    here = os.path.dirname(os.path.dirname(loom.__file__))
    path = os.pathsep.join([here] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    return dict(os.environ, PYTHONPATH=path, **extra)


def run(workdir, name, nproc, *extra):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), EXAMPLE,
           *MODEL, "--steps", str(STEPS), "--save", os.path.join(workdir, name), "--plot", "", *extra]
    proc = subprocess.run(cmd, cwd=workdir, env=package_env(OMP_NUM_THREADS="1"), capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    history = torch.load(os.path.join(workdir, name, "rank00000.pt"), weights_only=False)["history"]
    return proc.stdout, [loss for _, loss in history]


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
    assert training_layout(other)["order"] == "dp-tp-pp"

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
    assert got == {"tp": 2, "pp": 2, "dp": 2, "order": "tp-dp-pp", "micro_batches": 2, "micro_batch_size": 2,
                   "stage_starts": [2], "checkpoint": [0, 3]}
    with pytest.raises(ValueError, match="one layout per model"):
        training_layout(plan_of(["pp1-dp4", "pp1-dp2-tp2"]))
    with pytest.raises(ValueError, match="SDP"):
        training_layout(plan_of(["pp1-sdp4", "pp1-sdp4"]))
    with pytest.raises(ValueError, match="does not split"):
        training_layout(plan_of(["pp1-dp4"], global_batch=6))
