"""Vectorized, seeded problem generation for every task, with a train/test split by hash.

Operands are sampled as digit arrays in the target base, so one generator serves 10-digit
adders and 100-digit looped models alike. Every (len_a, len_b) pair is equally likely, as in
the Abacus paper: lengths are drawn uniformly and independently, then digits (the leading
digit of a multi-digit number is non-zero).

Disjointness: a problem's split is a pure function of (task, operand values). We hash each
operand's value modulo two primes (Horner's rule over its digits, so the hash does not depend
on base, padding or digit order), mix them with splitmix64 and put the problem in "test" when
the hash falls below `test_fraction`. Train sampling rejects test problems and vice versa, so
no problem can ever appear in both, whatever the seed, digit range or batch size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .formatting import FormatError, NumberFormat, Problems, get_task, parse_problem
from .tasks import tasks_with_kind
from .tasks.base import digit_count

SPLITS = ("train", "test")
DEFAULT_TEST_FRACTION = 0.1
_PRIMES = (np.uint64(2147483647), np.uint64(2147483629))
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


SAMPLE_BY = ("length", "value", "mixed", "longest", "length_longest")


@dataclass(frozen=True)
class ProblemSpec:
    """What to sample: task, operand digit range (in `base` digits), and item count for sort."""

    task: str = "add"
    min_digits: int = 1
    max_digits: int = 10
    base: int = 10
    min_items: int = 2
    max_items: int = 5
    # How uniform problems draw operand lengths: "length" gives every length in the range the same
    # share; "value" every value (most have max_digits digits, as in the tiny-adder protocol);
    # "mixed" half the problems one way, half the other (a stage that must keep both); "longest" every
    # length of a problem's longest operand (the others no longer), so every grid cell of a list's item
    # count and longest length is as common; "length_longest" half "length", half "longest".
    sample_by: str = "length"

    def __post_init__(self):
        task = get_task(self.task)
        if not 2 <= self.base <= 36:
            raise FormatError(f"base must be from 2 to 36, got {self.base}")
        if not 1 <= self.min_digits <= self.max_digits:
            raise FormatError(f"digit range must satisfy 1 <= min <= max, got {self.min_digits}-{self.max_digits}")
        if self.sample_by not in SAMPLE_BY:
            raise FormatError(f"sample_by must be one of {SAMPLE_BY}, got {self.sample_by!r}")
        if task.item_list and not 2 <= self.min_items <= self.max_items <= 26:
            raise FormatError(f"sort item range must satisfy 2 <= min <= max <= 26, got {self.min_items}-{self.max_items}")

    @property
    def task_rules(self):
        """The `Task` object of this spec's task."""
        return get_task(self.task)

    @property
    def n_operands(self) -> int:
        return get_task(self.task).n_operands(self.max_items)


# -- sampling -----------------------------------------------------------------------------
def _sample_operands(spec: ProblemSpec, n: int, rng: np.random.Generator):
    if spec.sample_by in ("longest", "length_longest"):
        return _sample_by_longest(spec, n, rng)
    k, width = spec.n_operands, spec.max_digits
    if spec.sample_by == "length":
        lengths = rng.integers(spec.min_digits, spec.max_digits + 1, size=(n, k))
    else:  # each length weighted by how many values have it
        span = np.arange(spec.min_digits, spec.max_digits + 1)
        # Counts over base^(max_digits - 1), so a 1,000-digit range does not overflow a float.
        scaled = np.where(span == 1, float(spec.base), spec.base - 1.0) * float(spec.base) ** (span - spec.max_digits)
        lengths = rng.choice(span, size=(n, k), p=scaled / scaled.sum())
        if spec.sample_by == "mixed":  # drawn after the value draw, so "value" keeps its random stream
            by_length = rng.random(n) < 0.5
            lengths[by_length] = rng.integers(spec.min_digits, spec.max_digits + 1, size=(int(by_length.sum()), k))
    digits = rng.integers(0, spec.base, size=(n, k, width), dtype=np.int8)
    _fix_leading(digits, lengths, spec.base, rng)
    lengths = get_task(spec.task).choose_items(lengths, digits, spec.min_items, spec.max_items, rng)
    return digits, lengths


