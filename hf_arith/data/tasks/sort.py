"""Sorting: 'a:31,b:7,c:120', answered by the labels in ascending order of value ('bac').

Ties keep label order. The written working may be radix passes (the labels once per digit place),
radix keys (each label with its digit, per place) or transposition rounds (per digit place, one
line per round of an odd-even transposition sort), with or without a marker that moves one slot a round,
and with or without each label's digit; or flagged rounds, where a label's case says whether its round has
swapped anything up to it, and a place ends after two rounds that swapped nothing.
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
    scratchpads = ("radix_passes", "radix_keys", "transposition_rounds", "transposition_marked", "transposition_keys",
                   "transposition_next_keys", "transposition_next_unmarked", "transposition_flags")
    _next = ("transposition_next_keys", "transposition_next_unmarked")  # a place's last round: the next place's digits
    _keyed = ("transposition_keys",) + _next  # each label followed by its item's digit
    _marked = ("transposition_marked", "transposition_keys", "transposition_next_keys")  # round r's slot r upper case
    _cased = _marked + ("transposition_flags",)  # labels in upper case too
    _rounds = ("transposition_rounds", "transposition_next_unmarked") + _marked  # a line per round of an odd-even sort
    item_list = True
    digit_answers = False  # labels
    default_digits = (1, 5)
    grid_axes = ("items", "digits")
    hard_kinds = ("repeated", "hard", "tie_heavy", "near_ties", "ties", "carried_ties")
    stress_kinds = ("tie_heavy", "near_ties")
    # Near ties and repeated values the bundled abacus-gpt2-sort answered wrong at confidence >= 0.9 (issue 57).
    views_note = "the list relabelled: its items in another order, equal values kept in label order"
    reported_failures = ("a:49565,b:41575,c:41565,d:41575,e:41562", "a:795524,b:795524,c:811860,d:811860,e:811860")

    def check_format(self, fmt):
        if fmt.answer_width:
            raise FormatError("answer_width does not apply to sorting (the answer is a list of labels)")
        if fmt.scratchpad in self._cased and fmt.base > 10:
            raise FormatError(f"{fmt.scratchpad} writes marked labels in upper case, which base "
                              f"{fmt.base} uses for digits: it needs base 10 or less")

    def symbols(self, fmt):
        marked = list(SORT_LABELS[: fmt.max_items].upper()) if fmt.scratchpad in self._cased else []
        return [":", ","] + list(SORT_LABELS[: fmt.max_items]) + marked

    def answer_digits(self, lengths):
        return (lengths > 0).sum(axis=1)

    def answer_tokens(self, fmt, lengths):
        end = 1 if fmt.end_token else 0
        items, places = (lengths > 0).sum(axis=1), lengths.max(axis=1)
        if fmt.scratchpad == "radix_passes":
            return places * items + (places - 1) + end  # one line of labels per digit place
        if fmt.scratchpad == "radix_keys":
            return places * (2 * items + 1) + items + end  # a line of label-digit pairs per place, then the labels
        if fmt.scratchpad in self._keyed:
            return places * items * (2 * items + 1) - 1 + end  # a line of label-digit pairs per round
        if fmt.scratchpad == "transposition_flags":  # at most items + 2 rounds a place (`flagged_rounds`)
            return places * (items + 2) * (2 * items + 1) - 1 + end
        if fmt.scratchpad in self._rounds:
            return places * items * (items + 1) - 1 + end  # a line of labels per round, one round per item and place
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

    def draw_kind(self, kind, spec, n, rng):
        """Lists that uniform sampling almost never draws, with spec's item counts and digit range:

        - "tie_heavy": k items taking values from a pool of 1 to k - 1 numbers, so at least two
          items are equal (up to all of them), in half the lists all of one length; equal items
          must keep their label order;
        - "near_ties": k items of one length L, each a base number with one digit changed (maybe to
          the same digit, a tie); in half the lists every item changes the same digit place, so
          any two items differ in that one digit, in the other half each item its own place;
        - "ties": each list one of the two, half and half;
        - "carried_ties": k items of one length L, and lists of 4 or more items written so that at every
          digit place, in the order that place's odd-even rounds start from (the items stably sorted by
          their lower places), the slots read big, x, t, t (4 items) or big, x, y, t, t (5 or more), with
          x, y < t < big: a larger digit moves right into the slot before two equal digits, which the
          next round must keep in order (round 0 with 4 items, round 1 with 5): rare in uniform lists
          of up to 5 items, common in every place of a list of 20 (base 4 or more).
        """
        base, width = spec.base, spec.max_digits
        count = rng.integers(spec.min_items, spec.max_items + 1, size=n)
        k = self.n_operands(spec.max_items)
        absent = np.arange(k)[None, :] >= count[:, None]
        if kind == "ties":
            heavy = self.draw_kind("tie_heavy", spec, n, rng)
            near = self.draw_kind("near_ties", spec, n, rng)
            rows = rng.random(n) < 0.5
            return (np.where(rows[:, None, None], heavy[0], near[0]), np.where(rows[:, None], heavy[1], near[1]))
        if kind == "tie_heavy":
            pool = rng.integers(0, base, size=(n, k, width))
            pool_lengths = rng.integers(spec.min_digits, spec.max_digits + 1, size=(n, k))
            # Half the lists of one length: their values then tie or differ only in their digits.
            pool_lengths = np.where((rng.random(n) < 0.5)[:, None], pool_lengths[:, :1], pool_lengths)
            distinct = 1 + (rng.random(n) * (count - 1)).astype(np.int64)  # 1 .. k - 1 values per list
            pick = (rng.random((n, k)) * distinct[:, None]).astype(np.int64)
            digits = np.take_along_axis(pool, pick[..., None], axis=1)
            lengths = np.take_along_axis(pool_lengths, pick, axis=1)
        elif kind == "carried_ties":
            if base < 4:
                raise FormatError(f"carried_ties writes four distinct digits a place, which base {base} does not have")
            length = rng.integers(spec.min_digits, spec.max_digits + 1, size=n)
            lengths = np.broadcast_to(length[:, None], (n, k)).copy()
            digits = rng.integers(1, base, size=(n, k, width))
            _carry_into_ties(digits, length, count, base, rng)
        elif kind == "near_ties":
            length = rng.integers(spec.min_digits, spec.max_digits + 1, size=n)
            lengths = np.broadcast_to(length[:, None], (n, k)).copy()
            digits = np.broadcast_to(rng.integers(0, base, size=(n, 1, width)), (n, k, width)).copy()
            shared = rng.random(n) < 0.5
            place = (rng.random((n, k)) * length[:, None]).astype(np.int64)
            place = np.where(shared[:, None], place[:, :1], place)
            np.put_along_axis(digits, place[..., None], rng.integers(0, base, size=(n, k, 1)), axis=2)
        else:
            return super().draw_kind(kind, spec, n, rng)
        # Leading digits of multi-digit numbers non-zero (the same fix for equal numbers keeps them
        # equal: it is drawn per list, not per item), digits past each length cleared.
        lead = np.maximum(lengths - 1, 0)[..., None]
        top = np.take_along_axis(digits, lead, axis=2)[..., 0]
        fixed = rng.integers(1, base, size=(n, 1))
        top = np.where((lengths > 1) & (top == 0), fixed, top)
        np.put_along_axis(digits, lead, top[..., None], axis=2)
        digits[np.arange(width)[None, None, :] >= lengths[..., None]] = 0
        lengths[absent] = 0
        digits[absent] = 0
        return digits.astype(np.int8), lengths

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

    def views(self, operands, count, rng):
        # The list relabelled: the items in another order, each under the label of its new place. Equal
        # values keep their relative order, so every view's sorted labels name the same items.
        n = len(operands)
        groups: dict[str, list[int]] = {}
        for i, value in enumerate(operands):  # parsed operands: decimal, without leading zeros
            groups.setdefault(value, []).append(i)
        orders, seen = [list(range(n))], {tuple(range(n))}
        for _ in range(4 * count):  # a list of few distinct orders (two items, all equal) has fewer views
            if len(orders) >= count:
                break
            order = rng.permutation(n).tolist()
            for members in groups.values():
                places = sorted(j for j in range(n) if order[j] in members)
                for place, item in zip(places, members):
                    order[place] = item
            if tuple(order) not in seen:
                seen.add(tuple(order))
                orders.append(order)
        return orders

    def answer_from_view(self, answer, order):
        if answer is None:
            return None
        labels = SORT_LABELS[: len(order)]
        if any(c not in labels for c in answer):
            return None
        return "".join(SORT_LABELS[order[labels.index(c)]] for c in answer)

    def prompt_segments(self, problems, fmt, vocab):
        segments = []
        for j in range(problems.operands.shape[1]):
            present = problems.lengths[:, j] > 0
            if j > 0:  # between items: a list moved to later places (`with_items_moved`) opens with no comma
                segments.append(const_segment(vocab[","], present & (problems.lengths[:, :j] > 0).any(axis=1)))
            segments.append(const_segment(vocab[SORT_LABELS[j]], present))
            segments.append(const_segment(vocab[":"], present))
            block, lens = digit_segment(problems.operands[:, j], problems.lengths[:, j],
                                        fmt.operand_width, fmt.reverse_operands)
            segments.append((block, np.where(present, lens, 0)))
        return segments

    def answer_segments(self, problems, fmt, vocab):
        label_ids = np.array([vocab[c] for c in SORT_LABELS[: problems.answer.shape[1]]])
        segments = []
        if fmt.scratchpad == "transposition_flags":
            return _flagged_lines(problems, label_ids, vocab)
        if fmt.scratchpad == "radix_passes" or fmt.scratchpad in self._rounds:
            lines = radix_passes(problems) if fmt.scratchpad == "radix_passes" else transposition_rounds(problems)
            rounds = max(int(problems.answer_lengths.max()), 1) if len(problems) else 1
            marked_ids = np.array([vocab[c.upper()] for c in SORT_LABELS[: problems.answer.shape[1]]]) \
                if fmt.scratchpad in self._marked else None
            digit_ids = np.array([vocab[c] for c in DIGIT_CHARS[: problems.base]])
            items = (problems.lengths > 0).sum(axis=1)
            for i, (order, has_line) in enumerate(lines):
                if i:
                    segments.append(const_segment(vocab[PROMPT_END], has_line))
                ids, width = label_ids[order], problems.answer_lengths
                if marked_ids is not None:  # round r marks slot r (transposition_rounds: rounds up to the most items)
                    ids[:, i % rounds] = marked_ids[order[:, i % rounds]]
                if fmt.scratchpad in self._keyed:  # each label followed by its digit at this line's place
                    digits = _line_digits(problems, order, i // rounds,
                                          fmt.scratchpad in self._next and (i % rounds == items - 1))
                    ids, width = np.stack([ids, digit_ids[digits]], axis=-1).reshape(len(problems), -1), 2 * width
                segments.append((ids, np.where(has_line, width, 0)))
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
        if fmt.scratchpad == "transposition_rounds":
            return ("it sorts as a radix sort does, each digit place by an odd-even transposition sort: per place, "
                    "lowest first, one line of labels per round (as many rounds as items), each round swapping "
                    "neighbours whose digit is out of order, the lines separated by '='; the last line is the "
                    "sorted order")
        if fmt.scratchpad == "transposition_marked":
            return ("it sorts as a radix sort does, each digit place by an odd-even transposition sort: per place, "
                    "lowest first, one line of labels per round (as many rounds as items), each round swapping "
                    "neighbours whose digit is out of order, round r writing the label at slot r in upper case, the "
                    "lines separated by '='; a place ends with the round that marks its last slot, and the last "
                    "line, read in lower case, is the sorted order")
        if fmt.scratchpad == "transposition_flags":
            return ("it sorts as a radix sort does, each digit place by an odd-even transposition sort: per place, "
                    "lowest first, one line per round of the labels, each followed by its item's digit at that "
                    "place, each round swapping neighbours whose digit is out of order (rounds alternate across "
                    "every line written), a label in upper case from the round's first swap on, the lines "
                    "separated by '='; a place ends after two rounds in a row that swapped nothing, and the last "
                    "line's labels, read in lower case, are the sorted order")
        if fmt.scratchpad == "transposition_keys":
            return ("it sorts as a radix sort does, each digit place by an odd-even transposition sort: per place, "
                    "lowest first, one line per round (as many rounds as items) of the labels, each followed by its "
                    "item's digit at that place, each round swapping neighbours whose digit is out of order, round "
                    "r writing the label at slot r in upper case, the lines separated by '='; a place ends with the "
                    "round that marks its last slot, and the last line's labels, read in lower case, are the sorted order")
        if fmt.scratchpad == "transposition_next_keys":
            return ("it sorts as transposition_keys does (per digit place, lowest first, one line per round of the "
                    "labels, each followed by its item's digit, round r writing the label at slot r in upper case), "
                    "but a place's last round writes each label's digit at the next place (0 past the longest), so "
                    "every round compares two digits written in the line before")
        if fmt.scratchpad == "transposition_next_unmarked":
            return ("it sorts as transposition_next_keys does, with no label in upper case: per digit place, lowest "
                    "first, as many rounds as items, one line per round of the labels, each followed by its item's "
                    "digit (a place's last round: at the next place), the last line's labels the sorted order")
        return None

    @staticmethod
    def _written_lines(fmt, operand_lengths) -> int:
        """The lines a list's written working takes: one per digit place of its longest item (and radix_keys'
        answer line), or per place and item (transposition rounds)."""
        places, items = int(np.max(operand_lengths)), int((np.asarray(operand_lengths) > 0).sum())
        if fmt.scratchpad in Sort._rounds:
            return places * items
        return places + (fmt.scratchpad == "radix_keys")

    def read_answer(self, text, fmt, operand_lengths=None):
        labels = SORT_LABELS[: fmt.max_items]
        lines = text.split(PROMPT_END) if fmt.scratchpad != "none" else [text]
        if fmt.scratchpad == "transposition_flags":
            return _read_flagged(lines, fmt, operand_lengths)
        if fmt.scratchpad == "radix_keys" or fmt.scratchpad in self._keyed:
            # Label-digit pairs (radix_keys: every line but the last); they are checked as the labels they order.
            digits = set(DIGIT_CHARS[: fmt.base])
            keyed, lines = (lines[:-1], lines[-1:]) if fmt.scratchpad == "radix_keys" else (lines, [])
            if not keyed or any(len(line) % 2 or not set(line[1::2]) <= digits for line in keyed):
                return None
            lines = [line[0::2] for line in keyed] + lines
        if fmt.scratchpad in self._marked:
            # One marked (upper-case) label a line, at its round's slot; then the lines are read as their labels.
            marks = [[j for j, c in enumerate(line) if c.isupper()] for line in lines]
            if any(len(m) != 1 for m in marks):
                return None
            if operand_lengths is not None:
                items = int((np.asarray(operand_lengths) > 0).sum())
                if any(m[0] != i % items for i, m in enumerate(marks)):
                    return None
            lines = [line.lower() for line in lines]
        if operand_lengths is not None:
            items = int((np.asarray(operand_lengths) > 0).sum())
            labels = SORT_LABELS[:items]
            if fmt.scratchpad != "none" and len(lines) != self._written_lines(fmt, operand_lengths):
                return None
        # Every line orders the same labels, each once.
        if any(not line or set(line) != set(lines[0]) or len(set(line)) != len(line) or not set(line) <= set(labels)
               for line in lines):
            return None
        if operand_lengths is not None and len(lines[0]) != len(labels):
            return None
        return lines[-1]


def transposition_rounds(problems) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each digit place p up to the longest item, then each round r below the most items: the
    item order after round r of an odd-even transposition sort by digit p ([n, k] item indices, the
    row's items first, absent ones last) and which rows write that line (p below their longest item,
    r below their item count). Round r compares the neighbours at places (i, i + 1) with i of r's
    parity and swaps them only where the first digit is larger, so equal digits keep the order of
    the line before and each place's last round leaves a stable sort by that digit (n rounds sort n
    items). Why: each label then depends on two labels of the line before, at its own place and a
    neighbour's, and one comparison of two digits; no line needs a count over the whole line."""
    present = problems.lengths > 0
    n, k = present.shape
    items, longest = present.sum(axis=1), problems.lengths.max(axis=1)
    order = np.argsort(~present, axis=1, kind="stable")  # a moved list's items first, in label order
    rows = np.arange(n)[:, None]
    lines = []
    for p in range(int(longest.max()) if n else 0):
        digit = np.where(p < problems.lengths, problems.operands[:, :, p], 0)
        for r in range(int(items.max())):
            key = digit[rows, order]
            first = np.arange(r % 2, k - 1, 2)
            swap = (key[:, first] > key[:, first + 1]) & (first[None, :] + 1 < items[:, None])
            left, right = order[:, first].copy(), order[:, first + 1].copy()
            order[:, first] = np.where(swap, right, left)
            order[:, first + 1] = np.where(swap, left, right)
            lines.append((order.copy(), (p < longest) & (r < items)))
    return lines


