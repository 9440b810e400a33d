"""Scoring: exact match overall and per operand length, and the public tiny-adder protocol."""

from __future__ import annotations

import random
import time

import numpy as np

from ..data.formatting import FormatError
from ..data.problems import ProblemSpec, held_out_problems
from ..runtime.decoding import default_batch_size
from ..runtime.limits import ModelLimits, model_limits
from ..runtime.solving import LOW_CONFIDENCE, solve
from .metrics import arith_scores, confidence_scores

# The tiny-adder leaderboard's fixed cases (its verify script lists 9999999999+9999999999 twice).
TINY_ADDER_EDGE_CASES = [
    (0, 0), (0, 1), (9999999999, 0), (9999999999, 1), (9999999999, 9999999999),
    (5000000000, 5000000000), (1111111111, 8888888889), (1234567890, 9876543210),
    (9999999999, 9999999999), (1, 9999999999),
]
TINY_ADDER_MAX = 9_999_999_999


def evaluate_model(model, tokenizer, spec: ProblemSpec, n: int = 2000, seed: int = 1234,
                   batch_size: int | None = None, test_fraction: float = 0.1, limits: ModelLimits | None = None,
                   progress: bool = False, confirm: bool = True, views: int | None = None) -> dict:
    """Exact match, per-digit accuracy and confidence figures of `n` held-out problems of `spec` (`solve`'s
    answers; `confirm=False`: a multi-token model's extra heads' own tokens, unverified; `views`: how many
    views of each problem vote, default the model's config.answer_views)."""
    problems = held_out_problems(spec, n, seed, test_fraction)
    texts, answers, lengths = problems.to_text(), problems.answer_text(), problems.lengths
    start = time.perf_counter()
    # Lengths beyond the training range are what a report measures, not something to warn about.
    answered = solve(model, tokenizer, texts, batch_size=batch_size, warn_beyond_training=False, return_confidence=True,
                     limits=limits, progress=progress, confirm=confirm, views=views)
    predictions = [a.answer for a in answered]
    report = arith_scores(predictions, answers, lengths)
    report.update(confidence_scores(texts, predictions, answers, [a.confidence for a in answered], LOW_CONFIDENCE))
    report["seconds"] = time.perf_counter() - start
    # The views of each problem solve answered and voted on.
    report["answer_views"] = views or (limits or model_limits(model, tokenizer)).answer_views
    return report


def loops_curve(model, tokenizer, texts: list[str], answers: list[str], loops, inside=None,
                batch_size: int | None = None, limits: ModelLimits | None = None) -> dict:
    """Exact match on the same problems for each number of recurrences; with `inside` (a boolean
    per problem: within the training range) also inside and beyond the training range."""
    # The loop counts and the problems are checked once, before the first run.
    limits = limits or model_limits(model, tokenizer)
    loops = limits.check_loops(loops)
    batch_size = batch_size or default_batch_size(model)
    limits.check_problems(texts, batch_size=batch_size)
    inside = None if inside is None else np.asarray(inside, dtype=bool)
    curve = {"loops": loops, "n": len(texts), "exact_match": [], "in_training_range": [], "beyond_training_range": []}
    for n in loops:
        predictions = solve(model, tokenizer, texts, batch_size=batch_size, model_kwargs={"num_recurrences": n},
                            checked=True, limits=limits)
        curve["exact_match"].append(arith_scores(predictions, answers)["exact_match"])
        for key, part in (("in_training_range", inside), ("beyond_training_range", None if inside is None else ~inside)):
            idx = [] if part is None else np.flatnonzero(part)
            curve[key].append(arith_scores([predictions[i] for i in idx], [answers[i] for i in idx])["exact_match"]
                              if len(idx) else None)
    return curve


def tiny_adder_cases(seed: int = 2025, n_random: int = 10_000) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    pairs = [(rng.randint(0, TINY_ADDER_MAX), rng.randint(0, TINY_ADDER_MAX)) for _ in range(n_random)]
    return list(TINY_ADDER_EDGE_CASES) + pairs


def is_tiny_adder_format(fmt) -> bool:
    """Whether a number format can hold the tiny-adder protocol's problems (10-digit decimal sums)."""
    return fmt.task == "add" and fmt.base == 10 and not 0 < fmt.operand_width < 10


def verify_tiny_adder(model, tokenizer, seed: int = 2025, batch_size: int = 16384) -> dict:
    """The public tiny-adder protocol: 10 edge cases + 10,000 random pairs from random.Random(seed)."""
    fmt = tokenizer.arith_format
    if not is_tiny_adder_format(fmt):
        raise FormatError(f"the tiny-adder protocol needs a model of 10-digit decimal addition; this one does "
                          f"{fmt.task_rules.title} in base {fmt.base}"
                          + (f" with {fmt.operand_width}-digit operands" if fmt.operand_width else ""))
    cases = tiny_adder_cases(seed)
    texts = [f"{a}+{b}" for a, b in cases]
    start = time.perf_counter()
    predictions = solve(model, tokenizer, texts, batch_size=batch_size)
    seconds = time.perf_counter() - start
    correct = sum(p == str(a + b) for p, (a, b) in zip(predictions, cases))
    return {
        "accuracy": correct / len(cases), "correct": correct, "total": len(cases),
        "edge_cases_correct": sum(p == str(a + b) for p, (a, b) in zip(predictions[:10], cases[:10])),
        "unique_params": model.num_parameters(), "seconds": seconds, "additions_per_second": len(cases) / seconds,
        "seed": seed,
    }


def verify_text(result: dict, name: str) -> str:
    """`verify_tiny_adder`'s result as `hf-arith verify` prints it (six lines, no trailing newline)."""
    from ..text import pct

    return "\n".join([
        f"Tiny-adder verify of {name} (seed {result['seed']}):",
        f"  accuracy          {pct(result['accuracy'], spaced=False)}",
        f"  correct           {result['correct']} / {result['total']}",
        f"  edge cases        {result['edge_cases_correct']} / 10",
        f"  unique params     {result['unique_params']}",
        f"  additions/s       {result['additions_per_second']:,.0f}",
    ])
