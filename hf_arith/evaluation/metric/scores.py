"""The answer scores, in plain Python and numpy: exact match, per-digit accuracy, the share of malformed
answers, and exact match by operand length.

Defined here, beside the `evaluate` metric module (metric.py) that loads this file as its sibling, so the
metric loads with `evaluate.load(folder)` where hf_arith is not installed (on the Hub, say); hf_arith.evaluation.metrics
re-exports them for `hf-arith eval`, the length grid and the Trainer's `compute_metrics`. Imports only the
standard library and numpy.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

_NUMBER = re.compile(r"[0-9]+")


def digit_matches(prediction: str | None, reference: str) -> tuple[int, int]:
    """(matching characters, compared positions) with both answers aligned at the units digit.

    Positions are counted over the longer of the two, so a missing or an extra digit counts as
    wrong; a malformed prediction (None) gets none of the reference's digits.
    """
    if prediction is None:
        return 0, len(reference)
    width = max(len(prediction), len(reference))
    a, b = prediction.rjust(width, " "), reference.rjust(width, " ")
    return sum(x == y != " " for x, y in zip(a, b)), width


def _summary(predictions, references) -> dict:
    n = len(references)
    if n == 0:
        return {"exact_match": 0.0, "per_digit_accuracy": 0.0, "malformed": 0.0, "n": 0}
    matched = [digit_matches(p, r) for p, r in zip(predictions, references)]
    positions = sum(t for _, t in matched)
    return {
        "exact_match": sum(p == r for p, r in zip(predictions, references)) / n,
        # Micro-average: long answers weigh more, which is what "share of digits right" means.
        "per_digit_accuracy": sum(c for c, _ in matched) / positions if positions else 0.0,
        "malformed": sum(p is None for p in predictions) / n,
        "n": n,
    }


def group_scores(predictions, references, keys) -> dict:
    """The same scores for each group of problems that share a key (e.g. an operand-length pair)."""
    groups = defaultdict(lambda: ([], []))
    for p, r, k in zip(predictions, references, keys):
        groups[k][0].append(p)
        groups[k][1].append(r)
    return {k: _summary(ps, rs) for k, (ps, rs) in sorted(groups.items())}


def length_key(row) -> str:
    """'3x5' for operands of 3 and 5 digits (absent sort items, length 0, are left out)."""
    return "x".join(str(int(n)) for n in row if n > 0)


def operand_lengths(problems: list[str]) -> np.ndarray:
    """Decimal digits of each operand of plain problems ('123+45' -> [3, 2]); [n, k], 0 = absent."""
    rows = [[len(v.lstrip("0") or "0") for v in _NUMBER.findall(p)] for p in problems]
    k = max((len(r) for r in rows), default=0)
    return np.array([r + [0] * (k - len(r)) for r in rows], dtype=np.int64).reshape(len(rows), k)


def arith_scores(predictions: list[str | None], references: list[str], lengths=None) -> dict:
    """Exact match, per-digit accuracy and malformed share; with `lengths` ([n, k] operand digit
    counts) also exact match by longest operand and by operand-length combination."""
    predictions, references = list(predictions), list(references)
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    report = _summary(predictions, references)
    if lengths is not None:
        lengths = np.asarray(lengths).reshape(len(references), -1)
        by_max = group_scores(predictions, references, [int(row.max()) for row in lengths])
        by_pair = group_scores(predictions, references, [length_key(row) for row in lengths])
        report["by_max_operand_length"] = {k: s["exact_match"] for k, s in by_max.items()}
        report["count_by_max_operand_length"] = {k: s["n"] for k, s in by_max.items()}
        report["by_operand_lengths"] = {k: s["exact_match"] for k, s in by_pair.items()}
        report["count_by_operand_lengths"] = {k: s["n"] for k, s in by_pair.items()}
    return report


__all__ = ["arith_scores", "digit_matches", "group_scores", "length_key", "operand_lengths"]
