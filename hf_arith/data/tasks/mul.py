"""Multiplication: 'a*b', answered by a * b, optionally after its running sums.

Two written forms of long multiplication: "running_sums" writes every running sum whole, so its
last line is the product; "shifted_sums" writes each running sum without the digits the lines
before it already finished, so every line is len(a) + 1 digits wide and the product is read off
the lines (each line's lowest digit, then the last line).
"""

from __future__ import annotations

import numpy as np

from ..formatting import DIGIT_CHARS, PROMPT_END, FormatError, const_segment, digit_segment, register_task
from .base import SWAPPED_OPERANDS, Task, digit_count, normalise


class Mul(Task):
    name, title, hash_id, operator = "mul", "multiplication", 3, "*"
    scratchpads = ("running_sums", "shifted_sums")
    commutative = True
    views_note = SWAPPED_OPERANDS
    default_digits = (1, 5)
    work_exponent = 2
    reported_failures = ("29299*29229", "927*88471", "89652*4880", "66661*66111")

    def check_format(self, fmt):
        if fmt.scratchpad != "none" and fmt.answer_width:
            raise FormatError(f"answer_width does not apply to {fmt.scratchpad} (each sum has its own width)")

    def answer_digits(self, lengths):
        return lengths.sum(axis=1)

    def answer_tokens(self, fmt, lengths):
        if fmt.scratchpad == "none":
            return super().answer_tokens(fmt, lengths)
        la, lb = lengths[:, 0], lengths[:, 1]
        end = 1 if fmt.end_token else 0
        if fmt.scratchpad == "shifted_sums":
            return lb * (la + 1) + (lb - 1) + end  # lines of la + 1 digits, '=' between
        return lb * la + lb * (lb + 1) // 2 + (lb - 1) + end  # sums of la + k + 1 digits, '=' between

    def answer_run_tokens(self, fmt, lengths):
        if fmt.scratchpad == "shifted_sums":
            return lengths[:, 0] + 1
        return super().answer_run_tokens(fmt, lengths)

    def solve(self, operands, lengths, base):
        n, _, width = operands.shape
        a, b = operands[:, 0].astype(np.int64), operands[:, 1].astype(np.int64)
        acc = np.zeros((n, 2 * width), dtype=np.int64)
        for i in range(width):
            acc[:, i : i + width] += a[:, i : i + 1] * b
            if i % 8 == 7:  # keep column sums small for large bases
                acc = normalise(acc, base)
        answer = normalise(acc, base).astype(np.int8)
        return answer, digit_count(answer), np.zeros(n, dtype=bool)

    def chain_problems(self, tops, base):
        return [(v, base - 1) for v in tops] + [(base - 1, v) for v in tops]

    def reference(self, values):
        return str(values[0] * values[1])

    def answer_segments(self, problems, fmt, vocab):
        if fmt.scratchpad == "none":
            return super().answer_segments(problems, fmt, vocab)
        shifted = fmt.scratchpad == "shifted_sums"
        segments = []
        for k, (digits, widths) in enumerate(running_sums(problems, fmt.base)):
            if k:
                segments.append(const_segment(vocab[PROMPT_END], widths > 0))
            if shifted:  # the digits from place k up: those below were final in the lines before
                digits, widths = digits[:, k:], np.where(widths > 0, widths - k, 0)
            segments.append(digit_segment(digits, widths, 0, fmt.reverse_answer))
        return segments

    def working_note(self, fmt):
        if fmt.scratchpad == "running_sums":
            return ("before the product it writes the running sums of long multiplication (a times the last 1, 2, "
                    "... digits of b), one per digit of b, separated by '='; the last sum is the product")
        if fmt.scratchpad == "shifted_sums":
            return ("it writes the running sums of long multiplication (a times the last 1, 2, ... digits of b), one "
                    "per digit of b, separated by '=', each without the low digits already final, so every line is "
                    "one digit longer than a; the product is each line's lowest digit, then the last line")
        return None

    def split_working(self, text, fmt):
        if fmt.scratchpad != "shifted_sums":
            return super().split_working(text, fmt)
        # The product is spread over the lines (each line's lowest digit, then the last line): no
        # stretch of the text is the answer alone, so all of it is working and `read_answer` reads it.
        return text, ""

    def answer_places(self, text, fmt):
        if fmt.scratchpad != "shifted_sums":
            return super().answer_places(text, fmt)
        # Each line's lowest digit, then the last line (in the format's digit order), whether or not
        # the lines are well formed: what the product is read from.
        starts = [0] + [i + 1 for i, c in enumerate(text) if c == PROMPT_END]
        ends = [i - 1 for i in starts[1:]] + [len(text)]
        last = list(range(starts[-1], ends[-1]))
        if fmt.reverse_answer:
            return [s for s, e in zip(starts[:-1], ends) if e > s] + last
        return last + [e - 1 for s, e in zip(starts[:-1], ends) if e > s][::-1]

    def read_answer(self, text, fmt, operand_lengths=None):
        if fmt.scratchpad == "shifted_sums":
            lines = text.split(PROMPT_END)
            width = len(lines[0]) if operand_lengths is None else int(operand_lengths[0]) + 1
            if operand_lengths is not None and len(lines) != int(operand_lengths[1]):
                return None
            if width < 2 or any(len(s) != width or not set(s) <= set(DIGIT_CHARS[: fmt.base]) for s in lines):
                return None
            low_first = [s if fmt.reverse_answer else s[::-1] for s in lines]
            digits = "".join(s[0] for s in low_first[:-1]) + low_first[-1]
            return super().read_answer(digits if fmt.reverse_answer else digits[::-1], fmt, operand_lengths)
        if fmt.scratchpad == "running_sums":
            sums = text.split(PROMPT_END)
            # Sum k has one digit more than sum k - 1: a sum dropped or cut short is not an answer.
            first = len(sums[0]) if operand_lengths is None else int(operand_lengths[0]) + 1
            if operand_lengths is not None and len(sums) != int(operand_lengths[1]):
                return None
            if any(len(s) != first + k or not set(s) <= set(DIGIT_CHARS[: fmt.base]) for k, s in enumerate(sums)):
                return None
            text = sums[-1]
        return super().read_answer(text, fmt, operand_lengths)


def running_sums(problems, base: int) -> list[tuple[np.ndarray, np.ndarray]]:
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


register_task(Mul())
