"""The abacus index-separation penalty (`optim.abacus_separation`)."""

from __future__ import annotations

import pytest
import torch

from hf_arith.runtime.loading import load_checkpoint
from hf_arith.training.index_separation import abacus_separation_penalty, has_abacus_table
from hf_arith.training.recipe import RecipeError, load_recipe, load_stages
from hf_arith.training.run import train


def test_penalty_finds_the_collisions_of_a_first_stage_model_and_descends_them_away():
    # abacus-gpt2-mul trained without index separation: indices 10 or more apart still score high
    # against each other; the bundled abacus-gpt2-add went through a separation stage.
    model, _ = load_checkpoint("abacus-gpt2-mul")
    model.train()
    before = abacus_separation_penalty(model, gap=10)
    assert before > 0.1
    fixed, _ = load_checkpoint("abacus-gpt2-add")
    assert abacus_separation_penalty(fixed, gap=10) < 0.01 * before
    params = [model.transformer.abacus.weight] + [p for b in model.transformer.h for p in b.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2)
    for _ in range(30):
        opt.zero_grad()
        abacus_separation_penalty(model, gap=10).backward()
        opt.step()
    assert abacus_separation_penalty(model, gap=10) < 0.1 * before
    # Pairs closer than the gap (the ones training sees) carry no penalty of their own.
    assert abacus_separation_penalty(model, gap=len(model.transformer.abacus.weight)) == 0


def test_separation_is_refused_for_models_without_abacus_positions(tmp_path):
    with pytest.raises(RecipeError, match="abacus_separation"):
        train(load_recipe("minimal-add10", ["optim.abacus_separation=1", "optim.steps=1", f"output_dir={tmp_path}"]))
    with pytest.raises(RecipeError, match="abacus_separation"):
        load_recipe("abacus-gpt2-add", ["optim.abacus_separation=-1"])


def test_training_with_separation_runs_end_to_end(tmp_path):
    # The first stage of the preset (the chain's stages are tested in test_recipe_stages.py).
    recipe = load_stages("abacus-gpt2-add", ["init_from=abacus-gpt2-add", "optim.abacus_separation=1",
                                             "optim.steps=3", "optim.batch_size=16", "optim.save_steps=1000",
                                             "eval.samples=50", f"output_dir={tmp_path}"])[0].recipe
    summary = train(recipe, output_dir=str(tmp_path))
    model, _ = load_checkpoint(summary["output"])
    assert has_abacus_table(model) and summary["steps"] == 3
