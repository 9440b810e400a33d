"""Each answer's confidence: the lowest probability the model gave any token it wrote.

One rule, two decoders: `solve` (hf_arith's greedy decoder) and the `arithmetic` pipeline (the
model's `generate`, which the Space uses) must give the same number for the same answer. The CLI
marks answers below the threshold; eval and the stress sets count the wrong answers above it.
"""

import json
import random

import pytest
import torch

import hf_arith
from hf_arith import Answer, ArithmeticPipeline, solve
from hf_arith.cli import main
from hf_arith.data.formatting import get_task
from hf_arith.evaluation.metrics import confidence_scores
from hf_arith.evaluation.stress import stress_sets
from hf_arith.runtime.decoding import greedy_decode
from hf_arith.runtime.solving import LOW_CONFIDENCE
from tests.cli_contract import fails

# Known wrong answers of the bundled models, given with low confidence, both beyond the 1-10 training
# digits (inside them the sweeps of both find none; the issue's in-range failures are right now). The
# k2's is beyond the 100 digits where its answers are measured exact: a 108-digit number plus a 109-digit one.
LONG_WRONG = "4001504777946583750158934861322+9649959276579673307202182853715198"
K2 = "abacus-gpt2-add-window-10-k2"
KNOWN_WRONG = {"abacus-gpt2-add": LONG_WRONG,
               K2: "82807465882127302389055208557782275604942398152202140415686699637305868121143765542129745329421047433774543"
                   "+4459584555891251473100365899830021239956798131190501366332729802634249896345144557801150328757661824593441350847"}
PROBLEMS = ["899014625+993120376", "55555555+5555555555", "123+456", "9999999999+1", "0+0"]


def beyond_range_sums(n: int, seed: int) -> list[str]:
    """Sums of two numbers of the same 105-115 digits: beyond the k2 model's measured 100, where it often
    writes wrong answers and sometimes no answer (the digits run past the answer's budget)."""
    rng = random.Random(seed)
    sums = []
    for _ in range(n):
        digits = rng.randint(105, 115)
        sums.append(f"{rng.randrange(10 ** (digits - 1), 10 ** digits)}+{rng.randrange(10 ** (digits - 1), 10 ** digits)}")
    return sums


@pytest.fixture(scope="module", params=["abacus-gpt2-add", K2, "looped-add-window", "minimal-add10"])
def loaded(request):
    model, tokenizer = hf_arith.load(request.param)
    return request.param, model, tokenizer


def test_solve_and_the_pipeline_give_the_same_answer_and_confidence(loaded):
    name, model, tokenizer = loaded
    answers = solve(model, tokenizer, PROBLEMS, return_confidence=True)
    pipe = ArithmeticPipeline(model=model, tokenizer=tokenizer)
    for problem, got in zip(PROBLEMS, answers, strict=True):
        assert isinstance(got, Answer) and 0.0 < got.confidence <= 1.0
        expected = pipe(problem, return_confidence=True)
        assert got.answer == expected["answer"]
        assert got.confidence == pytest.approx(expected["confidence"], abs=1e-4), problem
    # Without the flag, the same answers as plain strings.
    assert solve(model, tokenizer, PROBLEMS) == [a.answer for a in answers]


def test_known_wrong_answers_come_with_low_confidence(loaded):
    name, model, tokenizer = loaded
    if name not in KNOWN_WRONG:
        pytest.skip("no recorded wrong answer for this model")
    problem = KNOWN_WRONG[name]
    got = solve(model, tokenizer, problem, return_confidence=True)
    assert got.answer != str(eval(problem))  # still wrong: else this test checks nothing
    assert got.confidence < LOW_CONFIDENCE


def test_probabilities_are_the_written_tokens_and_one_after_the_end(loaded):
    name, model, tokenizer = loaded
    enc = tokenizer(PROBLEMS, padding=True, return_tensors="pt")
    steps = model.config.num_future_tokens if hasattr(model.config, "num_future_tokens") else 1
    budget = tokenizer.answer_budget(PROBLEMS)
    tokens, probabilities = greedy_decode(model, enc.input_ids, enc.attention_mask, budget, tokenizer.eos_token_id,
                                          tokenizer.pad_token_id, tokens_per_step=steps, return_probabilities=True)
    assert probabilities.shape == tokens.shape
    for row, probs in zip(tokens.tolist(), probabilities.tolist()):
        # Fixed-width formats (minimal-add10) write no end token: every written token counts.
        end = row.index(tokenizer.eos_token_id) if tokenizer.eos_token_id in row else len(row) - 1
        assert all(p == 1.0 for p in probs[end + 1:])
        assert all(0.0 < p <= 1.0 for p in probs[: end + 1])
    # The first token's probability, recomputed from one plain forward pass of row 2 (no padding).
    alone = tokenizer([PROBLEMS[2]], return_tensors="pt")
    first_tokens, first_probs = greedy_decode(model, alone.input_ids, None, 1, return_probabilities=True)
    with torch.no_grad():
        kwargs = {}
        if hasattr(model, "position_ids_from_input_ids"):
            kwargs["position_ids"] = model.position_ids_from_input_ids(alone.input_ids)
        logits = model(input_ids=alone.input_ids, **kwargs).logits[0, -1]
    assert first_probs[0, 0].item() == pytest.approx(logits.softmax(-1).max().item(), abs=1e-5)
    assert first_tokens[0, 0].item() == logits.argmax().item()


