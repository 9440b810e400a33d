"""The endless training stream: fixed-length rows, answer-only labels, per-rank data, train split only."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from hf_arith.data.formatting import EOS_TOKEN, PROMPT_END, NumberFormat, Problems, decode_answer, problems_from_ints
from hf_arith.data.problems import ProblemSpec, split_of, with_answers
from hf_arith.data.streaming import (
    CurriculumState,
    ProblemStream,
    encode_examples,
    stack_examples,
    worst_case_length,
)
from hf_arith.models import IGNORE_INDEX
from hf_arith.training.recipe import RecipeError, check_recipe, load_recipe


def take(stream, n: int) -> list[dict]:
    return list(itertools.islice(iter(stream), n))


def prompt_operands(row: dict, fmt: NumberFormat) -> list[int]:
    """Read the operands back from a row's prompt tokens (any task)."""
    vocab = fmt.vocab()
    n = int(row["attention_mask"].sum()) if "attention_mask" in row else len(row["input_ids"])
    tokens = [vocab[i] for i in row["input_ids"][:n]]
    prompt = "".join(tokens[: tokens.index(PROMPT_END)])
    if fmt.task == "sort":
        numbers = [item.split(":")[1] for item in prompt.split(",")]
    else:
        numbers = prompt.split({"add": "+", "sub": "-", "mul": "*"}[fmt.task])
    return [int(n[::-1] if fmt.reverse_operands else n, fmt.base) for n in numbers]


@pytest.mark.parametrize("task,settings", [
    ("add", dict()),
    ("sub", dict(reverse_answer=False)),
    ("mul", dict(end_token=False, operand_width=4, answer_width=8)),
    ("sort", dict(reverse_operands=False)),
    ("add", dict(base=16, end_token=False)),
])
def test_rows_are_fixed_length_with_answer_only_labels(task, settings):
    spec = ProblemSpec(task=task, min_digits=1, max_digits=4, base=settings.get("base", 10), max_items=4)
    fmt = NumberFormat(task=task, **settings)
    stream = ProblemStream(spec, fmt, seed=3, chunk_size=64)
    rows = take(stream, 150)  # spans three chunks
    length = worst_case_length(spec, fmt)
    assert stream.length == length
    eq_id, eos_id = fmt.token_id(PROMPT_END), fmt.token_id(EOS_TOKEN)
    vocab = fmt.vocab()
    # Only a format with fixed widths and no end token never pads; its rows carry no mask.
    assert stream.with_mask == (task != "mul")
    for row in rows:
        assert set(row) == {"input_ids", "labels"} | ({"attention_mask"} if stream.with_mask else set())
        assert all(row[k].shape == (length,) and row[k].dtype == np.int64 for k in row)
        mask = row.get("attention_mask", np.ones(length, dtype=np.int64))
        n = int(mask.sum())
        assert mask[:n].all() and not mask[n:].any()
        answer_start = int(np.argmax(row["input_ids"] == eq_id)) + 1
        labelled = row["labels"] != IGNORE_INDEX
        expected = np.zeros(length, dtype=bool)
        expected[answer_start:n] = True
        np.testing.assert_array_equal(labelled, expected)
        np.testing.assert_array_equal(row["labels"][labelled], row["input_ids"][labelled])
        assert (row["labels"][labelled][-1] == eos_id) == fmt.end_token
        assert eos_id not in row["labels"][labelled][:-1]
        # The labelled tokens are the right answer to the prompt.
        values = prompt_operands(row, fmt)
        answer = decode_answer([vocab[i] for i in row["labels"][labelled]], fmt)
        if task == "sort":
            assert answer == "".join("abcd"[i] for i in sorted(range(len(values)), key=lambda i: values[i]))
        else:
            a, b = values
            assert answer == str({"add": a + b, "sub": a - b, "mul": a * b}[task])


