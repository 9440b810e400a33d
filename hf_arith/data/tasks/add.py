"""Addition: 'a+b', answered by a + b."""

from __future__ import annotations

import numpy as np

from ..formatting import register_task
from .base import SWAPPED_OPERANDS, Task, digit_count, normalise


class Add(Task):
    name, title, hash_id, operator = "add", "addition", 1, "+"
    hard_kinds = ("repeated", "chains", "hard", "carries")
    chain = "carry"
    commutative = True
    views_note = SWAPPED_OPERANDS
    reported_failures = ("899014625+993120376", "55555555+5555555555", "445554445+5455544545", "99161+893926")

    def answer_digits(self, lengths: np.ndarray) -> np.ndarray:
        return lengths.max(axis=1) + 1

    def solve(self, operands, lengths, base):
        a, b = operands[:, 0].astype(np.int64), operands[:, 1].astype(np.int64)
        answer = normalise(np.pad(a + b, ((0, 0), (0, 1))), base).astype(np.int8)
        return answer, digit_count(answer), np.zeros(len(operands), dtype=bool)

    def chain_problems(self, tops, base):
        return [(v, 1) for v in tops] + [(1, v) for v in tops]

    def reference(self, values):
        return str(values[0] + values[1])


register_task(Add())