def _carry_into_ties(digits: np.ndarray, length: np.ndarray, count: np.ndarray, base: int, rng) -> None:
    """Writes "carried_ties" columns in place ([n, k, width] digits, each list's items `count` and length):
    at each place, for lists of 4 or more items, slot by slot of the order that place's rounds start
    from, big, x, (y,) t, t with 1 <= x, y < t < big <= base - 1 (no 0, so every leading digit stays
    non-zero); other slots and shorter lists keep their digits."""
    n, k, width = digits.shape
    rows = np.arange(n)[:, None]
    order = np.broadcast_to(np.arange(k), (n, k))  # place 0's rounds start from the list as given
    for p in range(width):
        t = rng.integers(2, base - 1, size=n)
        big = t + 1 + (rng.random(n) * (base - 1 - t)).astype(np.int64)
        x, y = (1 + (rng.random((2, n)) * (t - 1)).astype(np.int64))
        five = count >= 5
        column = digits[rows, order, p].astype(np.int64)  # by slot
        pattern = np.stack([big, x, np.where(five, y, t), t, np.where(five, t, column[:, 4 % k])], axis=1)
        slots = min(k, 5)
        column[:, :slots] = np.where(((count >= 4) & (p < length))[:, None], pattern[:, :slots], column[:, :slots])
        digits[rows, order, p] = column
        # the next place's rounds start from this place's stable sort by digit p (absent items last)
        key = column + base * (np.arange(k)[None, :] >= count[:, None])
        order = np.take_along_axis(order, np.argsort(key, axis=1, kind="stable"), axis=1)


