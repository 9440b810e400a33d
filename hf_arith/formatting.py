"""The number format: how an arithmetic problem is written as model tokens.

This file is shipped next to the tokenizer as Hub remote code, so it imports only numpy and
the standard library. Everything that turns problems into token ids (training data, prompts
typed by a user) goes through `render`, and every generated answer comes back through
`decode_answer`: one mechanism, whichever path the problem took.

Problems are held as digit arrays, least significant digit first, in the format's base. That
keeps 100-digit operands exact (no int64 overflow) and lets the data generator stay vectorized.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import asdict, dataclass, fields

import numpy as np

from .errors import HfArithError

TASKS = ("add", "sub", "mul", "sort")
OPERATORS = {"add": "+", "sub": "-", "mul": "*"}
TASK_NAMES = {"add": "addition", "sub": "subtraction", "mul": "multiplication", "sort": "sorting"}
NEGATIVE_ANSWERS = ("sign", "complement")  # how a subtraction answer below zero is written
SCRATCHPADS = ("none", "running_sums", "radix_passes", "radix_keys")  # intermediate steps written before the answer
SCRATCHPAD_TASKS = {"running_sums": "mul", "radix_passes": "sort", "radix_keys": "sort"}
DIGIT_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
SORT_LABELS = "abcdefghijklmnopqrstuvwxyz"
SORT_ITEMS = 5  # sorting lists drawn by default (eval, limits) hold 2 to this many items, fewer if max_items is lower
PAD_TOKEN, EOS_TOKEN = "<pad>", "<eos>"
PROMPT_END = "="
QUOTE_CHARS = 40  # an error message quotes at most this many characters of a problem


class FormatError(HfArithError):
    """A problem, answer or format setting that the number format cannot express.

    The message is always one line that names the offending input.
    """


def quote(text) -> str:
    """A problem as an error message quotes it: its repr, cut to the first QUOTE_CHARS characters
    (a longer one ends in '...' and says how long it is), so one line stays one short line."""
    text = str(text)
    if len(text) <= QUOTE_CHARS:
        return repr(text)
    return f"{text[:QUOTE_CHARS]!r}... ({len(text):,} characters)"


@dataclass(frozen=True)
class NumberFormat:
    """How numbers are written for one task. Saved inside the tokenizer's config.

    operand_width / answer_width: zero-pad to this many digits (0 = no padding).
    reverse_*: True writes the least significant digit first (what carries want).
    end_token: append <eos> after the answer. Fixed-width answers do not need it.
    negative_answers (subtraction): "sign" writes '-' and then the digits of |a - b|; "complement"
      writes the base complement of a - b over the longer operand's digits, (a - b) mod base**L
      with leading zeros kept, then '-' after the digits when a < b. Every answer digit then
      depends only on its own column and the borrow from the one below, as in addition, so the
      sign need not be known before the first digit; `decode_answer` gives the plain number.
    scratchpad (multiplication): "running_sums" writes, for k = 0 .. len(b) - 1, the running sum
      a * (b mod base**(k+1)) in len(a) + k + 1 digits (leading zeros kept), the sums joined by
      '='; the last sum is the product. Each digit of a sum then needs one digit product, the digit
      of the sum before it and a carry, as an addition does, instead of up to len(b) products at
      once. `decode_answer` returns the last sum only, and None unless every sum is well formed.
    scratchpad (sorting): "radix_passes" writes the labels once per digit place p = 0 .. longest
      item - 1, each time ordered by digit p (0 beyond an item's length), ties in the order of the
      line before (the first: label order), the lines joined by '='; the last line is the sorted
      order (a least-significant-digit radix sort). Each label then needs one digit and the rank of
      its label in the line before, instead of a comparison of whole numbers.
      "radix_keys" writes the sort keys as well: for p = 0 .. longest item - 1 a line of the
      labels in the order so far (label order, then the order after places 0 .. p - 1), each
      followed by its item's digit p, then the sorted labels ("a:31,b:7,c:120" is answered
      a1b7c0=c2a3b0=b0c1a0=bac). The order of each line is then a stable sort of the line before
      by the digits written in that line, and each written digit is one look-up in the prompt.
    """

    task: str = "add"
    base: int = 10
    reverse_operands: bool = True
    reverse_answer: bool = True
    operand_width: int = 0
    answer_width: int = 0
    end_token: bool = True
    max_items: int = 8  # sort: the largest number of labelled items a prompt may hold
    negative_answers: str = "sign"
    scratchpad: str = "none"

    def __post_init__(self):
        if self.task not in TASKS:
            raise FormatError(f"unknown task {self.task!r}; known tasks: {', '.join(TASKS)}")
        if not isinstance(self.base, int) or not 2 <= self.base <= 36:
            raise FormatError(f"base must be an integer from 2 to 36, got {self.base!r}")
        for name in ("operand_width", "answer_width"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise FormatError(f"{name} must be a non-negative integer, got {value!r}")
        if not isinstance(self.max_items, int) or not 2 <= self.max_items <= len(SORT_LABELS):
            raise FormatError(f"max_items must be from 2 to {len(SORT_LABELS)}, got {self.max_items!r}")
        if self.negative_answers not in NEGATIVE_ANSWERS:
            raise FormatError(f"negative_answers must be one of {NEGATIVE_ANSWERS}, got {self.negative_answers!r}")
        if self.negative_answers != "sign" and self.task != "sub":
            raise FormatError(f"negative_answers {self.negative_answers!r} applies to subtraction only, "
                              f"not {TASK_NAMES[self.task]}")
        if self.negative_answers == "complement" and self.answer_width:
            raise FormatError("answer_width does not apply to complement answers (they have the longer operand's width)")
        if self.scratchpad not in SCRATCHPADS:
            raise FormatError(f"scratchpad must be one of {SCRATCHPADS}, got {self.scratchpad!r}")
        if self.scratchpad != "none" and self.task != SCRATCHPAD_TASKS[self.scratchpad]:
            raise FormatError(f"scratchpad {self.scratchpad!r} applies to "
                              f"{TASK_NAMES[SCRATCHPAD_TASKS[self.scratchpad]]} only, not {TASK_NAMES[self.task]}")
        if self.scratchpad == "running_sums" and self.answer_width:
            raise FormatError("answer_width does not apply to running sums (each sum has its own width)")
        if self.task == "sort" and self.answer_width:
            raise FormatError("answer_width does not apply to sorting (the answer is a list of labels)")

    # -- serialization -------------------------------------------------------------------
    def to_dict(self) -> dict:
        return asdict(self)

    def fingerprint(self) -> str:
        """A short hash of the format, saved in a checkpoint's config.json and tokenizer_config.json
        (`number_format_fingerprint`) so that a tokenizer that writes problems differently from the
        model's training data is refused at load. The fields below always count; a field added to
        NumberFormat later counts only when it differs from its default, so saved fingerprints stay valid."""
        defaults = {f.name: f.default for f in fields(self)}
        data = {k: v for k, v in self.to_dict().items() if k in _FINGERPRINT_FIELDS or v != defaults[k]}
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: dict) -> NumberFormat:
        if not isinstance(data, dict):
            raise FormatError(f"number_format must be a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise FormatError(f"unknown number_format keys {unknown}; known keys: {sorted(known)}")
        return cls(**data)

    # -- vocabulary ----------------------------------------------------------------------
    def vocab(self) -> list[str]:
        """Token strings in id order. Digits come first so that a digit's id is its value."""
        symbols = {"add": ["+"], "sub": ["-"], "mul": ["*"], "sort": [":", ","]}[self.task]
        labels = list(SORT_LABELS[: self.max_items]) if self.task == "sort" else []
        return list(DIGIT_CHARS[: self.base]) + symbols + labels + [PROMPT_END, PAD_TOKEN, EOS_TOKEN]

    def token_id(self, token: str) -> int:
        return self.vocab().index(token)

    def max_answer_digits(self, lengths: np.ndarray) -> np.ndarray:
        """Upper bound on answer digits for operands of the given lengths ([n, k] array)."""
        if self.task == "add":
            bound = lengths.max(axis=1) + 1
        elif self.task == "sub":
            bound = lengths.max(axis=1)
        elif self.task == "mul":
            bound = lengths.sum(axis=1)
        else:
            return (lengths > 0).sum(axis=1)
        return np.maximum(bound, self.answer_width)

    def answer_tokens(self, lengths: np.ndarray) -> np.ndarray:
        """Per problem ([n, k] operand lengths): the tokens its answer may take, sign, running sums
        and <eos> included."""
        end = 1 if self.end_token else 0
        if self.scratchpad == "running_sums":
            la, lb = lengths[:, 0], lengths[:, 1]
            return lb * la + lb * (lb + 1) // 2 + (lb - 1) + end  # sums of la + k + 1 digits, '=' between
        if self.scratchpad == "radix_passes":
            items, places = (lengths > 0).sum(axis=1), lengths.max(axis=1)
            return places * items + (places - 1) + end  # one line of labels per digit place
        if self.scratchpad == "radix_keys":
            items, places = (lengths > 0).sum(axis=1), lengths.max(axis=1)
            return places * (2 * items + 1) + items + end  # a line of label-digit pairs per place, then the labels
        return self.max_answer_digits(lengths) + (1 if self.task == "sub" else 0) + end

    def answer_run_tokens(self, lengths: np.ndarray) -> np.ndarray:
        """Per problem: the longest run of answer tokens between separators, which an abacus model
        indexes as one number (a sign counts: a model may write a digit in its place)."""
        if self.scratchpad == "radix_keys":
            return 2 * self.max_answer_digits(lengths)  # a line of labels, each with its digit
        if self.scratchpad != "none":
            return self.max_answer_digits(lengths)  # a sum's digits, a line's labels
        return self.answer_tokens(lengths) - (1 if self.end_token else 0)

    def max_answer_tokens(self, problems: Problems) -> int:
        """Tokens a decoder may need for the longest answer in the batch (sign and <eos> included)."""
        return int(self.answer_tokens(problems.lengths).max())


