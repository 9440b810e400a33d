"""The learning-rate drop on the held-out scores (hf_arith.training.held_out_lr)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from transformers import TrainerControl

from hf_arith.training.adaptive_decay import DECAY_FILE
from hf_arith.training.held_out_lr import HeldoutLearningRateDrop
from hf_arith.training.recipe import RecipeError, load_recipe
from hf_arith.training.run import train
from tests.test_best_held_out import SCORED
from tests.test_training import SMALL


def _optimizer():
    """One-parameter SGD on a schedule that halves the rate every step, as the Trainer steps it."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5 ** step)


def _step(callback, optimizer, scheduler, step, exact=None):
    """One Trainer step: the update, the schedule's step, then the score (if any) and the callbacks."""
    optimizer.step()
    scheduler.step()
    if exact is not None:
        callback.scores.history.append({"step": step, "exact_match": exact, "token_accuracy": exact})
    state = SimpleNamespace(global_step=step, is_world_process_zero=True)
    callback.on_step_end(SimpleNamespace(), state, TrainerControl(), optimizer=optimizer, lr_scheduler=scheduler)


def test_the_rate_follows_the_schedule_until_the_score_reaches_the_drop_then_never_exceeds_a_share_of_the_peak():
    optimizer, scheduler = _optimizer()
    callback = HeldoutLearningRateDrop(SimpleNamespace(history=[]), drop_exact=0.5, factor=0.1)
    rates = []
    for step, exact in enumerate([0.1, None, 0.6, None, 0.2, None], start=1):
        _step(callback, optimizer, scheduler, step, exact)
        rates.append(optimizer.param_groups[0]["lr"])
    # The schedule (0.5 ** step) until step 3's score; then at most 0.1 of the peak (1.0): step 3's 0.125
    # is capped, and from step 4 on the schedule is under the cap. The cap never compounds, and it holds
    # after the score falls again (step 5).
    assert rates == pytest.approx([0.5, 0.25, 0.1, 0.0625, 0.03125, 0.015625])
    assert callback.record() == {"drop_exact": 0.5, "factor": 0.1, "dropped_at_step": 3}


def test_a_resumed_run_past_its_drop_starts_at_the_lower_rate():
    optimizer, scheduler = _optimizer()
    scores = SimpleNamespace(history=[{"step": 3, "exact_match": 0.2, "token_accuracy": 0.8},
                                      {"step": 6, "exact_match": 0.7, "token_accuracy": 0.9}])
    callback = HeldoutLearningRateDrop(scores, drop_exact=0.5, factor=0.25)
    assert callback.dropped_at == 6
    callback.on_train_begin(SimpleNamespace(), SimpleNamespace(), TrainerControl(), optimizer=optimizer,
                            lr_scheduler=scheduler)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.25)


def test_a_run_trains_at_the_lower_rate_from_the_score_that_reaches_the_drop(tmp_path):
    out = tmp_path / "run"
    # The small model passes 1 % exact match within 300 steps (tests/test_adaptive_decay.py).
    summary = train(load_recipe("minimal-add10", SCORED + ["optim.save_steps=50", "optim.lr_drop_exact=0.01",
                                                           "optim.lr_drop_factor=0.02", f"output_dir={out}"]),
                    evaluate=False)
    history = json.loads((out / DECAY_FILE).read_text())["history"]
    first = next(h["step"] for h in history if h["exact_match"] >= 0.01)
    assert summary["held_out_lr_drop"] == {"drop_exact": 0.01, "factor": 0.02, "dropped_at_step": first}
    # Each checkpoint's optimizer holds the rate of the next step; its scheduler the schedule's own, whose
    # peak is the recipe's learning rate.
    checked, capped = [], []
    for step in range(50, summary["steps"] + 1, 50):
        folder = out / f"checkpoint-{step}"
        if not folder.is_dir():
            continue
        checked.append(step)
        used = torch.load(folder / "optimizer.pt", weights_only=True)["param_groups"][0]["lr"]
        scheduled = torch.load(folder / "scheduler.pt", weights_only=True)["_last_lr"][0]
        assert used == pytest.approx(min(scheduled, 0.002 * 0.02) if step >= first else scheduled), step
        capped += [step] if used < scheduled else []
    assert capped, (first, checked)  # the cap was below the schedule at some checkpoint after the drop


@pytest.mark.parametrize("override, words", [
    (["optim.lr_drop_exact=0.5"], "optim.lr_drop_exact read the held-out scores"),
    (["optim.lr_drop_exact=0.5", "optim.lr_drop_factor=1.0", "optim.weight_decay=0.01", "optim.wd_drop_exact=1.0",
      "optim.wd_drop_exact_final=1.0"], "optim.lr_drop_factor must be in"),
    (["optim.lr_drop_exact=2"], "optim.lr_drop_exact must be from 0 to 1"),
])
def test_bad_learning_rate_drops_are_refused_in_one_line(override, words):
    with pytest.raises(RecipeError, match=words):
        load_recipe("minimal-add10", SMALL + override)
