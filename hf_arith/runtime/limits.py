"""A model's limits, in one place: the longest operands it takes, its context and abacus range,
the operand lengths it was trained on, its loop counts and tokens per step.

`model_limits(model, tokenizer)` reads them; its checks refuse anything beyond them with a
one-line `FormatError` that names the input and the limit. Each entry point (the CLI commands,
`solve`, `length_grid`, `loops_curve`, `stress_test`) checks its input here once;
the code below it trusts what it is given.
"""

from __future__ import annotations

import inspect
import numbers
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from ..data.formatting import (
    SORT_ITEMS,
    FormatError,
    NumberFormat,
    Problems,
    get_task,
    parse_problems,
    quote,
    render,
    task_names,
)
from ..data.problems import ProblemSpec
from ..data.tokenization_arith import FINGERPRINT_KEY
from ..models import MAX_RECURRENCES
from ..models.configuration_common import MAX_ANSWER_VIEWS
from ..records import chain_items, read_summary
from .decoding import max_tokens_per_step

# The longest context (and abacus range) hf_arith works out limits for: the longest operand is found by
# rendering worst-case problems, which takes memory in proportion (a million positions: about a megabyte).
MAX_CONTEXT = 1_000_000
# The most confidence an answer beyond the trained range reports (`ModelLimits.calibrated`): below the 0.9
# under which answers are flagged (solving.LOW_CONFIDENCE), so every answer beyond the range is flagged.
BEYOND_TRAINING_CONFIDENCE = 0.5
# Operands assumed for a model that states neither a context nor an abacus range (none does today).
UNBOUNDED_MAX_DIGITS = 10


def problem_spec(fmt: NumberFormat, min_digits: int, max_digits: int,
                 items: tuple[int, int] | None = None, sample_by: str = "length") -> ProblemSpec:
    """The problems in format `fmt` with operands of these lengths (drawn as `sample_by` says): what
    eval and training draw and the limits assume. Lists (sorting) hold 2 to SORT_ITEMS items unless
    `items` (min, max) says otherwise."""
    if items is None and fmt.task_rules.item_list:
        items = (2, min(SORT_ITEMS, fmt.max_items))
    counts = {} if items is None else {"min_items": items[0], "max_items": items[1]}
    return ProblemSpec(task=fmt.task, base=fmt.base, min_digits=min_digits, max_digits=max_digits,
                       sample_by=sample_by, **counts)


def _list_tasks() -> str:
    """The titles of the tasks whose problems are lists of items ('sorting')."""
    return " and ".join(get_task(t).title for t in task_names() if get_task(t).item_list)


def training_range(fmt: NumberFormat, folder: str | Path | None = None) -> tuple[int, int] | None:
    """The operand lengths a checkpoint was trained on, where it can be known: `train_digits`
    ([min, max]) in its training_summary.json, else a fixed-width format's 1..width. A corrupt
    summary is a RecordError (ValueError) naming the file (`records.read_summary`)."""
    summary = read_summary(folder) if folder is not None else None
    digits = (summary or {}).get("train_digits")
    if digits is not None:
        return digits[0], digits[1]
    return (1, fmt.operand_width) if fmt.operand_width else None


def training_items(fmt: NumberFormat, folder: str | Path | None = None) -> tuple[int, int] | None:
    """The list sizes a sorting checkpoint was trained on, over every stage of its chain (its recipe's
    data.min_items and max_items in training_summary.json, and those of the earlier stages it lists),
    where known; None for other tasks."""
    if not fmt.task_rules.item_list or folder is None:
        return None
    return chain_items(read_summary(folder))


# A length counts as measured when held-out exact match there is at least this (over every problem whose
# longest operand has that length).
MEASURED_EXACT = 0.99


