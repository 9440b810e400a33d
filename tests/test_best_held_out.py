"""Early stopping and best-weights keeping on the held-out scores (hf_arith.training.best_held_out), and the
screen on held-out token accuracy (hf_arith.training.seed_screen)."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest
import torch
from transformers import TrainerControl

from hf_arith.runtime.loading import load_checkpoint
from hf_arith.training.adaptive_decay import DECAY_FILE
from hf_arith.training.best_held_out import BEST_FILE, BEST_WEIGHTS, BestHeldoutCallback
from hf_arith.training.recipe import RecipeError, load_recipe
from hf_arith.training.run import train
from hf_arith.training.seed_screen import SCREEN_FILE, AbandonOnPlateau
from tests.test_training import SMALL

SCORED = SMALL + ["eval.samples=20", "optim.steps=300", "optim.weight_decay=0.01", "optim.wd_drop_exact=1.0",
                  "optim.wd_drop_exact_final=1.0", "optim.wd_eval_steps=50", "optim.wd_eval_samples=200"]


def _drive(callback, model, scores, tmp_path):
    """Feed `callback` one held-out score per step (the weights set to the step number), then end training."""
    args = SimpleNamespace(output_dir=str(tmp_path))
    control = TrainerControl()
    for step, exact in enumerate(scores, start=1):
        with torch.no_grad():
            model.weight.fill_(step)
        callback.scores.history.append({"step": step, "exact_match": exact, "token_accuracy": exact})
        state = SimpleNamespace(global_step=step, is_world_process_zero=True)
        control = callback.on_step_end(args, state, control, model=model)
        if control.should_training_stop:
            break
    callback.on_train_end(args, state, control, model=model)
    return control


def test_keep_best_ends_on_the_best_scored_weights(tmp_path):
    model = torch.nn.Linear(2, 1, bias=False)
    callback = BestHeldoutCallback(SimpleNamespace(history=[]), stop_exact=0.0, keep_best=True)
    control = _drive(callback, model, [0.1, 0.6, 0.4, 0.0], tmp_path)
    assert not control.should_training_stop
    assert torch.all(model.weight == 2)  # step 2 scored best; the last score (0.0) was lower
    assert callback.record()["best"] == {"step": 2, "exact_match": 0.6, "token_accuracy": 0.6}
    assert json.loads((tmp_path / BEST_FILE).read_text())["best"]["step"] == 2


def test_without_keep_best_the_last_weights_stay(tmp_path):
    model = torch.nn.Linear(2, 1, bias=False)
    callback = BestHeldoutCallback(SimpleNamespace(history=[]), stop_exact=0.0, keep_best=False)
    _drive(callback, model, [0.1, 0.6, 0.4, 0.0], tmp_path)
    assert torch.all(model.weight == 4) and callback.record()["best"] is None


def test_training_stops_once_the_held_out_score_reaches_stop_exact(tmp_path):
    model = torch.nn.Linear(2, 1, bias=False)
    callback = BestHeldoutCallback(SimpleNamespace(history=[]), stop_exact=0.5, keep_best=True)
    control = _drive(callback, model, [0.1, 0.3, 0.5, 0.9], tmp_path)
    assert control.should_training_stop and control.should_save
    assert callback.record()["stopped_at_step"] == 3 and torch.all(model.weight == 3)


def test_a_run_stops_early_and_its_final_weights_are_its_best_checkpoint(tmp_path):
    out = tmp_path / "run"
    # The small model passes 1 % exact match within 300 steps (tests/test_adaptive_decay.py).
    summary = train(load_recipe("minimal-add10", SCORED + ["optim.save_steps=50", "optim.stop_exact=0.01",
                                                           "optim.keep_best=true", f"output_dir={out}"]),
                    evaluate=False)
    history = json.loads((out / DECAY_FILE).read_text())["history"]
    first = next(h["step"] for h in history if h["exact_match"] >= 0.01)
    assert summary["steps"] == first < 300 and history[-1]["step"] == first
    record = summary["held_out_best"]
    assert record["stopped_at_step"] == first
    best = max(history, key=lambda h: (h["exact_match"], h["token_accuracy"]))
    assert record["best"]["step"] == best["step"]
    final, _ = load_checkpoint(str(out / "final"))
    kept, _ = load_checkpoint(str(out / f"checkpoint-{best['step']}"))
    for (name, x), y in zip(final.state_dict().items(), kept.state_dict().values()):
        assert torch.equal(x, y), name
    assert (out / f"checkpoint-{first}" / BEST_WEIGHTS).is_file()


def test_the_screen_can_pick_on_held_out_token_accuracy(tmp_path):
    out = tmp_path / "screened"
    screen = ["optim.screen_steps=50", "optim.screen_tries=3", "optim.save_steps=50", "optim.steps=100",
              "optim.logging_steps=50"]
    # A bound no init reaches: all three are tried and the most accurate one goes on.
    summary = train(load_recipe("minimal-add10", SCORED + screen + ["optim.screen_min_token_accuracy=1.0",
                                                                    f"output_dir={out}"]), evaluate=False)
    record = json.loads((out / SCREEN_FILE).read_text())
    accuracies = [c["token_accuracy"] for c in record["candidates"]]
    assert len(accuracies) == 3 and all(0 < a < 1 for a in accuracies)
    assert record["chosen_seed"] == record["candidates"][accuracies.index(max(accuracies))]["seed"]
    assert summary["steps"] == 100
    # A bound the first init passes: it goes on alone.
    low = tmp_path / "low"
    train(load_recipe("minimal-add10", SCORED + screen + [f"optim.screen_min_token_accuracy={min(accuracies) / 2}",
                                                          f"output_dir={low}"]), evaluate=False)
    assert [c["seed"] for c in json.loads((low / SCREEN_FILE).read_text())["candidates"]] == [0]


@pytest.mark.parametrize("override, words", [
    (["optim.stop_exact=0.9"], "optim.stop_exact read the held-out scores"),
    (["optim.keep_best=true"], "optim.keep_best read the held-out scores"),
    (["optim.stop_exact=1.5", "optim.weight_decay=0.01", "optim.wd_drop_exact=1.0", "optim.wd_drop_exact_final=1.0"],
     "optim.stop_exact must be from 0 to 1"),
    (["optim.screen_steps=100", "optim.logging_steps=100", "optim.screen_min_token_accuracy=0.3",
      "optim.weight_decay=0.01", "optim.wd_drop_exact=1.0", "optim.wd_drop_exact_final=1.0", "optim.wd_eval_steps=3000"],
     "multiple of optim.wd_eval_steps"),
    (["optim.screen_steps=100", "optim.logging_steps=100", "optim.screen_abandon_step=100", "optim.weight_decay=0.01",
      "optim.wd_drop_exact=1.0", "optim.wd_drop_exact_final=1.0", "optim.wd_eval_steps=50"],
     "screen_abandon_step .100. gives up"),
    (["optim.screen_steps=100", "optim.logging_steps=100", "optim.screen_abandon_step=250", "optim.weight_decay=0.01",
      "optim.wd_drop_exact=1.0", "optim.wd_drop_exact_final=1.0", "optim.wd_eval_steps=100"],
     "multiple of optim.wd_eval_steps .100."),
    (["optim.screen_steps=100", "optim.logging_steps=100", "optim.screen_abandon_step=200"],
     "optim.screen_abandon_step read the held-out scores"),
    (["optim.screen_abandon_exact=1.0"], "optim.screen_abandon_exact must be from 0 to 0.99"),
])
def test_bad_held_out_keys_are_refused_in_one_line(override, words):
    with pytest.raises(RecipeError, match=words):
        load_recipe("minimal-add10", SMALL + override)


def _plateau_scores(callback, scores):
    """Feed AbandonOnPlateau one held-out score per step; the step it stopped at (None: it did not)."""
    control = TrainerControl()
    for step, exact in enumerate(scores, start=1):
        callback.scores.history.append({"step": step, "exact_match": exact, "token_accuracy": 0.1 * step})
        control = callback.on_step_end(None, SimpleNamespace(global_step=step, is_world_process_zero=True), control)
        if control.should_training_stop:
            return step
    return None


@pytest.mark.parametrize("scores, exact, stopped", [
    ([0.0, 0.0, 0.0, 0.0], 0.0, 3),  # nothing solved by the step: given up there
    ([0.0, 0.01, 0.0, 0.0], 0.0, None),  # one score above 0 is enough to go on, even if it falls back
    ([0.0, 0.0], 0.0, None),  # the step never came
    ([0.0, 0.05, 0.02, 0.0], 0.05, 3),  # a stalled init: never above the bound
    ([0.0, 0.0, 0.06, 0.0], 0.05, None),  # above it at the step itself
])
def test_an_init_is_given_up_only_if_it_solved_too_little_by_the_step(scores, exact, stopped):
    callback = AbandonOnPlateau(SimpleNamespace(history=[]), step=3, exact=exact)
    assert _plateau_scores(callback, scores) == stopped
    assert callback.abandoned == ({"step": 3, "best_exact_match": max(scores[:3]),
                                   "best_token_accuracy": pytest.approx(0.3)} if stopped else None)


def test_a_given_up_init_makes_way_for_the_next_and_the_last_one_is_kept(tmp_path):
    out = tmp_path / "screened"
    # A learning rate too small to solve anything: every init stays at 0 held-out exact match. The first passes
    # the screen, is given up at step 100, and the second (the last try) goes on to the end.
    settings = SCORED + ["optim.learning_rate=1e-7", "optim.steps=150", "optim.save_steps=50",
                         "optim.logging_steps=50", "optim.screen_steps=50", "optim.screen_tries=2",
                         "optim.screen_max_loss=100"]
    summary = train(load_recipe("minimal-add10", settings + ["optim.screen_abandon_step=100", f"output_dir={out}"]),
                    evaluate=False)
    record = json.loads((out / SCREEN_FILE).read_text())
    assert [c["seed"] for c in record["candidates"]] == [0, 1000]
    assert [(a["seed"], a["step"]) for a in record["abandoned"]] == [(0, 100)]
    assert record["abandoned"][0]["seconds"] > 0 and record["chosen_seed"] == 1000
    assert record["screen_seconds"] == pytest.approx(
        sum(c["seconds"] for c in record["candidates"]) + record["abandoned"][0]["seconds"], abs=0.2)
    assert summary["steps"] == 150 and summary["screen"] == record
    assert not (out / "screen" / "seed-0").exists()
    # The run went on with init 1000 from its screen checkpoint: the same weights as training it alone.
    plain = tmp_path / "plain"
    train(load_recipe("minimal-add10", settings + ["optim.screen_steps=0", "optim.seed=1000", f"output_dir={plain}"]),
          evaluate=False)
    final, _ = load_checkpoint(str(out / "final"))
    alone, _ = load_checkpoint(str(plain / "final"))
    for (name, x), y in zip(final.state_dict().items(), alone.state_dict().values()):
        assert torch.equal(x, y), name
    # Stopped right after init 0 was given up (before init 1000's first checkpoint): --resume goes on with 1000.
    for path in [out / "final", *out.glob("checkpoint-*")]:
        shutil.rmtree(path)
    (out / SCREEN_FILE).write_text(json.dumps({**record, "chosen_seed": None}))
    again = train(load_recipe("minimal-add10", settings + ["optim.screen_abandon_step=100", f"output_dir={out}"]),
                  resume=True, evaluate=False)
    assert again["screen"]["chosen_seed"] == 1000 and again["screen"]["abandoned"] == record["abandoned"]
    resumed, _ = load_checkpoint(str(out / "final"))
    for (name, x), y in zip(resumed.state_dict().items(), alone.state_dict().values()):
        assert torch.equal(x, y), name