_FINGERPRINT_FIELDS = ("task", "base", "reverse_operands", "reverse_answer", "operand_width", "answer_width",
                       "end_token", "max_items")


@dataclass
class Problems:
    """A batch of problems of one task as digit arrays (least significant digit first).

    operands: [n, k, L] digits in `base`; lengths: [n, k] digit counts (0 = no such item,
    which only sorting uses). answer / answer_lengths / negative are None for prompts whose
    answer is unknown (user input). For sorting, `answer` holds item indices in sorted order.
    """

    task: str
    base: int
    operands: np.ndarray
    lengths: np.ndarray
    answer: np.ndarray | None = None
    answer_lengths: np.ndarray | None = None
    negative: np.ndarray | None = None

    def __len__(self) -> int:
        return self.operands.shape[0]

    def select(self, index) -> Problems:
        def pick(a):
            return None if a is None else a[index]

        return Problems(self.task, self.base, self.operands[index], self.lengths[index],
                        pick(self.answer), pick(self.answer_lengths), pick(self.negative))

    # -- conversion to and from plain decimal text ---------------------------------------
    def operand_values(self) -> list[list[int]]:
        """Operands as Python ints (exact for any length)."""
        out = []
        for row_digits, row_lengths in zip(self.operands, self.lengths):
            out.append([digits_to_int(d[:n], self.base) for d, n in zip(row_digits, row_lengths) if n > 0])
        return out

    def _operand_texts(self) -> list[list[str]]:
        """Operands as decimal strings per problem (base 10: straight from the digits, any length)."""
        if self.base != 10:
            return [[str(v) for v in row] for row in self.operand_values()]
        n, k, _ = self.operands.shape
        if n == 0:
            return []
        texts = decimal_strings(self.operands.reshape(n * k, -1), self.lengths.reshape(-1))
        return [[t for t, m in zip(texts[i * k:(i + 1) * k], self.lengths[i]) if m > 0] for i in range(n)]

    def to_text(self) -> list[str]:
        """Plain decimal problem text, e.g. '123+456' or 'a:31,b:7,c:120'."""
        rows = self._operand_texts()
        if self.task == "sort":
            return [",".join(f"{SORT_LABELS[i]}:{v}" for i, v in enumerate(r)) for r in rows]
        op = OPERATORS[self.task]
        return [f"{r[0]}{op}{r[1]}" for r in rows]

    def answer_text(self) -> list[str]:
        """Plain decimal answers ('579', '-12') or sorted labels ('bac')."""
        if self.answer is None:
            raise FormatError("these problems carry no answers (they were parsed from prompts)")
        if self.task == "sort":
            return ["".join(SORT_LABELS[i] for i in row[:n]) for row, n in zip(self.answer, self.answer_lengths)]
        if self.base == 10:
            values = decimal_strings(self.answer, self.answer_lengths)
        else:
            values = [str(digits_to_int(row[:n], self.base)) for row, n in zip(self.answer, self.answer_lengths)]
        return [f"-{v}" if neg else v for v, neg in zip(values, self.negative)]


