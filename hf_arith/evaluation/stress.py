"""Stress sets: problems that random sampling almost never draws, each reported on its own.

- commutativity (addition, multiplication): a+b and b+a must get the same (correct) answer;
- carry chains: 999..9 + 1 and 1 + 999..9 (every digit carries), 1000..0 - 1 (every digit
  borrows), 999..9 * 9, for every length;
- zero operands: 0+0, 0+x and x+0 (sorting: all items 0);
- ties (sorting): lists of equal items, whose answer is the labels in order;
- max length: both operands as long as the model takes;
- repeated digits: operands written with one or two distinct digits (55555555+5555555555), where
  random sampling almost never goes and attention has the most look-alike positions to confuse
  (sorting: lists full of ties);
- tie-heavy and near-tie lists (sorting: the task's `stress_kinds`, kinds it draws itself): lists
  with repeated values, and lists whose values differ in one digit;
- reported failures: wrong answers bundled models once gave, kept as regression cases.

"9" stands for the largest digit of the model's base. Reference answers come from the
vectorized reference solver of `problems.py`, exact for any length; scores from `metrics`.
"""

from __future__ import annotations

import numpy as np

from ..data.formatting import SORT_ITEMS, digits_to_int, parse_problems
from ..data.problems import ProblemSpec, sample, with_answers
from ..runtime.decoding import default_batch_size
from ..runtime.limits import ModelLimits, model_limits
from ..runtime.loading import checkpoint_folder
from ..runtime.solving import LOW_CONFIDENCE, solve
from .metrics import arith_scores, is_silent_wrong

SHOW_FAILURES = 5  # failing examples kept per set

def _random_values(base: int, length: int, n: int, rng: np.random.Generator) -> list[int]:
    """n numbers of exactly `length` digits in `base` (Python ints: exact at any length)."""
    digits = rng.integers(0, base, size=(n, length))
    if length > 1:
        digits[:, -1] = rng.integers(1, base, size=n)
    return [digits_to_int(row, base) for row in digits]


