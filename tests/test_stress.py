"""Stress sets: what each set holds, scores on hand-made answers, and a run through a real model."""

from __future__ import annotations

import pytest

import hf_arith.evaluation.stress as stress
from hf_arith.data.formatting import NumberFormat
from hf_arith.evaluation.stress import references, stress_sets, stress_test
from hf_arith.runtime.loading import load_checkpoint
from hf_arith.runtime.solving import LOW_CONFIDENCE, Answer, solve


def test_addition_sets():
    sets = stress_sets(NumberFormat(), max_digits=4, n=8, seed=0)
    assert set(sets) == {"commutativity", "carry_chains", "zero_operands", "max_length", "repeated_digits"}
    assert len(sets["repeated_digits"]) == 8
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
    assert set(sort) == {"zero_operands", "max_length", "ties", "repeated_digits", "tie_heavy", "near_ties"}
    assert sort["zero_operands"][0] == "a:0,b:0"
    # Ties: k copies of one number for every item count and length, the answer the labels in order.
    assert "a:99,b:99,c:99,d:99" in sort["ties"] and len(sort["ties"]) == 2 * 2 * 3
    assert all(len({t.split(":")[1] for t in text.split(",")}) == 1 for text in sort["ties"])
    assert set(references(sort["ties"], NumberFormat(task="sort", max_items=4))) == {"ab", "abc", "abcd"}
    assert len(sort["repeated_digits"]) == 5
    # The sort task's own kinds: every tie-heavy list repeats a value, every near-tie list is of one length.
    assert len(sort["tie_heavy"]) == len(sort["near_ties"]) == 5
    values = [[item.split(":")[1] for item in text.split(",")] for text in sort["tie_heavy"]]
    assert all(len(set(v)) < len(v) for v in values)
    assert all(len({len(item.split(":")[1]) for item in text.split(",")}) == 1 for text in sort["near_ties"])
    # The lists the bundled sort model once got wrong, where the format takes their length.
    wide = stress_sets(NumberFormat(task="sort", max_items=8), max_digits=6, n=5)
    assert wide["reported_failures"][0] == "a:49565,b:41575,c:41565,d:41575,e:41562"
    assert references(wide["reported_failures"], NumberFormat(task="sort", max_items=8)) == ["ecbda", "abcde"]


def test_scores_by_hand(monkeypatch, add10):
    model, tok = load_checkpoint(add10)
    answers = {"1+2": "3", "2+1": "3", "30+4": "34", "4+30": "35", "9+1": "1", "0+0": "0"}
    monkeypatch.setattr(stress, "solve", lambda m, t, problems, **_: [Answer(answers[p], 0.99) for p in problems])
    report = stress_test(model, tok, 10, sets={"commutativity": ["1+2", "30+4"], "carry_chains": ["9+1"],
                                               "zero_operands": ["0+0"]})
    assert list(report) == ["commutativity", "carry_chains", "zero_operands"]  # swapped set folded in
    c = report["commutativity"]
    assert c["exact_match"] == 1.0 and c["swapped_exact_match"] == 0.5 and c["agreement"] == 0.5
    carry = report["carry_chains"]
    assert carry["exact_match"] == 0.0 and carry["per_digit_accuracy"] == 0.0  # ' 1' against '10'
    assert carry["failures"] == [{"problem": "9+1", "expected": "10", "got": "1", "confidence": 0.99}]
    assert carry["silent_wrong"] == 1  # wrong at 99 %: not flagged
    assert report["zero_operands"]["exact_match"] == 1.0


def test_real_model_run_scores_each_set_as_the_model_answers():
    # abacus-gpt2-add is right up to 20 digits (trained on 10) and often wrong from about 33, so
    # 35-digit sets hold right and wrong answers alike.
    model, tok = load_checkpoint("abacus-gpt2-add")
    report = stress_test(model, tok, 35, n=20)
    sets = stress_sets(tok.arith_format, 35, n=20)
    assert set(report) == set(sets) == {"commutativity", "carry_chains", "zero_operands", "max_length",
                                        "repeated_digits", "reported_failures"}
    scores = set()
    for name, texts in sets.items():
        answered = solve(model, tok, texts, return_confidence=True)
        predictions = [a.answer for a in answered]
        expected = [str(int(a) + int(b)) for a, b in (t.split("+") for t in texts)]  # Python's own sums
        right = [p == e for p, e in zip(predictions, expected)]
        r = report[name]
        assert r["n"] == len(texts) and r["exact_match"] == pytest.approx(sum(right) / len(texts)), name
        failures = [(t, e, a) for t, a, e, ok in zip(texts, answered, expected, right) if not ok][:stress.SHOW_FAILURES]
        assert [(f["problem"], f["expected"], f["got"]) for f in r["failures"]] == \
            [(t, e, a.answer) for t, e, a in failures], name
        # Batched with other sets, the same answers' probabilities move in the last float digits only.
        assert [f["confidence"] for f in r["failures"]] == pytest.approx([a.confidence for _, _, a in failures],
                                                                         abs=1e-4), name
        assert r["silent_wrong"] == sum(not ok and a.answer is not None and a.confidence >= LOW_CONFIDENCE
                                        for a, ok in zip(answered, right)), name
        scores.add(r["exact_match"])
    assert any(0 < score < 1 for score in scores)  # right and wrong answers (and failures) were compared
    swapped = solve(model, tok, ["+".join(t.split("+")[::-1]) for t in sets["commutativity"]])
    forward = solve(model, tok, sets["commutativity"])
    same = sum(x == y and x is not None for x, y in zip(forward, swapped)) / len(forward)
    assert report["commutativity"]["agreement"] == pytest.approx(same)


@pytest.mark.parametrize("digits", [1, 3])
def test_max_length_set_respects_the_requested_length(digits):
    sets = stress_sets(NumberFormat(), max_digits=digits, n=4)
    assert all(len(x) == digits for t in sets["max_length"] for x in t.split("+"))
