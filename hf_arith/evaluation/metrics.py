"""Answer metrics in plain Python: exact match, per-digit accuracy, accuracy by operand length and
the share of malformed answers.

One implementation (`hf_arith/evaluation/metric/scores.py`, beside the `evaluate` metric module so that the metric
loads without hf_arith) serves every caller: `hf-arith eval`, the length grid, the `evaluate` metric
module (`evaluate.load(hf_arith.metric_path())`, a thin wrapper, since evaluate is in maintenance
mode) and the Trainer's `compute_metrics`. Answers are plain decimal strings as `solve` returns
them (None = not a well-formed answer); references are plain decimal strings too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data.formatting import DIGIT_CHARS, EOS_TOKEN, PAD_TOKEN, PROMPT_END
from ..models.modeling_common import IGNORE_INDEX
from .metric.scores import _summary, arith_scores, digit_matches, group_scores, length_key, operand_lengths  # noqa: F401


def metric_path() -> str:
    """The folder of the `evaluate` metric module: `evaluate.load(metric_path())` works offline."""
    return str(Path(__file__).parent / "metric")


def is_silent_wrong(prediction: str | None, reference: str, confidence: float, threshold: float) -> bool:
    """A wrong answer the model was sure of (confidence at or above `threshold`), so nothing flags it.
    A malformed answer (None) is never silent: it reads as no answer."""
    return prediction is not None and prediction != reference and confidence >= threshold


def confidence_scores(problems: list[str], predictions, references, confidences, threshold: float,
                      show: int = 5) -> dict:
    """How visible the wrong answers are: how many came with a confidence (the lowest token
    probability) at or above `threshold`, i.e. silently, and how many answers fall below it.
    `silent_wrong_examples` lists up to `show` of the silent ones."""
    wrong = [i for i, (p, r) in enumerate(zip(predictions, references)) if p != r]
    silent = [i for i in wrong if is_silent_wrong(predictions[i], references[i], confidences[i], threshold)]
    return {
        "confidence_threshold": threshold,
        "wrong": len(wrong),
        "silent_wrong": len(silent),
        "below_threshold": sum(c < threshold for c in confidences),
        "silent_wrong_examples": [{"problem": problems[i], "expected": references[i], "got": predictions[i],
                                   "confidence": confidences[i]} for i in silent[:show]],
    }


# -- the Trainer ----------------------------------------------------------------------------
def preprocess_logits_for_metrics(logits, labels):
    """Keep only the greedy token ids, not [batch, T, vocab] logits, between eval batches."""
    if isinstance(logits, tuple):
        logits = logits[0]
    return logits.argmax(-1)


def prompt_operand_lengths(input_ids, fmt, vocab: list[str]) -> np.ndarray:
    """Operand digit counts read back from formatted prompts ([n, T] ids, padding anywhere)."""
    digits = set(DIGIT_CHARS[: fmt.base])

    def char(i: int) -> str:  # digits and '=' stay, padding vanishes, anything else separates operands
        token = vocab[i] if 0 <= i < len(vocab) else " "
        if token in digits or token == PROMPT_END:
            return token
        return "" if token in (PAD_TOKEN, EOS_TOKEN) else " "

    rows = []
    for row in np.asarray(input_ids).tolist():
        prompt = "".join(char(i) for i in row).split(PROMPT_END)[0]
        # Padding zeros sit after the most significant digit when operands are written reversed.
        runs = [r.rstrip("0") if fmt.reverse_operands else r.lstrip("0") for r in prompt.split()]
        rows.append([max(len(r), 1) for r in runs])
    k = max((len(r) for r in rows), default=0)
    return np.array([r + [0] * (k - len(r)) for r in rows], dtype=np.int64).reshape(len(rows), k)


def teacher_forced_answers(predicted_ids, label_ids, tokenizer):
    """(predictions, references) as plain decimal from next-token predictions and answer labels."""
    predicted_ids, label_ids = np.asarray(predicted_ids), np.asarray(label_ids)
    if predicted_ids.ndim == 3:  # raw logits
        predicted_ids = predicted_ids.argmax(-1)
    # The prediction at position t is for token t + 1.
    guess, target = predicted_ids[:, :-1], label_ids[:, 1:]
    answer = target != IGNORE_INDEX
    predictions = tokenizer.decode_answers([g[m].tolist() for g, m in zip(guess, answer)])
    references = tokenizer.decode_answers([t[m].tolist() for t, m in zip(target, answer)])
    return predictions, [r if r is not None else "" for r in references]


def compute_metrics(tokenizer):
    """A `compute_metrics` for the Trainer, scoring teacher-forced answers with `arith_scores`.

    Pair it with `preprocess_logits_for_metrics` (keeps memory small); with
    `include_for_metrics=["inputs"]` the report is also broken down by longest operand.
    """
    fmt, vocab = tokenizer.arith_format, tokenizer.arith_format.vocab()

    def _compute(eval_pred) -> dict:
        predictions, references = teacher_forced_answers(eval_pred.predictions, eval_pred.label_ids, tokenizer)
        inputs = getattr(eval_pred, "inputs", None)
        if inputs is not None:
            answer = np.asarray(eval_pred.label_ids) != IGNORE_INDEX
            prompts = np.where(answer, fmt.token_id(PAD_TOKEN), np.asarray(inputs))
            lengths = prompt_operand_lengths(prompts, fmt, vocab)
        else:
            lengths = None
        report = arith_scores(predictions, references, lengths)
        # Trainer logs want flat scalars.
        flat = {k: v for k, v in report.items() if k in ("exact_match", "per_digit_accuracy", "malformed")}
        for k, v in report.get("by_max_operand_length", {}).items():
            flat[f"exact_match_len_{k}"] = v
        return flat

    return _compute


__all__ = [
    "arith_scores", "compute_metrics", "digit_matches", "group_scores", "length_key", "metric_path",
    "operand_lengths", "preprocess_logits_for_metrics", "prompt_operand_lengths", "teacher_forced_answers",
]
