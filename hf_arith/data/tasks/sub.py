"""Subtraction: 'a-b', answered by a - b (below zero: a sign, or the base complement)."""

from __future__ import annotations

import numpy as np

from ..formatting import FormatError, const_segment, digit_segment, register_task
from .base import Task, digit_count, read_value


class Sub(Task):
    name, title, hash_id, operator = "sub", "subtraction", 2, "-"
    hard_kinds = ("repeated", "chains", "hard")
    chain = "borrow"
    negative_answers = ("sign", "complement")
    digit_answers = False  # a sign before (or after) the digits

    def check_format(self, fmt):
        if fmt.negative_answers == "complement" and fmt.answer_width:
            raise FormatError("answer_width does not apply to complement answers (they have the longer operand's width)")

    def answer_digits(self, lengths):
        return lengths.max(axis=1)

    def answer_tokens(self, fmt, lengths):
        return super().answer_tokens(fmt, lengths) + 1  # the sign

    def solve(self, operands, lengths, base):
        a, b = operands[:, 0].astype(np.int64), operands[:, 1].astype(np.int64)
        negative = _compare(a, b) < 0
        big, small = np.where(negative[:, None], b, a), np.where(negative[:, None], a, b)
        diff = big - small
        for i in range(operands.shape[2] - 1):
            borrow = diff[:, i] < 0
            diff[:, i] += borrow * base
            diff[:, i + 1] -= borrow
        answer = diff.astype(np.int8)
        return answer, digit_count(answer), negative

    def chain_problems(self, tops, base):
        return [(v + 1, 1) for v in tops[:-1]] + [(v, v) for v in tops]

    def reference(self, values):
        return str(values[0] - values[1])

    def example(self, a, b, max_items):
        return self.problem_text([str(b), str(a)])  # the larger first: a positive answer

    def answer_segments(self, problems, fmt, vocab):
        if fmt.negative_answers == "complement":
            digits, lengths = complement_digits(problems, fmt.base)
            return [digit_segment(digits, lengths, fmt.answer_width, fmt.reverse_answer),
                    const_segment(vocab["-"], problems.negative)]
        return [const_segment(vocab["-"], problems.negative), *super().answer_segments(problems, fmt, vocab)]

    def read_answer(self, text, fmt, operand_lengths=None):
        complement = fmt.negative_answers == "complement"
        sign = "-" if (text.endswith("-") if complement else text.startswith("-")) else ""
        if sign:
            text = text[:-1] if complement else text[1:]
        value = read_value(text, fmt)
        if value is None:
            return None
        if sign and complement:
            value = fmt.base ** len(text) - value  # a - b = value - base**L < 0
            if value == fmt.base ** len(text):
                return None  # all zeros with a borrow out: no a - b is written so
        if sign and value == 0:
            return None  # "-0" is not how any answer is written
        return f"{sign}{value}"


def _compare(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sign of a - b for equal-width digit arrays (most significant differing digit wins)."""
    diff = np.sign(a.astype(np.int64) - b.astype(np.int64))[:, ::-1]
    first = np.argmax(diff != 0, axis=1)
    return diff[np.arange(len(a)), first]


def complement_digits(problems, base: int) -> tuple[np.ndarray, np.ndarray]:
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


register_task(Sub())
