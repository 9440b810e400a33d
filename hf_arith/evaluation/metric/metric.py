"""Exact arithmetic answers, as an `evaluate` metric: a thin wrapper of `hf_arith.evaluation.metrics`.

    import evaluate, hf_arith
    metric = evaluate.load(hf_arith.metric_path())          # offline: a local module
    metric.compute(predictions=["579", None], references=["579", "10"], problems=["123+456", "9+1"])

Predictions are plain decimal answers as `hf_arith.solve` returns them (None = malformed).
"""

import datasets
import evaluate

from hf_arith.evaluation.metrics import arith_scores, operand_lengths

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
            features=datasets.Features({"predictions": datasets.Value("string"),
                                        "references": datasets.Value("string")}),
        )

    def _compute(self, predictions, references, problems=None, lengths=None):
        if problems is not None and lengths is None:
            lengths = operand_lengths(problems)
        return arith_scores(predictions, references, lengths)
