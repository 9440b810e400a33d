"""`solve`: plain decimal problems in, plain decimal answers out, through the model alone."""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import torch

from ..data.formatting import FormatError, parse_problems
from ..text import progress_bar
from .answer_views import agreed_answers, problem_views
from .decoding import default_batch_size, default_tokens_per_step, greedy_decode, row_chunks
from .limits import BeyondTrainingWarning, ModelLimits, answer_budget, check_model_kwargs, model_limits
from .loading import checkpoint_folder, other_bundled_model

# Below this confidence an answer is flagged (the CLI marks it; eval counts the wrong answers above it).
# Answers beyond the trained range report at most limits.BEYOND_TRAINING_CONFIDENCE, below it.
LOW_CONFIDENCE = 0.9


class Answer(NamedTuple):
    """An answer with the model's confidence in it: the lowest probability the model gave any token
    it wrote, its end token included. None where the output is malformed."""

    answer: str | None
    confidence: float


def _problem_list(problems) -> list:
    """`problems` as a list: one problem (a string) or an iterable of them; anything else is one line."""
    if isinstance(problems, str):
        return [problems]
    if isinstance(problems, (bytes, bytearray, dict, set, frozenset)):  # a set has no order to answer in
        raise FormatError(f"problems must be a problem (a string) or a list of problems, got {type(problems).__name__}")
    try:
        return list(problems)
    except TypeError:
        raise FormatError(f"problems must be a problem (a string) or a list of problems, "
                          f"got {type(problems).__name__}") from None


def solve(model, tokenizer, problems: list[str] | str, batch_size: int | None = None, use_cache: bool = True,
          tokens_per_step: int | None = None, model_kwargs: dict | None = None, *, checked: bool = False,
          warn_beyond_training: bool = True, return_confidence: bool = False, confirm: bool = True,
          limits: ModelLimits | None = None, progress: bool = False, views: int | None = None):
    """Answer plain problems ('123+456') with greedy decoding; None where the output is malformed.

    With `return_confidence=True` each answer is an `Answer(answer, confidence)`; an answer to a problem
    beyond the checkpoint's trained range (longer operands, or for sorting longer lists) reports at most
    `limits.BEYOND_TRAINING_CONFIDENCE` (0.5, below LOW_CONFIDENCE: `ModelLimits.calibrated`).

    The tokenizer writes each problem in the model's format and reads the answer back; the
    model generates every answer token. No arithmetic happens here. A multi-token model's extra
    heads draft tokens (`tokens_per_step`, default: all its heads) and with `confirm` (the default)
    the first head verifies them in the same passes (`decoding.speculative_decode`): the answers and
    confidences are those of one token per pass, in fewer passes; `confirm=False` takes the extra
    heads' tokens as written (faster, not exact). `model_kwargs` reach every forward pass (for example
    `{"num_recurrences": 8}` for a looped model; a name the model's forward does not take is refused).
    `batch_size` (a positive integer) defaults to `default_batch_size(model)`; long problems run fewer rows
    (`decoding.row_chunks`). `limits`: the model's `ModelLimits`, when the caller built them already.
    `views` (1 to 16; None: the model's `config.answer_views`, 1 unless recorded): answer that many
    equivalent views of each problem (a sort list relabelled, a product's operands swapped) and return
    the answer most of them give, its confidence scaled by the share that agree
    (`hf_arith.runtime.answer_views`).

    Every argument and problem is checked against the model's limits (`hf_arith.runtime.limits`) before the
    first batch runs, each bad one a one-line FormatError (a ValueError). Problems beyond the range the
    checkpoint was trained on (operand lengths, list sizes) are answered with one BeyondTrainingWarning per call (unless
    `warn_beyond_training=False`: evaluations that measure those lengths on purpose). `checked=True`
    skips the checks and the warning: for callers that have checked the problems already
    (`length_grid`, `loops_curve`, `stress_test`). `progress=True` shows a bar on stderr once the call has
    run a few seconds (`text.progress_bar`).
    """
    if not callable(getattr(model, "parameters", None)) or getattr(model, "config", None) is None:
        raise TypeError(f"model must be a transformers model (for example from hf_arith.load), got {type(model).__name__}")
    if not hasattr(tokenizer, "arith_format"):
        raise TypeError(f"tokenizer must be the model's hf_arith tokenizer (for example from hf_arith.load), "
                        f"got {type(tokenizer).__name__}")
    single = isinstance(problems, str)
    problems = _problem_list(problems)
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer))
                                   or batch_size < 1):
        raise FormatError(f"batch_size must be a positive integer (or None: the model's default), got {batch_size!r}")
    if not problems:
        return []
    batch_size = int(batch_size or default_batch_size(model))
    if tokens_per_step is None:  # every head, drafted and verified, where that is faster
        tokens_per_step = default_tokens_per_step(model, min(batch_size, len(problems)))
    if checked:
        limits = limits or model_limits(model, tokenizer)
        parsed = parse_problems(problems, limits.fmt)
    else:
        limits = limits or model_limits(model, tokenizer, checkpoint_folder(model))
        limits.check_tokens_per_step(tokens_per_step)
        model_kwargs = check_model_kwargs(model, model_kwargs, limits)
        parsed = limits.check_problems(problems, batch_size=batch_size)
        message = limits.beyond_training_warning(problems, parsed) if warn_beyond_training else None
        if message is not None:
            beyond = parsed.lengths[limits.beyond_training(parsed)]
            other = other_bundled_model(model, limits.fmt, int(beyond.max()), int((beyond > 0).sum(axis=1).max()))
            if other:
                message += f"; bundled {other} holds them: hf_arith.load({other!r})"
            warnings.warn(message, BeyondTrainingWarning, stacklevel=2)
    views = limits.check_views(views)
    decode = {"use_cache": use_cache, "tokens_per_step": tokens_per_step, "model_kwargs": model_kwargs,
              "confirm": confirm}
    if views > 1:  # the views vote by their confidences, whether or not the caller asked for them
        task = limits.fmt.task_rules
        texts, orders, counts = problem_views(task, limits.fmt, problems, views)
        # The views vote by the model's own confidences; capping them first (beyond the trained range every
        # view sits at the cap) would settle two views that disagree by their order instead.
        written, confidences = _decode(model, tokenizer, texts, parse_problems(texts, limits.fmt), limits, batch_size,
                                       decode, confidence=True, calibrate=False, progress=progress)
        agreed = agreed_answers(task, written, confidences, orders, counts)
        agreed_confidences = [a[1] for a in agreed]
        if not checked:
            agreed_confidences = limits.calibrated(agreed_confidences, parsed)
        answers = [Answer(a[0], c) if return_confidence else a[0] for a, c in zip(agreed, agreed_confidences)]
    else:
        written, confidences = _decode(model, tokenizer, problems, parsed, limits, batch_size, decode,
                                       confidence=return_confidence, calibrate=not checked, progress=progress)
        answers = list(map(Answer, written, confidences)) if return_confidence else written
    return answers[0] if single else answers