def stress_sets(fmt, max_digits: int, n: int = 100, seed: int = 0) -> dict[str, list[str]]:
    """Plain problem texts per stress set for this format; only the sets that apply to its task."""
    rng = np.random.default_rng(seed)
    base, task = fmt.base, fmt.task_rules
    lengths = range(1, max_digits + 1)
    if task.item_list:
        return _list_sets(fmt, max_digits, n, rng)

    def text(x, y):
        return task.problem_text([str(x), str(y)])

    top = [base**k - 1 for k in lengths]  # 99..9 in the model's base, k digits
    sets = {}
    if task.commutative:
        a = [v for k in lengths for v in _random_values(base, k, max(1, n // max_digits), rng)]
        b = [v for k in reversed(lengths) for v in _random_values(base, k, max(1, n // max_digits), rng)]
        sets["commutativity"] = [text(x, y) for x, y in zip(a, b)]
    chains = task.chain_problems(top, base)
    if chains:
        sets["carry_chains"] = [text(x, y) for x, y in chains]
    some = [v for k in lengths for v in _random_values(base, k, 1, rng)]
    sets["zero_operands"] = [text(0, 0)] + [text(0, v) for v in some] + [text(v, 0) for v in some]
    wide_a, wide_b = (_random_values(base, max_digits, n, rng) for _ in range(2))
    sets["max_length"] = [text(x, y) for x, y in zip(wide_a, wide_b)]
    spec = ProblemSpec(task=task.name, base=base, min_digits=1, max_digits=max_digits)
    sets["repeated_digits"] = sample(spec, n, rng, split=None, kind="repeated").to_text()
    if base == 10:
        reported = [t for t in task.reported_failures if max(map(len, t.split(task.operator))) <= max_digits]
        if reported:
            sets["reported_failures"] = reported
    return sets


def _list_sets(fmt, max_digits: int, n: int, rng: np.random.Generator) -> dict[str, list[str]]:
    """The stress sets of a task whose problems are lists of items (sorting)."""
    base, task = fmt.base, fmt.task_rules
    lengths = range(1, max_digits + 1)
    items = min(fmt.max_items, SORT_ITEMS)
    spec = ProblemSpec(task=task.name, base=base, min_digits=max_digits, max_digits=max_digits,
                       min_items=items, max_items=items)
    # Equal items must keep their label order: k copies of one number, for every length and item count.
    values = [v for k in lengths for v in (*_random_values(base, k, 1, rng), base**k - 1)]
    mixed = ProblemSpec(task=task.name, base=base, min_digits=1, max_digits=max_digits, min_items=2, max_items=items)
    sets = {
        "zero_operands": [task.problem_text(["0"] * k) for k in range(2, fmt.max_items + 1)],
        "max_length": sample(spec, n, rng, split=None).to_text(),
        "ties": [task.problem_text([str(v)] * k) for v in values for k in range(2, fmt.max_items + 1)],
        "repeated_digits": sample(mixed, n, rng, split=None, kind="repeated").to_text(),
    }
    for kind in task.stress_kinds:  # hard kinds the task draws itself, each a set under its own name
        sets[kind] = sample(mixed, n, rng, split=None, kind=kind).to_text()
    reported = [t for t in task.reported_failures
                if t.count(",") < fmt.max_items and max(map(len, task.parse(t, fmt))) <= max_digits]
    if base == 10 and reported:
        sets["reported_failures"] = reported
    return sets


def references(texts: list[str], fmt) -> list[str]:
    return with_answers(parse_problems(texts, fmt)).answer_text()


def _swap(text: str, op: str) -> str:
    left, _, right = text.partition(op)
    return f"{right}{op}{left}"


def score_set(texts: list[str], predictions, expected, confidences=None) -> dict:
    """Scores of one set and its first failures; with `confidences`, each failure's confidence and
    `silent_wrong`: the wrong answers at or above the flagging threshold (LOW_CONFIDENCE)."""
    report = arith_scores(predictions, expected)
    confidences = [None] * len(texts) if confidences is None else confidences
    failures = [{"problem": t, "expected": r, "got": p} | ({} if c is None else {"confidence": c})
                for t, p, r, c in zip(texts, predictions, expected, confidences) if p != r]
    report["failures"] = failures[:SHOW_FAILURES]
    if confidences and confidences[0] is not None:
        report["silent_wrong"] = sum(is_silent_wrong(f["got"], f["expected"], f["confidence"], LOW_CONFIDENCE)
                                     for f in failures)
    return report


def stress_test(model, tokenizer, max_digits: int, n: int = 100, seed: int = 0, batch_size: int | None = None,
                model_kwargs: dict | None = None, sets: dict[str, list[str]] | None = None,
                limits: ModelLimits | None = None) -> dict:
    """Run every stress set (or the given `sets`) through `solve`; one report per set.

    The commutativity report adds `swapped_exact_match` (b+a) and `agreement`: the share of
    pairs where a+b and b+a got the same well-formed answer, right or wrong.
    """
    fmt = tokenizer.arith_format
    sets = dict(sets if sets is not None else stress_sets(fmt, max_digits, n, seed))
    if "commutativity" in sets:
        sets["commutativity (swapped)"] = [_swap(t, fmt.task_rules.operator) for t in sets["commutativity"]]
    # One solve call for all sets: one batched run instead of several small ones, its problems
    # checked against the model's limits first.
    everything = [t for texts in sets.values() for t in texts]
    batch_size = batch_size or default_batch_size(model)
    limits = limits or model_limits(model, tokenizer, checkpoint_folder(model))
    parsed = limits.check_problems(everything, batch_size=batch_size)
    answered = solve(model, tokenizer, everything, batch_size=batch_size, model_kwargs=model_kwargs, checked=True,
                     return_confidence=True, limits=limits)
    # Confidences as solve reports them: capped beyond the trained range (limits.calibrated).
    predicted, confidences = [a.answer for a in answered], limits.calibrated([a.confidence for a in answered], parsed)
    expected = with_answers(parsed).answer_text()
    reports, start = {}, 0
    for name, texts in sets.items():
        end = start + len(texts)
        reports[name] = score_set(texts, predicted[start:end], expected[start:end], confidences[start:end])
        reports[name]["predictions"] = predicted[start:end]
        start = end
    if "commutativity" in reports:
        forward, back = reports["commutativity"], reports.pop("commutativity (swapped)")
        forward["swapped_exact_match"] = back["exact_match"]
        pairs = list(zip(forward["predictions"], back["predictions"]))
        forward["agreement"] = sum(x == y and x is not None for x, y in pairs) / len(pairs) if pairs else 0.0
    for report in reports.values():
        del report["predictions"]
    return reports


__all__ = ["references", "score_set", "stress_sets", "stress_test"]