def measured_accuracy(report: dict | None, grid: dict | None = None) -> dict[int, float]:
    """Held-out exact match by longest operand length, from an `hf-arith eval --json` report (its
    by_max_operand_length, weighted by its counts) and a length grid (`grid.length_grid`: each cell's problems
    count at its longer operand; a sorting grid's lists of up to the trained number of items count at their
    numbers' digits), pooled by problems."""
    pooled: dict[int, tuple[float, int]] = {}

    def add(length: int, accuracy, n: int) -> None:
        if isinstance(accuracy, (int, float)) and accuracy == accuracy and n:  # NaN: a cell not measured
            right, total = pooled.get(length, (0.0, 0))
            pooled[length] = (right + accuracy * n, total + n)

    if report:
        counts = report.get("count_by_max_operand_length") or {}
        for key, accuracy in (report.get("by_max_operand_length") or {}).items():
            add(int(key), accuracy, counts.get(key, counts.get(int(key))) or 1)
    matrix = ((grid or {}).get("matrices") or {}).get("exact_match")
    if matrix:  # (a grid's summary alone says nothing per length)
        first, n = grid["lengths"][0], grid["samples_per_cell"]
        if (grid.get("axes") or ["len_a"])[0] == "items":
            most = (grid.get("train_items") or grid["items"])[1]
            rows = [row for i, row in enumerate(matrix) if grid["items"][0] + i <= most]
            cells = [(first + j, accuracy) for row in rows for j, accuracy in enumerate(row)]
        else:
            cells = [(first + max(i, j), accuracy) for i, row in enumerate(matrix) for j, accuracy in enumerate(row)]
        for length, accuracy in cells:
            add(length, accuracy, n)
    return {length: right / total for length, (right, total) in sorted(pooled.items())}


def measured_max_digits(report: dict | None, grid: dict | None = None) -> int | None:
    """The longest operand length L such that every length from 1 to L was measured (`measured_accuracy`) at
    MEASURED_EXACT or more: the measured range 1..L, what a card, `hf-arith models` and the Space call the
    lengths the model answers (`config.measured_max_digits`). None when 1 digit was not measured so."""
    accuracy, longest = measured_accuracy(report, grid), 0
    while accuracy.get(longest + 1, 0.0) >= MEASURED_EXACT:
        longest += 1
    return longest or None


def answer_budget(tokenizer, problems: list[str]) -> int:
    """New tokens the decoder may need for the longest answer in `problems` (plain text)."""
    return tokenizer.answer_budget(problems)


