"""Metrics: hand-computed cases, the offline `evaluate` wrapper, and the Trainer's compute_metrics."""

from __future__ import annotations

import evaluate
import numpy as np
import pytest
import torch

from hf_arith.data.formatting import NumberFormat, parse_problems, render
from hf_arith.data.problems import with_answers
from hf_arith.data.streaming import encode_examples
from hf_arith.data.tokenization_arith import ArithTokenizer
from hf_arith.evaluation.metrics import (
    IGNORE_INDEX,
    arith_scores,
    compute_metrics,
    digit_matches,
    metric_path,
    operand_lengths,
    prompt_operand_lengths,
    teacher_forced_answers,
)
from hf_arith.runtime.loading import load_checkpoint


@pytest.mark.parametrize(("prediction", "reference", "expected"), [
    ("579", "579", (3, 3)),
    ("589", "579", (2, 3)),
    ("1579", "579", (3, 4)),   # an extra digit is a wrong position
    ("79", "579", (2, 3)),     # aligned at the units digit
    (None, "10", (0, 2)),      # malformed: none of the reference's digits
    ("-12", "-13", (2, 3)),
    ("bac", "bac", (3, 3)),
])
def test_digit_matches(prediction, reference, expected):
    assert digit_matches(prediction, reference) == expected


def test_scores_by_hand():
    predictions = ["579", "589", None, "10", "1111"]
    references = ["579", "579", "10", "10", "1110"]
    lengths = [[3, 3], [3, 3], [1, 1], [1, 1], [4, 3]]
    report = arith_scores(predictions, references, lengths)
    assert report["exact_match"] == pytest.approx(2 / 5)
    assert report["per_digit_accuracy"] == pytest.approx((3 + 2 + 0 + 2 + 3) / (3 + 3 + 2 + 2 + 4))
    assert report["malformed"] == pytest.approx(1 / 5)
    assert report["by_max_operand_length"] == {1: 0.5, 3: 0.5, 4: 0.0}
    assert report["count_by_max_operand_length"] == {1: 2, 3: 2, 4: 1}
    assert report["by_operand_lengths"] == {"1x1": 0.5, "3x3": 0.5, "4x3": 0.0}


def test_scores_reject_mismatched_lists():
    with pytest.raises(ValueError, match="3 predictions but 2 references"):
        arith_scores(["1", "2", "3"], ["1", "2"])


def test_operand_lengths_of_plain_problems():
    lengths = operand_lengths(["123+45", "007+0", "a:31,b:7,c:120"])
    assert lengths.tolist() == [[3, 2, 0], [1, 1, 0], [2, 1, 3]]


def test_evaluate_metric_loads_offline_and_wraps_the_same_code():
    metric = evaluate.load(metric_path())
    predictions, references = ["579", None, "11", "100"], ["579", "10", "10", "100"]
    problems = ["123+456", "9+1", "5+5", "1+99"]
    result = metric.compute(predictions=predictions, references=references, problems=problems)
    # By hand: digits right 3 + 0 + 1 ('11' against '10') + 3 of 10; longest operands 3, 1, 1, 2.
    assert result == {
        "exact_match": 0.5, "per_digit_accuracy": 0.7, "malformed": 0.25, "n": 4,
        "by_max_operand_length": {1: 0.0, 2: 1.0, 3: 1.0}, "count_by_max_operand_length": {1: 2, 2: 1, 3: 1},
        "by_operand_lengths": {"1x1": 0.0, "1x2": 1.0, "3x3": 1.0},
        "count_by_operand_lengths": {"1x1": 2, "1x2": 1, "3x3": 1},
    }
    plain = metric.compute(predictions=predictions, references=references)
    assert "by_operand_lengths" not in plain and plain["exact_match"] == 0.5


def test_the_metric_accumulates_batches_with_their_problems():
    """`add_batch(..., problems=...)` and `add(...)` as evaluate's own metrics take them; a malformed
    answer (None) may come first; problems are given for every prediction or none."""
    metric = evaluate.load(metric_path())
    metric.add_batch(predictions=[None, "579"], references=["10", "579"], problems=["9+1", "123+456"])
    metric.add(prediction="11", reference="10", problems="5+5")
    metric.add_batch(predictions=["100"], references=["100"], problems=["1+99"])
    batched = metric.compute()
    whole = metric.compute(predictions=[None, "579", "11", "100"], references=["10", "579", "10", "100"],
                           problems=["9+1", "123+456", "5+5", "1+99"])
    assert batched == whole and batched["by_max_operand_length"] == {1: 0.0, 2: 1.0, 3: 1.0}
    metric.add_batch(predictions=["1"], references=["1"])
    assert metric.compute() == {"exact_match": 1.0, "per_digit_accuracy": 1.0, "malformed": 0.0, "n": 1}
    metric.add_batch(predictions=["1"], references=["1"], problems=["0+1"])
    metric.add_batch(predictions=["2"], references=["2"])
    with pytest.raises(ValueError, match="give every problem or none"):
        metric.compute()


def test_the_metric_loads_from_its_folder_without_hf_arith(tmp_path):
    """The folder alone (copied elsewhere), in a process where hf_arith cannot be imported, as a metric
    shared on the Hub would be loaded."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    from remote_code import BLOCK_HF_ARITH

    folder = tmp_path / "arith_accuracy"
    shutil.copytree(metric_path(), folder, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    (folder / "metric.py").rename(folder / "arith_accuracy.py")  # evaluate loads NAME/NAME.py
    script = BLOCK_HF_ARITH + f"""
