"""`solve`: plain decimal problems in, plain decimal answers out, through the model alone."""

from __future__ import annotations

import numpy as np

from .decoding import check_tokens_per_step, default_batch_size, greedy_decode
from .formatting import FormatError, parse_problems


def answer_budget(tokenizer, problems: list[str]) -> int:
    """New tokens the decoder may need for the longest answer in `problems`."""
    return tokenizer.arith_format.max_answer_tokens(parse_problems(problems, tokenizer.arith_format))


def check_number_lengths(model, fmt, parsed, problems: list[str]) -> None:
    """Models with per-digit positions (abacus) can place numbers up to `abacus_max_digits` long."""
    limit = getattr(model.config, "abacus_max_digits", None)
    if limit is None:
        return
    # An aligned answer (abacus_align_answer) indexes its digits one higher.
    answer = fmt.max_answer_digits(parsed.lengths) + int(bool(getattr(model.config, "abacus_align_answer", False)))
    longest = np.maximum(parsed.lengths.max(axis=1), answer)
    if (longest > limit).any():
        i = int(np.argmax(longest > limit))
        raise FormatError(
            f"{problems[i]!r}: needs numbers of {int(longest[i])} digits, beyond this model's abacus range of "
            f"{limit} digits (config.abacus_max_digits)"
        )


def check_context(model, prompt_length: int, budget: int) -> None:
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None and prompt_length + budget > limit:
        raise FormatError(
            f"problem too long for this model: {prompt_length} prompt + {budget} answer tokens "
            f"exceed its context of {limit} positions"
        )


def solve(model, tokenizer, problems: list[str] | str, batch_size: int | None = None, use_cache: bool = True,
          tokens_per_step: int = 1, model_kwargs: dict | None = None):
    """Answer plain problems ('123+456') with greedy decoding; None where the output is malformed.

    The tokenizer writes each problem in the model's format and reads the answer back; the
    model generates every answer token. No arithmetic happens here. `tokens_per_step` > 1 uses
    a multi-token model's extra heads; `model_kwargs` reach every forward pass (for example
    `{"num_recurrences": 8}` for a looped model). `batch_size` defaults to `default_batch_size(model)`.
    """
    single = isinstance(problems, str)
    problems = [problems] if single else list(problems)
    if not problems:
        return []
    if not hasattr(tokenizer, "arith_format"):
        raise FormatError(f"{type(tokenizer).__name__} is not an hf_arith tokenizer (no number format)")
    check_tokens_per_step(model, tokens_per_step)
    batch_size = batch_size or default_batch_size(model)
    answers = []
    model_device = next(model.parameters()).device
    for start in range(0, len(problems), batch_size):
        chunk = problems[start : start + batch_size]
        parsed = parse_problems(chunk, tokenizer.arith_format)
        budget = tokenizer.arith_format.max_answer_tokens(parsed)
        check_number_lengths(model, tokenizer.arith_format, parsed, chunk)
        enc = tokenizer(chunk, padding=True, return_tensors="pt")
        check_context(model, enc["input_ids"].shape[1], budget)
        new = greedy_decode(
            model, enc["input_ids"].to(model_device), enc["attention_mask"].to(model_device), budget,
            eos_token_id=tokenizer.eos_token_id if tokenizer.arith_format.end_token else None,
            pad_token_id=tokenizer.pad_token_id, use_cache=use_cache,
            tokens_per_step=tokens_per_step, model_kwargs=model_kwargs,
        )
        answers.extend(tokenizer.decode_answers(new.cpu()))
    return answers[0] if single else answers


__all__ = ["solve", "answer_budget", "check_context", "check_number_lengths"]