def decimal_strings(digits: np.ndarray, lengths: np.ndarray) -> list[str]:
    """Base-10 digit rows ([m, L], least significant first) to decimal strings without Python ints:
    exact and fast for any length (Python refuses int-to-text conversions beyond 4,300 digits)."""
    if digits.shape[1] == 0:
        return ["0"] * len(lengths)
    width = digits.shape[1]
    text = (digits[:, ::-1].astype(np.uint8) + ord("0")).tobytes().decode("ascii")
    out = []
    for i, n in enumerate(lengths.tolist()):
        row = text[i * width + width - min(int(n), width):(i + 1) * width]
        out.append(row.lstrip("0") or "0")
    return out


def digits_to_int(digits, base: int) -> int:
    """Least-significant-first digits to a Python int."""
    value = 0
    for d in reversed([int(x) for x in digits]):
        value = value * base + d
    return value


def int_to_digits(value: int, base: int) -> list[int]:
    """A non-negative Python int to least-significant-first digits (at least one digit)."""
    digits = []
    while True:
        value, d = divmod(value, base)
        digits.append(d)
        if value == 0:
            return digits


def problems_from_ints(task: str, rows: list[list[int]], base: int) -> Problems:
    """Operand tuples (Python ints, any size) to a `Problems` batch without answers."""
    if not rows:
        raise FormatError("no problems given")
    if any(v < 0 for row in rows for v in row):
        raise FormatError("negative numbers are not supported")
    digit_rows = [[int_to_digits(v, base) for v in row] for row in rows]
    k = max(len(r) for r in rows)
    width = max(len(d) for r in digit_rows for d in r)
    operands = np.zeros((len(rows), k, width), dtype=np.int8)
    lengths = np.zeros((len(rows), k), dtype=np.int64)
    for i, row in enumerate(digit_rows):
        for j, digits in enumerate(row):
            operands[i, j, : len(digits)] = digits
            lengths[i, j] = len(digits)
    return Problems(task, base, operands, lengths)


