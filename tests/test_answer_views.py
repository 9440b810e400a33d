"""Answers agreed on by several views of a problem (`hf_arith.runtime.answer_views`, `Task.views`).

A sort list relabelled (its equal values kept in order) has the same sorted items, so every view's
answer read back must be the problem's own answer; the vote takes the answer most views give, at a
confidence scaled by the share that agree. The bundled sort model answers five views by default
(`config.answer_views`), in `solve`, the pipeline and the saved folder without hf_arith; a commutative
problem has two (its operands swapped), and the bundled multiplier to 10 digits answers both.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_save_paths import run_without_hf_arith
from transformers import pipeline

import hf_arith
from hf_arith import solve
from hf_arith.data.formatting import FormatError, get_task
from hf_arith.models import AbacusGPT2Config
from hf_arith.runtime.answer_views import agreed_answers, problem_views
from hf_arith.runtime.saving import save_checkpoint

SORT = get_task("sort")
# Lists the bundled sort model answers wrong (or not at all) as given, at one view: its sweeps' and a
# fresh seed's wrong answers (bench/results/sweep_abacus-gpt2-sort.json).
WRONG_AS_GIVEN = ["a:14,b:7,c:0,d:6,e:6", "a:30333,b:3,c:30000,d:300000,e:300000",
                  "a:696,b:696,c:184,d:184,e:722", "a:60000,b:0,c:600000,d:6,e:666606"]

# Products the bundled multiplier to 10 digits answers wrong as given (its sweep's wrong answers at one
# view); each is right as written the other way round.
MUL_WRONG_AS_GIVEN = ["8992701197*5694889912", "5908699769*3416428966", "5369543339*8316224787",
                      "989170321*1688348343", "3490672381*2677625755"]

# 10 x 10 products, past the 1-5 digits abacus-gpt2-mul-5-to-10 was trained on, that it answers wrong as
# given and right as written the other way round, the surer of the two.
MUL_PAST_TRAINING = ["4430707163*3948143406", "4203288337*2029490621", "8060605948*3059722255",
                     "6301839576*7346302914"]


def sorted_labels(values: list[int]) -> str:
    """The labels of `values` in ascending order, ties in label order: counted here, not by the task."""
    return "".join("abcdefghij"[i] for i, _ in sorted(enumerate(values), key=lambda pair: (pair[1], pair[0])))


@pytest.mark.parametrize("seed", range(4))
def test_every_view_of_a_list_has_the_lists_answer_read_back(seed):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        n = int(rng.integers(2, 9))
        values = [int(v) for v in rng.integers(0, 4 if rng.random() < 0.5 else 10 ** 6, n)]  # many ties, or few
        operands = [str(v) for v in values]
        views = SORT.views(operands, 5, rng)
        assert views[0] == list(range(n))  # the list as given comes first
        assert len({tuple(v) for v in views}) == len(views) <= 5
        assert all(sorted(order) == list(range(n)) for order in views)
        for order in views:
            answer = sorted_labels([values[i] for i in order])  # the view's right answer, counted independently
            assert SORT.answer_from_view(answer, order) == sorted_labels(values), (values, order)


def test_a_list_with_few_orders_has_few_views_and_a_binary_task_one():
    rng = np.random.default_rng(0)
    assert SORT.views(["7", "7", "7"], 5, rng) == [[0, 1, 2]]  # equal values keep their order: one view
    assert len(SORT.views(["1", "2"], 5, rng)) == 2
    assert get_task("sub").views(["12", "34"], 5, rng) == [[0, 1]]  # no symmetry: the problem as given


@pytest.mark.parametrize("task, model, sign", [("add", "abacus-gpt2-add", "+"), ("mul", "abacus-gpt2-mul-10", "*")])
def test_a_commutative_problem_has_two_views_its_operands_swapped_unless_equal(task, model, sign):
    rng = np.random.default_rng(0)
    rules = get_task(task)
    assert rules.views(["12", "34"], 5, rng) == [[0, 1], [1, 0]]
    assert rules.views(["12", "34"], 1, rng) == [[0, 1]]
    assert rules.views(["77", "77"], 5, rng) == [[0, 1]]
    assert rules.answer_from_view("408", [1, 0]) == "408"  # b*a's answer is a*b's
    fmt = hf_arith.load(model)[1].arith_format
    texts, orders, counts = problem_views(rules, fmt, [f"12{sign}34", f"5{sign}5"], 2)
    assert texts == [f"12{sign}34", f"34{sign}12", f"5{sign}5"] and counts == [2, 1]
    assert SORT.answer_from_view("bz", [1, 0]) is None and SORT.answer_from_view(None, [1, 0]) is None


def test_views_of_a_problem_do_not_depend_on_its_batch():
    fmt = hf_arith.load("abacus-gpt2-sort")[1].arith_format
    alone = problem_views(SORT, fmt, ["a:5,b:3,c:9,d:1"], 5)
    batched = problem_views(SORT, fmt, ["a:1,b:2", "a:5,b:3,c:9,d:1"], 5)
    assert batched[0][-5:] == alone[0] and batched[1][-5:] == alone[1] and batched[2][-1] == alone[2][0] == 5


def test_the_vote_takes_the_answer_most_views_give_at_the_share_that_agree():
    orders = [[0, 1, 2]] * 5 + [[0, 1]] * 2 + [[0, 1]] * 2
    answers = ["abc", "acb", "abc", None, "abc"] + [None, None] + ["ab", "ba"]
    confidences = [0.99, 0.95, 0.93, 0.2, 0.97] + [0.5, 0.6] + [0.9, 0.99]
    first, empty, split = agreed_answers(SORT, answers, confidences, orders, [5, 2, 2])
    assert first[0] == "abc" and first[1] == pytest.approx(3 / 5 * 0.93) and first[2:] == (0, 3, 5)
    assert empty == (None, 0.5, 5, 0, 2)  # no view answered: None, at its first view's confidence
    assert split[0] == "ba" and split[1] == pytest.approx(0.495)  # a tie goes to the surer view
    even = agreed_answers(SORT, ["ab", "ba"], [0.9, 0.9], [[0, 1]] * 2, [2])[0]
    assert even[0] == "ab" and even[2] == 0  # ... and between views as sure, to the earlier one


def test_the_bundled_multiplier_answers_both_orders_and_the_surer_one_rights_the_wrong_one():
    model, tok = hf_arith.load("abacus-gpt2-mul-10")
    assert model.config.answer_views == 2
    right = [str(int(a) * int(b)) for a, b in (p.split("*") for p in MUL_WRONG_AS_GIVEN)]
    one = solve(model, tok, MUL_WRONG_AS_GIVEN, views=1)
    assert all(a != r for a, r in zip(one, right))  # each is wrong as given: else this checks nothing
    agreed = solve(model, tok, MUL_WRONG_AS_GIVEN, return_confidence=True)
    assert [a.answer for a in agreed] == right
    assert all(a.confidence <= 0.5 for a in agreed)  # the two views disagreed: never a sure answer


def test_past_the_trained_range_the_views_vote_by_the_models_confidences_then_the_answer_is_capped():
    """Every view of such a problem has its confidence capped at 0.5: capped before the vote, two views that
    disagree would tie, and the problem as given would win whatever the model said."""
    model, tok = hf_arith.load("abacus-gpt2-mul-5-to-10")
    right = [str(int(a) * int(b)) for a, b in (p.split("*") for p in MUL_PAST_TRAINING)]
    one = solve(model, tok, MUL_PAST_TRAINING, views=1)
    assert all(a != r for a, r in zip(one, right))  # each is wrong as given: else this checks nothing
    agreed = solve(model, tok, MUL_PAST_TRAINING, return_confidence=True)
    assert [a.answer for a in agreed] == right
    assert all(a.confidence <= 0.5 for a in agreed)
    piped = pipeline("arithmetic", model=model, tokenizer=tok)(MUL_PAST_TRAINING)
    assert [p["answer"] for p in piped] == right  # the pipeline, which knows no trained range, agrees


@pytest.fixture(scope="module")
def sort_model():
    return hf_arith.load("abacus-gpt2-sort")


def test_the_bundled_sort_model_answers_five_views_and_they_right_what_one_view_gets_wrong(sort_model):
    model, tok = sort_model
    assert model.config.answer_views == 5
    one = solve(model, tok, WRONG_AS_GIVEN, views=1)
    right = [sorted_labels([int(item.split(":")[1]) for item in p.split(",")]) for p in WRONG_AS_GIVEN]
    assert all(a != r for a, r in zip(one, right))  # each is wrong as given: else this checks nothing
    agreed = solve(model, tok, WRONG_AS_GIVEN, return_confidence=True)
    assert [a.answer for a in agreed] == right
    # A view disagreed on each, so none is sure: the confidence is the share that agree times theirs.
    assert all(a.confidence <= 0.8 for a in agreed)


def test_the_pipeline_votes_as_solve_does(sort_model):
    model, tok = sort_model
    pipe = pipeline("arithmetic", model=model, tokenizer=tok)
    problems = WRONG_AS_GIVEN + ["a:5,b:5", "a:9,b:0,c:5"]
    expected = solve(model, tok, problems, return_confidence=True)
    for got in (pipe(problems, return_confidence=True), [pipe(p, return_confidence=True) for p in problems],
                list(pipe((p for p in problems), batch_size=4, return_confidence=True))):
        assert [g["answer"] for g in got] == [e.answer for e in expected]
        assert [g["confidence"] for g in got] == pytest.approx([e.confidence for e in expected], abs=1e-4)
        assert all(g["views"]["count"] >= g["views"]["agreeing"] >= 1 for g in got[:4])


@pytest.mark.parametrize("bad", [0, 17, "5", True, 2.0])
def test_a_bad_view_count_is_one_line_naming_it(sort_model, bad):
    model, tok = sort_model
    with pytest.raises(FormatError, match="views must be an integer from 1 to 16"):
        solve(model, tok, "a:1,b:2", views=bad)
    if isinstance(bad, int) and not isinstance(bad, bool):
        with pytest.raises(ValueError, match="answer_views must be"):
            AbacusGPT2Config(answer_views=bad)


def test_a_saved_sort_folder_votes_without_hf_arith(sort_model, tmp_path):
    model, tok = sort_model
    folder = tmp_path / "saved"
    save_checkpoint(model, tok, folder)
    assert json.loads((folder / "config.json").read_text())["answer_views"] == 5
    assert (folder / "answer_views.py").is_file()
    body = f"""
        from transformers import pipeline
        solver = pipeline("arithmetic", model={str(folder)!r}, trust_remote_code=True)
        print(json.dumps([r["answer"] for r in solver({WRONG_AS_GIVEN!r})]))
    """
    assert run_without_hf_arith(body, tmp_path) == solve(model, tok, WRONG_AS_GIVEN)


def test_the_card_says_how_many_views_answer_and_what_they_cost(sort_model):
    from hf_arith.publishing.model_card import model_card

    model, tok = sort_model
    report = json.loads((Path(hf_arith.bundled_path("abacus-gpt2-sort")) / "eval_results.json").read_text())
    text = model_card(model, tok, report, repo_id="someone/sorter").text
    assert "the one most of 5 views of the problem give, the surer one where they split\n  (the list relabelled" in text
    assert "a problem costs 5 decodes" in text
    model.config.answer_views = 1
    try:
        assert "views of the problem" not in model_card(model, tok, report, repo_id="someone/sorter").text
    finally:
        model.config.answer_views = 5


def test_the_multipliers_card_says_its_two_views_are_the_operands_swapped():
    from hf_arith.publishing.model_card import model_card

    model, tok = hf_arith.load("abacus-gpt2-mul-10")
    report = json.loads((Path(hf_arith.bundled_path("abacus-gpt2-mul-10")) / "eval_results.json").read_text())
    text = model_card(model, tok, report, repo_id="someone/multiplier").text
    assert "the one most of 2 views of the problem give, the surer one where they split\n  (the problem as given and " \
           "with its two operands swapped" in text
    assert "a problem costs 2 decodes" in text
