"""Adaptive weight decay (hf_arith.training.adaptive_decay): the schedule, the held-out score it reads, and a
resumed run that goes on at the decay it stopped at."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hf_arith.data.problems import ProblemSpec, sample
from hf_arith.data.streaming import encode_examples
from hf_arith.models.modeling_common import IGNORE_INDEX
from hf_arith.runtime.loading import load_checkpoint
from hf_arith.training.adaptive_decay import DECAY_FILE, AdaptiveWeightDecayCallback, decay_scale, teacher_forced_scores
from hf_arith.training.recipe import RecipeError, load_recipe
from hf_arith.training.run import train
from tests.test_training import SMALL


@pytest.mark.parametrize("exact, tokens, scale", [
    (0.0, 0.99, 1.0),
    (0.02, 0.69, 1.0),  # exact match alone is not enough: the token accuracy gate holds
    (0.02, 0.71, 0.1),
    (0.049, 0.9, 0.1),
    (0.05, 0.9, 0.01),
    (1.0, 1.0, 0.01),
])
def test_the_decay_steps_down_with_the_held_out_score(exact, tokens, scale):
    scores = {"exact_match": exact, "token_accuracy": tokens}
    assert decay_scale(scores, drop_exact=0.01, final_exact=0.05, min_token_accuracy=0.7, factor=0.1) == pytest.approx(scale)
    assert decay_scale(None, 0.01, 0.05, 0.7, 0.1) == 1.0


def test_the_optimizer_follows_the_latest_score_both_ways(monkeypatch):
    weights, bias = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.AdamW([{"params": [weights], "weight_decay": 0.01},
                                   {"params": [bias], "weight_decay": 0.0}])
    callback = AdaptiveWeightDecayCallback((None, None, None), base=0.01, every=10, drop_exact=0.01,
                                           final_exact=0.05, min_token_accuracy=0.7, factor=0.1)
    scores = iter([{"exact_match": 0.02, "token_accuracy": 0.8}, {"exact_match": 0.3, "token_accuracy": 0.9},
                   {"exact_match": 0.0, "token_accuracy": 0.5}])
    monkeypatch.setattr("hf_arith.training.adaptive_decay.teacher_forced_scores", lambda *a, **k: next(scores))
    seen = []
    for step in range(1, 31):
        state = SimpleNamespace(global_step=step, is_world_process_zero=True)
        callback.on_step_end(None, state, None, model=torch.nn.Linear(1, 1), optimizer=optimizer)
        seen.append((optimizer.param_groups[0]["weight_decay"], optimizer.param_groups[1]["weight_decay"]))
    assert seen[8] == (0.01, 0.0)  # no score before step 10
    assert seen[9] == pytest.approx((0.001, 0.0))
    assert seen[19] == pytest.approx((0.0001, 0.0))
    assert seen[29] == (0.01, 0.0)  # the circuit lost: the full decay is back
    assert [h["step"] for h in callback.history] == [10, 20, 30]


def test_the_score_is_teacher_forced_exact_match_on_answer_tokens():
    model, tokenizer = load_checkpoint("minimal-add10")  # the bundled adder answers every 10-digit sum
    fmt = tokenizer.arith_format
    problems = sample(ProblemSpec("add", 1, 10), 64, np.random.default_rng(0), split=None)
    ids, mask, labels = (torch.as_tensor(a) for a in encode_examples(problems, fmt, model.config.max_position_embeddings))
    perfect = teacher_forced_scores(model, ids, labels, attention_mask=mask, batch_size=16)
    assert perfect == {"exact_match": 1.0, "token_accuracy": 1.0}
    answer_tokens = int((labels[:, 1:] != IGNORE_INDEX).sum())
    wrong = labels.clone()
    first = int((wrong[0] != IGNORE_INDEX).nonzero()[0])
    wrong[0, first] = (wrong[0, first] + 1) % 10  # one digit of one answer changed
    scores = teacher_forced_scores(model, ids, wrong, attention_mask=mask, batch_size=16)
    assert scores["exact_match"] == pytest.approx(63 / 64)
    assert scores["token_accuracy"] == pytest.approx(1 - 1 / answer_tokens)
    model.train()
    teacher_forced_scores(model, ids[:4], labels[:4])
    assert model.training  # scored in eval mode, then put back as it was


@pytest.mark.parametrize("override, key", [
    (["optim.wd_drop_exact=0.01"], "optim.weight_decay"),  # nothing to lower
    (["optim.weight_decay=0.01", "optim.wd_drop_exact=0.1", "optim.wd_drop_exact_final=0.05"],
     "optim.wd_drop_exact_final"),
    (["optim.weight_decay=0.01", "optim.wd_drop_exact=0.01", "optim.wd_drop_factor=1.5"], "optim.wd_drop_factor"),
    (["optim.wd_drop_exact=1.5"], "optim.wd_drop_exact"),
    (["optim.wd_eval_steps=0"], "optim.wd_eval_steps"),
])
def test_bad_adaptive_decay_keys_are_refused_with_the_key_named(override, key):
    with pytest.raises(RecipeError, match=key):
        load_recipe("minimal-add10", ["optim.weight_decay=0"] + override)


def test_a_resumed_run_goes_on_at_the_decay_it_stopped_at(tmp_path):
    # Thresholds the small model passes within the run, so the decay drops while it trains.
    recipe = SMALL + ["optim.save_steps=150", "eval.samples=20", "optim.steps=300", "optim.weight_decay=0.5",
                      "optim.wd_drop_exact=0.01", "optim.wd_drop_exact_final=0.5", "optim.wd_drop_token_accuracy=0.3",
                      "optim.wd_eval_steps=50", "optim.wd_eval_samples=200"]
    whole, split = tmp_path / "whole", tmp_path / "split"
    for folder in (whole, split):
        train(load_recipe("minimal-add10", recipe + [f"output_dir={folder}"]), evaluate=False)
    history = json.loads((whole / DECAY_FILE).read_text())["history"]
    assert [h["step"] for h in history] == [50, 100, 150, 200, 250, 300]
    for h in history:  # every recorded decay is the one its score calls for
        assert h["weight_decay"] == pytest.approx(0.5 * decay_scale(h, 0.01, 0.5, 0.3, 0.1))
    assert history[0]["weight_decay"] == 0.5 and history[-1]["weight_decay"] < 0.5, history
    saved = json.loads((split / "checkpoint-150" / DECAY_FILE).read_text())["history"]
    assert saved == history[:3]
    # Continue from checkpoint-150 alone, as a run killed after it would.
    shutil.rmtree(split / "checkpoint-300")
    shutil.rmtree(split / "final")
    train(load_recipe("minimal-add10", recipe + [f"output_dir={split}"]), resume=True, evaluate=False)
    assert json.loads((split / DECAY_FILE).read_text())["history"] == history
    a, _ = load_checkpoint(str(whole / "final"))
    b, _ = load_checkpoint(str(split / "final"))
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), name


def test_decay_all_decays_the_norms_the_trainer_leaves_out():
    from transformers import Trainer

    from hf_arith.training.run import ArithTrainer
    model, _ = load_checkpoint("minimal-add10")
    names = [name for name, _ in model.named_parameters()]
    default = Trainer.get_decay_parameter_names(SimpleNamespace(), model)
    assert any("norm" in n for n in names) and not any("norm" in n for n in default)
    assert ArithTrainer.get_decay_parameter_names(SimpleNamespace(decay_all=True), model) == names
    assert load_recipe("minimal-add10", ["optim.decay_all=true"]).optim.decay_all is True
    with pytest.raises(RecipeError, match="optim.decay_all"):
        load_recipe("minimal-add10", ["optim.decay_all=3"])