def test_labels_of_a_hand_written_example_are_the_answer_tokens_only():
    """'12+34' and '5+5', reversed, with an end token, right-padded to 11: written out by hand.
    Vocabulary: digits 0-9 are ids 0-9, '+' 10, '=' 11, <pad> 12, <eos> 13."""
    problems = with_answers(problems_from_ints("add", [[12, 34], [5, 5]], 10))
    input_ids, attention_mask, labels = encode_examples(problems, NumberFormat(), 11)
    x = IGNORE_INDEX
    assert input_ids.tolist() == [[2, 1, 10, 4, 3, 11, 6, 4, 13, 12, 12],   # 21+43=64<eos>: 46, reversed
                                  [5, 10, 5, 11, 0, 1, 13, 12, 12, 12, 12]]  # 5+5=01<eos>: 10, reversed
    assert attention_mask.tolist() == [[1] * 9 + [0] * 2, [1] * 7 + [0] * 4]
    assert labels.tolist() == [[x, x, x, x, x, x, 6, 4, 13, x, x],
                               [x, x, x, x, 0, 1, 13, x, x, x, x]]
    # Fixed widths and no end token: the zero-padded answer digits are labelled, nothing else is.
    fixed = NumberFormat(operand_width=3, answer_width=4, end_token=False)
    _, _, labels = encode_examples(problems, fixed, 13)
    assert labels.tolist() == [[x] * 8 + [6, 4, 0, 0, x], [x] * 8 + [0, 1, 0, 0, x]]


def test_worst_case_length_is_reached():
    spec, fmt = ProblemSpec(task="add", min_digits=3, max_digits=3), NumberFormat()
    problems = problems_from_ints("add", [[999, 999]], 10)
    input_ids, attention_mask, _ = encode_examples(with_answers(problems), fmt, worst_case_length(spec, fmt))
    assert attention_mask.sum() == worst_case_length(spec, fmt) == len("999+999=1998") + 1
    with pytest.raises(ValueError, match="exceed the fixed length"):
        encode_examples(with_answers(problems), fmt, 5)


def test_same_seed_and_rank_repeat_and_other_ranks_differ():
    spec, fmt = ProblemSpec(task="add", min_digits=1, max_digits=8), NumberFormat()

    def ids(**kw):
        return np.stack([r["input_ids"] for r in take(ProblemStream(spec, fmt, chunk_size=50, **kw), 100)])

    base = ids(seed=0, rank=0)
    np.testing.assert_array_equal(base, ids(seed=0, rank=0))
    other_rank, other_seed = ids(seed=0, rank=1), ids(seed=1, rank=0)
    for other in (other_rank, other_seed):
        same_rows = (base == other).all(axis=1)
        assert same_rows.mean() < 0.05


@pytest.mark.parametrize("task", ["add", "mul", "sort"])
def test_streamed_problems_are_all_in_the_train_split(task):
    spec = ProblemSpec(task=task, min_digits=1, max_digits=2, max_items=3)
    fmt = NumberFormat(task=task)
    rows = take(ProblemStream(spec, fmt, chunk_size=256, test_fraction=0.3), 600)
    values = [prompt_operands(r, fmt) for r in rows]
    # Rebuild each problem from its prompt alone (one item-slot count for sort, see test_problems).
    k = spec.n_operands
    operands = np.zeros((len(values), k, 4), dtype=np.int8)
    lengths = np.zeros((len(values), k), dtype=np.int64)
    for i, row in enumerate(values):
        one = problems_from_ints(task, [row], 10)
        operands[i, : one.operands.shape[1], : one.operands.shape[2]] = one.operands[0]
        lengths[i, : one.lengths.shape[1]] = one.lengths[0]
    rebuilt = Problems(task, 10, operands, lengths)
    assert rebuilt.operand_values() == values
    assert not split_of(rebuilt, 0.3).any()
    # ... while ~30% of such problems are test problems, so the filter is doing the work.
    everything = problems_from_ints("add", [[a, b] for a in range(100) for b in range(100)], 10)
    assert 0.25 < split_of(everything, 0.3).mean() < 0.35


def test_curriculum_state_moves_the_digit_range():
    spec, fmt = ProblemSpec(task="add", min_digits=1, max_digits=5), NumberFormat()
    state = CurriculumState(min_digits=1, max_digits=1)
    it = iter(ProblemStream(spec, fmt, state=state, chunk_size=16))
    first = [next(it) for _ in range(16)]
    state.min_digits = state.max_digits = 5
    later = [next(it) for _ in range(16)]
    assert all(max(prompt_operands(r, fmt)) < 10 for r in first)
    assert all(min(prompt_operands(r, fmt)) >= 10_000 for r in later)
    assert len({r["input_ids"].shape for r in first + later}) == 1


