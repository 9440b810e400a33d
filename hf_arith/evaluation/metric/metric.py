"""Exact arithmetic answers, as an `evaluate` metric: a thin wrapper of the scores in its sibling scores.py.

    import evaluate, hf_arith
    metric = evaluate.load(hf_arith.metric_path())          # offline: a local module
    metric.compute(predictions=["579", None], references=["579", "10"], problems=["123+456", "9+1"])
    metric.add_batch(predictions=["579"], references=["579"], problems=["123+456"])  # then metric.compute()

Predictions are plain decimal answers as `hf_arith.solve` returns them (None = malformed). The folder loads
with `evaluate.load(folder)` without hf_arith: this file imports only evaluate, datasets and scores.py.
"""

import datasets
import evaluate

from .scores import arith_scores, operand_lengths

_DESCRIPTION = """Exact match, per-digit accuracy (answers aligned at the units digit), the share of
malformed answers, and, given the problems or their operand lengths, exact match by longest operand
and by operand-length combination ('3x5')."""

_INPUTS = """
Args:
    predictions: answers as plain decimal strings; None for an answer that is not a well-formed number.
    references: the correct answers as plain decimal strings.
    problems (optional): the problems as plain text ('123+456'); their operand lengths group the scores.
    lengths (optional): operand digit counts per problem ([n, k]) instead of `problems`.
Returns:
    exact_match, per_digit_accuracy, malformed, n; with problems or lengths also by_max_operand_length,
    count_by_max_operand_length, by_operand_lengths and count_by_operand_lengths.
"""


class ArithAccuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_INPUTS,
            # The problems are an optional column: `compute`, `add_batch` and `add` take them or not ("").
            features=datasets.Features({"predictions": datasets.Value("string"), "references": datasets.Value("string"),
                                        "problems": datasets.Value("string")}),
        )

    # evaluate's writer takes strings only (a None first in a column is refused): a malformed answer (None)
    # travels as "", which no well-formed answer is, and a problem not given as "".
    def compute(self, *, predictions=None, references=None, **kwargs):
        """The scores of these predictions (or of those added so far); `problems` optional."""
        if predictions is not None:
            predictions, kwargs["problems"] = _columns(predictions, kwargs.get("problems"))
        return super().compute(predictions=predictions, references=references, **kwargs)

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Add a batch of predictions and references, and optionally their `problems`."""
        if predictions is not None:
            predictions, kwargs["problems"] = _columns(predictions, kwargs.get("problems"))
        return super().add_batch(predictions=predictions, references=references, **kwargs)

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Add one prediction and reference, and optionally its `problems` (the problem)."""
        kwargs["problems"] = kwargs.get("problems") or ""
        return super().add(prediction="" if prediction is None else prediction, reference=reference, **kwargs)

    def _compute(self, predictions, references, problems=None, lengths=None):
        given = [p for p in problems or [] if p]
        if given and len(given) != len(references):
            raise ValueError(f"problems: {len(given)} given for {len(references)} predictions; give every problem or none")
        if given and lengths is None:
            lengths = operand_lengths(given)
        return arith_scores([p if p else None for p in predictions], references, lengths)


def _columns(predictions, problems) -> tuple[list, list]:
    """Predictions with None as "", and the problems ("" for each when not given)."""
    predictions = ["" if p is None else p for p in predictions]
    return predictions, list(problems) if problems is not None else [""] * len(predictions)