@dataclass(frozen=True)
class ModelLimits:
    """What one model (with its number format) can take. Build it with `model_limits`.

    abacus_answer_offset: 1 when the abacus indexes answer digits one higher than operand digits
    (config.abacus_align_answer), so an answer of n digits needs abacus_max_digits >= n + 1.
    loops: (1, MAX_RECURRENCES) for a looped model, None for one without recurrence.
    tokens_per_step: (1, config.num_future_tokens).
    """

    fmt: NumberFormat
    context: int | None  # config.max_position_embeddings: prompt and answer tokens together
    abacus_max_digits: int | None  # the longest number the abacus table places (abacus models)
    abacus_answer_offset: int
    loops: tuple[int, int] | None
    tokens_per_step: tuple[int, int]
    folder: Path | None = None
    model_name: str = "this model"
    measured_max_digits: int | None = None  # config.measured_max_digits: 1..this measured at >= MEASURED_EXACT
    answer_views: int = 1  # config.answer_views: views of each problem answered by default (`answer_views`)

    # -- what each problem needs ---------------------------------------------------------
    def answer_budget(self, parsed: Problems) -> int:
        """New tokens the decoder may need for the longest answer in a batch of parsed problems."""
        return self.fmt.max_answer_tokens(parsed)

    def answer_budgets(self, parsed: Problems) -> np.ndarray:
        """Per problem: the answer tokens it may take (its own budget, whatever batch it is decoded in)."""
        return self.fmt.answer_tokens(parsed.lengths)

    def _tokens(self, parsed: Problems) -> tuple[np.ndarray, np.ndarray]:
        """Per problem: prompt tokens and answer tokens (the answer's budget)."""
        _, _, prompt = render(parsed, self.fmt, with_answer=False)
        return prompt, self.answer_budgets(parsed)

    def prompt_tokens(self, parsed: Problems) -> np.ndarray:
        """Per problem: its prompt in tokens, what a cached decoder's prefill takes (`decoding.row_chunks`)."""
        return self._tokens(parsed)[0]

    def sequence_tokens(self, parsed: Problems) -> np.ndarray:
        """Per problem: its prompt and answer budget in tokens, the longest sequence decoding it makes
        (what sets how many rows run at once: `decoding.row_chunks`)."""
        prompt, answer = self._tokens(parsed)
        return prompt + answer

    def _first_refusal(self, parsed: Problems, tokens=None) -> tuple[int, str] | None:
        """The first problem the model cannot take and why (context first, then abacus range);
        `tokens`: their `_tokens`, when the caller has them."""
        prompt, answer = self._tokens(parsed) if tokens is None else tokens
        # The longest run of answer tokens may all be digits the abacus places: a subtraction model
        # that writes no sign has room for one digit more than the answer can have.
        digits = self.fmt.answer_run_tokens(parsed.lengths) + self.abacus_answer_offset
        longest = np.maximum(parsed.lengths.max(axis=1), digits)  # the longest number the abacus places
        no_room = prompt + answer > self.context if self.context is not None else np.zeros(len(parsed), bool)
        no_index = (longest > self.abacus_max_digits if self.abacus_max_digits is not None
                    else np.zeros(len(parsed), bool))
        if not (no_room | no_index).any():
            return None
        i = int(np.argmax(no_room | no_index))
        if no_room[i]:
            return i, (f"{prompt[i]} prompt + {answer[i]} answer tokens are too long for this model's context of "
                       f"{self.context} positions (config.max_position_embeddings)")
        longest_operand = int(parsed.lengths[i].max())
        # Written working (or an aligned answer) may place longer numbers than the operands: say which.
        written = (f"its operands of up to {longest_operand} digits need numbers of {longest[i]} digits in the answer,"
                   if longest[i] > longest_operand else f"numbers of {longest[i]} digits are")
        return i, (f"{written} beyond this model's abacus range of "
                   f"{self.abacus_max_digits} digits (config.abacus_max_digits)")

    def worst_case(self, digits: int, items: int | None = None) -> Problems:
        """The longest problem with operands of `digits` digits (every digit the base's largest;
        for sorting, `items` items or as many as eval draws): what a range of lengths must fit."""
        k = items or problem_spec(self.fmt, 1, digits).n_operands
        operands = np.full((1, k, digits), self.fmt.base - 1, dtype=np.int8)
        return Problems(self.fmt.task, self.fmt.base, operands, np.full((1, k), digits, dtype=np.int64))

    def _length_refusal(self, digits: int) -> str | None:
        """Why operands of `digits` digits are beyond the model, or None if they fit."""
        if self.fmt.operand_width and digits > self.fmt.operand_width:
            return (f"operands of {digits} digits are wider than this model's fixed width of "
                    f"{self.fmt.operand_width} digits")
        # Lengths no worst case needs rendering for (its arrays grow with `digits`), the context first as in
        # `_first_refusal`: longer than the whole context, or than anything hf_arith works out.
        if self.context is not None and digits > self.context:
            return (f"operands of {digits:,} digits are too long for this model's context of {self.context} positions "
                    "(config.max_position_embeddings)")
        if digits > MAX_CONTEXT:
            if self.abacus_max_digits is not None and digits > self.abacus_max_digits:
                return (f"numbers of {digits:,} digits are beyond this model's abacus range of {self.abacus_max_digits} "
                        "digits (config.abacus_max_digits)")
            return f"operands of {digits:,} digits are beyond the {MAX_CONTEXT:,} digits hf_arith works out limits for"
        refused = self._first_refusal(self.worst_case(digits))
        return None if refused is None else refused[1]

    # -- the limits ------------------------------------------------------------------------
    @cached_property
    def max_digits(self) -> int:
        """The longest operands the model takes: its fixed width, else the longest whose worst
        case fits its context and abacus range."""
        if self.fmt.operand_width:
            return self.fmt.operand_width
        bounds = [b for b in (self.context, self.abacus_max_digits) if b is not None]
        if not bounds:
            return UNBOUNDED_MAX_DIGITS
        top = min(bounds)  # no operand can be longer than either
        if top > MAX_CONTEXT:
            raise FormatError(f"{self.model_name}: a context of {top:,} positions is beyond the {MAX_CONTEXT:,} that "
                              "hf_arith works out limits for (config.max_position_embeddings)")
        reason = self._length_refusal(1)
        if reason is not None:
            raise FormatError(f"{self.model_name} takes no problem at all: even one-digit operands: {reason}")
        low, high = 1, top  # operands of `low` digits fit; the answer lies in [low, high]
        while low < high:  # every need grows with the operand length, so a bisection finds the edge
            mid = (low + high + 1) // 2
            if self._length_refusal(mid) is None:
                low = mid
            else:
                high = mid - 1
        return low

    @cached_property
    def training_range(self) -> tuple[int, int] | None:
        """The operand lengths the checkpoint was trained on, where known (see `training_range`)."""
        return training_range(self.fmt, self.folder)

    @cached_property
    def training_items(self) -> tuple[int, int] | None:
        """The list sizes a sorting checkpoint was trained on, where known (see `training_items`)."""
        return training_items(self.fmt, self.folder)

    def _longer_and_more(self, parsed: Problems) -> tuple[np.ndarray, np.ndarray]:
        """Per problem: an operand longer than the trained lengths; a sorting list with more items than the
        trained list sizes (known ranges only). Lengths are the parsed operands' digits (leading zeros do
        not count); a sorting list's absent items have length 0."""
        none = np.zeros(len(parsed), dtype=bool)
        trained, items = self.training_range, self.training_items
        longer = parsed.lengths.max(axis=1) > trained[1] if trained is not None else none
        more = (parsed.lengths > 0).sum(axis=1) > items[1] if items is not None and self.fmt.task_rules.item_list else none
        return longer, more

    def beyond_training(self, parsed: Problems) -> np.ndarray:
        """Per problem: True where it lies beyond the trained range in any dimension: an operand longer than
        the trained lengths, or for sorting a list longer than the trained list sizes (known ranges only)."""
        longer, more = self._longer_and_more(parsed)
        return longer | more

    def beyond_training_notes(self, parsed: Problems) -> list[str | None]:
        """Per problem: how it lies beyond the trained range, in words (None: inside it, or range unknown)."""
        longer, more = self._longer_and_more(parsed)
        notes = []
        for is_longer, is_more in zip(longer.tolist(), more.tolist()):
            parts = ([f"operands beyond the {self.training_range[1]} digits"] if is_longer else []) + \
                ([f"a list beyond the {self.training_items[1]} items"] if is_more else [])
            notes.append(f"{' and '.join(parts)} this model was trained on" if parts else None)
        return notes

    def beyond_training_warning(self, texts: list[str], parsed: Problems) -> str | None:
        """The one warning for a call whose problems lie beyond the trained range (None: none does), naming
        every dimension they exceed (operand lengths, and list sizes for sorting)."""
        longer, more = self._longer_and_more(parsed)
        beyond = longer | more
        if not beyond.any():
            return None
        dims = []
        if longer.any():
            low, high = self.training_range
            dims.append(f"operands longer than the {low}-{high} digits")
        if more.any():
            low, high = self.training_items
            dims.append(f"lists longer than the {low}-{high} items")
        return (f"{int(beyond.sum())} of {len(texts)} problem(s) have {' or '.join(dims)} this model was trained on "
                f"(first: {quote(texts[int(np.argmax(beyond))])}); their answers are less reliable (its length grid "
                f"says how far to trust them), and their confidence is capped at {BEYOND_TRAINING_CONFIDENCE:g}")

    def calibrated(self, confidences: list[float], parsed: Problems) -> list[float]:
        """The confidences of answers to `parsed`, those beyond the trained range (`beyond_training`) capped at
        BEYOND_TRAINING_CONFIDENCE: the model's token probabilities there were measured wrong at >= 0.9
        (for example abacus-gpt2-add's 35-digit 72243232874053592248184441421529506+72642957725228228543478500231960369
        -> 44886190599281820791662941653489875 at 0.99), and no accuracy
        was measured for them, so no such answer reports the confidence of a checked one."""
        beyond = self.beyond_training(parsed).tolist()
        return [min(c, BEYOND_TRAINING_CONFIDENCE) if b else c for c, b in zip(confidences, beyond)]

    @cached_property
    def max_sequence_tokens(self) -> int:
        """The longest token sequence (prompt and answer) of any problem the model takes: its context
        when it has one (every problem it takes fits there, `check_problems`), else the worst case at
        `max_digits`. What a saved tokenizer's `model_max_length` is set to, so that no prompt the
        model takes is longer than it."""
        if self.context is not None:
            return int(self.context)
        worst = self.worst_case(self.max_digits)
        return int(self._tokens(worst)[0][0]) + self.answer_budget(worst)

    def longest_problem(self) -> str:
        """The worst-case problem at `max_digits`, as plain text."""
        return self.worst_case(self.max_digits).to_text()[0]

    @cached_property
    def max_answer_tokens(self) -> int:
        """New tokens the longest answer the model can be asked for takes (sign and end token
        included): the worst case at `max_digits`, and for sorting the format's most items. What
        a saved checkpoint's `generation_config.max_new_tokens` is set to."""
        budget = self.answer_budget(self.worst_case(self.max_digits))
        if self.fmt.task_rules.item_list:  # a prompt may hold up to max_items items, each answered by a label
            items = self.fmt.max_items
            most_items = Problems(self.fmt.task, self.fmt.base, np.zeros((1, items, 1), dtype=np.int8),
                                  np.ones((1, items), dtype=np.int64))
            budget = max(budget, self.answer_budget(most_items))  # radix passes: the longest items write most
        return budget

    # -- the checks --------------------------------------------------------------------------
    def check_problems(self, texts: list[str], parsed: Problems | None = None, *,
                       batch_size: int | None = None) -> Problems:
        """Refuse any problem the model cannot take; return them parsed.

        Each problem must fit the context (prompt and answer budget) and the abacus range, and no operand
        may be longer than `max_digits`, even where the problem would fit. The decoder runs
        `batch_size` rows at once (None: all) with the longest prompt and the largest budget among
        them, so each such batch must fit the context too.
        """
        if parsed is None:
            parsed = parse_problems(texts, self.fmt)
        prompt, answer = self._tokens(parsed)
        refused = self._first_refusal(parsed, (prompt, answer))
        if refused is not None:
            raise FormatError(f"{quote(texts[refused[0]])}: {refused[1]}")
        # One number is the limit a card states: a lopsided problem (15 x 1 digits) that would fit is still
        # refused past it, since nothing was measured there and the stated limit must stay true.
        longest = parsed.lengths.max(axis=1)
        if (longest > self.max_digits).any():
            i = int(np.argmax(longest > self.max_digits))
            unit = "digits" if self.fmt.base == 10 else f"base-{self.fmt.base} digits"
            raise FormatError(f"{quote(texts[i])}: an operand of {longest[i]:,} {unit} is longer than this model's hard "
                              f"limit of {self.max_digits:,} {unit} (the longest operands whose worst case fits its "
                              "context and abacus range)")
        if self.context is None:
            return parsed
        size = batch_size or len(texts)
        for start in range(0, len(texts), size):
            rows = slice(start, start + size)
            p, a = int(prompt[rows].argmax()) + start, int(answer[rows].argmax()) + start
            if prompt[p] + answer[a] > self.context:
                raise FormatError(
                    f"{quote(texts[p])} and {quote(texts[a])} decoded together need {prompt[p]} prompt + {answer[a]} answer "
                    f"tokens, too long for this model's context of {self.context} positions; use a smaller batch size")
        return parsed

    def check_digit_range(self, min_digits: int, max_digits: int,
                          names: tuple[str, str] = ("min_digits", "max_digits")) -> None:
        """Operand lengths min..max (named as the caller's options) that the model can take."""
        low, high = names
        if not 1 <= min_digits <= max_digits:
            raise FormatError(f"need 1 <= {low} <= {high}, got {min_digits} and {max_digits}")
        reason = self._length_refusal(max_digits)
        if reason is not None:
            raise FormatError(f"{high} {max_digits}: {reason}")

    def check_items(self, items: tuple[int, int], max_digits: int, what: str = "--items") -> None:
        """Sorting lists of items[0] to items[1] items, each up to `max_digits` digits: within the
        format's item count, and the longest such list fits the model."""
        if not self.fmt.task_rules.item_list:
            raise FormatError(f"{what}: item counts apply to {_list_tasks()}; this model does {self.fmt.task_rules.title}")
        low, high = items
        if not 2 <= low <= high <= self.fmt.max_items:
            raise FormatError(f"{what} {low}:{high}: lists must hold 2 to {self.fmt.max_items} items "
                              "(the format's max_items)")
        refused = self._first_refusal(self.worst_case(max_digits, items=high))
        if refused is not None:
            raise FormatError(f"{what} {low}:{high} with items of {max_digits} digits: {refused[1]}")

    @property
    def grid_items(self) -> tuple[int, int]:
        """The list sizes of a sorting model's grid unless asked otherwise: every size its format writes."""
        return 2, self.fmt.max_items

    def check_grid(self, lengths: tuple[int, int], items: tuple[int, int] | None = None) -> None:
        """Since a grid's largest cells run last, lengths up to lengths[1] (and for sorting, lists
        of up to items[1] items) that the model can take: checked before the first cell runs."""
        if self.fmt.task_rules.item_list or items is not None:
            self.check_items(items or self.grid_items, lengths[1], what="grid items")
            return
        reason = self._length_refusal(lengths[1])
        if reason is not None:
            raise FormatError(f"grid up to {lengths[1]} digits: {reason}")

    def check_lengths(self, lengths, items: tuple[int, int] | None = None, what: str = "--lengths") -> None:
        """A sparse grid's operand lengths (and for sorting, lists of `items` items, default every size the
        format writes), checked before its first cell runs: the shortest the model cannot take is one line
        naming it and the longest operands the model takes."""
        for length in sorted(lengths):
            reason = self._length_refusal(length)
            if reason is not None:
                raise FormatError(f"{what} {length}: {reason}; this model takes operands of at most "
                                  f"{self.max_digits} digits")
        if self.fmt.task_rules.item_list or items is not None:
            self.check_items(items or self.grid_items, max(lengths), what=f"{what} items")

    def check_loops(self, counts, what: str = "loops") -> list[int]:
        """Loop counts (num_recurrences) the model takes; returned as a list."""
        counts = list(counts)
        if self.loops is None:
            raise FormatError(f"{what}: {self.model_name} has no recurrence (its config has no num_recurrences), "
                              "so its number of loops cannot be varied")
        if not counts:
            raise FormatError(f"{what}: no loop counts given")
        lo, hi = self.loops
        for n in counts:
            if not isinstance(n, numbers.Integral) or isinstance(n, bool) or not lo <= n <= hi:
                raise FormatError(f"{what} {n!r}: num_recurrences must be an integer between {lo} and {hi}")
        return [int(n) for n in counts]

    def check_tokens_per_step(self, tokens_per_step) -> None:
        """Tokens per forward pass: 1 up to the model's output heads (config.num_future_tokens)."""
        if not isinstance(tokens_per_step, int) or isinstance(tokens_per_step, bool) or tokens_per_step < 1:
            raise FormatError(f"tokens_per_step must be a positive integer, got {tokens_per_step!r}")
        limit = self.tokens_per_step[1]
        if tokens_per_step > limit:
            raise FormatError(f"tokens_per_step={tokens_per_step} but this model was trained to predict at most "
                              f"{limit} token(s) per forward pass (config.num_future_tokens={limit})")

    def check_views(self, views) -> int:
        """Views of each problem to answer (`solve(..., views=)`): None for the model's default
        (config.answer_views), else 1 to MAX_ANSWER_VIEWS."""
        if views is None:
            return self.answer_views
        if not isinstance(views, numbers.Integral) or isinstance(views, bool) or not 1 <= views <= MAX_ANSWER_VIEWS:
            raise FormatError(f"views must be an integer from 1 to {MAX_ANSWER_VIEWS} (or None: the model's default, "
                              f"{self.answer_views}), got {views!r}")
        return int(views)