def test_dataloader_batches_with_stack_examples():
    spec, fmt = ProblemSpec(task="sub", min_digits=1, max_digits=6), NumberFormat(task="sub")
    loader = torch.utils.data.DataLoader(ProblemStream(spec, fmt, chunk_size=32), batch_size=8,
                                         collate_fn=stack_examples)
    batch = next(iter(loader))
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    for value in batch.values():
        assert value.shape == (8, worst_case_length(spec, fmt)) and value.dtype == torch.int64


@pytest.mark.parametrize("task,batch_size,start_step", [("sub", 8, 0), ("add", 10, 0), ("add", 10, 3),
                                                        ("mul", 40, 1)])
def test_stream_batches_are_the_dataloader_batches_of_its_examples(task, batch_size, start_step):
    """`ProblemStream.batches` (what a one-process Trainer trains on) gives the batches a DataLoader of the
    stream's examples with stack_examples gives: same keys, values and order, also for batches that span
    two chunks (10 and 40 do not divide 16) and from a resumed step."""
    spec = ProblemSpec(task=task, min_digits=1, max_digits=4)
    fmt = NumberFormat(task=task, **({"end_token": False, "operand_width": 4, "answer_width": 8}
                                     if task == "mul" else {}))

    def stream():
        state = CurriculumState(1, 4, schedule=lambda step: (1, 2) if step < 2 else (1, 4),
                                examples_per_step=batch_size, start_step=start_step)
        return ProblemStream(spec, fmt, state=state, chunk_size=16, seed=5, hard_fraction=0.5)

    one_by_one = torch.utils.data.DataLoader(stream(), batch_size=batch_size, collate_fn=stack_examples)
    whole = torch.utils.data.DataLoader(stream().batches(batch_size), batch_size=None)
    pairs = list(itertools.islice(zip(one_by_one, whole), 7))
    assert len(pairs) == 7
    for expected, batch in pairs:
        assert list(batch) == list(expected)
        for key in expected:
            assert batch[key].dtype == expected[key].dtype
            torch.testing.assert_close(batch[key], expected[key], rtol=0, atol=0)


def _rows(batch: dict) -> set[tuple]:
    """A batch's rows as (attended input ids, their labels), whatever width the batch was cut to."""
    mask = batch["attention_mask"].bool()
    return {(tuple(i[m].tolist()), tuple(lab[m].tolist()))
            for i, lab, m in zip(batch["input_ids"], batch["labels"], mask)}


@pytest.mark.parametrize("task,settings", [("sort", {"min_items": 2, "max_items": 8}), ("mul", {})])
def test_length_buckets_cut_batches_to_their_longest_row_and_keep_the_examples(task, settings):
    """With length_buckets = k, each window of k batches holds the same examples as without (rows sorted
    by length, each batch cut to its longest row, no label lost), and is shorter on average."""
    spec = ProblemSpec(task=task, min_digits=1, max_digits=6, **settings)
    fmt = NumberFormat(task=task, **({"max_items": 8, "scratchpad": "radix_passes"} if task == "sort" else
                                     {"scratchpad": "running_sums"}))
    size, k = 16, 4

    def stream(buckets):
        state = CurriculumState(1, 6, schedule=lambda step: (1, 6), examples_per_step=size)
        return ProblemStream(spec, fmt, state=state, chunk_size=24, seed=3, length_buckets=buckets)

    plain = list(itertools.islice(iter(stream(0).batches(size)), 2 * k))
    bucketed = list(itertools.islice(iter(stream(k).batches(size)), 2 * k))
    full = worst_case_length(spec, fmt)
    for window in range(2):
        expected = set().union(*(_rows(b) for b in plain[window * k:(window + 1) * k]))
        got = [_rows(b) for b in bucketed[window * k:(window + 1) * k]]
        assert set().union(*got) == expected and sum(map(len, got)) == k * size
    for batch in bucketed:
        lengths = batch["attention_mask"].sum(1)
        assert batch["input_ids"].shape[1] == int(lengths.max()) <= full  # cut to its longest row
        assert batch["attention_mask"][:, -1].any()
    assert np.mean([b["input_ids"].shape[1] for b in bucketed]) < full
    assert [b["input_ids"].shape[1] for b in bucketed] != sorted(b["input_ids"].shape[1] for b in bucketed)