# -- parsing what a user types ------------------------------------------------------------
_NUMBER = re.compile(r"[0-9]+")
_SORT_ITEM = re.compile(r"([a-z]):([0-9]+)")


def _check_number(text: str, token: str, problem: str) -> str:
    """A validated decimal operand, leading zeros dropped ('007' -> '7')."""
    if token == "":
        raise FormatError(f"{quote(problem)}: missing operand")
    if token.startswith("-"):
        raise FormatError(f"{quote(problem)}: negative numbers are not supported")
    if not _NUMBER.fullmatch(token):
        bad = next(c for c in token if not c.isdigit() or not c.isascii())
        raise FormatError(f"{quote(problem)}: {bad!r} is not a decimal digit")
    return token.lstrip("0") or "0"


def parse_problem(text: str, fmt: NumberFormat) -> list[str]:
    """'123+456' -> ['123', '456'] (or the sort items), with one-line errors for anything else."""
    if not isinstance(text, str):
        raise FormatError(f"a problem must be a string, got {type(text).__name__}")
    problem = text.strip().replace(" ", "")
    if not problem:
        raise FormatError("empty problem")
    if fmt.task == "sort":
        items = problem.split(",")
        # A malformed item first: 'a:1;b:2' is one bad item, not a list of one.
        for item in items:
            if _SORT_ITEM.fullmatch(item) is None:
                raise FormatError(f"{quote(problem)}: sort items look like 'a:31,b:7', got {quote(item)}")
        if not 2 <= len(items) <= fmt.max_items:
            raise FormatError(f"{quote(problem)}: this format sorts 2 to {fmt.max_items} items, got {len(items)}")
        values = []
        for i, item in enumerate(items):
            m = _SORT_ITEM.fullmatch(item)
            if m.group(1) != SORT_LABELS[i]:
                raise FormatError(f"{quote(problem)}: item {i + 1} must be labelled {SORT_LABELS[i]!r}")
            values.append(_check_number(problem, m.group(2), problem))
        if not 2 <= len(values) <= fmt.max_items:
            raise FormatError(f"{quote(problem)}: this format sorts 2 to {fmt.max_items} items, got {len(values)}")
        return values
    op = OPERATORS[fmt.task]
    # A leading '-' is a negative first operand, not the operator.
    if problem.startswith("-"):
        raise FormatError(f"{quote(problem)}: negative numbers are not supported")
    found = [c for c in "+-*" if c in problem]
    if op not in problem:
        other = next((t for t, o in OPERATORS.items() if o in found), None)
        if other:
            raise FormatError(f"{quote(problem)} is {TASK_NAMES[other]}, but this model does {TASK_NAMES[fmt.task]} ('{op}')")
        raise FormatError(f"{quote(problem)}: expected two numbers joined by '{op}'")
    left, _, right = problem.partition(op)
    if problem.count(op) > 1 and not right.startswith("-"):  # '5--3' is a negative operand, said below
        raise FormatError(f"{quote(problem)}: expected two numbers joined by one '{op}', got {problem.count(op)} '{op}' signs")
    return [_check_number(problem, left, problem), _check_number(problem, right, problem)]