import evaluate, json
metric = evaluate.load({str(folder)!r})
metric.add_batch(predictions=[None, "579"], references=["10", "579"], problems=["9+1", "123+456"])
print(json.dumps(metric.compute()))
"""
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf_home")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["exact_match"] == 0.5 and result["by_max_operand_length"] == {"1": 0.0, "3": 1.0}


@pytest.mark.parametrize("reverse", [True, False])
def test_prompt_operand_lengths_reads_fixed_width_prompts(reverse):
    fmt = NumberFormat(operand_width=6, answer_width=7, end_token=False, reverse_operands=reverse)
    problems = with_answers(parse_problems(["120+5", "0+100000", "10+10"], fmt))
    ids, _, _ = encode_examples(problems, fmt, 22)
    assert prompt_operand_lengths(ids, fmt, fmt.vocab()).tolist() == [[3, 1], [1, 6], [2, 2]]


def _examples(tokenizer, texts, length=None):
    fmt = tokenizer.arith_format
    problems = with_answers(parse_problems(texts, fmt))
    input_ids, attention_mask, labels = encode_examples(problems, fmt, length or render(problems, fmt, True)[0].shape[1])
    return input_ids, attention_mask, labels, problems.answer_text()


def test_compute_metrics_scores_teacher_forced_predictions_by_hand():
    tok = ArithTokenizer(number_format=NumberFormat(end_token=True))
    input_ids, _, labels, answers = _examples(tok, ["12+34", "5+5", "999+1"])
    # Perfect next-token predictions: the prediction at t is the token at t + 1.
    perfect = np.roll(input_ids, -1, axis=1)
    wrong = perfect.copy()
    first_answer = np.argmax(labels[1] != IGNORE_INDEX)  # '5+5': its first answer digit ('0' of 10, reversed)
    wrong[1, first_answer - 1] = tok.arith_format.token_id("7")
    predictions, references = teacher_forced_answers(wrong, labels, tok)
    assert references == answers == ["46", "10", "1000"]
    assert predictions == ["46", "17", "1000"]
    fn = compute_metrics(tok)
    eval_pred = type("EvalPrediction", (), {"predictions": wrong, "label_ids": labels, "inputs": input_ids})
    metrics = fn(eval_pred)
    assert metrics["exact_match"] == pytest.approx(2 / 3)
    assert metrics["per_digit_accuracy"] == pytest.approx((2 + 1 + 4) / (2 + 2 + 4))
    assert metrics["exact_match_len_1"] == 0.0 and metrics["exact_match_len_2"] == 1.0
    assert metrics["exact_match_len_3"] == 1.0
    # Raw logits work too: one-hot logits of the same tokens give the same numbers.
    logits = np.eye(len(tok.arith_format.vocab()))[wrong]
    eval_pred.predictions = logits
    assert fn(eval_pred) == metrics


def test_compute_metrics_in_a_trainer_matches_a_manual_pass(add10, tmp_path):
    from transformers import Trainer, TrainingArguments

    from hf_arith.evaluation.metrics import preprocess_logits_for_metrics

    model, tok = load_checkpoint(add10)
    texts = ["1234+5678", "99+1", "5+0", "123456789+987654321", "7+8", "3000+4000"]
    input_ids, _, labels, _ = _examples(tok, texts, 33)
    dataset = [{"input_ids": torch.tensor(i), "labels": torch.tensor(lab)} for i, lab in zip(input_ids, labels)]
    args = TrainingArguments(output_dir=str(tmp_path), per_device_eval_batch_size=4, report_to="none",
                             use_cpu=True, include_for_metrics=["inputs"])
    trainer = Trainer(model=model, args=args, eval_dataset=dataset, compute_metrics=compute_metrics(tok),
                      preprocess_logits_for_metrics=preprocess_logits_for_metrics)
    metrics = trainer.evaluate()
    # The expected scores by an independent route: the greedy token after each position, read as
    # the reversed fixed-width answer, against the sums Python computes.
    with torch.no_grad():
        greedy = model(input_ids=torch.tensor(input_ids)).logits.argmax(-1).numpy()
    vocab = tok.arith_format.vocab()
    assert tok.arith_format.reverse_answer and not tok.arith_format.end_token
    exact, right, positions = 0, 0, 0
    for text, row, lab in zip(texts, greedy, labels):
        reference = str(sum(int(v) for v in text.split("+")))
        written = "".join(vocab[row[t - 1]] for t in np.flatnonzero(lab != IGNORE_INDEX))[::-1]
        prediction = (written.lstrip("0") or "0") if written.isdigit() else None
        exact += prediction == reference
        width = max(len(prediction or ""), len(reference))  # digits aligned at the units digit
        right += sum(a == b for a, b in zip((prediction or "").rjust(width, "?"), reference.rjust(width, "!")))
        positions += width if prediction is not None else len(reference)
    assert metrics["eval_exact_match"] == pytest.approx(exact / len(texts))
    assert metrics["eval_per_digit_accuracy"] == pytest.approx(right / positions)
    assert "eval_exact_match_len_9" in metrics