def test_one_length_bucket_cuts_each_batch_and_keeps_its_rows():
    spec = ProblemSpec(task="sort", min_digits=1, max_digits=6, min_items=2, max_items=8)
    fmt = NumberFormat(task="sort", max_items=8, scratchpad="radix_passes")

    def batches(buckets):
        state = CurriculumState(1, 6, schedule=lambda step: (1, 6), examples_per_step=16)
        stream = ProblemStream(spec, fmt, state=state, chunk_size=24, seed=4, length_buckets=buckets)
        return list(itertools.islice(iter(stream.batches(16)), 5))

    for plain, cut in zip(batches(0), batches(1), strict=True):
        assert _rows(cut) == _rows(plain)
        assert cut["input_ids"].shape[1] == int(cut["attention_mask"].sum(1).max())


@pytest.mark.parametrize("start_step", [1, 4, 6])
def test_length_buckets_resume_with_the_batches_an_uninterrupted_run_sees(start_step):
    spec = ProblemSpec(task="sort", min_digits=1, max_digits=5, min_items=2, max_items=6)
    fmt = NumberFormat(task="sort", max_items=6, scratchpad="radix_passes")

    def batches(start):
        state = CurriculumState(1, 5, schedule=lambda step: (1, 5), examples_per_step=8, start_step=start)
        stream = ProblemStream(spec, fmt, state=state, chunk_size=20, seed=9, length_buckets=3)
        return list(itertools.islice(iter(stream.batches(8)), 9 - start))

    for expected, batch in zip(batches(0)[start_step:], batches(start_step), strict=True):
        for key in expected:
            torch.testing.assert_close(batch[key], expected[key], rtol=0, atol=0)


def test_scheduled_stream_is_a_function_of_the_position():
    """With a schedule, example i has the range of step i // examples_per_step, and a stream
    started at a later step yields exactly the tail of one started at step 0 (that is how a
    resumed run sees the data an uninterrupted run would)."""
    spec, fmt = ProblemSpec(task="add", min_digits=1, max_digits=5), NumberFormat()

    def stream(start_step=0):
        state = CurriculumState(1, 5, schedule=lambda step: (1, 2) if step < 3 else (5, 5),
                                examples_per_step=10, start_step=start_step)
        return ProblemStream(spec, fmt, state=state, chunk_size=16, seed=7)

    rows = take(stream(), 64)
    for i, row in enumerate(rows):
        values = prompt_operands(row, fmt)
        assert (max(values) < 100) if i < 30 else (min(values) >= 10_000), i
    for start in (1, 2, 4):
        later = take(stream(start), 64 - 10 * start)
        for a, b in zip(rows[10 * start:], later, strict=True):
            np.testing.assert_array_equal(a["input_ids"], b["input_ids"])
    # A chunk is the same arrays whenever it is drawn (it does not depend on what was drawn before).
    np.testing.assert_array_equal(stream().chunk(3)[0], stream().chunk(3)[0])


def test_random_prefix_moves_each_example_right_by_attended_filler():
    spec = ProblemSpec(task="add", min_digits=1, max_digits=4)
    fmt = NumberFormat(task="add", reverse_operands=True, reverse_answer=True, end_token=True)
    plain = take(ProblemStream(spec, fmt, seed=3, chunk_size=64), 100)
    shifted_stream = ProblemStream(spec, fmt, seed=3, chunk_size=64, random_prefix=6)
    shifted = take(shifted_stream, 100)
    assert shifted_stream.length == worst_case_length(spec, fmt) + 6 and shifted_stream.with_mask
    pad, shifts = fmt.token_id("<pad>"), []
    for row, ref in zip(shifted, plain):
        ids, mask, labels = row["input_ids"], row["attention_mask"], row["labels"]
        start = int(np.argmax(ids != pad))  # the filler: attended <pad> tokens, then the example unchanged
        n = int(ref["attention_mask"].sum())
        shifts.append(start)
        np.testing.assert_array_equal(ids[start:start + n], ref["input_ids"][:n])
        np.testing.assert_array_equal(labels[start:start + n], ref["labels"][:n])
        assert (labels[:start] == IGNORE_INDEX).all() and (labels[start + n:] == IGNORE_INDEX).all()
        assert mask[:start + n].all() and not mask[start + n:].any()
    assert len(set(shifts)) > 3  # the shift varies from row to row


