"""Every bundled model writes the answers recorded in tests/data/bundled_answers.json, wrong ones
included, for every decoding setting it supports: refactoring the model code must not change
what a shipped model says. `scripts/record_bundled_answers.py` records the file."""

import json
from pathlib import Path

import pytest

import hf_arith
from hf_arith.runtime.loading import load_checkpoint

RECORD = json.loads((Path(__file__).parent / "data" / "bundled_answers.json").read_text())


def test_every_bundled_model_has_a_record():
    assert sorted(RECORD) == hf_arith.bundled_models()


@pytest.mark.parametrize("name", sorted(RECORD))
def test_bundled_model_answers_are_unchanged(name):
    model, tokenizer = load_checkpoint(name)
    problems = RECORD[name]["problems"]
    for run in RECORD[name]["runs"]:
        got = hf_arith.solve(model, tokenizer, problems, **run["setting"])
        changed = [(p, want, have) for p, want, have in zip(problems, run["answers"], got, strict=True) if want != have]
        assert not changed, f"{name} {run['setting']}: {len(changed)} answers changed, first {changed[0]}"