def problems_from_decimal(task: str, rows: list[list[str]], base: int) -> Problems:
    """Decimal operand strings to digit arrays; base 10 skips big-int conversion entirely."""
    if base != 10:
        limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
        longest = max(len(v) for row in rows for v in row)
        if limit and longest > limit:
            raise FormatError(f"an operand of {longest:,} decimal digits is longer than the {limit:,} digits Python "
                              f"converts to base {base} (sys.get_int_max_str_digits)")
        return problems_from_ints(task, [[int(v) for v in row] for row in rows], base)
    k = max(len(r) for r in rows)
    width = max(len(v) for r in rows for v in r)
    cells = [row[j] if j < len(row) else "" for row in rows for j in range(k)]
    lengths = np.array([len(v) for v in cells], dtype=np.int64).reshape(len(rows), k)
    text = "".join(v[::-1].ljust(width, "0") for v in cells)  # least significant digit first
    digits = (np.frombuffer(text.encode("ascii"), dtype=np.uint8) - ord("0")).astype(np.int8)
    return Problems(task, base, digits.reshape(len(rows), k, width), lengths)


def parse_problems(texts: list[str], fmt: NumberFormat) -> Problems:
    if isinstance(texts, str) or not len(texts):
        raise FormatError("expected a non-empty list of problems")
    rows = [parse_problem(t, fmt) for t in texts]
    problems = problems_from_decimal(fmt.task, rows, fmt.base)
    check_fits(problems, fmt)
    return problems


def check_fits(problems: Problems, fmt: NumberFormat) -> None:
    """Operands wider than a fixed-width format cannot be written: say which one."""
    if fmt.operand_width and (problems.lengths > fmt.operand_width).any():
        i = int(np.argwhere(problems.lengths > fmt.operand_width)[0][0])
        raise FormatError(
            f"{quote(problems.select([i]).to_text()[0])}: an operand has more than {fmt.operand_width} "
            f"base-{fmt.base} digits, the width this model was trained on"
        )
    if fmt.answer_width and (fmt.max_answer_digits(problems.lengths) > fmt.answer_width).any():
        i = int(np.argmax(fmt.max_answer_digits(problems.lengths) > fmt.answer_width))
        raise FormatError(
            f"{quote(problems.select([i]).to_text()[0])}: the answer may need more than {fmt.answer_width} digits"
        )