def test_cli_marks_answers_below_the_threshold(capsys):
    assert main(["solve", LONG_WRONG, "123+456", "--model", "abacus-gpt2-add"]) == 0
    wrong, right = capsys.readouterr().out.splitlines()
    assert wrong.startswith(f"{LONG_WRONG} = 29653960781357619890952341788676520 ?") and "low confidence" in wrong
    assert right == "123+456 = 579"
    assert main(["solve", LONG_WRONG, "--model", "abacus-gpt2-add", "--min-confidence", "0"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"{LONG_WRONG} = 29653960781357619890952341788676520") and "?" not in out


def test_the_in_range_wrong_answers_the_issue_reported_are_right_now():
    # Issue 20: abacus-gpt2-add dropped a final carry (1 in 50,000 random problems) and the k2 model
    # wrote repeated-digit sums wrong, until their hard-case stages (presets *-hardcases).
    for name in ("abacus-gpt2-add", K2):
        model, tokenizer = hf_arith.load(name)
        for problem in list(get_task("add").reported_failures):
            for k in (1, 2) if name.endswith("k2") else (1,):
                assert solve(model, tokenizer, problem, tokens_per_step=k) == str(eval(problem)), (name, problem, k)


@pytest.mark.parametrize("bad", ["2", "-0.1", "high", "nan"])
def test_cli_refuses_a_threshold_outside_0_to_1(capsys, bad):
    assert "--min-confidence" in fails(capsys, "solve", "1+1", "--min-confidence", bad)


def test_confidence_scores_count_silent_wrong_answers():
    report = confidence_scores(["1+1", "2+2", "3+3", "4+4"], ["2", "5", "7", None], ["2", "4", "6", "8"],
                               [0.99, 0.95, 0.5, 0.99], threshold=0.9)
    # 2+2=5 at 95 % is silent; 3+3=7 at 50 % is flagged; a malformed answer is never silent.
    assert report["wrong"] == 3 and report["silent_wrong"] == 1 and report["below_threshold"] == 1
    assert report["silent_wrong_examples"] == [{"problem": "2+2", "expected": "4", "got": "5", "confidence": 0.95}]


def test_eval_reports_wrong_answers_by_confidence(tmp_path, capsys):
    target = tmp_path / "report.json"
    assert main(["eval", K2, "--samples", "30", "--min-digits", "110", "--max-digits", "114",
                 "--json", str(target)]) == 0
    out = capsys.readouterr().out
    report = json.loads(target.read_text())
    # Beyond its measured 100 digits the k2 model is often wrong: the report says how often silently.
    assert report["wrong"] == round((1 - report["exact_match"]) * report["n"]) > 0
    assert 0 <= report["silent_wrong"] <= report["wrong"]
    assert f"Wrong answers: {report['wrong']}, of which {report['silent_wrong']} at confidence" in out


def test_stress_sets_hold_repeated_digits_and_reported_failures():
    _, tokenizer = hf_arith.load("abacus-gpt2-add")
    sets = stress_sets(tokenizer.arith_format, 10, n=50, seed=3)
    assert len(sets["repeated_digits"]) == 50
    for problem in sets["repeated_digits"]:
        for operand in problem.split("+"):
            assert len(set(operand)) <= 2 and (operand == "0" or operand[0] != "0")
    assert sets["reported_failures"] == list(get_task("add").reported_failures)
    # Too short a model: only the reported cases that fit are kept.
    assert "reported_failures" not in stress_sets(tokenizer.arith_format, 5, n=10)


def test_an_answer_does_not_depend_on_the_batch_it_was_decoded_in():
    # Beyond its measured lengths the k2 model sometimes writes past an answer's own budget; in a batch
    # with longer problems it has room to, alone it has not. Each answer ends at its own budget.
    model, tokenizer = hf_arith.load(K2)
    problems = beyond_range_sums(40, seed=1)
    together = solve(model, tokenizer, problems, return_confidence=True)
    alone = [solve(model, tokenizer, p, return_confidence=True) for p in problems]
    assert [a.answer for a in together] == [a.answer for a in alone]
    assert [a.confidence for a in together] == pytest.approx([a.confidence for a in alone], abs=1e-4)
    assert sum(a.answer is None for a in alone) >= 5  # the case this guards: unfinished answers