def test_hard_fraction_mixes_in_that_share_of_hard_problems():
    fmt = NumberFormat(task="add", reverse_operands=True, reverse_answer=True)
    spec = ProblemSpec(task="add", min_digits=8, max_digits=10)
    plain = ProblemStream(spec, fmt, seed=3, chunk_size=1000)
    mixed = ProblemStream(spec, fmt, seed=3, chunk_size=1000, hard_fraction=0.5)

    def repeated_share(stream):
        rows = take(stream, 1000)
        return np.mean([len(set("".join(map(str, prompt_operands(r, fmt))))) <= 2 for r in rows])

    # Half the rows are hard and half of those are repeated digits: about a quarter, spread
    # over the chunk (its first hundred rows hold their share too).
    assert repeated_share(plain) < 0.01
    assert 0.18 < repeated_share(mixed) < 0.32
    first = take(mixed, 100)
    assert np.mean([len(set("".join(map(str, prompt_operands(r, fmt))))) <= 2 for r in first]) > 0.1
    # Labels stay the exact answers, and the stream repeats itself.
    for row in first:
        a, b = prompt_operands(row, fmt)
        answer = [fmt.vocab()[i] for i in row["labels"][row["labels"] != IGNORE_INDEX]]
        assert decode_answer(answer, fmt) == str(a + b)
    np.testing.assert_array_equal(mixed.chunk(0)[0], mixed.chunk(0)[0])


def test_hard_fraction_fade_holds_the_share_then_falls_to_zero():
    """data.hard_fraction_fade [4, 8] with 250 examples per step and chunks of 1,000: chunk 0
    (steps 0-3) is all hard, chunk 2 (steps 8-11) all uniform."""
    fmt = NumberFormat(task="add", reverse_operands=True, reverse_answer=True)
    spec = ProblemSpec(task="add", min_digits=8, max_digits=10)
    state = CurriculumState(8, 10, schedule=lambda step: (8, 10), examples_per_step=250)
    stream = ProblemStream(spec, fmt, state, seed=3, chunk_size=1000, hard_fraction=1.0, hard_fraction_fade=(4, 8))
    assert [stream.hard_fraction_at(s) for s in (0, 4, 6, 8, 100)] == [1.0, 1.0, 0.5, 0.0, 0.0]

    def repeated_share(chunk):
        ids, _, labels = stream.chunk(chunk)
        rows = [{"input_ids": i, "labels": label} for i, label in zip(ids, labels)]
        return np.mean([len(set("".join(map(str, prompt_operands(r, fmt))))) <= 2 for r in rows])

    assert 0.4 < repeated_share(0) < 0.6  # every problem hard, half of them repeated digits
    assert 0.1 < repeated_share(1) < 0.4  # the share falls over steps 4-7
    assert repeated_share(2) < 0.01


def test_hard_kind_chooses_what_the_hard_share_draws():
    fmt = NumberFormat(task="add", reverse_operands=True, reverse_answer=True)
    spec = ProblemSpec(task="add", min_digits=8, max_digits=10)
    stream = ProblemStream(spec, fmt, seed=3, chunk_size=1000, hard_fraction=1.0, hard_kind="carries")
    rows = take(stream, 1000)
    operands = [prompt_operands(r, fmt) for r in rows]
    # The carry patterns: a quarter are a run of nines plus a small number; none repeat two digits.
    assert 0.2 < np.mean([set(str(a)) == {"9"} for a, _ in operands]) < 0.35
    for row, (a, b) in zip(rows[:50], operands[:50]):
        answer = [fmt.vocab()[i] for i in row["labels"][row["labels"] != IGNORE_INDEX]]
        assert decode_answer(answer, fmt) == str(a + b)


def test_packed_examples_hold_whole_problems_each_closed_by_eos_with_every_answer_labelled():
    """'12+34' and '5+5' packed into one row (sizes [2]), and '12+34' alone into the next (sizes [1]
    of the group '12+34', '5+5'): written out by hand. <pad> 12, <eos> 13."""
    problems = with_answers(problems_from_ints("add", [[12, 34], [5, 5], [12, 34], [5, 5]], 10))
    input_ids, attention_mask, labels = encode_examples(problems, NumberFormat(), 18, pack_sizes=np.array([2, 1]))
    x = IGNORE_INDEX
    assert input_ids.tolist() == [[2, 1, 10, 4, 3, 11, 6, 4, 13, 5, 10, 5, 11, 0, 1, 13, 12, 12],
                                  [2, 1, 10, 4, 3, 11, 6, 4, 13] + [12] * 9]
    assert attention_mask.tolist() == [[1] * 16 + [0] * 2, [1] * 9 + [0] * 9]
    assert labels.tolist() == [[x] * 6 + [6, 4, 13] + [x] * 4 + [0, 1, 13, x, x], [x] * 6 + [6, 4, 13] + [x] * 9]


