"""Stress sets: what each set holds, scores on hand-made answers, and a run through a real model."""

from __future__ import annotations

import pytest

import hf_arith.stress as stress
from hf_arith.formatting import NumberFormat
from hf_arith.loading import load_checkpoint
from hf_arith.stress import references, stress_sets, stress_test


def test_addition_sets():
    sets = stress_sets(NumberFormat(), max_digits=4, n=8, seed=0)
    assert set(sets) == {"commutativity", "carry_chains", "zero_operands", "max_length"}
    assert sets["carry_chains"] == ["9+1", "99+1", "999+1", "9999+1", "1+9", "1+99", "1+999", "1+9999"]
    assert sets["zero_operands"][0] == "0+0"
    assert all(t.startswith("0+") or t.endswith("+0") for t in sets["zero_operands"])
    assert all(len(a) == len(b) == 4 for a, b in (t.split("+") for t in sets["max_length"]))
    assert len(sets["max_length"]) == 8
    assert references(["9999+1", "1+9999"], NumberFormat()) == ["10000", "10000"]


def test_sets_follow_task_and_base():
    sub = stress_sets(NumberFormat(task="sub"), max_digits=3)
    assert "commutativity" not in sub and "10-1" in sub["carry_chains"] and "999-999" in sub["carry_chains"]
    mul = stress_sets(NumberFormat(task="mul", base=7), max_digits=2)
    assert mul["carry_chains"][:2] == ["6*6", "48*6"]  # 6 and 66 in base 7, times the largest digit
    sort = stress_sets(NumberFormat(task="sort", max_items=4), max_digits=2, n=5)
    assert set(sort) == {"zero_operands", "max_length"} and sort["zero_operands"][0] == "a:0,b:0"


def test_scores_by_hand(monkeypatch, add10):
    model, tok = load_checkpoint(add10)
    answers = {"1+2": "3", "2+1": "3", "30+4": "34", "4+30": "35", "9+1": "1", "0+0": "0"}
    monkeypatch.setattr(stress, "solve", lambda m, t, problems, **_: [answers[p] for p in problems])
    report = stress_test(model, tok, 10, sets={"commutativity": ["1+2", "30+4"], "carry_chains": ["9+1"],
                                               "zero_operands": ["0+0"]})
    assert list(report) == ["commutativity", "carry_chains", "zero_operands"]  # swapped set folded in
    c = report["commutativity"]
    assert c["exact_match"] == 1.0 and c["swapped_exact_match"] == 0.5 and c["agreement"] == 0.5
    carry = report["carry_chains"]
    assert carry["exact_match"] == 0.0 and carry["per_digit_accuracy"] == 0.0  # ' 1' against '10'
    assert carry["failures"] == [{"problem": "9+1", "expected": "10", "got": "1"}]
    assert report["zero_operands"]["exact_match"] == 1.0


def test_real_model_run_reports_every_set(add10):
    model, tok = load_checkpoint(add10)
    report = stress_test(model, tok, 10, n=20)
    assert set(report) == {"commutativity", "carry_chains", "zero_operands", "max_length"}
    for name, r in report.items():
        assert r["n"] > 0 and 0.0 <= r["exact_match"] <= 1.0, name
        assert len(r["failures"]) <= stress.SHOW_FAILURES
    assert 0.0 <= report["commutativity"]["agreement"] <= 1.0
    assert report["carry_chains"]["n"] == 20


@pytest.mark.parametrize("digits", [1, 3])
def test_max_length_set_respects_the_requested_length(digits):
    sets = stress_sets(NumberFormat(), max_digits=digits, n=4)
    assert all(len(x) == digits for t in sets["max_length"] for x in t.split("+"))
