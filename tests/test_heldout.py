"""Evaluation never scores a problem from the training split, whichever public entry point draws it.

The oracle is the split hash itself (`hf_arith.data.problems.split_of`): each problem an entry point
hands to the model is rebuilt from its plain text and must hash into the test split. Every
held-out accuracy the project publishes rests on this.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import hf_arith.evaluation.held_out as evaluation
from hf_arith.cli import main
from hf_arith.data.formatting import problems_from_ints
from hf_arith.data.problems import split_of
from hf_arith.evaluation.grid import length_grid
from hf_arith.runtime.loading import load_checkpoint
from hf_arith.training.recipe import load_recipe
from hf_arith.training.run import train


def in_test_split(texts: list[str]) -> np.ndarray:
    """For plain addition problems ('123+45'): True where the problem is in the test split."""
    rows = [[int(v) for v in t.split("+")] for t in texts]
    return split_of(problems_from_ints("add", rows, 10))


@pytest.fixture
def recorded(monkeypatch) -> list[str]:
    """Every problem the evaluation module hands to `solve`, which still answers it."""
    seen: list[str] = []
    solve = evaluation.solve

    def recording(model, tokenizer, problems, *args, **kwargs):
        seen.extend([problems] if isinstance(problems, str) else problems)
        return solve(model, tokenizer, problems, *args, **kwargs)

    monkeypatch.setattr(evaluation, "solve", recording)
    return seen


def test_the_oracle_tells_the_splits_apart():
    # A tenth of all problems is held out, so a check that only ever saw True would prove nothing.
    flags = in_test_split([f"{a}+{b}" for a in range(40) for b in range(40)])
    assert 0.05 < flags.mean() < 0.15


def test_hf_arith_eval_scores_held_out_problems_only(add10, tmp_path, capsys, recorded):
    report = tmp_path / "report.json"
    assert main(["eval", str(add10), "--samples", "300", "--seed", "5", "--json", str(report)]) == 0, \
        capsys.readouterr().err
    assert len(recorded) == json.loads(report.read_text())["n"] == 300
    assert in_test_split(recorded).all()


def test_length_grid_draws_held_out_problems_only(add10):
    model, tok = load_checkpoint(add10)
    # Lengths 1-6 cover both ways a cell is drawn: enumerated (small cells) and rejection-sampled.
    result = length_grid(model, tok, (1, 6), samples_per_cell=6, seed=2, keep_problems=True)
    texts = [p["problem"] for p in result["problems"]]
    assert len(texts) == 36 * 6
    assert in_test_split(texts).all()


def test_the_training_runs_final_evaluation_is_held_out(tmp_path, recorded):
    recipe = load_recipe("minimal-add10", ["optim.steps=2", "optim.compile=false", "eval.samples=120",
                                           "eval.verify=false", "optim.save_steps=1000", f"output_dir={tmp_path}"])
    summary = train(recipe)
    assert summary["heldout"]["n"] == 120 and len(recorded) >= 120
    assert in_test_split(recorded).all()
