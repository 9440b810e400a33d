"""Grokfast-EMA (hf_arith.training.grokfast) and the cosine floor: recipe keys, not forks of the training loop."""

from __future__ import annotations

import math
import shutil
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from hf_arith.runtime.loading import load_checkpoint
from hf_arith.training.grokfast import GROKFAST_FILE, GrokfastCallback
from hf_arith.training.recipe import RecipeError, load_recipe
from hf_arith.training.run import cosine_with_restart, train
from tests.test_training import SMALL


def test_the_filter_adds_lambda_times_the_gradient_average_from_its_start_step():
    layer = torch.nn.Linear(3, 1, bias=False)
    callback = GrokfastCallback(alpha=0.9, lamb=2.0, start_step=2)
    grads = [torch.randn(1, 3) for _ in range(6)]
    ema = None
    for step, g in enumerate(grads):
        layer.weight.grad = g.clone()
        callback.on_pre_optimizer_step(None, SimpleNamespace(global_step=step), None, model=layer)
        if step < 2:
            expected = g  # before start_step: untouched
        else:
            ema = g.clone() if ema is None else 0.9 * ema + 0.1 * g
            expected = g + 2.0 * ema
        torch.testing.assert_close(layer.weight.grad, expected)


@pytest.mark.parametrize("alpha, lamb, start", [(1.0, 2.0, 0), (0.5, 0.0, 0), (0.5, 1.0, -1)])
def test_bad_settings_are_refused(alpha, lamb, start):
    with pytest.raises(ValueError, match="Grokfast needs"):
        GrokfastCallback(alpha, lamb, start)


@pytest.mark.parametrize("override, key", [
    ("optim.grokfast_alpha=1.0", "optim.grokfast_alpha"),
    ("optim.grokfast_lambda=-1", "optim.grokfast_lambda"),
    ("optim.grokfast_start=-0.5", "optim.grokfast_start"),
    ("optim.min_lr_ratio=1.5", "optim.min_lr_ratio"),
])
def test_recipe_keys_are_bounded_with_the_key_named(override, key):
    with pytest.raises(RecipeError, match=key):
        load_recipe("minimal-add10", [override])


def test_the_cosine_ends_at_its_floor_and_the_restart_keeps_it():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = cosine_with_restart(opt, total=100, warmup=0, restart_at=0.5, restart_scale=0.2, min_ratio=0.1)
    factor = sched.lr_lambdas[0]
    assert factor(0) == pytest.approx(1.0)
    assert factor(25) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert factor(49) == pytest.approx(0.1, abs=0.01)  # the first cosine ends at its floor, not at zero
    assert factor(50) == pytest.approx(0.2)
    assert factor(99) == pytest.approx(0.02, abs=0.002)  # the restart's floor: 0.1 of its own peak


def test_a_resumed_grokfast_run_ends_with_the_weights_of_an_uninterrupted_one(tmp_path):
    recipe = SMALL + ["optim.save_steps=10", "eval.samples=20", "optim.grokfast_lambda=2.0",
                      "optim.grokfast_start=5", "optim.grokfast_alpha=0.9"]
    whole = tmp_path / "whole"
    train(load_recipe("minimal-add10", recipe + ["optim.steps=20", f"output_dir={whole}"]), evaluate=False)
    split = tmp_path / "split"
    train(load_recipe("minimal-add10", recipe + ["optim.steps=20", f"output_dir={split}"]), evaluate=False)
    saved = load_file(str(split / "checkpoint-10" / GROKFAST_FILE))
    assert saved and all(torch.isfinite(t).all() for t in saved.values())
    # Continue from checkpoint-10 alone, as a run killed after it would; once more without the averages.
    shutil.rmtree(split / "checkpoint-20")
    shutil.rmtree(split / "final")
    forgetful = tmp_path / "forgetful"
    shutil.copytree(split, forgetful)
    (forgetful / "checkpoint-10" / GROKFAST_FILE).unlink()
    for folder in (split, forgetful):
        train(load_recipe("minimal-add10", recipe + ["optim.steps=20", f"output_dir={folder}"]), resume=True,
              evaluate=False)
    a, _ = load_checkpoint(str(whole / "final"))
    b, _ = load_checkpoint(str(split / "final"))
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), name
    d, _ = load_checkpoint(str(forgetful / "final"))
    assert not torch.equal(a.model.embed_tokens.weight, d.model.embed_tokens.weight)  # the averages mattered
    # Without the saved averages the resumed run would differ: the filter changes the weights.
    plain = tmp_path / "plain"
    train(load_recipe("minimal-add10", SMALL + ["optim.save_steps=10", "eval.samples=20", "optim.steps=20",
                                                f"output_dir={plain}"]), evaluate=False)
    c, _ = load_checkpoint(str(plain / "final"))
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)
