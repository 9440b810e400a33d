"""Random restarts (hf_arith.training.seed_screen): candidate inits screened on their early loss, one continued."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from hf_arith.runtime.loading import load_checkpoint
from hf_arith.training.recipe import RecipeError, load_recipe
from hf_arith.training.run import train
from hf_arith.training.seed_screen import SCREEN_FILE, logged_loss, logged_losses
from tests.test_training import SMALL

BASE = SMALL + ["optim.steps=20", "optim.save_steps=10", "optim.logging_steps=5", "eval.samples=20"]
SCREEN = ["optim.screen_steps=10", "optim.screen_tries=3"]


def _weights(folder):
    model, _ = load_checkpoint(str(folder))
    return model.state_dict()


def _same(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.values(), b.values()))


def test_without_a_pass_every_init_is_tried_and_the_lowest_loss_goes_on(tmp_path):
    out = tmp_path / "screened"
    summary = train(load_recipe("minimal-add10", BASE + SCREEN + ["optim.screen_max_loss=0", f"output_dir={out}"]),
                    evaluate=False)
    record = json.loads((out / SCREEN_FILE).read_text())
    seeds = [c["seed"] for c in record["candidates"]]
    losses = [c["loss"] for c in record["candidates"]]
    assert seeds == [0, 1000, 2000] and all(loss > 0 for loss in losses)
    # Each candidate's curve: the losses logged every optim.logging_steps, ending at the screened one.
    assert [list(c["losses"]) for c in record["candidates"]] == [["5", "10"]] * 3
    assert [c["losses"]["10"] for c in record["candidates"]] == pytest.approx(losses, abs=1e-4)
    assert record["chosen_seed"] == seeds[losses.index(min(losses))]
    assert summary["screen"] == record and summary["steps"] == 20
    # Only the chosen init keeps its screen checkpoint; the run goes on in the output folder itself.
    assert sorted(p.name for p in (out / "screen").iterdir()) == [f"seed-{record['chosen_seed']}"]
    assert (out / "checkpoint-20").is_dir() and (out / "final" / "model.safetensors").is_file()
    # Continuing the chosen init is the same run as training that seed from scratch.
    plain = tmp_path / "plain"
    train(load_recipe("minimal-add10", BASE + [f"optim.seed={record['chosen_seed']}", f"output_dir={plain}"]),
          evaluate=False)
    assert _same(_weights(out / "final"), _weights(plain / "final"))


def test_the_first_init_under_the_bound_goes_on_without_trying_more(tmp_path):
    out = tmp_path / "screened"
    train(load_recipe("minimal-add10", BASE + SCREEN + ["optim.screen_max_loss=100", f"output_dir={out}"]),
          evaluate=False)
    record = json.loads((out / SCREEN_FILE).read_text())
    assert [c["seed"] for c in record["candidates"]] == [0] and record["chosen_seed"] == 0
    plain = tmp_path / "plain"
    train(load_recipe("minimal-add10", BASE + [f"output_dir={plain}"]), evaluate=False)
    assert _same(_weights(out / "final"), _weights(plain / "final"))


def test_resume_goes_on_with_the_chosen_init_and_its_seed(tmp_path):
    out = tmp_path / "screened"
    recipe = BASE + SCREEN + ["optim.screen_max_loss=0", f"output_dir={out}"]
    train(load_recipe("minimal-add10", recipe), evaluate=False)
    whole = _weights(out / "final")
    # As if stopped after the screen's first checkpoint in the output folder, then resumed.
    shutil.rmtree(out / "checkpoint-20")
    shutil.rmtree(out / "final")
    train(load_recipe("minimal-add10", recipe), resume=True, evaluate=False)
    assert _same(whole, _weights(out / "final"))


def test_resume_of_an_unfinished_screen_tries_only_the_inits_left(tmp_path):
    out = tmp_path / "screened"
    recipe = BASE + SCREEN + ["optim.screen_max_loss=0", f"output_dir={out}"]
    train(load_recipe("minimal-add10", recipe), evaluate=False)
    record = json.loads((out / SCREEN_FILE).read_text())
    whole = _weights(out / "final")
    # As a run stopped during its third init leaves it: two scored (the better one's checkpoint kept),
    # nothing trained in the output folder itself yet.
    first_two = {k: v for k, v in record.items() if k not in ("chosen_seed", "screen_seconds")}
    first_two["candidates"] = record["candidates"][:2]
    shutil.rmtree(out / "final")
    for path in [*out.glob("checkpoint-*"), out / "screen" / "seed-2000"]:
        shutil.rmtree(path, ignore_errors=True)
    (out / SCREEN_FILE).write_text(json.dumps(first_two))
    summary = train(load_recipe("minimal-add10", recipe), resume=True, evaluate=False)
    again = summary["screen"]
    assert again["candidates"][:2] == record["candidates"][:2]  # not trained again
    assert again["candidates"][2]["loss"] == pytest.approx(record["candidates"][2]["loss"])
    assert again["chosen_seed"] == record["chosen_seed"]
    assert _same(whole, _weights(out / "final"))


def test_logged_loss_reads_the_step_asked_for():
    history = [{"step": 5, "loss": 2.0}, {"step": 10, "loss": 1.5}, {"step": 10, "eval_loss": 9.0}]
    assert logged_loss(history, 10) == 1.5
    assert logged_loss(history, 15) is None
    assert logged_losses(history) == {"5": 2.0, "10": 1.5}


@pytest.mark.parametrize("override, words", [
    (["optim.screen_steps=7"], "multiple of optim.logging_steps"),
    (["optim.screen_steps=20"], "below optim.steps"),
    (["optim.screen_steps=10", "optim.screen_tries=0"], "optim.screen_tries"),
    (["optim.screen_steps=10", "optim.screen_max_loss=-1"], "optim.screen_max_loss"),
    (["optim.screen_steps=10", "init_from=minimal-add10"], "fresh inits"),
])
def test_bad_screen_settings_are_refused_in_one_line(override, words):
    with pytest.raises(RecipeError, match=words):
        load_recipe("minimal-add10", BASE + override)