# -- rendering to token ids ---------------------------------------------------------------
def radix_passes(problems: Problems) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each digit place p up to the longest item: the item order after a stable sort by digit p
    of the order before ([n, k] item indices, absent items last) and which rows have place p."""
    present = problems.lengths > 0
    longest = problems.lengths.max(axis=1)
    order = np.broadcast_to(np.arange(problems.operands.shape[1]), present.shape).copy()
    passes = []
    for p in range(int(longest.max()) if len(problems) else 0):
        digit = np.where(p < problems.lengths, problems.operands[:, :, p], 0)
        key = np.take_along_axis(np.where(present, digit, problems.base), order, axis=1)
        order = np.take_along_axis(order, np.argsort(key, axis=1, kind="stable"), axis=1)
        passes.append((order.copy(), p < longest))
    return passes


def running_sums(problems: Problems, base: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """For k = 0 .. longest b - 1: a * (b mod base**(k+1)) as digit rows (least significant first)
    and its width len(a) + k + 1, 0 in rows whose b has no digit k. Schoolbook on digit arrays, so
    operands of any length stay exact."""
    a = problems.operands[:, 0].astype(np.int64)
    b = problems.operands[:, 1].astype(np.int64)
    la, lb = problems.lengths[:, 0], problems.lengths[:, 1]
    width = a.shape[1]
    total = np.zeros((len(problems), 2 * width + 1), dtype=np.int64)
    sums = []
    for k in range(int(lb.max()) if len(problems) else 0):
        present = k < lb
        digit = np.where(present, b[:, k], 0)
        carry = np.zeros(len(problems), dtype=np.int64)
        for i in range(width + 1):  # add a * digit * base**k; position k + width takes the last carry
            term = total[:, k + i] + carry + (a[:, i] * digit if i < width else 0)
            total[:, k + i], carry = term % base, term // base
        sums.append((total.copy(), np.where(present, la + k + 1, 0)))
    return sums


def complement_digits(problems: Problems, base: int) -> tuple[np.ndarray, np.ndarray]:
    """(a - b) mod base**L as digit rows (least significant first) and L, the longer operand's length.

    For a >= b that is |a - b| with leading zeros up to L digits; for a < b it is base**L - |a - b|:
    below the first non-zero digit of |a - b| the digits stay 0, that digit becomes base - d and
    every digit above it base - 1 - d.
    """
    width = int(problems.lengths.max()) if len(problems) else 0
    lengths = problems.lengths[:, :2].max(axis=1)
    x = np.zeros((len(problems), width), dtype=np.int64)
    cols = min(width, problems.answer.shape[1])
    x[:, :cols] = problems.answer[:, :cols]
    position = np.arange(width)[None, :]
    first = np.argmax(x != 0, axis=1)[:, None]  # |a - b| > 0 whenever a < b
    flipped = np.where(position < first, 0, np.where(position == first, base - x, base - 1 - x))
    digits = np.where(problems.negative[:, None], flipped, x)
    digits[position >= lengths[:, None]] = 0
    return digits, lengths


def _digit_segment(digits: np.ndarray, lengths: np.ndarray, width: int, reverse: bool):
    """Digits of one number per row as a [n, W] block in print order, with per-row lengths."""
    shown = np.full_like(lengths, width) if width else lengths
    cols = int(shown.max()) if len(shown) else 0
    if digits.shape[1] < cols:
        digits = np.pad(digits, ((0, 0), (0, cols - digits.shape[1])))
    if reverse:
        return digits[:, :cols].astype(np.int64), shown
    index = np.clip(shown[:, None] - 1 - np.arange(cols)[None, :], 0, None)
    return np.take_along_axis(digits, index, axis=1).astype(np.int64), shown


def _concat(segments, n: int, pad_id: int):
    """Lay out per-row variable-length segments side by side, right-padded with pad_id."""
    total = sum(lens for _, lens in segments) if segments else np.zeros(n, dtype=np.int64)
    out = np.full((n, int(total.max())), pad_id, dtype=np.int64)
    start = np.zeros(n, dtype=np.int64)
    for block, lens in segments:
        width = block.shape[1]
        cols = start[:, None] + np.arange(width)[None, :]
        mask = np.arange(width)[None, :] < lens[:, None]
        out[np.nonzero(mask)[0], cols[mask]] = block[mask]
        start = start + lens
    return out, total


def _const(token_id: int, present: np.ndarray):
    """A one-token segment that appears where `present` is true."""
    return np.full((len(present), 1), token_id, dtype=np.int64), present.astype(np.int64)


def render(problems: Problems, fmt: NumberFormat, with_answer: bool):
    """Token ids for a batch. Returns (ids [n, T] right-padded, lengths [n], prompt_lengths [n]).

    The prompt ends with '='; with_answer appends the answer (and <eos> if the format has one).
    """
    if problems.task != fmt.task:
        raise FormatError(f"problems are {problems.task!r} but the format is for {fmt.task!r}")
    if problems.base != fmt.base:
        raise FormatError(f"problems are in base {problems.base} but the format uses base {fmt.base}")
    check_fits(problems, fmt)
    vocab = {t: i for i, t in enumerate(fmt.vocab())}
    n = len(problems)
    ones = np.ones(n, dtype=bool)
    segments = []
    if fmt.task == "sort":
        for j in range(problems.operands.shape[1]):
            present = problems.lengths[:, j] > 0
            if j > 0:
                segments.append(_const(vocab[","], present))
            segments.append(_const(vocab[SORT_LABELS[j]], present))
            segments.append(_const(vocab[":"], present))
            block, lens = _digit_segment(problems.operands[:, j], problems.lengths[:, j],
                                         fmt.operand_width, fmt.reverse_operands)
            segments.append((block, np.where(present, lens, 0)))
    else:
        for j in range(2):
            if j == 1:
                segments.append(_const(vocab[OPERATORS[fmt.task]], ones))
            segments.append(_digit_segment(problems.operands[:, j], problems.lengths[:, j],
                                           fmt.operand_width, fmt.reverse_operands))
    segments.append(_const(vocab[PROMPT_END], ones))
    prompt_lengths = sum(lens for _, lens in segments)
    if with_answer:
        if problems.answer is None:
            raise FormatError("cannot render answers for problems parsed from prompts")
        if fmt.task == "sort":
            label_ids = np.array([vocab[c] for c in SORT_LABELS[: problems.answer.shape[1]]])
            if fmt.scratchpad == "radix_passes":
                for p, (order, has_place) in enumerate(radix_passes(problems)):
                    if p:
                        segments.append(_const(vocab[PROMPT_END], has_place))
                    segments.append((label_ids[order], np.where(has_place, problems.answer_lengths, 0)))
            elif fmt.scratchpad == "radix_keys":
                segments += _radix_key_lines(problems, label_ids, vocab)
                segments.append((label_ids[problems.answer], problems.answer_lengths))
            else:
                segments.append((label_ids[problems.answer], problems.answer_lengths))
        elif fmt.task == "sub" and fmt.negative_answers == "complement":
            digits, lengths = complement_digits(problems, fmt.base)
            segments.append(_digit_segment(digits, lengths, fmt.answer_width, fmt.reverse_answer))
            segments.append(_const(vocab["-"], problems.negative))
        elif fmt.scratchpad == "running_sums":
            for k, (digits, widths) in enumerate(running_sums(problems, fmt.base)):
                if k:
                    segments.append(_const(vocab[PROMPT_END], widths > 0))
                segments.append(_digit_segment(digits, widths, 0, fmt.reverse_answer))
        else:
            if fmt.task == "sub":
                segments.append(_const(vocab["-"], problems.negative))
            segments.append(_digit_segment(problems.answer, problems.answer_lengths,
                                           fmt.answer_width, fmt.reverse_answer))
        if fmt.end_token:
            segments.append(_const(vocab[EOS_TOKEN], ones))
    ids, lengths = _concat(segments, n, vocab[PAD_TOKEN])
    return ids, lengths, prompt_lengths


def _radix_key_lines(problems: Problems, label_ids: np.ndarray, vocab: dict) -> list:
    """The segments of radix_keys' lines: per digit place p, the labels in the order before pass p,
    each followed by its item's digit p (0 beyond its length), then '='; rows whose longest item is
    shorter than p + 1 digits write nothing for p. Absent items come last in every order."""
    digit_ids = np.array([vocab[c] for c in DIGIT_CHARS[: problems.base]])
    n, k = problems.lengths.shape
    order = np.broadcast_to(np.arange(k), (n, k))
    items = (problems.lengths > 0).sum(axis=1)
    segments = []
    for p, (after, has_place) in enumerate(radix_passes(problems)):
        digit = np.where(p < problems.lengths, problems.operands[:, :, p], 0)
        pairs = np.stack([label_ids[order], digit_ids[np.take_along_axis(digit, order, axis=1)]], axis=2)
        segments.append((pairs.reshape(n, 2 * k), np.where(has_place, 2 * items, 0)))
        segments.append(_const(vocab[PROMPT_END], has_place))
        order = after
    return segments


# -- reading answers back -----------------------------------------------------------------
def decode_answer(tokens: list[str], fmt: NumberFormat, operand_lengths=None) -> str | None:
    """Generated answer tokens to plain decimal text.

    The answer is the tokens before the first <eos> (or <pad>). A format with an end token
    writes <eos> after every answer, so tokens without one (an answer cut off by the token
    budget, or ended by <pad>) are not an answer. Returns None when the tokens are not a
    well-formed answer in this format. `operand_lengths` (the problem's operand digit counts),
    when given, also holds written working to the problem's shape: running sums, one per digit
    of b, the first len(a) + 1 digits wide; radix passes, one line of every item's label per
    digit place of the longest item.
    """
    chars, ended = [], False
    for t in tokens:
        if t in (EOS_TOKEN, PAD_TOKEN):
            ended = t == EOS_TOKEN
            break
        chars.append(t)
    if fmt.end_token and not ended:
        return None
    text = "".join(chars)
    if fmt.scratchpad == "running_sums":
        sums = text.split(PROMPT_END)
        # Sum k has one digit more than sum k - 1: a sum dropped or cut short is not an answer.
        first = len(sums[0]) if operand_lengths is None else int(operand_lengths[0]) + 1
        if operand_lengths is not None and len(sums) != int(operand_lengths[1]):
            return None
        if any(len(s) != first + k or not set(s) <= set(DIGIT_CHARS[: fmt.base]) for k, s in enumerate(sums)):
            return None
        text = sums[-1]
    if fmt.task == "sort":
        labels = SORT_LABELS[: fmt.max_items]
        lines = text.split(PROMPT_END) if fmt.scratchpad != "none" else [text]
        if fmt.scratchpad == "radix_keys":
            # Every line but the last: label-digit pairs; they are checked as the labels they order.
            digits = set(DIGIT_CHARS[: fmt.base])
            keyed, lines = lines[:-1], lines[-1:]
            if not keyed or any(len(line) % 2 or not set(line[1::2]) <= digits for line in keyed):
                return None
            lines = [line[0::2] for line in keyed] + lines
        if operand_lengths is not None:
            items = int((np.asarray(operand_lengths) > 0).sum())
            labels = SORT_LABELS[:items]
            if len(lines) != int(np.max(operand_lengths)) + (fmt.scratchpad == "radix_keys"):
                return None  # one line per digit place of the longest item (and radix_keys' answer line)
        # Every line orders the same labels, each once.
        if any(not line or set(line) != set(lines[0]) or len(set(line)) != len(line) or not set(line) <= set(labels)
               for line in lines):
            return None
        if operand_lengths is not None and len(lines[0]) != len(labels):
            return None
        return lines[-1]
    sign = ""
    complement = fmt.task == "sub" and fmt.negative_answers == "complement"
    if complement and text.endswith("-"):
        sign, text = "-", text[:-1]
    elif fmt.task == "sub" and not complement and text.startswith("-"):
        sign, text = "-", text[1:]
    digits = DIGIT_CHARS[: fmt.base]
    if not text or any(c not in digits for c in text):
        return None
    if fmt.reverse_answer:
        text = text[::-1]
    value = int(text, fmt.base)
    if sign and complement:
        value = fmt.base ** len(text) - value  # a - b = value - base**L < 0
        if value == fmt.base ** len(text):
            return None  # all zeros with a borrow out: no a - b is written so
    if sign and value == 0:
        return None  # "-0" is not how any answer is written
    return f"{sign}{value}"