def _sample_by_longest(spec: ProblemSpec, n: int, rng: np.random.Generator):
    """Operands whose longest length is uniform over the spec's range and the others uniform up to it
    ("longest"), or half the problems so and half drawn by "length" ("length_longest").

    Drawn by length, a list's longest number is almost always near max_digits (of ten numbers of 1-10
    digits, 65 % have a 10-digit one and one in 10^10 only one-digit ones), so lists of short numbers,
    whose written working is shorter, are all but absent from training."""
    task, k, width = get_task(spec.task), spec.n_operands, spec.max_digits
    lo, hi = spec.min_digits, spec.max_digits
    longest = rng.integers(lo, hi + 1, size=n)
    lengths = lo + (rng.random((n, k)) * (longest[:, None] - lo + 1)).astype(np.int64)
    by_length = rng.random(n) < 0.5 if spec.sample_by == "length_longest" else np.zeros(n, dtype=bool)
    lengths[by_length] = rng.integers(lo, hi + 1, size=(int(by_length.sum()), k))
    # Items first (a list's unused slots are its last ones), then the longest length at one used slot.
    lengths = task.choose_items(lengths, np.zeros((n, k, 1), dtype=np.int8), spec.min_items, spec.max_items, rng)
    slot = (rng.random(n) * (lengths > 0).sum(axis=1)).astype(np.int64)
    rows = np.flatnonzero(~by_length)
    lengths[rows, slot[rows]] = longest[rows]
    digits = rng.integers(0, spec.base, size=(n, k, width), dtype=np.int8)
    _fix_leading(digits, lengths, spec.base, rng)
    return digits, lengths


def _fix_leading(digits: np.ndarray, lengths: np.ndarray, base: int, rng: np.random.Generator) -> None:
    """Give every multi-digit number a non-zero leading digit, so its length is the one drawn, and
    clear the digits past its length (in place)."""
    n, k, width = digits.shape
    lead = np.maximum(lengths - 1, 0)[..., None]
    top = np.take_along_axis(digits, lead, axis=2)[..., 0]
    fixed = np.where((lengths > 1) & (top == 0), rng.integers(1, base, size=(n, k)), top)
    np.put_along_axis(digits, lead, fixed[..., None].astype(np.int8), axis=2)
    digits[np.arange(width)[None, None, :] >= lengths[..., None]] = 0


# The last four are drawn by the sort task itself (`Task.draw_kind`): lists with repeated values,
# lists whose values differ in one digit, "ties" (half the one, half the other), and lists whose every
# place moves a larger digit up to two equal ones.
HARD_KINDS = ("repeated", "chains", "hard", "carries", "tie_heavy", "near_ties", "ties", "carried_ties")
TASK_KINDS = ("tie_heavy", "near_ties", "ties", "carried_ties")
KINDS = ("uniform", *HARD_KINDS)


