"""`solve`: plain decimal problems in, plain decimal answers out, through the model alone."""

from __future__ import annotations

from .decoding import default_batch_size, greedy_decode
from .formatting import parse_problems
from .limits import answer_budget, model_limits


def solve(model, tokenizer, problems: list[str] | str, batch_size: int | None = None, use_cache: bool = True,
          tokens_per_step: int = 1, model_kwargs: dict | None = None, *, checked: bool = False):
    """Answer plain problems ('123+456') with greedy decoding; None where the output is malformed.

    The tokenizer writes each problem in the model's format and reads the answer back; the
    model generates every answer token. No arithmetic happens here. `tokens_per_step` > 1 uses
    a multi-token model's extra heads; `model_kwargs` reach every forward pass (for example
    `{"num_recurrences": 8}` for a looped model). `batch_size` defaults to `default_batch_size(model)`.

    Every problem is checked against the model's limits (`hf_arith.limits`) before the first
    batch runs. `checked=True` skips that: for callers that have checked the problems already
    (`length_grid`, `loops_curve`, `stress_test`).
    """
    single = isinstance(problems, str)
    problems = [problems] if single else list(problems)
    if not problems:
        return []
    batch_size = batch_size or default_batch_size(model)
    limits = model_limits(model, tokenizer)
    if checked:
        parsed = parse_problems(problems, limits.fmt)
    else:
        limits.check_tokens_per_step(tokens_per_step)
        parsed = limits.check_problems(problems, batch_size=batch_size)
    answers = []
    model_device = next(model.parameters()).device
    end = tokenizer.eos_token_id if limits.fmt.end_token else None
    for start in range(0, len(problems), batch_size):
        chunk = problems[start : start + batch_size]
        enc = tokenizer(chunk, padding=True, return_tensors="pt")
        budget = limits.answer_budget(parsed.select(slice(start, start + batch_size)))
        new = greedy_decode(
            model, enc["input_ids"].to(model_device), enc["attention_mask"].to(model_device), budget,
            eos_token_id=end, pad_token_id=tokenizer.pad_token_id,
            use_cache=use_cache, tokens_per_step=tokens_per_step, model_kwargs=model_kwargs,
        )
        answers.extend(tokenizer.decode_answers(new.cpu()))
    return answers[0] if single else answers


__all__ = ["answer_budget", "solve"]
