"""Plans whose layers have their own layouts train through examples/train_gpt.py --plan with the losses of
a single process: TP and DP layers mixed in one stage, SDP layers beside TP ones (the tied embedding
sharded), checkpointing that differs by layer, and a pipeline whose stages differ (a re-layout where the
activations arrive, the head alone in its stage, the embedding's two copies split differently) on the
ranks the plan gives them (not runs of consecutive ranks).

Plain SGD with a large step: Adam's first steps are nearly sign(gradient), so a gradient off by a factor
would give Adam's losses to 1e-6; SGD's move with it (a missing re-layout scale shows at 3e-3)."""
import json

import pytest

from gpt_runs import train

MODEL = ["--layers", "2", "--hidden", "32", "--heads", "4", "--vocab", "64", "--seq-len", "16",
         "--optimizer", "sgd", "--lr", "0.5", "--steps", "3"]
GLOBAL_BATCH = 16

# Per stage, its ranks (None: the planner's runs of consecutive ranks) and the strategy of each layer:
# embedding, block 0, block 1, head.
PLANS = {
    "tp_and_dp_in_one_stage": [(None, ["pp1-dp4", "pp1-tp2-dp2", "pp1-dp2-tp2+ckpt", "pp1-dp4"])],
    "sdp_beside_tp": [(None, ["pp1-sdp4", "pp1-tp4+ckpt", "pp1-sdp4+ckpt", "pp1-tp2-sdp2"])],
    "stages_of_their_own": [([0, 2], ["pp2-sdp2", "pp2-tp2", "pp2-dp2+ckpt"]), ([1, 3], ["pp2-tp2"])],
}


def plan_json(stages, micro_batches=2):
    index, out = 0, []
    for ranks, strategies in stages:
        out.append({"layers": [{"index": index + k, "strategy": s} for k, s in enumerate(strategies)]})
        if ranks is not None:
            out[-1]["ranks"] = ranks
        index += len(strategies)
    return {"pp": len(stages), "micro_batches": micro_batches, "global_batch": GLOBAL_BATCH, "stages": out}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    work = tmp_path_factory.mktemp("single")
    return train(str(work), "single", 1, *MODEL, "--micro-batches", "4", "--micro-batch-size", "4")[1]


@pytest.mark.parametrize("name", list(PLANS))
def test_per_layer_plan_trains_with_single_process_losses(name, reference, tmp_path):
    with open(tmp_path / "plan.json", "w") as f:
        json.dump(plan_json(PLANS[name]), f)
    out, losses = train(str(tmp_path), name, 4, *MODEL, "--plan", "plan.json")
    assert "per-layer layouts on 4 ranks" in out, out
    assert losses == pytest.approx(reference, rel=1e-5)


def test_blocks_of_unlike_widths_train_with_single_process_losses(tmp_path):
    """A model of unlike layers (--ffn-mults: MLPs 1 and 8 hiddens wide), the kind the planner gives
    different layouts per layer, under TP and DP layers in one stage."""
    unlike = MODEL + ["--ffn-mults", "1,8"]
    (tmp_path / "single").mkdir()
    reference = train(str(tmp_path / "single"), "single", 1, *unlike, "--micro-batches", "4",
                      "--micro-batch-size", "4")[1]
    with open(tmp_path / "plan.json", "w") as f:
        json.dump(plan_json(PLANS["tp_and_dp_in_one_stage"]), f)
    out, losses = train(str(tmp_path), "unlike", 4, *unlike, "--plan", "plan.json")
    assert "per-layer layouts on 4 ranks" in out, out
    assert losses == pytest.approx(reference, rel=1e-5)


def test_unlike_widths_are_checked_before_anything_runs():
    from loom.parallel import gpt

    with pytest.raises(ValueError, match="ffn_mults needs a positive integer for each of the 2 blocks"):
        gpt.GPTConfig(layers=2, ffn_mults=(1,)).check(1)
    with pytest.raises(ValueError, match="ffn_mults needs a positive integer"):
        gpt.GPTConfig(layers=2, ffn_mults=(1, 0)).check(1)
