"""The `evaluate` metric module (metric.py): load it with `evaluate.load(hf_arith.evaluation.metrics.metric_path())`.

This file only makes the folder a package, so that it is installed with hf_arith.
"""