def _line_digits(problems, order, place: int, next_place: np.ndarray | bool) -> np.ndarray:
    """Each slot's digit in a keyed line ([n, k]): the digit at `place` of the item `order` puts there, or
    where `next_place` (per row) at place + 1; 0 past an item's length, and past the longest item."""
    rows = np.arange(len(problems))[:, None]
    at = place + np.broadcast_to(np.asarray(next_place, dtype=np.int64), (len(problems),))
    width = problems.operands.shape[2]
    digits = problems.operands[rows, order, np.minimum(at, width - 1)[:, None]]
    return np.where((at < width)[:, None], digits, 0)


def flagged_rounds(problems) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """For each line i that transposition_flags writes: the item order after round i of an odd-even
    transposition sort ([n, k] item indices, the row's items first, absent ones last), the digit place that
    round compares in each row ([n]), which slots lie at or after the round's first swap ([n, k], the labels
    written in upper case) and which rows write line i ([n]). Round i compares the neighbours at places
    (j, j + 1) with j of i's parity, counting every line written, and swaps them only where the first digit
    is larger (equal digits keep the line before's order). A place ends after two rounds in a row that
    swapped nothing (the list is then sorted by that digit), the next place going on from that order, and
    a row's last line ends its longest item's last place. At most items + 2 rounds a place: n rounds sort
    n items. Why: every label depends on its neighbours in the line before and on the label before it in
    its own line (the case), and a round's end on its last slot and the line before's, never on how far
    a marker has come along the line, which a list of 5 items cannot show for a list of 20."""
    present = problems.lengths > 0
    n, k = present.shape
    items, longest = present.sum(axis=1), problems.lengths.max(axis=1)
    order = np.argsort(~present, axis=1, kind="stable")  # a moved list's items first, in label order
    rows, slots = np.arange(n)[:, None], np.arange(k)[None, :]
    place = np.zeros(n, dtype=np.int64)
    quiet = np.zeros(n, dtype=bool)  # the line before, in the same place, swapped nothing
    active = longest > 0
    lines = []
    while active.any():
        p = np.minimum(place, problems.operands.shape[2] - 1)  # a row past its last place writes nothing
        key = problems.operands[rows, order, p[:, None]]  # 0 past an item's length
        first = np.arange(len(lines) % 2, k - 1, 2)
        swap = (key[:, first] > key[:, first + 1]) & (first[None, :] + 1 < items[:, None]) & active[:, None]
        before = order.copy()
        left, right = order[:, first].copy(), order[:, first + 1].copy()
        order[:, first] = np.where(swap, right, left)
        order[:, first + 1] = np.where(swap, left, right)
        flags = np.cumsum(order != before, axis=1) > 0
        lines.append((order.copy(), p, flags & (slots < items[:, None]), active.copy()))
        swapped = flags[:, -1]
        ends = active & quiet & ~swapped
        quiet = ~swapped & ~ends
        place = place + ends
        active &= place < longest
    return lines