# Forward arguments the decoder sets itself: not for `model_kwargs`.
DECODER_ARGUMENTS = {"input_ids", "attention_mask", "position_ids", "past_key_values", "cache", "use_cache",
                     "logits_to_keep", "labels", "inputs_embeds", "num_future_tokens"}


def check_model_kwargs(model, model_kwargs, limits: ModelLimits | None = None) -> dict:
    """Extra forward arguments for every decoding pass (`solve(..., model_kwargs=)`), as a dict: each must be
    a named parameter of the model's forward (its signature says what it takes; a name it would swallow in
    **kwargs is refused, not ignored) that the decoder does not set itself; num_recurrences within the
    model's loop range."""
    if model_kwargs is None:
        return {}
    if not isinstance(model_kwargs, dict) or not all(isinstance(k, str) for k in model_kwargs):
        raise FormatError(f"model_kwargs must be a dict of forward arguments by name, got {type(model_kwargs).__name__}")
    parameters = inspect.signature(model.forward).parameters
    named = {n for n, p in parameters.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    for key in model_kwargs:
        if key in DECODER_ARGUMENTS:
            raise FormatError(f"model_kwargs[{key!r}]: the decoder sets {key} itself")
        if key not in named:
            takes = sorted(named - DECODER_ARGUMENTS)
            raise FormatError(f"model_kwargs[{key!r}]: {type(model).__name__}.forward takes no argument {key!r} "
                              f"(it takes {', '.join(takes) or 'none besides the inputs'})")
    if "num_recurrences" in model_kwargs and limits is not None:
        limits.check_loops([model_kwargs["num_recurrences"]], what="model_kwargs['num_recurrences']")
    return dict(model_kwargs)


class BeyondTrainingWarning(UserWarning):
    """Operands longer than any the model was trained on: answered, but with no accuracy measured for them."""


def check_pair(config, tokenizer) -> None:
    """Refuse a tokenizer that does not belong to the model whose config this is, in one line: the
    tokenizer's own check (`ArithTokenizer.check_model`: the fingerprint, else the format the model's
    folder records, then the token ids), the one every path runs."""
    if not hasattr(tokenizer, "arith_format") or not hasattr(tokenizer, "check_model"):
        raise FormatError(f"{type(tokenizer).__name__} is not an hf_arith tokenizer (no number format)")
    tokenizer.check_model(config)


def model_limits(model, tokenizer, folder: str | Path | None = None) -> ModelLimits:
    """The limits of `model` with its tokenizer's number format; `folder` (its checkpoint) adds
    the trained range from training_summary.json. A tokenizer that does not belong to the model
    is refused (`check_pair`)."""
    config = model.config
    check_pair(config, tokenizer)
    return ModelLimits(
        fmt=tokenizer.arith_format,
        context=getattr(config, "max_position_embeddings", None) or None,
        abacus_max_digits=getattr(config, "abacus_max_digits", None),
        abacus_answer_offset=int(bool(getattr(config, "abacus_align_answer", False))),
        # A looped model takes `num_recurrences` at every forward pass and says so in its config.
        loops=(1, MAX_RECURRENCES) if hasattr(config, "num_recurrences") else None,
        tokens_per_step=(1, max_tokens_per_step(model)),
        folder=Path(folder) if folder is not None else None,
        model_name=type(model).__name__,
        measured_max_digits=getattr(config, "measured_max_digits", None),
        answer_views=getattr(config, "answer_views", 1),
    )


__all__ = [
    "BEYOND_TRAINING_CONFIDENCE", "FINGERPRINT_KEY", "MEASURED_EXACT", "measured_accuracy", "measured_max_digits", "BeyondTrainingWarning", "ModelLimits", "answer_budget", "check_model_kwargs", "check_pair",
    "max_tokens_per_step", "model_limits", "problem_spec", "training_items", "training_range",
]