def test_a_packing_stream_draws_one_to_all_problems_per_row_within_its_length():
    spec, fmt = ProblemSpec(task="add", min_digits=1, max_digits=6), NumberFormat(reverse_operands=True,
                                                                                  reverse_answer=True)
    stream = ProblemStream(spec, fmt, seed=3, context_problems=2, random_prefix=4)
    assert stream.length == 3 * worst_case_length(spec, fmt) + 4
    rows = take(stream, 300)
    eos = fmt.token_id(EOS_TOKEN)
    counts = [int((r["input_ids"][r["attention_mask"] == 1] == eos).sum()) for r in rows]
    assert set(counts) == {1, 2, 3}
    for row in rows[:50]:  # every answer is labelled and reads back as the sum of its own problem
        ids = row["input_ids"][row["attention_mask"] == 1].tolist()
        labelled = row["labels"][row["attention_mask"] == 1].tolist()
        vocab = fmt.vocab()
        text = "".join(vocab[i] for i in ids).replace("<pad>", "").split(EOS_TOKEN)[:-1]
        for problem in text:
            prompt, answer = problem.split(PROMPT_END)
            a, b = (int(t[::-1]) for t in prompt.split("+"))
            assert int(answer[::-1]) == a + b
        assert sum(t != IGNORE_INDEX for t in labelled) == sum(len(p.split(PROMPT_END)[1]) + 1 for p in text)


def test_item_places_move_every_training_list_to_later_labels_and_the_recipe_bounds_them():
    """data.item_places: every streamed list (uniform, hard and its answer alike) sits at a run of places
    within that many, so lists of at most 5 items carry labels up to the last place; the answer is the
    moved labels in sorted order. A recipe whose places cannot hold its lists, or whose format cannot
    write them, is one line."""
    fmt = NumberFormat(task="sort", max_items=12, reverse_operands=True, end_token=True, scratchpad="none")
    spec = ProblemSpec(task="sort", min_digits=1, max_digits=3, min_items=2, max_items=5)
    stream = ProblemStream(spec, fmt, hard_fraction=0.5, hard_kind="ties", item_places=12, chunk_size=512)
    vocab, firsts = fmt.vocab(), set()
    for row in take(stream, 512):
        n = int(row["attention_mask"].sum())
        text = "".join(vocab[i] for i in row["input_ids"][:n])
        prompt, answer = text.split(PROMPT_END)
        items = [item.split(":") for item in prompt.split(",")]
        labels = "".join(label for label, _ in items)
        assert labels in "abcdefghijkl" and 2 <= len(labels) <= 5
        firsts.add(labels[0])
        order = sorted(range(len(items)), key=lambda i: int(items[i][1][::-1]))
        assert answer == "".join(labels[i] for i in order) + EOS_TOKEN
    assert len(firsts) > 8  # later labels are drawn, up to the last place a list fits at
    for places, message in ((4, "data.item_places must be 0 or, for a list task, from data.max_items"),
                            (13, "to format.max_items")):
        recipe = load_recipe("abacus-gpt2-sort", [f"data.item_places={places}", "format.max_items=12"])
        with pytest.raises(RecipeError, match=message):
            check_recipe(recipe)
    check_recipe(load_recipe("abacus-gpt2-sort", ["data.item_places=12", "format.max_items=12"]))
    with pytest.raises(RecipeError, match="for a list task"):
        check_recipe(load_recipe("abacus-gpt2-add", ["data.item_places=5"]))
    with pytest.raises(RecipeError, match="data.item_spread needs data.item_places"):
        check_recipe(load_recipe("abacus-gpt2-sort", ["data.item_spread=true"]))
    spread = ProblemStream(spec, fmt, item_places=12, item_spread=True, chunk_size=512)
    prompts = ["".join(vocab[i] for i in row["input_ids"][: int(row["attention_mask"].sum())]).split(PROMPT_END)[0]
               for row in take(spread, 256)]
    labels = ["".join(item[0] for item in prompt.split(",")) for prompt in prompts]
    assert any(label not in "abcdefghijkl" for label in labels)  # not one run: 'c', 'h', 'k'
    assert all(list(label) == sorted(label) and len(set(label)) == len(label) for label in labels)