def _hard_operands(spec: ProblemSpec, n: int, rng: np.random.Generator, kind: str = "hard"):
    """Operands that uniform sampling almost never draws.

    - "repeated": each problem's numbers are written with one or two distinct digits, the
      look-alike positions where attention confuses one column with another;
    - "chains" (add, sub): over a random span up to the shorter operand's length, b's digits make
      every column carry (a_i + b_i = base - 1 after a carry in) or borrow (a_i = b_i after a
      borrow in), so one early column decides many answer digits; half the time the chain goes
      on into the longer operand's own digits (base - 1 for a carry, 0 for a borrow), past the
      end of the shorter one (990+99999999);
    - "hard": each problem one of the two, half and half where the task has chains; in sorting,
      half the lists repeated digits and half uniform digits.
    Lengths are drawn as for uniform problems, except in sorting: there half the lists have every
    item as long as their longest (uniform lists almost never do, and then every radix pass orders
    every item), and each later item of those repeats the first a third of the time, so that ties
    (equal items, which must keep their label order) are common, up to lists of equal items.
    """
    task = get_task(spec.task)
    digits, lengths = _sample_operands(spec, n, rng)
    ties = np.zeros(lengths.shape, dtype=bool)
    if task.item_list:
        ties = (rng.random(n) < 0.5)[:, None] & (lengths > 0)
        lengths = np.where(ties, lengths.max(axis=1, keepdims=True), lengths)
        ties[:, 0] = False
        ties &= rng.random(lengths.shape) < 1 / 3
    base, width = spec.base, spec.max_digits
    if kind == "chains" and task.chain is None:
        raise FormatError(f"carry chains apply to {' and '.join(t.name for t in tasks_with_kind('chains'))}, "
                          f"not {spec.task}")
    chain = np.full(n, kind == "chains") if kind != "hard" or task.chain is None else rng.random(n) < 0.5
    # Repeated digits: two distinct digits per problem; each number uses one of them or both.
    first = rng.integers(0, base, size=(n, 1, 1))
    second = (first + rng.integers(1, base, size=(n, 1, 1))) % base
    mixed = rng.random((n, digits.shape[1], 1)) < 0.5
    pick = mixed & (rng.random(digits.shape) < 0.5)
    repeated = np.where(pick, second, first).astype(np.int8)
    uniform = rng.random(n) < 0.5 if task.item_list and kind == "hard" else chain  # rows keeping their digits
    digits = np.where(~uniform[:, None, None], repeated, digits)
    # Leading zeros take the pair's other digit (non-zero, as the two differ), so that the
    # _fix_leading below, which would draw any non-zero digit, keeps them within the pair.
    lead = np.maximum(lengths - 1, 0)[..., None]
    top = np.take_along_axis(digits, lead, axis=2)[..., 0]
    other = np.broadcast_to(np.where(first[..., 0] == 0, second[..., 0], first[..., 0]), top.shape)
    top = np.where((~uniform[:, None]) & (lengths > 1) & (top == 0), other, top)
    np.put_along_axis(digits, lead, top[..., None].astype(np.int8), axis=2)
    if chain.any():
        shorter = lengths[:, :2].min(axis=1)
        start = (rng.random(n) * shorter).astype(np.int64)  # chain columns: start .. shorter - 1
        cols = np.arange(width)[None, :]
        in_chain = chain[:, None] & (cols >= start[:, None]) & (cols < shorter[:, None])
        a = digits[:, 0].astype(np.int64)
        b = np.where(in_chain, (base - 1 - a) if task.chain == "carry" else a, digits[:, 1])
        # The column below the chain starts it: a carry in (a + b >= base) or a borrow in (a < b).
        below = chain & (start > 0)
        rows, col = np.nonzero(below)[0], start[below] - 1
        if task.chain == "carry":
            a[rows, col] = base - 1
            b[rows, col] = rng.integers(1, base, size=len(rows))
        else:
            a[rows, col] = rng.integers(0, base - 1, size=len(rows))
            b[rows, col] = a[rows, col] + 1
        digits[:, 0], digits[:, 1] = a, b
        # Half the chains go on past the shorter operand, through the longer one's digits.
        longer = lengths[:, :2].max(axis=1)
        reach = shorter + (rng.random(n) * (longer - shorter + 1)).astype(np.int64)
        onward = (chain & (rng.random(n) < 0.5))[:, None] & (cols >= shorter[:, None]) & (cols < reach[:, None])
        which = np.argmax(lengths[:, :2], axis=1)  # the longer operand of each problem
        rows, col = np.nonzero(onward)
        digits[rows, which[rows], col] = base - 1 if task.chain == "carry" else 0
    _fix_leading(digits, lengths, base, rng)
    digits[ties] = np.broadcast_to(digits[:, :1], digits.shape)[ties]
    return digits, lengths


def _small_digits(values: np.ndarray, width: int, base: int) -> np.ndarray:
    """[n] non-negative integers -> [n, width] digits, least significant first (cut to `width`)."""
    out = np.zeros((len(values), width), dtype=np.int64)
    values = values.astype(np.int64)
    for i in range(width):
        values, out[:, i] = np.divmod(values, base)
    return out


