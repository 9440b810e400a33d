"""`Task`: what one arithmetic task knows about itself, and the digit-array helpers its answers use.

A task owns its problem syntax (how a typed problem is parsed and a problem is written as plain
text), how its operands are drawn (item counts, hard cases), its exact answer, the written forms of
that answer (the scratchpads it offers) and how an answer is read back, its grid axes and its
default limits. The number format (`formatting`), the problem generator, the grid, the stress
sets, the limits and the Space ask the task instead of comparing task names.

This module and the built-in task modules beside it travel with a saved tokenizer as Hub remote
code (flattened next to `formatting.py`), so they import only numpy, the standard library,
`formatting` and each other, always as `from .x import` (`from ..formatting import` here, which
the tokenizer's `save_pretrained` rewrites for the flat folder).
"""

from __future__ import annotations

import numpy as np

from ..formatting import (
    DIGIT_CHARS,
    PROMPT_END,
    FormatError,
    NumberFormat,
    Problems,
    check_number,
    const_segment,
    decimal_strings,
    digit_segment,
    digits_to_int,
    get_task,
    quote,
    task_names,
)

# The views of a commutative task (`Task.views`), in words.
SWAPPED_OPERANDS = "the problem as given and with its two operands swapped"


class Task:
    """One arithmetic task. Subclass it, set the class attributes, override what differs and
    register an instance with `register_task`; the built-in tasks (add, sub, mul, sort) are written so.

    name: the short name used in configs ('add'); title: the word used in messages ('addition').
    hash_id: a stable number mixed into every problem's train/test hash (unique per task).
    operator: the symbol between the two operands of a binary task (None for other problem shapes).
    hard_kinds: the hard problem kinds its data may draw ('repeated', 'chains', 'hard', 'carries';
    sorting also 'tie_heavy', 'near_ties' and 'ties', drawn by its own `draw_kind`).
    stress_kinds: the hard kinds it draws itself that are also stress sets, each under its kind's name.
    chain: 'carry' or 'borrow' for tasks whose hard cases include carry or borrow chains.
    negative_answers: how an answer below zero may be written ('sign' always).
    scratchpads: the written working the format may put before the answer (besides 'none').
    item_list: the problem is a list of labelled items (a variable count) rather than two operands.
    grid_axes: the two axes of its length grid.
    default_digits: the operand digit range a dataset of the task draws unless told otherwise.
    digit_answers: every answer is digits only (no sign, no labels), so a model may write digits alone.
    commutative: a+b and b+a have the same answer (the stress sets' commutativity check, and `views`).
    reported_failures: in-range problems that bundled models once answered wrongly (a stress set).
    work_exponent: a problem's digit operations grow as max_digits to this power (2: every digit of
    one operand meets every digit of the other), which bounds how much a data export may draw.
    views_note: what its `views` of a problem are, in words for a reader (None: it has one view).
    """

    name: str = ""
    title: str = ""
    hash_id: int = 0
    operator: str | None = None
    hard_kinds: tuple[str, ...] = ("repeated", "hard")
    chain: str | None = None
    negative_answers: tuple[str, ...] = ("sign",)
    scratchpads: tuple[str, ...] = ()
    item_list: bool = False
    grid_axes: tuple[str, str] = ("len_a", "len_b")
    commutative: bool = False
    digit_answers: bool = True
    default_digits: tuple[int, int] = (1, 10)
    reported_failures: tuple[str, ...] = ()
    stress_kinds: tuple[str, ...] = ()
    work_exponent: int = 1
    views_note: str | None = None

    def __repr__(self) -> str:
        return f"<task {self.name!r}>"

    # -- the format ------------------------------------------------------------------------
    def check_format(self, fmt: NumberFormat) -> None:
        """Refuse format settings this task cannot write (one line naming the setting)."""

    def symbols(self, fmt: NumberFormat) -> list[str]:
        """The tokens of its vocabulary besides digits, '=' and the special tokens."""
        return [self.operator]

    def answer_digits(self, lengths: np.ndarray) -> np.ndarray:
        """Upper bound on answer digits (or answer symbols) for operands of the given lengths ([n, k])."""
        raise NotImplementedError

    def answer_tokens(self, fmt: NumberFormat, lengths: np.ndarray) -> np.ndarray:
        """Per problem: the tokens its answer may take, sign and <eos> included."""
        return fmt.max_answer_digits(lengths) + (1 if fmt.end_token else 0)

    def answer_run_tokens(self, fmt: NumberFormat, lengths: np.ndarray) -> np.ndarray:
        """The longest run of answer tokens between separators (an abacus model indexes it as one number)."""
        if fmt.scratchpad != "none":
            return fmt.max_answer_digits(lengths)
        return self.answer_tokens(fmt, lengths) - (1 if fmt.end_token else 0)

    # -- problem syntax ------------------------------------------------------------------------
    def n_operands(self, max_items: int) -> int:
        """Operand slots in a problem's digit array (a list task: its largest item count)."""
        return 2

    def parse(self, problem: str, fmt: NumberFormat) -> list[str]:
        """A typed problem (spaces removed) to its decimal operands, with one-line errors."""
        op = self.operator
        if problem.startswith("-"):  # a leading '-' is a negative first operand, not the operator
            raise FormatError(f"{quote(problem)}: negative numbers are not supported")
        if op not in problem:
            operators = [get_task(t) for t in task_names() if get_task(t).operator]
            other = next((t for t in operators if t.operator in problem), None)
            if other is not None:
                raise FormatError(f"{quote(problem)} is {other.title}, but this model does {self.title} ('{op}')")
            raise FormatError(f"{quote(problem)}: expected two numbers joined by '{op}'")
        left, _, right = problem.partition(op)
        if problem.count(op) > 1 and not right.startswith("-"):  # '5--3' is a negative operand, said below
            raise FormatError(f"{quote(problem)}: expected two numbers joined by one '{op}', "
                              f"got {problem.count(op)} '{op}' signs")
        return [check_number(left, problem), check_number(right, problem)]

    def problem_text(self, operands: list[str]) -> str:
        """Plain decimal operands to the problem as a user types it ('123+456')."""
        return f"{operands[0]}{self.operator}{operands[1]}"

    def example(self, a: int, b: int, max_items: int) -> str:
        """A fixed example problem from two numbers (model cards, the Space)."""
        return self.problem_text([str(a), str(b)])

    def grid_cell(self, lengths: np.ndarray) -> np.ndarray:
        """Each problem's length-grid cell from its operand lengths ([n, k] -> [n, 2]), on `grid_axes`."""
        return lengths[:, :2]

    def chain_problems(self, tops: list[int], base: int) -> list[tuple[int, int]]:
        """Operand pairs whose every digit carries or borrows ('99..9' of each length is in `tops`)."""
        return []

    # -- sampling --------------------------------------------------------------------------
    def draw_kind(self, kind: str, spec, n: int, rng: np.random.Generator):
        """(digits [n, k, width], lengths [n, k]) of n problems of a hard kind the task draws itself
        (problems.TASK_KINDS, listed in its `hard_kinds`); digits least significant first."""
        raise FormatError(f"{self.title} draws no problems of kind {kind!r}")

    def choose_items(self, lengths: np.ndarray, digits: np.ndarray, min_items: int, max_items: int,
                     rng: np.random.Generator) -> np.ndarray:
        """Operand lengths after dropping the slots a problem does not use (a list task: its item count)."""
        return lengths

    # -- the exact answer --------------------------------------------------------------------
    def solve(self, operands: np.ndarray, lengths: np.ndarray, base: int):
        """Reference answers on digit arrays: (answer [n, La], answer_lengths [n], negative [n])."""
        raise NotImplementedError

    def reference(self, values: list[int]) -> str:
        """The exact answer to one problem from its operands as Python ints, as the data labels it."""
        raise NotImplementedError

    def answer_text(self, problems: Problems) -> list[str]:
        """Plain decimal answers of a batch that carries answers."""
        if problems.base == 10:
            values = decimal_strings(problems.answer, problems.answer_lengths)
        else:
            values = [str(digits_to_int(row[:n], problems.base)) for row, n in
                      zip(problems.answer, problems.answer_lengths)]
        return [f"-{v}" if neg else v for v, neg in zip(values, problems.negative)]

    # -- equivalent views ---------------------------------------------------------------------
    def views(self, operands: list[str], count: int, rng: np.random.Generator) -> list[list[int]]:
        """Up to `count` distinct ways to write the same problem, each an order of its operands (entry j:
        the operand written j-th), the problem as given first; `answer_from_view` reads a view's answer
        back. A commutative task has two: the problem as given and its operands swapped (one when they
        are equal). A task without such a symmetry has one view: the problem as given."""
        if self.commutative and count > 1 and operands[0] != operands[1]:
            return [[0, 1], [1, 0]]
        return [list(range(len(operands)))]

    def answer_from_view(self, answer: str | None, order: list[int]) -> str | None:
        """An answer to the view written in `order`, as the answer to the problem as given."""
        return answer

    # -- written forms -----------------------------------------------------------------------
    def prompt_segments(self, problems: Problems, fmt: NumberFormat, vocab: dict) -> list:
        """The prompt's segments before '=' (see `formatting.render`)."""
        ones = np.ones(len(problems), dtype=bool)
        return [digit_segment(problems.operands[:, 0], problems.lengths[:, 0], fmt.operand_width, fmt.reverse_operands),
                const_segment(vocab[self.operator], ones),
                digit_segment(problems.operands[:, 1], problems.lengths[:, 1], fmt.operand_width, fmt.reverse_operands)]

    def answer_segments(self, problems: Problems, fmt: NumberFormat, vocab: dict) -> list:
        """The answer's segments (written working included), before <eos>."""
        return [digit_segment(problems.answer, problems.answer_lengths, fmt.answer_width, fmt.reverse_answer)]

    def read_answer(self, text: str, fmt: NumberFormat, operand_lengths=None) -> str | None:
        """The answer text a model wrote (before <eos>) to plain decimal; None when malformed."""
        return read_number(text, fmt)

    def read_prompt(self, text: str, fmt: NumberFormat) -> list[str] | None:
        """A prompt as the format writes it (without its '=') back to decimal operands; None when
        `text` is not one (decoding tells prompts from answers so)."""
        left, op, right = text.partition(self.operator) if self.operator else ("", "", "")
        values = [read_operand(left, fmt), read_operand(right, fmt)] if op else [None]
        return None if None in values else values

    def split_working(self, text: str, fmt: NumberFormat) -> tuple[str, str]:
        """A written answer (before <eos>) as (its written working, its final answer): in a format
        with a scratchpad the working runs up to and including the last '=', else there is none.
        Only the final part is the answer; the working is how the model got there."""
        if fmt.scratchpad == "none":
            return "", text
        cut = text.rfind(PROMPT_END) + 1
        return text[:cut], text[cut:]

    def answer_places(self, text: str, fmt: NumberFormat) -> list[int]:
        """Where the final answer's tokens are in a written answer (before <eos>), in written order: the
        tokens after the working (`split_working`), unless the format reads the answer off the working."""
        working, _ = self.split_working(text, fmt)
        return list(range(len(working), len(text)))

    def working_note(self, fmt: NumberFormat) -> str | None:
        """What the format's written working is, in words for a reader (None without working)."""
        return None