def _flagged_lines(problems, label_ids: np.ndarray, vocab: dict) -> list:
    """The segments of transposition_flags' lines (`flagged_rounds`), joined by '=': each label (upper case
    from its round's first swap on) followed by its item's digit at the round's place."""
    marked_ids = np.array([vocab[c.upper()] for c in SORT_LABELS[: len(label_ids)]])
    digit_ids = np.array([vocab[c] for c in DIGIT_CHARS[: problems.base]])
    n = len(problems)
    rows = np.arange(n)[:, None]
    segments = []
    for i, (order, place, flags, has_line) in enumerate(flagged_rounds(problems)):
        if i:
            segments.append(const_segment(vocab[PROMPT_END], has_line))
        labels = np.where(flags, marked_ids[order], label_ids[order])
        digits = digit_ids[problems.operands[rows, order, place[:, None]]]
        pairs = np.stack([labels, digits], axis=-1).reshape(n, -1)
        segments.append((pairs, np.where(has_line, 2 * problems.answer_lengths, 0)))
    return segments


def _read_flagged(lines: list[str], fmt, operand_lengths) -> str | None:
    """The sorted labels of a transposition_flags answer split into lines, or None where the working is not
    well formed: label-digit pairs, each line the same labels once each, the upper-case labels exactly those
    from the first slot that differs from the line before (the first line: from label order), and the last
    line the end of a place (with `operand_lengths`: of the longest item's last place)."""
    digits = set(DIGIT_CHARS[: fmt.base])
    if any(len(line) % 2 or not line or not set(line[1::2]) <= digits for line in lines):
        return None
    lines = [line[0::2] for line in lines]
    first = lines[0].lower()
    if operand_lengths is not None:
        items = int((np.asarray(operand_lengths) > 0).sum())
        if sorted(first) != list(SORT_LABELS[:items]):
            return None
    before, quiet, places, ended = "".join(sorted(first)), False, 0, False
    for line in lines:
        plain = line.lower()
        if sorted(plain) != sorted(before) or len(set(plain)) != len(plain) or not set(plain) <= set(SORT_LABELS):
            return None
        changed = [a != b for a, b in zip(plain, before, strict=True)]
        swapped = any(changed)
        flags = [c.isupper() for c in line]
        if flags != [any(changed[: j + 1]) for j in range(len(line))]:
            return None
        ended = quiet and not swapped
        places += ended
        quiet = not swapped and not ended
        before = plain
    if not ended or (operand_lengths is not None and places != int(np.max(operand_lengths))):
        return None
    return before


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
