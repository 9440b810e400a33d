"""The problem generator: exact answers, the length distribution, and the hash split."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hf_arith.data.formatting import (
    FormatError,
    NumberFormat,
    Problems,
    digits_to_int,
    int_to_digits,
    problems_from_ints,
    render,
)
from hf_arith.data.problems import (
    ProblemSpec,
    problem_hash,
    sample,
    solve_digits,
    split_of,
    with_answers,
    with_items_moved,
)

ARITH = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b}


def _answer_ints(problems: Problems) -> list[int]:
    out = []
    for row, n, neg in zip(problems.answer, problems.answer_lengths, problems.negative, strict=True):
        value = digits_to_int(row[:n], problems.base)
        out.append(-value if neg else value)
    return out


def _keys(problems: Problems) -> set[tuple[int, ...]]:
    return {tuple(v) for v in problems.operand_values()}


# -- determinism ---------------------------------------------------------------------------
@pytest.mark.parametrize("task", ["add", "sub", "mul", "sort"])
def test_sample_is_deterministic_for_a_seed(task):
    spec = ProblemSpec(task=task, min_digits=1, max_digits=8)
    first = sample(spec, 300, np.random.default_rng(7))
    again = sample(spec, 300, np.random.default_rng(7))
    other = sample(spec, 300, np.random.default_rng(8))
    for name in ("operands", "lengths", "answer", "answer_lengths", "negative"):
        np.testing.assert_array_equal(getattr(first, name), getattr(again, name))
    assert first.to_text() == again.to_text()
    assert first.to_text() != other.to_text()
    assert len(first) == 300


# -- exact answers ---------------------------------------------------------------------------
@pytest.mark.parametrize("base", [2, 10, 16, 36])
@pytest.mark.parametrize("task", ["add", "sub", "mul"])
def test_answers_match_python_ints(task, base):
    spec = ProblemSpec(task=task, min_digits=1, max_digits=30, base=base)
    problems = sample(spec, 200, np.random.default_rng(base), split=None)
    values = problems.operand_values()
    expected = [ARITH[task](a, b) for a, b in values]
    assert _answer_ints(problems) == expected
    # The digit count is exact (no leading zeros), and the decimal text agrees.
    assert [len(int_to_digits(abs(v), base)) for v in expected] == problems.answer_lengths.tolist()
    assert problems.answer_text() == [str(v) for v in expected]
    assert problems.to_text() == [f"{a}{'+-*'[['add', 'sub', 'mul'].index(task)]}{b}" for a, b in values]


def test_answers_at_the_edges():
    """Carries through every digit, zero results, the largest products, a - a = 0 (never '-0')."""
    rows = [[99999, 1], [0, 0], [999, 999], [1, 999], [12345, 12345], [10**29 - 1, 10**29 - 1]]
    for task, fn in ARITH.items():
        problems = with_answers(problems_from_ints(task, rows, 10))
        assert _answer_ints(problems) == [fn(a, b) for a, b in rows]
        assert "-0" not in problems.answer_text()


@pytest.mark.parametrize("max_digits", [1, 4])
def test_sort_answer_is_a_stable_python_sort(max_digits):
    # max_digits=1 forces many equal values, so the tie order is exercised.
    spec = ProblemSpec(task="sort", min_digits=1, max_digits=max_digits, base=10, min_items=2, max_items=7)
    problems = sample(spec, 400, np.random.default_rng(3), split=None)
    values = problems.operand_values()
    for row, n, vals in zip(problems.answer, problems.answer_lengths, values, strict=True):
        assert n == len(vals)
        assert row[:n].tolist() == sorted(range(len(vals)), key=lambda i: vals[i])
    labels = problems.answer_text()
    assert labels[0] == "".join("abcdefg"[i] for i in sorted(range(len(values[0])), key=lambda i: values[0][i]))
    assert any(len(set(v)) < len(v) for v in values)  # ties did occur


def test_sort_with_hand_made_ties():
    problems = with_answers(problems_from_ints("sort", [[5, 3, 5, 1], [7, 7]], 10))
    assert problems.answer_text() == ["dbac", "ab"]


# -- lengths and leading digits -----------------------------------------------------------------
@pytest.mark.parametrize("task,base", [("add", 10), ("mul", 2), ("sub", 16), ("sort", 36)])
def test_leading_digit_nonzero_and_lengths_as_drawn(task, base):
    spec = ProblemSpec(task=task, min_digits=2, max_digits=9, base=base, min_items=2, max_items=6)
    problems = sample(spec, 500, np.random.default_rng(11), split=None)
    lengths = problems.lengths
    present = lengths > 0
    assert (lengths[present] >= 2).all() and (lengths[present] <= 9).all()
    top = np.take_along_axis(problems.operands, np.maximum(lengths - 1, 0)[..., None], axis=2)[..., 0]
    assert (top[present] != 0).all()
    beyond = np.arange(problems.operands.shape[2])[None, None, :] >= lengths[..., None]
    assert (problems.operands[beyond] == 0).all()
    for row_values, row_lengths in zip(problems.operand_values(), lengths, strict=True):
        assert [len(int_to_digits(v, base)) for v in row_values] == row_lengths[row_lengths > 0].tolist()


def test_one_digit_operands_may_be_zero():
    spec = ProblemSpec(task="add", min_digits=1, max_digits=1)
    values = np.array(sample(spec, 2000, np.random.default_rng(0), split=None).operand_values())
    assert set(np.unique(values)) == set(range(10))


def _chi_square(counts: np.ndarray) -> float:
    expected = counts.sum() / counts.size
    return float(((counts - expected) ** 2 / expected).sum())


@pytest.mark.parametrize("split", [None, "train"])
def test_length_pairs_are_uniform(split):
    spec = ProblemSpec(task="add", min_digits=1, max_digits=4)
    problems = sample(spec, 16_000, np.random.default_rng(5), split=split)
    counts = np.zeros((4, 4))
    np.add.at(counts, (problems.lengths[:, 0] - 1, problems.lengths[:, 1] - 1), 1)
    # 15 degrees of freedom: the 99.99th percentile is about 44. Sampling values uniformly
    # (or lengths from values) would put ~90% of operands at 4 digits and score in the thousands.
    assert _chi_square(counts) < 44, counts
    # And the bound is tight enough that moving 30% of the (1,1) mass to (4,4) fails it.
    tilted = counts.copy()
    tilted[3, 3] *= 1.3
    tilted[0, 0] *= 0.7
    assert _chi_square(tilted) > 44


def test_sort_item_counts_are_uniform():
    spec = ProblemSpec(task="sort", min_digits=1, max_digits=3, min_items=2, max_items=6)
    problems = sample(spec, 10_000, np.random.default_rng(2), split=None)
    counts = np.bincount((problems.lengths > 0).sum(axis=1), minlength=7)[2:]
    assert _chi_square(counts) < 25, counts  # 4 degrees of freedom


# -- the split ----------------------------------------------------------------------------------
def _all_small_additions() -> Problems:
    return problems_from_ints("add", [[a, b] for a, b in itertools.product(range(100), repeat=2)], 10)


def test_exhaustive_small_space_train_and_test_never_overlap():
    everything = _all_small_additions()
    is_test = split_of(everything)
    test_keys = {tuple(k) for k, t in zip(everything.operand_values(), is_test, strict=True) if t}
    assert 0.07 < len(test_keys) / len(everything) < 0.13

    spec = ProblemSpec(task="add", min_digits=1, max_digits=2)
    train = sample(spec, 5000, np.random.default_rng(0), split="train")
    test = sample(spec, 1000, np.random.default_rng(1), split="test")
    train_keys, sampled_test_keys = _keys(train), _keys(test)
    assert not train_keys & test_keys
    assert sampled_test_keys <= test_keys
    assert not train_keys & sampled_test_keys
    assert not split_of(train).any()
    assert split_of(test).all()
    # Lengths are uniform, so ~1/4 of the test draws are 1+1 digit problems: all ~10 of those show up.
    one_digit = {k for k in test_keys if max(k) < 10}
    assert one_digit and one_digit <= sampled_test_keys


@pytest.mark.parametrize("task", ["add", "sub", "mul", "sort"])
def test_sampled_splits_agree_with_split_of(task):
    spec = ProblemSpec(task=task, min_digits=1, max_digits=6, min_items=2, max_items=4)
    train = sample(spec, 2000, np.random.default_rng(0), split="train", test_fraction=0.25)
    test = sample(spec, 500, np.random.default_rng(0), split="test", test_fraction=0.25)
    assert not split_of(train, 0.25).any()
    assert split_of(test, 0.25).all()
    assert not _keys(train) & _keys(test)


@pytest.mark.parametrize("task", ["add", "sub", "mul"])
def test_split_is_the_same_in_base_10_and_base_16(task):
    rows = [[a, b] for a, b in np.random.default_rng(4).integers(0, 10**6, size=(3000, 2)).tolist()]
    rows += [[0, 0], [15, 16], [255, 1], [10**20, 3]]
    decimal = problems_from_ints(task, rows, 10)
    hexadecimal = problems_from_ints(task, rows, 16)
    np.testing.assert_array_equal(problem_hash(decimal), problem_hash(hexadecimal))
    np.testing.assert_array_equal(split_of(decimal), split_of(hexadecimal))
    assert 0 < split_of(decimal).sum() < len(rows)
    # Extra zero digit columns (a wider batch) do not change the hash either.
    wide = Problems(task, 10, np.pad(decimal.operands, ((0, 0), (0, 0), (0, 7))), decimal.lengths)
    np.testing.assert_array_equal(problem_hash(wide), problem_hash(decimal))


def test_split_depends_on_the_task():
    rows = [[a, b] for a, b in np.random.default_rng(9).integers(0, 1000, size=(2000, 2)).tolist()]
    add, mul = split_of(problems_from_ints("add", rows, 10)), split_of(problems_from_ints("mul", rows, 10))
    assert (add != mul).any()


def test_sort_split_does_not_depend_on_item_slots():
    spec = ProblemSpec(task="sort", min_digits=1, max_digits=3, min_items=2, max_items=5)
    sampled = sample(spec, 2000, np.random.default_rng(0), split=None)
    reparsed = [split_of(problems_from_ints("sort", [v], 10))[0] for v in sampled.operand_values()]
    np.testing.assert_array_equal(split_of(sampled), np.array(reparsed))


def test_moved_lists_keep_their_items_and_answer_with_the_labels_of_their_new_places():
    """with_items_moved puts a list's items, in order, at a run of places that starts anywhere it fits;
    the answer is the same order of items under their new labels, and the prompt opens with no comma."""
    spec = ProblemSpec(task="sort", min_digits=1, max_digits=3, min_items=2, max_items=5)
    lists = sample(spec, 3000, np.random.default_rng(0), split=None, kind="ties")
    moved = with_items_moved(lists, 12, np.random.default_rng(1))
    assert moved.operands.shape[1] == 12 and moved.operand_values() == lists.operand_values()
    count = (lists.lengths > 0).sum(axis=1)
    start = (moved.lengths > 0).argmax(axis=1)
    assert ((moved.lengths > 0).sum(axis=1) == count).all() and (start + count <= 12).all()
    assert set(start[count == 2].tolist()) == set(range(11))  # every start that fits is drawn
    np.testing.assert_array_equal(moved.answer_lengths, lists.answer_lengths)
    np.testing.assert_array_equal(np.where(np.arange(12) < count[:, None], moved.answer, 0),
                                  np.where(np.arange(12) < count[:, None],
                                           np.pad(lists.answer, ((0, 0), (0, 7))) + start[:, None], 0))
    fmt = NumberFormat(task="sort", max_items=12, reverse_operands=True, end_token=True, scratchpad="radix_passes")
    vocab = fmt.vocab()
    ids, lengths, _ = render(moved.select(np.arange(3)), fmt, with_answer=False)
    texts = ["".join(vocab[i] for i in row[:n]) for row, n in zip(ids, lengths)]
    assert all(t[0] == "abcdefghijkl"[s] and t[1] == ":" and ",:" not in t for t, s in zip(texts, start[:3]))
    with pytest.raises(FormatError, match="cannot move within 4 item places"):
        with_items_moved(lists, 4, np.random.default_rng(1))


def test_spread_lists_keep_their_items_in_order_at_places_drawn_apart():
    """with_items_moved(spread=True): a list's items, in order, at random places among the slots, so items
    once neighbours end up far apart; the answer names the same items under their new labels."""
    spec = ProblemSpec(task="sort", min_digits=1, max_digits=3, min_items=2, max_items=5)
    lists = sample(spec, 3000, np.random.default_rng(0), split=None, kind="ties")
    moved = with_items_moved(lists, 12, np.random.default_rng(1), spread=True)
    assert moved.operand_values() == lists.operand_values()
    count = (lists.lengths > 0).sum(axis=1)
    np.testing.assert_array_equal((moved.lengths > 0).sum(axis=1), count)
    places = [np.flatnonzero(row) for row in moved.lengths > 0]
    gaps = {int(g) for p in places for g in np.diff(p)}
    assert gaps == set(range(1, 12))  # neighbours 1 to 11 places apart
    assert {int(p[0]) for p in places} == set(range(11)) and {int(p[-1]) for p in places} == set(range(1, 12))
    for p, row, n, answer in zip(places, lists.answer, count, moved.answer):
        np.testing.assert_array_equal(answer[:n], p[row[:n]])


@pytest.mark.parametrize("fraction", [0.1, 0.3])
def test_test_fraction_is_roughly_respected(fraction):
    spec = ProblemSpec(task="add", min_digits=1, max_digits=10)
    problems = sample(spec, 20_000, np.random.default_rng(0), split=None)
    assert abs(split_of(problems, fraction).mean() - fraction) < 0.015


def test_bad_arguments_raise_format_errors():
    with pytest.raises(FormatError, match="unknown task"):
        ProblemSpec(task="div")
    with pytest.raises(FormatError, match="digit range"):
        ProblemSpec(min_digits=3, max_digits=2)
    with pytest.raises(FormatError, match="base"):
        ProblemSpec(base=37)
    with pytest.raises(FormatError, match="unknown split"):
        sample(ProblemSpec(), 5, np.random.default_rng(0), split="validation")
    with pytest.raises(FormatError, match="unknown task"):
        solve_digits("div", np.zeros((1, 2, 1), dtype=np.int8), np.ones((1, 2), dtype=np.int64), 10)


# -- hard cases (data.hard_fraction) -------------------------------------------------------------
def _longest_carry_chain(a: int, b: int, base: int = 10) -> int:
    """Most consecutive columns of a + b that carry only because the column below did (digit sum
    base - 1): the answer digits there all depend on one column further down."""
    longest = run = carry = 0
    while a or b or carry:
        column = a % base + b % base
        run = run + 1 if carry and column == base - 1 else 0
        carry = int(column + carry >= base)
        longest = max(longest, run)
        a, b = a // base, b // base
    return longest


def _distinct_digits(values: list[int]) -> int:
    return len(set("".join(str(v) for v in values)))


@pytest.mark.parametrize("task,base", [("add", 10), ("sub", 16), ("mul", 10), ("sort", 10)])
def test_hard_problems_are_well_formed_with_exact_answers(task, base):
    spec = ProblemSpec(task=task, min_digits=1, max_digits=12, base=base, min_items=2, max_items=5)
    problems = sample(spec, 400, np.random.default_rng(5), kind="hard")
    assert not split_of(problems).any()  # still the training split
    lengths = problems.lengths
    for row_values, row_lengths in zip(problems.operand_values(), lengths, strict=True):
        assert [len(int_to_digits(v, base)) for v in row_values] == row_lengths[row_lengths > 0].tolist()
    if task != "sort":
        assert _answer_ints(problems) == [ARITH[task](a, b) for a, b in problems.operand_values()]
    again = sample(spec, 400, np.random.default_rng(5), kind="hard")
    assert problems.to_text() == again.to_text()


def test_hard_addition_is_repeated_digits_and_long_carry_chains():
    spec = ProblemSpec(task="add", min_digits=8, max_digits=10)
    rng = np.random.default_rng(0)
    hard, uniform = (sample(spec, 2000, rng, kind=k).operand_values() for k in ("hard", "uniform"))

    def repeated(rows):
        return np.mean([_distinct_digits(r) <= 2 for r in rows])

    def long_chains(rows):
        return np.mean([_longest_carry_chain(a, b) >= 4 for a, b in rows])

    assert repeated(uniform) < 0.01 and 0.4 < repeated(hard) < 0.6
    assert long_chains(uniform) < 0.005 and long_chains(hard) > 0.2


def test_hard_multiplication_is_all_repeated_digits():
    problems = sample(ProblemSpec(task="mul", min_digits=1, max_digits=6), 500, np.random.default_rng(1), kind="hard")
    assert all(_distinct_digits(r) <= 2 for r in problems.operand_values())


def test_each_hard_kind_alone():
    spec = ProblemSpec(task="add", min_digits=6, max_digits=10)
    repeated = sample(spec, 500, np.random.default_rng(2), kind="repeated", split="test").operand_values()
    chains = sample(ProblemSpec(task="add", min_digits=2, max_digits=10), 500, np.random.default_rng(2),
                    kind="chains").operand_values()
    assert all(_distinct_digits(r) <= 2 for r in repeated)
    assert np.mean([_longest_carry_chain(a, b) >= 3 for a, b in chains]) > 0.3
    # Some carries run on past the end of the shorter operand, through the longer one's nines.
    def carried_past_shorter(a: int, b: int) -> int:
        shorter, column, carry, past = min(len(str(a)), len(str(b))), 0, 0, 0
        while a or b or carry:
            carry = int(a % 10 + b % 10 + carry >= 10)
            past += carry and column >= shorter
            a, b, column = a // 10, b // 10, column + 1
        return past

    assert np.mean([carried_past_shorter(a, b) >= 2 for a, b in chains]) > 0.1
    with pytest.raises(FormatError, match="carry chains apply to add and sub, not mul"):
        sample(ProblemSpec(task="mul"), 10, np.random.default_rng(0), kind="chains")
    with pytest.raises(FormatError, match="unknown problem kind 'easy'"):
        sample(spec, 10, np.random.default_rng(0), kind="easy")


@pytest.mark.parametrize("low, high", [(1, 3), (9, 10)])
def test_carry_patterns_are_sparse_problems_around_one_carry(low, high):
    spec = ProblemSpec(task="add", min_digits=low, max_digits=high)
    problems = sample(spec, 2000, np.random.default_rng(4), kind="carries")
    rows = problems.operand_values()
    assert _answer_ints(problems) == [a + b for a, b in rows]
    assert max(max(a, b) for a, b in rows) < 10 ** high
    assert not split_of(problems).any()  # still the training split

    def carries(a: int, b: int) -> int:
        count = carry = 0
        while a or b:
            carry = int(a % 10 + b % 10 + carry >= 10)
            count += carry
            a, b = a // 10, b // 10
        return count

    counts = [carries(a, b) for a, b in rows]
    nines = [a for a, _ in rows if set(str(a)) == {"9"}]
    # A quarter of the problems run a carry through a number of nines (the chain pattern).
    assert 0.2 < len(nines) / len(rows) < 0.35
    if low == 9:  # sparse: uniform 10-digit operands carry in about 4.5 columns, most of these in one
        assert np.median([c for (a, _), c in zip(rows, counts) if a not in nines]) <= 1
        # "single": one carry, every other column's digits below 5
        single = [(a, b) for (a, b), c in zip(rows, counts) if c == 1 and sum(d >= "5" for d in str(a) + str(b)) == 2]
        assert len(single) > 0.15 * len(rows)
        assert np.mean([max(a, b) >= 10 ** (low - 1) for a, b in rows]) > 0.9  # full-length operands
    with pytest.raises(FormatError, match="carry patterns apply to add, not sub"):
        sample(ProblemSpec(task="sub"), 10, np.random.default_rng(0), kind="carries")


def test_hard_sorting_lists_are_full_of_ties():
    spec = ProblemSpec(task="sort", min_digits=1, max_digits=6, min_items=2, max_items=5)
    hard, uniform = (sample(spec, 4000, np.random.default_rng(3), kind=k) for k in ("hard", "uniform"))

    def share(problems, test):
        return np.mean([test(values) for values in problems.operand_values()])

    def has_tie(values):
        return len(set(values)) < len(values)

    def all_equal_long(values):
        return len(values) >= 4 and len(set(values)) == 1 and values[0] >= 10**5

    assert share(uniform, has_tie) < 0.1 and share(hard, has_tie) > 0.4
    assert share(uniform, all_equal_long) == 0 and share(hard, all_equal_long) > 0.001


TIE_SPEC = ProblemSpec(task="sort", min_digits=1, max_digits=6, min_items=2, max_items=5)


def _label_order(values):
    """Labels by value, equal values by label: the order the answer must have, written out."""
    order = []
    for value in sorted(set(values)):
        order += [i for i, v in enumerate(values) if v == value]  # ascending label among equals
    return "".join("abcdefgh"[i] for i in order)


def _digit_places_apart(x: int, y: int) -> int:
    return sum(a != b for a, b in zip(str(x), str(y)))


@pytest.mark.parametrize("split", ["test", "train"])
def test_tie_heavy_lists_repeat_values_and_answers_order_equal_values_by_label(split):
    problems = sample(TIE_SPEC, 2000, np.random.default_rng(5), split=split, kind="tie_heavy")
    assert (split_of(problems) == (split == "test")).all()  # held out when asked, never when not
    values = problems.operand_values()
    assert all(len(set(v)) < len(v) for v in values)  # every list has two equal items or more
    assert {len(v) for v in values} == {2, 3, 4, 5}
    assert {len(str(x)) for v in values for x in v} == set(range(1, 7))
    assert np.mean([len(set(v)) > 1 for v in values]) > 0.3  # not only lists of one value
    one_length = [len(set(v)) > 1 and len({len(str(x)) for x in v}) == 1 for v in values]
    assert np.mean(one_length) > 0.15  # distinct values of one length, as in 'a:795524,b:795524,c:811860'
    assert problems.answer_text() == [_label_order(v) for v in values]
    # A tie of three: 'a:7,b:3,c:7,d:7,e:3' -> 'beacd', labels kept in order among equals.
    assert any(len(v) - len(set(v)) >= 2 for v in values)


def test_near_tie_lists_differ_in_one_digit():
    problems = sample(TIE_SPEC, 2000, np.random.default_rng(6), split="test", kind="near_ties")
    assert split_of(problems).all()
    values = problems.operand_values()
    assert all(len({len(str(x)) for x in v}) == 1 for v in values)  # one length per list
    apart = [max(_digit_places_apart(x, y) for x in v for y in v) for v in values]
    assert max(apart) == 2  # each item changes one place of the list's base number
    assert np.mean([a == 1 for a in apart]) > 0.4  # half the lists change the same place in every item
    long_values = [v for v in values if v[0] >= 10**4]
    assert np.mean([len(set(v)) > 1 for v in long_values]) > 0.9  # near ties, mostly not equal
    assert problems.answer_text() == [_label_order(v) for v in values]


def test_ties_kind_draws_both_and_only_for_sorting():
    values = sample(TIE_SPEC, 2000, np.random.default_rng(7), split="train", kind="ties").operand_values()
    mixed_lengths = np.mean([len({len(str(x)) for x in v}) > 1 for v in values])
    assert 0.05 < mixed_lengths < 0.3  # tie-heavy lists (lengths drawn per value) among near ties (one length)
    assert all(len(set(v)) < len(v) or len({len(str(x)) for x in v}) == 1 for v in values)
    for kind in ("tie_heavy", "near_ties", "ties"):
        with pytest.raises(FormatError, match=f"problem kind '{kind}' applies to sorting, not addition"):
            sample(ProblemSpec(task="add"), 10, np.random.default_rng(0), kind=kind)


def test_sampling_by_value_weights_each_length_by_how_many_values_have_it():
    spec = ProblemSpec("add", 1, 4, sample_by="value")
    lengths = sample(spec, 40_000, np.random.default_rng(0), split=None).lengths.ravel()
    share = np.bincount(lengths, minlength=5)[1:] / lengths.size
    # 10, 90, 900 and 9,000 of the 10,000 values below 10^4 have 1, 2, 3 and 4 digits.
    assert share == pytest.approx([0.001, 0.009, 0.09, 0.9], abs=0.006)
    by_length = sample(ProblemSpec("add", 1, 4), 40_000, np.random.default_rng(0), split=None).lengths.ravel()
    assert np.bincount(by_length, minlength=5)[1:] / by_length.size == pytest.approx([0.25] * 4, abs=0.01)
    mixed = sample(ProblemSpec("add", 1, 4, sample_by="mixed"), 40_000, np.random.default_rng(0), split=None).lengths.ravel()
    # half the problems by value, half by length: (value share + 0.25) / 2 per length
    assert np.bincount(mixed, minlength=5)[1:] / mixed.size == pytest.approx([0.1255, 0.1295, 0.17, 0.575], abs=0.01)
    with pytest.raises(FormatError, match="sample_by"):
        ProblemSpec("add", 1, 4, sample_by="digits")


def test_sampling_by_longest_makes_every_longest_length_and_list_size_as_common():
    spec = ProblemSpec("sort", 1, 10, min_items=2, max_items=10, sample_by="longest")
    problems = sample(spec, 20_000, np.random.default_rng(0), split=None)
    lengths = problems.lengths
    longest, items = lengths.max(axis=1), (lengths > 0).sum(axis=1)
    assert np.bincount(longest, minlength=11)[1:] / len(longest) == pytest.approx([0.1] * 10, abs=0.01)
    assert np.bincount(items, minlength=11)[2:] / len(items) == pytest.approx([1 / 9] * 9, abs=0.01)
    # Lists of one-digit numbers, one in 10^10 of ten items drawn by length, are a tenth of them here.
    assert ((longest == 1) & (items == 10)).sum() > 100
    # Every value has the length drawn for it (no leading zero), and the longest item is any item.
    for values, row in zip(problems.operand_values()[:500], lengths[:500]):
        assert [len(str(v)) for v in values] == row[row > 0].tolist()
    ten = lengths[items == 10]
    assert (ten == ten.max(axis=1, keepdims=True)).mean(axis=0).min() > 0.1  # each slot often a longest
    half = sample(ProblemSpec("sort", 1, 10, min_items=2, max_items=10, sample_by="length_longest"), 20_000,
                  np.random.default_rng(1), split=None).lengths.max(axis=1)
    by_length = sample(ProblemSpec("sort", 1, 10, min_items=2, max_items=10), 20_000,
                       np.random.default_rng(1), split=None).lengths.max(axis=1)
    share = lambda x: np.bincount(x, minlength=11)[1:] / len(x)  # noqa: E731
    assert share(half) == pytest.approx((share(by_length) + 0.1) / 2, abs=0.015)
    pair = sample(ProblemSpec("add", 3, 6, sample_by="longest"), 20_000, np.random.default_rng(2), split=None).lengths
    assert pair.min() >= 3 and pair.max() <= 6
    assert np.bincount(pair.max(axis=1), minlength=7)[3:] / len(pair) == pytest.approx([0.25] * 4, abs=0.015)


def test_carried_tie_lists_move_a_larger_digit_up_to_two_equal_ones_at_every_place():
    from hf_arith.data.tasks.sort import transposition_rounds

    problems = sample(TIE_SPEC, 400, np.random.default_rng(8), split="train", kind="carried_ties")
    values = problems.operand_values()
    assert problems.answer_text() == [_label_order(v) for v in values]
    assert all(len({len(str(x)) for x in v}) == 1 for v in values)  # one length per list
    items, longest = (problems.lengths > 0).sum(axis=1), problems.lengths.max(axis=1)
    start = np.broadcast_to(np.arange(problems.lengths.shape[1]), problems.lengths.shape)
    lines = [start] + [order for order, _ in transposition_rounds(problems)]
    rounds = int(items.max())
    for row in np.flatnonzero(items >= 4):
        for place in range(longest[row]):
            # the line a place's rounds start from, and the round that should meet big, x, (y,) t, t
            first = place * rounds
            before = lines[first + (items[row] >= 5)][row]
            after = lines[first + 1 + (items[row] >= 5)][row]
            slot = 2 + (items[row] >= 5)  # the pair (slot, slot + 1) ties, a larger digit moved into slot - 1
            digit = problems.operands[row, before, place].astype(int)
            assert digit[slot] == digit[slot + 1] and digit[slot - 2] > digit[slot]
            assert after[slot - 1] == before[slot - 2] and list(after[slot: slot + 2]) == list(before[slot: slot + 2])
    assert (items >= 4).mean() > 0.4
    with pytest.raises(FormatError, match="problem kind 'carried_ties' applies to sorting, not addition"):
        sample(ProblemSpec(task="add"), 10, np.random.default_rng(0), kind="carried_ties")