def _decode(model, tokenizer, problems: list[str], parsed, limits: ModelLimits, batch_size: int, decode: dict, *,
            confidence: bool, calibrate: bool, progress: bool) -> tuple[list, list[float] | None]:
    """The answers `solve` reads back from the model's greedy decoding (`decode`: greedy_decode's options) of
    checked problems, and with `confidence` each one's confidence (None otherwise); `calibrate`: beyond the
    trained range, capped below LOW_CONFIDENCE (limits.calibrated)."""
    answers, confidences = [], [] if confidence else None
    model_device = next(model.parameters()).device
    end = tokenizer.eos_token_id if limits.fmt.end_token else None
    bar = progress_bar(len(problems), "solving", "problem", enabled=progress)
    prompts = limits.prompt_tokens(parsed) if decode["use_cache"] else None  # without a cache, every step is a pass
    for rows in row_chunks(limits.sequence_tokens(parsed), model, batch_size, prompts):
        chunk = problems[rows]
        enc = tokenizer(chunk, padding=True, return_tensors="pt")
        batch = parsed.select(rows)
        budgets = limits.answer_budgets(batch)
        new = greedy_decode(model, enc["input_ids"].to(model_device), enc["attention_mask"].to(model_device),
                            int(budgets.max()), eos_token_id=end, pad_token_id=tokenizer.pad_token_id,
                            return_probabilities=confidence, **decode)
        new, probabilities = new if confidences is not None else (new, None)
        # Each answer ends at its own budget, as when it is decoded alone: tokens a shorter problem
        # wrote only because it shared a batch with a longer one do not count.
        beyond = torch.arange(new.shape[1], device=new.device) >= torch.as_tensor(budgets, device=new.device)[:, None]
        new = new.masked_fill(beyond, tokenizer.pad_token_id).cpu()
        answers.extend(tokenizer.decode_answers(new, batch))
        if confidences is not None:
            lowest = probabilities.masked_fill(beyond, 1.0).min(1).values.tolist() if probabilities.shape[1] \
                else [1.0] * len(chunk)
            confidences.extend(limits.calibrated(lowest, batch) if calibrate else lowest)
        bar.update(len(chunk))
    bar.close()
    return answers, confidences


__all__ = ["LOW_CONFIDENCE", "Answer", "BeyondTrainingWarning", "answer_budget", "solve"]