def _carry_patterns(spec: ProblemSpec, n: int, rng: np.random.Generator):
    """Sparse addition problems built around one carry (the "carry mix" of the small AdderBoard
    models, MicroAdder's four patterns), each with a length L drawn from the spec's digit range:

    - single: one column whose digits are both in the upper half (a carry), every other column of
      the L in the lower half (no carry, and none passed on);
    - chain: a = L nines, b in [1, base^min(L, 3)] (the carry runs through the whole number);
    - place: a random L-digit a plus one non-zero digit at one column;
    - boundary: a = base^L - k for k in [1, 10], b in [1, 20] (just below a power of the base).

    Uniform sampling almost never draws a carry that runs far or one column that alone decides
    the answer's length; these keep the digits around that carry simple, so its effect is easy to
    read off.
    """
    if "carries" not in get_task(spec.task).hard_kinds:
        raise FormatError(f"carry patterns apply to add, not {spec.task}")
    base, width = spec.base, spec.max_digits
    cols = np.arange(width)[None, :]
    length = rng.integers(spec.min_digits, spec.max_digits + 1, size=n)
    inside = cols < length[:, None]  # [n, width]: the columns of an L-digit number
    pattern = rng.integers(0, 4, size=n)
    column = (rng.random(n) * length).astype(np.int64)[:, None]  # one column below L
    half = base // 2
    single = np.where((cols == column)[:, None], rng.integers(half, base, size=(n, 2, width)),
                      rng.integers(0, half, size=(n, 2, width))) * inside[:, None]
    place_a = rng.integers(0, base, size=(n, width)) * inside
    place_a[np.arange(n), length - 1] = rng.integers(1, base, size=n)  # a has L digits
    place_b = np.where(cols == column, rng.integers(1, base, size=(n, 1)), 0)
    nines = (base - 1) * inside
    top = base ** np.minimum(length, 3).astype(np.float64)  # chain: b in [1, base^min(L, 3)]
    chain_b = np.minimum((rng.random(n) * top).astype(np.int64) + 1, base ** min(width, 18) - 1)
    boundary_a = nines - _small_digits(np.minimum(rng.integers(0, 10, size=n), base ** np.minimum(length, 9) - 1),
                                       width, base)  # base^L - k = (base^L - 1) - (k - 1), k in [1, 10]
    small_b = _small_digits(np.where(pattern == 1, chain_b, rng.integers(1, 21, size=n)), width, base)
    a = np.select([pattern[:, None] == 0, pattern[:, None] == 1, pattern[:, None] == 2],
                  [single[:, 0], nines, place_a], boundary_a)
    b = np.select([pattern[:, None] == 0, pattern[:, None] == 2], [single[:, 1], place_b], small_b)
    digits = np.stack([a, b], axis=1).astype(np.int8)
    lengths = digit_count(digits.reshape(2 * n, width)).reshape(n, 2)
    return digits, lengths


def solve_digits(task: str, operands: np.ndarray, lengths: np.ndarray, base: int):
    """Reference answers on digit arrays: (answer [n, La], answer_lengths [n], negative [n])."""
    return get_task(task).solve(operands, lengths, base)


def with_answers(problems: Problems) -> Problems:
    return problems.with_answers()


def with_items_moved(problems: Problems, slots: int, rng: np.random.Generator, spread: bool = False) -> Problems:
    """Each list's items moved together to a run of `slots` item places that starts at a place drawn
    uniformly from those that fit (a list of c items: 0 to slots - c), answers recomputed. With
    `spread`, a list's c items go to c places drawn at random among the `slots` instead, in their order.

    Why: a list's i-th item is labelled and placed as item i, so a model trained on lists of at most
    5 items never sees the labels and places of a longer list. Moved, a short list reads
    'f:31,g:7,h:120' (answered 'gfh'), and every label and place up to `slots` gets trained while no
    list grows. Spread, labels far apart in the alphabet ('c:31,k:7,r:120') stand side by side, as
    they come to in the written rounds of a long list. Training data only: the split is decided on the
    list before it moves."""
    keep = problems.lengths > 0
    count = keep.sum(axis=1)
    if count.max(initial=0) > slots:
        raise FormatError(f"lists of {int(count.max())} items cannot move within {slots} item places")
    n, k, width = problems.operands.shape
    if spread:  # the c places of a row's smallest c random keys, in order: a uniform c-subset
        drawn = np.argsort(rng.random((n, slots)), axis=1)
        chosen = np.sort(np.where(np.arange(slots)[None, :] < count[:, None], drawn, slots), axis=1)
        place = np.take_along_axis(chosen, np.maximum(keep.cumsum(axis=1) - 1, 0), axis=1)
    else:
        start = (rng.random(len(problems)) * (slots - count + 1)).astype(np.int64)
        place = start[:, None] + keep.cumsum(axis=1) - 1  # a row's j-th item goes to place start + j
    rows = np.broadcast_to(np.arange(n)[:, None], (n, k))
    operands = np.zeros((n, slots, width), dtype=problems.operands.dtype)
    lengths = np.zeros((n, slots), dtype=problems.lengths.dtype)
    operands[rows[keep], place[keep]] = problems.operands[keep]
    lengths[rows[keep], place[keep]] = problems.lengths[keep]
    return Problems(problems.task, problems.base, operands, lengths).with_answers()


# -- the split ----------------------------------------------------------------------------
def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK64
        x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK64
        x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK64
        return x ^ (x >> np.uint64(31))


