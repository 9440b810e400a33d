"""Sorting: 'a:31,b:7,c:120', answered by the labels in ascending order of value ('bac').

Ties keep label order. The written working may be radix passes (the labels once per digit place)
or radix keys (each label with its digit, per place).
"""

from __future__ import annotations

import re

import numpy as np

from ..formatting import (
    DIGIT_CHARS,
    PROMPT_END,
    SORT_LABELS,
    FormatError,
    check_number,
    const_segment,
    digit_segment,
    quote,
    register_task,
)
from .base import Task, read_operand

_SORT_ITEM = re.compile(r"([a-z]):([0-9]+)")


class Sort(Task):
    name, title, hash_id = "sort", "sorting", 4
    scratchpads = ("radix_passes", "radix_keys")
    item_list = True
    digit_answers = False  # labels
    default_digits = (1, 5)
    grid_axes = ("items", "digits")

    def check_format(self, fmt):
        if fmt.answer_width:
            raise FormatError("answer_width does not apply to sorting (the answer is a list of labels)")

    def symbols(self, fmt):
        return [":", ","] + list(SORT_LABELS[: fmt.max_items])

    def answer_digits(self, lengths):
        return (lengths > 0).sum(axis=1)

    def answer_tokens(self, fmt, lengths):
        end = 1 if fmt.end_token else 0
        items, places = (lengths > 0).sum(axis=1), lengths.max(axis=1)
        if fmt.scratchpad == "radix_passes":
            return places * items + (places - 1) + end  # one line of labels per digit place
        if fmt.scratchpad == "radix_keys":
            return places * (2 * items + 1) + items + end  # a line of label-digit pairs per place, then the labels
        return items + end

    def answer_run_tokens(self, fmt, lengths):
        if fmt.scratchpad == "radix_keys":
            return 2 * fmt.max_answer_digits(lengths)  # a line of labels, each with its digit
        return super().answer_run_tokens(fmt, lengths)

    def n_operands(self, max_items):
        return max_items

    def parse(self, problem, fmt):
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
            values.append(check_number(m.group(2), problem))
        return values

    def read_prompt(self, text, fmt):
        values = []
        for i, item in enumerate(text.split(",")):
            label, colon, digits = item.partition(":")
            value = read_operand(digits, fmt) if colon and label == SORT_LABELS[i:i + 1] else None
            if value is None:
                return None
            values.append(value)
        return values if len(values) >= 2 else None

    def problem_text(self, operands):
        return ",".join(f"{SORT_LABELS[i]}:{v}" for i, v in enumerate(operands))

    def example(self, a, b, max_items):
        return self.problem_text([str(v) for v in [b, a, (a + b) // 2][: min(3, max_items)]])

    def grid_cell(self, lengths):
        return np.stack([(lengths > 0).sum(axis=1), lengths.max(axis=1)], axis=1)

    def choose_items(self, lengths, digits, min_items, max_items, rng):
        count = rng.integers(min_items, max_items + 1, size=len(lengths))
        absent = np.arange(lengths.shape[1])[None, :] >= count[:, None]
        digits[absent] = 0
        return np.where(absent, 0, lengths)

    def solve(self, operands, lengths, base):
        # Order items by value: primary key row, then digits from most significant down;
        # lexsort is stable, so equal values keep their label order.
        n, k, width = operands.shape
        flat = operands.reshape(n * k, width).astype(np.int64)
        value_keys = [flat[:, i] for i in range(width)]
        present = lengths.reshape(-1) > 0
        rows = np.repeat(np.arange(n), k)
        order = np.lexsort(value_keys + [~present, rows]).reshape(n, k) % k
        return order, (lengths > 0).sum(axis=1), np.zeros(n, dtype=bool)

    def reference(self, values):
        return "".join(SORT_LABELS[i] for i in sorted(range(len(values)), key=values.__getitem__))

    def answer_text(self, problems):
        return ["".join(SORT_LABELS[i] for i in row[:n]) for row, n in zip(problems.answer, problems.answer_lengths)]

    def prompt_segments(self, problems, fmt, vocab):
        segments = []
        for j in range(problems.operands.shape[1]):
            present = problems.lengths[:, j] > 0
            if j > 0:
                segments.append(const_segment(vocab[","], present))
            segments.append(const_segment(vocab[SORT_LABELS[j]], present))
            segments.append(const_segment(vocab[":"], present))
            block, lens = digit_segment(problems.operands[:, j], problems.lengths[:, j],
                                        fmt.operand_width, fmt.reverse_operands)
            segments.append((block, np.where(present, lens, 0)))
        return segments

    def answer_segments(self, problems, fmt, vocab):
        label_ids = np.array([vocab[c] for c in SORT_LABELS[: problems.answer.shape[1]]])
        segments = []
        if fmt.scratchpad == "radix_passes":
            for p, (order, has_place) in enumerate(radix_passes(problems)):
                if p:
                    segments.append(const_segment(vocab[PROMPT_END], has_place))
                segments.append((label_ids[order], np.where(has_place, problems.answer_lengths, 0)))
            return segments
        if fmt.scratchpad == "radix_keys":
            segments += _radix_key_lines(problems, label_ids, vocab)
        segments.append((label_ids[problems.answer], problems.answer_lengths))
        return segments

    def working_note(self, fmt):
        if fmt.scratchpad == "radix_passes":
            return ("it sorts as a radix sort does: one line of labels per digit place, lowest place first, each "
                    "line ordered by that place's digit, separated by '='; the last line is the sorted order")
        if fmt.scratchpad == "radix_keys":
            return ("it sorts as a radix sort does: per digit place, lowest first, every label with its digit at "
                    "that place, then '='; the last line is the sorted order")
        return None

    def read_answer(self, text, fmt, operand_lengths=None):
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


def radix_passes(problems) -> list[tuple[np.ndarray, np.ndarray]]:
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


def _radix_key_lines(problems, label_ids: np.ndarray, vocab: dict) -> list:
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
        segments.append(const_segment(vocab[PROMPT_END], has_place))
        order = after
    return segments


register_task(Sort())