def read_number(text: str, fmt: NumberFormat) -> str | None:
    """Digits in the format's base and order to a decimal string; None unless every character is a digit."""
    value = read_value(text, fmt)
    return None if value is None else str(value)


def read_operand(text: str, fmt: NumberFormat) -> str | None:
    """An operand as a prompt writes it (the format's base, operand order and padding) to decimal;
    None unless every character is a digit."""
    digits = DIGIT_CHARS[: fmt.base]
    if not text or any(c not in digits for c in text):
        return None
    return str(int(text[::-1] if fmt.reverse_operands else text, fmt.base))


def read_value(text: str, fmt: NumberFormat) -> int | None:
    """Digits in the format's base and order to an int; None unless every character is a digit."""
    digits = DIGIT_CHARS[: fmt.base]
    if not text or any(c not in digits for c in text):
        return None
    return int(text[::-1] if fmt.reverse_answer else text, fmt.base)


def normalise(acc: np.ndarray, base: int) -> np.ndarray:
    """Propagate carries in an [n, L] array of non-negative column sums."""
    acc = acc.astype(np.int64)
    for i in range(acc.shape[1] - 1):
        carry, acc[:, i] = np.divmod(acc[:, i], base)
        acc[:, i + 1] += carry
    return acc


def digit_count(digits: np.ndarray) -> np.ndarray:
    """Digits per row of an [n, L] digit array (least significant first), at least one."""
    nonzero = digits != 0
    last = digits.shape[1] - 1 - np.argmax(nonzero[:, ::-1], axis=1)
    return np.where(nonzero.any(axis=1), last + 1, 1)