def problem_hash(problems: Problems) -> np.ndarray:
    """A 64-bit hash per problem of (task, operand values); independent of base and format."""
    n, k, width = problems.operands.shape
    base = np.uint64(problems.base)
    fingerprints = []
    for p in _PRIMES:
        v = np.zeros((n, k), dtype=np.uint64)
        for i in range(width - 1, -1, -1):
            v = (v * base + problems.operands[:, :, i].astype(np.uint64)) % p
        fingerprints.append(v)
    h = np.full(n, get_task(problems.task).hash_id, dtype=np.uint64)
    for j in range(k):
        present = (problems.lengths[:, j] > 0).astype(np.uint64)
        word = (fingerprints[0][:, j] << np.uint64(32)) | (fingerprints[1][:, j] << np.uint64(1)) | present
        # Absent sort slots leave the hash alone, so 'a:3,b:5' hashes the same in any batch width.
        h = np.where(present.astype(bool), _splitmix64(h ^ word), h)
    return h


def split_of(problems: Problems, test_fraction: float = DEFAULT_TEST_FRACTION) -> np.ndarray:
    """'test' or 'train' for each problem, as a boolean array (True = test)."""
    threshold = np.uint64(int(test_fraction * 2**32))
    return (problem_hash(problems) >> np.uint64(32)) < threshold


def sample(spec: ProblemSpec, n: int, rng: np.random.Generator, split: str | None = "train",
           test_fraction: float = DEFAULT_TEST_FRACTION, kind: str = "uniform") -> Problems:
    """n problems with answers, all from `split` ('train', 'test', or None for no filter).

    `kind` other than "uniform" draws the hard cases of `_hard_operands` (repeated digits,
    carry and borrow chains, or both), for "carries" the sparse patterns of `_carry_patterns`, and
    for a kind in TASK_KINDS the task's own `draw_kind` (sorting: tie-heavy and near-tie lists).
    """
    if kind not in KINDS:
        raise FormatError(f"unknown problem kind {kind!r}; use one of {KINDS}")
    task = get_task(spec.task)
    if kind in TASK_KINDS and kind not in task.hard_kinds:
        owners = " and ".join(t.title for t in tasks_with_kind(kind))
        raise FormatError(f"problem kind {kind!r} applies to {owners}, not {task.title}")
    if split not in (*SPLITS, None):
        raise FormatError(f"unknown split {split!r}; use one of {SPLITS}")
    chunks, have = [], 0
    for _ in range(1000):
        count = max(n - have, 16) + (n - have) // 4
        if kind == "uniform":
            digits, lengths = _sample_operands(spec, count, rng)
        elif kind == "carries":
            digits, lengths = _carry_patterns(spec, count, rng)
        elif kind in TASK_KINDS:
            digits, lengths = task.draw_kind(kind, spec, count, rng)
        else:
            digits, lengths = _hard_operands(spec, count, rng, kind)
        batch = Problems(spec.task, spec.base, digits, lengths)
        if split is not None:
            keep = split_of(batch, test_fraction) == (split == "test")
            batch = batch.select(keep)
        chunks.append(batch)
        have += len(batch)
        if have >= n:
            break
    else:
        raise FormatError(f"could not draw {n} {split} problems for {spec}; the range is too small for that split")
    merged = Problems(spec.task, spec.base, np.concatenate([c.operands for c in chunks])[:n],
                      np.concatenate([c.lengths for c in chunks])[:n])
    return with_answers(merged)


def held_out_problems(spec: ProblemSpec, n: int, seed: int = 1234,
                      test_fraction: float = DEFAULT_TEST_FRACTION) -> Problems:
    """n problems (with answers) from the test split, which training never draws, seeded by `seed`."""
    return sample(spec, n, np.random.default_rng(seed), split="test", test_fraction=test_fraction)


def example_problem(fmt: NumberFormat, max_digits: int) -> str:
    """A fixed problem in `fmt` with operands of `max_digits` digits (for model cards and the Space)."""
    n, base = max(1, max_digits), fmt.base
    if base == 10:
        reps = -(-n // 10)
        a, b = int(("1234567890" * reps)[:n]), int(("9876543210" * reps)[:n])
    else:  # two n-digit numbers in the model's base, written in decimal as users type them
        low, high = base ** (n - 1) if n > 1 else 0, base**n - 1
        a, b = low + (high - low) // 3, max(low, high - high // 7)
    return fmt.task_rules.example(a, b, fmt.max_items)


def reference_answer(problem: str, fmt: NumberFormat) -> str:
    """The exact answer to a typed problem, as the data labels it (to check a model's answer, never to make one)."""
    return fmt.task_rules.reference([int(v) for v in parse_problem(problem, fmt)])


def count_of_length(base: int, length: int) -> int:
    """How many numbers have exactly `length` digits (0 counts as a one-digit number)."""
    return base if length == 1 else (base - 1) * base ** (length - 1)
