"""The number format: rendering to tokens, parsing user input, decoding generated answers."""

from __future__ import annotations

import re

import numpy as np
import pytest

from hf_arith.data.formatting import (
    EOS_TOKEN,
    PAD_TOKEN,
    SCRATCHPAD_TASKS,
    FormatError,
    NumberFormat,
    decode_answer,
    parse_problem,
    parse_problems,
    problems_from_ints,
    render,
)
from hf_arith.data.problems import ProblemSpec, sample, with_answers


def rendered(task: str, rows: list[list[int]], **settings) -> list[tuple[str, str]]:
    """(prompt, answer) strings per problem; '$' stands for <eos>."""
    fmt = NumberFormat(task=task, **settings)
    problems = with_answers(problems_from_ints(task, rows, fmt.base))
    ids, lengths, prompt_lengths = render(problems, fmt, with_answer=True)
    vocab = fmt.vocab()
    out = []
    for row, n, m in zip(ids, lengths, prompt_lengths, strict=True):
        tokens = [vocab[i] for i in row[:n]]
        out.append(("".join(tokens[:m]), "".join(tokens[m:]).replace(EOS_TOKEN, "$")))
    return out


def answer_tokens(problems, fmt: NumberFormat) -> list[list[str]]:
    ids, lengths, prompt_lengths = render(problems, fmt, with_answer=True)
    vocab = fmt.vocab()
    return [[vocab[i] for i in row[m:n]] for row, n, m in zip(ids, lengths, prompt_lengths, strict=True)]


# -- rendering -------------------------------------------------------------------------------
def test_reversal_on_and_off():
    rows = [[123, 456], [7, 95]]
    assert rendered("add", rows) == [("321+654=", "975$"), ("7+59=", "201$")]
    assert rendered("add", rows, reverse_operands=False, reverse_answer=False) == [
        ("123+456=", "579$"), ("7+95=", "102$")]
    assert rendered("add", rows, reverse_operands=False) == [("123+456=", "975$"), ("7+95=", "201$")]
    assert rendered("add", rows, reverse_answer=False) == [("321+654=", "579$"), ("7+59=", "102$")]


def test_padding_widths():
    assert rendered("add", [[123, 45]], operand_width=5, answer_width=6) == [("32100+54000=", "861000$")]
    assert rendered("add", [[123, 45]], operand_width=5, answer_width=6, reverse_operands=False,
                    reverse_answer=False) == [("00123+00045=", "000168$")]
    # Padding gives every row of a batch the same prompt and answer length.
    fmt = NumberFormat(operand_width=4, answer_width=5)
    problems = with_answers(problems_from_ints("add", [[1, 2], [9999, 9999], [50, 7]], 10))
    _, lengths, prompt_lengths = render(problems, fmt, with_answer=True)
    assert prompt_lengths.tolist() == [10, 10, 10]
    assert lengths.tolist() == [16, 16, 16]


def test_base_16():
    assert rendered("add", [[255, 1]], base=16) == [("FF+1=", "001$")]
    assert rendered("add", [[255, 1]], base=16, reverse_operands=False, reverse_answer=False) == [("FF+1=", "100$")]
    assert rendered("add", [[123, 456]], base=16, reverse_operands=False, reverse_answer=False) == [
        ("7B+1C8=", "243$")]
    assert rendered("mul", [[255, 255]], base=16, reverse_answer=False) == [("FF*FF=", "FE01$")]
    assert rendered("add", [[5, 3]], base=2, reverse_operands=False, reverse_answer=False) == [("101+11=", "1000$")]


def test_sub_negative_answers_carry_a_minus():
    rows = [[3, 10], [10, 3], [7, 7], [5, 123]]
    assert rendered("sub", rows, reverse_operands=False, reverse_answer=False) == [
        ("3-10=", "-7$"), ("10-3=", "7$"), ("7-7=", "0$"), ("5-123=", "-118$")]
    assert rendered("sub", rows)[3] == ("5-321=", "-811$")  # the sign stays in front of reversed digits
    assert rendered("sub", [[3, 10]], answer_width=4, reverse_answer=False) == [("3-01=", "-0007$")]


def test_sub_complement_answers_end_with_the_borrow():
    rows = [[123, 456], [1000, 999], [5, 5], [0, 7], [999, 1000], [1, 1000000]]
    assert rendered("sub", rows, reverse_operands=False, reverse_answer=False, negative_answers="complement") == [
        ("123-456=", "667-$"), ("1000-999=", "0001$"), ("5-5=", "0$"), ("0-7=", "3-$"), ("999-1000=", "9999-$"),
        ("1-1000000=", "9000001-$")]
    # Reversed, each answer digit sits in its own column's place, and the '-' is the borrow out.
    assert rendered("sub", rows[:2], negative_answers="complement") == [("321-654=", "766-$"), ("0001-999=", "1000$")]


def test_sub_complement_answers_decode_to_plain_numbers():
    fmt = NumberFormat(task="sub", negative_answers="complement")
    assert decode_answer(["7", "6", "6", "-", EOS_TOKEN], fmt) == "-333"
    assert decode_answer(["1", "0", "0", "0", EOS_TOKEN], fmt) == "1"
    for malformed in (["0", "0", "-", EOS_TOKEN], ["-", "5", EOS_TOKEN], ["-", EOS_TOKEN], ["1", "-"]):
        assert decode_answer(malformed, fmt) is None
    assert fmt.fingerprint() != NumberFormat(task="sub").fingerprint()


def test_mul_and_no_end_token():
    assert rendered("mul", [[12, 34], [0, 999]], end_token=False) == [("21*43=", "804"), ("0*999=", "0")]


def test_mul_running_sums_are_written_before_the_product():
    # 123*45: a*5 = 615 in 4 digits, then a*45 = 5535 in 5; reversed, each sum in its own width.
    assert rendered("mul", [[123, 45]], scratchpad="running_sums") == [("321*54=", "5160=53550$")]
    assert rendered("mul", [[123, 45]], scratchpad="running_sums", reverse_operands=False,
                    reverse_answer=False) == [("123*45=", "0615=05535$")]
    # A zero digit of b repeats the sum; a one-digit b writes the product alone.
    assert rendered("mul", [[7, 908], [0, 5]], scratchpad="running_sums") == [
        ("7*809=", "65=650=6536$"), ("0*5=", "00$")]
    assert rendered("mul", [[255, 255]], base=16, scratchpad="running_sums", reverse_answer=False) == [
        ("FF*FF=", "EF1=FE01$")]


def test_mul_running_sums_budget_is_exact():
    """The answer budget of each problem is the tokens its running sums and <eos> take."""
    fmt = NumberFormat(task="mul", scratchpad="running_sums")
    spec = ProblemSpec(task="mul", min_digits=1, max_digits=9)
    problems = sample(spec, 300, np.random.default_rng(1), split=None)
    _, lengths, prompt_lengths = render(problems, fmt, with_answer=True)
    assert (fmt.answer_tokens(problems.lengths) == lengths - prompt_lengths).all()
    assert fmt.max_answer_tokens(problems) == int((lengths - prompt_lengths).max())
    # An abacus model indexes the longest sum, the product, as one number.
    assert (fmt.answer_run_tokens(problems.lengths) == problems.lengths.sum(axis=1)).all()


def test_mul_running_sums_decode_only_whole_answers():
    fmt = NumberFormat(task="mul", scratchpad="running_sums")
    assert decode_answer(list("5160=53550") + [EOS_TOKEN], fmt) == "5535"
    assert decode_answer(list("5160") + [EOS_TOKEN], fmt) == "615"  # a one-digit b: the product alone
    for malformed in ("5160=5355$",  # the product a digit short
                      "5160=53550",  # no end token: cut off by the budget
                      "5160=$", "=53550$", "5160==53550$", "516*=53550$"):
        tokens = [EOS_TOKEN if c == "$" else c for c in malformed]
        assert decode_answer(tokens, fmt) is None, malformed
    assert fmt.fingerprint() != NumberFormat(task="mul").fingerprint()


def test_mul_shifted_sums_leave_out_the_digits_already_final():
    # 123*45: a*5 = 615 in 4 digits; a*45 = 5535 without its units digit (final in the line before):
    # 553 in 4. Reversed, the product is each line's first digit, then the last line: 5 355 -> 5535.
    assert rendered("mul", [[123, 45]], scratchpad="shifted_sums") == [("321*54=", "5160=3550$")]
    assert rendered("mul", [[123, 45]], scratchpad="shifted_sums", reverse_operands=False,
                    reverse_answer=False) == [("123*45=", "0615=0553$")]
    # Every line is len(a) + 1 digits; a one-digit b writes the product alone.
    assert rendered("mul", [[7, 908], [0, 5], [99, 99]], scratchpad="shifted_sums") == [
        ("7*809=", "65=50=36$"), ("0*5=", "00$"), ("99*99=", "198=089$")]
    fmt = NumberFormat(task="mul", scratchpad="shifted_sums")
    spec = ProblemSpec(task="mul", min_digits=1, max_digits=9)
    problems = sample(spec, 300, np.random.default_rng(1), split=None)
    ids, lengths, prompt_lengths = render(problems, fmt, with_answer=True)
    assert (fmt.answer_tokens(problems.lengths) == lengths - prompt_lengths).all()
    assert (fmt.answer_run_tokens(problems.lengths) == problems.lengths[:, 0] + 1).all()
    vocab = fmt.vocab()
    for row, n, p, values, la_lb in zip(ids, lengths, prompt_lengths, problems.operand_values(), problems.lengths):
        tokens = [vocab[i] for i in row[p:n]]
        assert decode_answer(tokens, fmt, la_lb) == str(values[0] * values[1])


def test_mul_shifted_sums_decode_only_whole_answers():
    fmt = NumberFormat(task="mul", scratchpad="shifted_sums")
    assert decode_answer(list("5160=3550") + [EOS_TOKEN], fmt, [3, 2]) == "5535"
    assert decode_answer(list("198=089") + [EOS_TOKEN], fmt) == "9801"
    for malformed, lengths in (("5160=355$", None),  # a line a digit short
                               ("5160=3550$", [3, 3]),  # a line fewer than b has digits
                               ("5160=3550$", [2, 2]),  # lines wider than a + 1
                               ("5160=3550", None), ("5160=$", None), ("5160==3550$", None), ("516*=3550$", None)):
        tokens = [EOS_TOKEN if c == "$" else c for c in malformed]
        assert decode_answer(tokens, fmt, lengths) is None, malformed
    assert fmt.task_rules.split_working("5160=3550", fmt) == ("5160=3550", "")
    # The product's tokens, read off the lines in the format's digit order (the Space judges these).
    assert ["5160=3550"[i] for i in fmt.task_rules.answer_places("5160=3550", fmt)] == list("53550")
    forward = NumberFormat(task="mul", scratchpad="shifted_sums", reverse_operands=False, reverse_answer=False)
    assert ["0615=0553"[i] for i in forward.task_rules.answer_places("0615=0553", forward)] == list("05535")
    running = NumberFormat(task="mul", scratchpad="running_sums")
    assert running.task_rules.answer_places("5160=53550", running) == [5, 6, 7, 8, 9]  # after the working
    assert fmt.fingerprint() != NumberFormat(task="mul", scratchpad="running_sums").fingerprint()


def test_sort_radix_passes_order_the_labels_one_digit_place_at_a_time():
    # 31, 7, 120 by units (0 < 1 < 7): c a b; by tens, ties kept (0, 2, 3): b c a; by hundreds: b a c.
    assert rendered("sort", [[31, 7, 120], [5, 5], [10, 2]], scratchpad="radix_passes") == [
        ("a:13,b:7,c:021=", "cab=bca=bac$"), ("a:5,b:5=", "ab$"), ("a:01,b:2=", "ab=ba$")]
    fmt = NumberFormat(task="sort", scratchpad="radix_passes")
    assert decode_answer(list("cab=bca=bac") + [EOS_TOKEN], fmt, [2, 1, 3]) == "bac"
    for malformed, lengths in (("cab=bca=bac$", [2, 1, 2]),  # a line more than the longest item's places
                               ("cab=bac$", [2, 1, 3]),  # a line fewer
                               ("ca=bc=ba$", [2, 1, 3]),  # an item left out
                               ("cab=bcc=bac$", None), ("cab=bca=bad$", None), ("cab=bca=bac", None)):
        tokens = [EOS_TOKEN if c == "$" else c for c in malformed]
        assert decode_answer(tokens, fmt, lengths) is None, malformed


def test_sort_radix_keys_write_each_lines_digits_before_the_next_order():
    # 31, 7, 120: units 1 7 0 in label order; by units c a b, with tens 2 3 0; by tens b c a, with
    # hundreds 0 1 0; by hundreds: b a c. A line's order is its predecessor sorted by the digits written there.
    assert rendered("sort", [[31, 7, 120], [5, 5], [10, 2]], scratchpad="radix_keys") == [
        ("a:13,b:7,c:021=", "a1b7c0=c2a3b0=b0c1a0=bac$"), ("a:5,b:5=", "a5b5=ab$"), ("a:01,b:2=", "a0b2=a1b0=ba$")]
    fmt = NumberFormat(task="sort", scratchpad="radix_keys")
    assert decode_answer(list("a1b7c0=c2a3b0=b0c1a0=bac") + [EOS_TOKEN], fmt, [2, 1, 3]) == "bac"
    for malformed, lengths in (("a1b7c0=c2a3b0=bac$", [2, 1, 3]),  # a line of keys fewer than the places
                               ("a1b7c0=c2a3b0=b0c1a0=b0c1a0=bac$", [2, 1, 3]),  # one more
                               ("a1b7c0=c2a3b=b0c1a0=bac$", None),  # a key left out
                               ("a1b7c0=c2a3bx=b0c1a0=bac$", None),  # a key that is not a digit
                               ("a1b7c0=c2a3b0=b0c1a0=ba$", None),  # the answer drops an item
                               ("bac$", None), ("a1b7c0=c2a3b0=b0c1a0=bac", None)):
        tokens = [EOS_TOKEN if c == "$" else c for c in malformed]
        assert decode_answer(tokens, fmt, lengths) is None, malformed


def test_sort_transposition_rounds_swap_neighbours_by_one_digit_place_per_round():
    # 31, 7, 120, units 1 7 0: round 0 pairs (a, b), no swap; round 1 (b, c), 7 > 0: acb; round 2
    # (a, c), 1 > 0: cab. Tens 3 0 2 in order c a b: cab, then (a, b) 3 > 0: cba, then (c, b): bca.
    # Hundreds 0 1 0 in order b c a: bca, then (c, a): bac, then (b, a), a tie kept: bac.
    assert rendered("sort", [[31, 7, 120], [5, 5], [10, 2]], scratchpad="transposition_rounds") == [
        ("a:13,b:7,c:021=", "abc=acb=cab=cab=cba=bca=bca=bac=bac$"), ("a:5,b:5=", "ab=ab$"), ("a:01,b:2=", "ab=ab=ba=ba$")]
    fmt = NumberFormat(task="sort", scratchpad="transposition_rounds")
    assert decode_answer(list("abc=acb=cab=cab=cba=bca=bca=bac=bac") + [EOS_TOKEN], fmt, [2, 1, 3]) == "bac"
    for malformed, lengths in (("abc=acb=cab=cab=cba=bca=bca=bac$", [2, 1, 3]),  # a round fewer
                               ("abc=acb=cab=bac$", [2, 1, 3]),  # a line per place, as radix passes write
                               ("abc=acb=cab=cab=cba=bca=bca=bac=ba$", None),  # an item left out
                               ("ab=ab=ba=ba", None)):
        tokens = [EOS_TOKEN if c == "$" else c for c in malformed]
        assert decode_answer(tokens, fmt, lengths) is None, malformed


def test_transposition_marked_writes_the_rounds_with_a_marker_one_slot_further_each_round():
    # The rounds above; round r of each place writes the label at slot r in upper case, so each place's
    # last round marks its last slot. A marker missing, doubled or out of its slot is malformed.
    assert rendered("sort", [[31, 7, 120], [5, 5], [10, 2]], scratchpad="transposition_marked") == [
        ("a:13,b:7,c:021=", "Abc=aCb=caB=Cab=cBa=bcA=Bca=bAc=baC$"), ("a:5,b:5=", "Ab=aB$"), ("a:01,b:2=", "Ab=aB=Ba=bA$")]
    fmt = NumberFormat(task="sort", scratchpad="transposition_marked")
    assert decode_answer(list("Abc=aCb=caB=Cab=cBa=bcA=Bca=bAc=baC") + [EOS_TOKEN], fmt, [2, 1, 3]) == "bac"
    assert decode_answer(list("Abc=aCb=caB=Cab=cBa=bcA=Bca=bAc=baC") + [EOS_TOKEN], fmt) == "bac"
    for malformed, lengths in (("Abc=aCb=caB=Cab=cBa=bcA=Bca=bAc=bac$", [2, 1, 3]),  # the last marker missing
                               ("Abc=aCb=caB=Cab=cBa=bcA=Bca=Bac=baC$", [2, 1, 3]),  # a marker out of its slot
                               ("ABc=aCb=caB=Cab=cBa=bcA=Bca=bAc=baC$", None),  # two in a line
                               ("Abc=aCb=caB=Cab=cBa=bcA=Bca=bAc$", [2, 1, 3])):  # a round fewer
        tokens = [EOS_TOKEN if c == "$" else c for c in malformed]
        assert decode_answer(tokens, fmt, lengths) is None, malformed
    with pytest.raises(FormatError, match="upper case"):
        NumberFormat(task="sort", scratchpad="transposition_marked", base=16)


def assert_working_of_31_7_120(fmt: NumberFormat, answer: str, malformed: tuple[str, ...]) -> None:
    """The list 31, 7, 120 (lengths 2, 1, 3) written as `answer` decodes to "bac"; each of `malformed` to None."""
    assert decode_answer(list(answer) + [EOS_TOKEN], fmt, [2, 1, 3]) == "bac"
    for text in malformed:
        assert decode_answer(list(text) + [EOS_TOKEN], fmt, [2, 1, 3]) is None, text


def test_transposition_keys_write_each_marked_round_with_every_label_s_digit_at_its_place():
    # The marked rounds above, each label followed by its item's digit at the line's place (0 past its
    # length): 31, 7, 120 by place 0 are 1, 7, 0, by place 1 are 3, 0, 2, by place 2 are 0, 0, 1.
    assert rendered("sort", [[31, 7, 120], [5, 5]], scratchpad="transposition_keys") == [
        ("a:13,b:7,c:021=", "A1b7c0=a1C0b7=c0a1B7=C2a3b0=c2B0a3=b0c2A3=B0c1a0=b0A0c1=b0a0C1$"), ("a:5,b:5=", "A5b5=a5B5$")]
    fmt = NumberFormat(task="sort", scratchpad="transposition_keys")
    answer = "A1b7c0=a1C0b7=c0a1B7=C2a3b0=c2B0a3=b0c2A3=B0c1a0=b0A0c1=b0a0C1"
    assert_working_of_31_7_120(fmt, answer, (answer[:-1], answer.replace("A3", "Ax"),
                                             answer.replace("b0c2A3", "b0c2a3"), answer[:-10]))
    with pytest.raises(FormatError, match="upper case"):
        NumberFormat(task="sort", scratchpad="transposition_keys", base=16)


def test_transposition_next_keys_write_a_place_s_last_round_with_the_next_place_s_digits():
    # As transposition_keys, but each place's last round (its last slot marked) carries the digits the next
    # round compares: place 1's after place 0's last round, and 0s (no place 3) after the last.
    assert rendered("sort", [[31, 7, 120], [5, 5]], scratchpad="transposition_next_keys") == [
        ("a:13,b:7,c:021=", "A1b7c0=a1C0b7=c2a3B0=C2a3b0=c2B0a3=b0c1A0=B0c1a0=b0A0c1=b0a0C0$"), ("a:5,b:5=", "A5b5=a0B0$")]
    fmt = NumberFormat(task="sort", scratchpad="transposition_next_keys")
    answer = "A1b7c0=a1C0b7=c2a3B0=C2a3b0=c2B0a3=b0c1A0=B0c1a0=b0A0c1=b0a0C0"
    assert_working_of_31_7_120(fmt, answer, (answer[:-1], answer.replace("a3B0", "a3b0"), answer[:-10]))
    # transposition_next_unmarked: the same lines, no label in upper case (a model's roles say where a place ends)
    assert rendered("sort", [[31, 7, 120]], scratchpad="transposition_next_unmarked") == [
        ("a:13,b:7,c:021=", answer.lower() + "$")]
    fmt = NumberFormat(task="sort", scratchpad="transposition_next_unmarked", base=16)  # no upper-case labels
    assert_working_of_31_7_120(fmt, answer.lower(), (answer.lower()[:-7], answer.lower().replace("c2a3b0", "c2a3a0"),
                                                     answer))


def test_transposition_flags_write_a_round_s_swaps_in_upper_case_and_end_a_place_after_two_quiet_rounds():
    # 31, 7, 120, units 1 7 0: round 0 pairs (a, b), no swap; round 1 (b, c), 7 > 0, upper case from
    # slot 1 on; round 2 (a, c), 1 > 0; rounds 3 and 4 swap nothing, which ends the place. The tens 3 0 2
    # go on from c a b with round 5 (odd, as rounds count every line); the hundreds 0 0 1 keep the tie b, a.
    assert rendered("sort", [[31, 7, 120], [5, 5], [10, 2]], scratchpad="transposition_flags") == [
        ("a:13,b:7,c:021=", "a1b7c0=a1C0B7=C0A1B7=c0a1b7=c0a1b7=c2B0A3=B0C2A3=b0c2a3=b0c2a3=b0A0C1=b0a0c1=b0a0c1$"),
        ("a:5,b:5=", "a5b5=a5b5$"), ("a:01,b:2=", "a0b2=a0b2=B0A1=b0a1=b0a1$")]
    fmt = NumberFormat(task="sort", scratchpad="transposition_flags")
    answer = "a1b7c0=a1C0B7=C0A1B7=c0a1b7=c0a1b7=c2B0A3=B0C2A3=b0c2a3=b0c2a3=b0A0C1=b0a0c1=b0a0c1"
    assert decode_answer(list(answer) + [EOS_TOKEN], fmt, [2, 1, 3]) == "bac"
    assert decode_answer(list(answer) + [EOS_TOKEN], fmt) == "bac"
    for malformed, lengths in ((answer[: -len("=b0a0c1")], [2, 1, 3]),  # the last place not ended
                               (answer + "=b0a0c1", [2, 1, 3]),  # a quiet round past the place's end
                               (answer.replace("C0A1B7", "C0a1b7"), None),  # upper case stops after a swap
                               (answer.replace("a1C0B7", "A1C0B7"), None),  # upper case before the first swap
                               (answer.replace("c2B0A3", "c2B0A"), None),  # a digit left out
                               ("a1b7c0=a1c0b7=c0a1b7", None),  # a swap in lower case
                               ("a5b5=a5b5=a5b5", [1, 1]),  # two places, where the items have one digit
                               ("a5b5", [1, 1])):  # one quiet round
        tokens = [EOS_TOKEN if c == "$" else c for c in malformed]
        assert decode_answer(tokens, fmt, lengths) is None, malformed
    with pytest.raises(FormatError, match="upper case"):
        NumberFormat(task="sort", scratchpad="transposition_flags", base=16)


def test_flagged_rounds_end_each_place_where_a_radix_pass_does_within_items_plus_two_rounds():
    # An independent route: each place's last round is that place's radix pass (a stable sort by its
    # digit), reached in at most items + 2 rounds, each round swapping only neighbours of its line's
    # parity; the upper-case slots are those from the first one that moved.
    from hf_arith.data.problems import with_items_moved
    from hf_arith.data.tasks.sort import flagged_rounds, radix_passes

    spec = ProblemSpec(task="sort", min_digits=1, max_digits=4, min_items=2, max_items=7)
    drawn = sample(spec, 400, np.random.default_rng(3), split=None, kind="ties")  # equal digits are common
    problems = with_items_moved(drawn, 9, np.random.default_rng(4))
    rounds, passes = flagged_rounds(problems), radix_passes(problems)
    items, longest = (problems.lengths > 0).sum(axis=1), problems.lengths.max(axis=1)
    for i in range(len(problems)):
        n = items[i]
        lines = [(r, order[i, :n].tolist(), int(place[i]), flags[i, :n].tolist())
                 for r, (order, place, flags, has) in enumerate(rounds) if has[i]]
        assert [r for r, *_ in lines] == list(range(len(lines)))  # a row's lines come first, none skipped
        places = [p for _, _, p, _ in lines]
        assert places == sorted(places) and set(places) == set(range(longest[i]))
        before = sorted(lines[0][1])
        for r, line, _, flags in lines:
            moved = [j for j in range(n) if line[j] != before[j]]
            assert all(j % 2 == r % 2 and j + 1 in moved for j in moved[::2]), (i, r, before, line)
            assert flags == [bool(moved) and j >= moved[0] for j in range(n)]
            before = line
        for p in range(longest[i]):
            in_place = [line for _, line, q, _ in lines if q == p]
            assert 2 <= len(in_place) <= n + 2
            assert in_place[-1] == in_place[-2] == passes[p][0][i, :n].tolist()


def test_transposition_flags_budget_bounds_every_answer():
    fmt = NumberFormat(task="sort", scratchpad="transposition_flags")
    spec = ProblemSpec(task="sort", min_digits=1, max_digits=5, min_items=2, max_items=8)
    problems = sample(spec, 300, np.random.default_rng(2), split=None)
    _, lengths, prompt_lengths = render(problems, fmt, with_answer=True)
    budget = fmt.answer_tokens(problems.lengths)
    assert (lengths - prompt_lengths <= budget).all() and (lengths - prompt_lengths < budget).any()


def test_transposition_rounds_end_each_place_where_a_radix_pass_does_and_swap_only_neighbours():
    # An independent route: each place's last round is that place's radix pass (a stable sort by its
    # digit), and each round swaps only the neighbour pairs its parity names, on lists moved in their places.
    from hf_arith.data.problems import with_items_moved
    from hf_arith.data.tasks.sort import radix_passes, transposition_rounds

    spec = ProblemSpec(task="sort", min_digits=1, max_digits=4, min_items=2, max_items=7)
    drawn = sample(spec, 400, np.random.default_rng(3), split=None, kind="ties")  # equal digits are common
    problems = with_items_moved(drawn, 9, np.random.default_rng(4))
    rounds, passes = transposition_rounds(problems), radix_passes(problems)
    items, longest = (problems.lengths > 0).sum(axis=1), problems.lengths.max(axis=1)
    most = int(items.max())
    assert len(rounds) == len(passes) * most
    for i in range(len(problems)):
        n = items[i]
        lines = [order[i, :n].tolist() for order, has in rounds if has[i]]
        assert len(lines) == longest[i] * n
        for p in range(longest[i]):
            assert lines[p * n + n - 1] == passes[p][0][i, :n].tolist()
            before = lines[p * n - 1] if p else sorted(lines[0])
            for r, line in enumerate(lines[p * n : (p + 1) * n]):
                moved = [j for j in range(n) if line[j] != before[j]]
                assert all(j % 2 == r % 2 and j + 1 in moved for j in moved[::2]), (i, p, r, before, line)
                before = line


@pytest.mark.parametrize("scratchpad", ["radix_passes", "radix_keys", "transposition_rounds", "transposition_marked",
                                        "transposition_keys", "transposition_next_keys",
                                        "transposition_next_unmarked"])
def test_sort_scratchpad_budget_is_exact(scratchpad):
    fmt = NumberFormat(task="sort", scratchpad=scratchpad)
    spec = ProblemSpec(task="sort", min_digits=1, max_digits=7, min_items=2, max_items=8)
    problems = sample(spec, 300, np.random.default_rng(2), split=None)
    _, lengths, prompt_lengths = render(problems, fmt, with_answer=True)
    assert (fmt.answer_tokens(problems.lengths) == lengths - prompt_lengths).all()


def test_sort_prompt_and_label_answers():
    rows = [[31, 7, 120], [5, 5]]
    assert rendered("sort", rows, reverse_operands=False) == [("a:31,b:7,c:120=", "bac$"), ("a:5,b:5=", "ab$")]
    assert rendered("sort", rows) == [("a:13,b:7,c:021=", "bac$"), ("a:5,b:5=", "ab$")]
    assert rendered("sort", rows, reverse_operands=False, operand_width=4) == [
        ("a:0031,b:0007,c:0120=", "bac$"), ("a:0005,b:0005=", "ab$")]


def test_prompts_are_right_padded_and_digit_ids_are_values():
    fmt = NumberFormat(task="add", base=16)
    assert [fmt.token_id(c) for c in "0123456789ABCDEF"] == list(range(16))
    problems = problems_from_ints("add", [[1, 2], [12345, 6789]], 16)
    ids, lengths, prompt_lengths = render(problems, fmt, with_answer=False)
    assert lengths.tolist() == prompt_lengths.tolist()
    assert (ids[0, lengths[0]:] == fmt.token_id(PAD_TOKEN)).all()
    assert ids[0, : lengths[0]].tolist() == [1, fmt.token_id("+"), 2, fmt.token_id("=")]


def test_render_refuses_mismatches():
    problems = with_answers(problems_from_ints("add", [[123456, 1]], 10))
    with pytest.raises(FormatError, match="base 16"):
        render(problems, NumberFormat(base=16), with_answer=False)
    with pytest.raises(FormatError, match="'sub'"):
        render(problems, NumberFormat(task="sub"), with_answer=False)
    with pytest.raises(FormatError, match="more than 5 base-10 digits"):
        render(problems, NumberFormat(operand_width=5), with_answer=False)
    with pytest.raises(FormatError, match="answer may need more than 6 digits"):
        render(problems, NumberFormat(answer_width=6), with_answer=True)
    with pytest.raises(FormatError, match="cannot render answers"):
        render(problems_from_ints("add", [[1, 2]], 10), NumberFormat(), with_answer=True)


# -- parsing ---------------------------------------------------------------------------------
def test_parse_valid_problems():
    assert parse_problem(" 12 + 34 ", NumberFormat()) == ["12", "34"]
    assert parse_problem("0-00", NumberFormat(task="sub")) == ["0", "0"]
    assert parse_problem("a:31, b:007,c:120", NumberFormat(task="sort")) == ["31", "7", "120"]
    problems = parse_problems(["123+456", "9+1"], NumberFormat())
    assert problems.to_text() == ["123+456", "9+1"]
    assert problems.answer is None


@pytest.mark.parametrize("text,fmt,message", [
    ("", NumberFormat(), "empty problem"),
    ("   ", NumberFormat(), "empty problem"),
    ("12+3a", NumberFormat(), "'a' is not a decimal digit"),
    ("1.5+2", NumberFormat(), "'.' is not a decimal digit"),
    ("1²+2", NumberFormat(), "'²' is not a decimal digit"),
    ("1\n+2", NumberFormat(), "is not a decimal digit"),
    ("+12", NumberFormat(), "missing operand"),
    ("12+", NumberFormat(), "missing operand"),
    ("-3+4", NumberFormat(), "negative numbers"),
    ("3+-4", NumberFormat(), "negative numbers"),
    ("5--3", NumberFormat(task="sub"), "negative numbers"),
    ("3*4", NumberFormat(), "is multiplication, but this model does addition"),
    ("3-4", NumberFormat(task="mul"), "is subtraction, but this model does multiplication"),
    ("3 4", NumberFormat(), "expected two numbers joined by '+'"),
    ("a:1", NumberFormat(task="sort"), "sorts 2 to 8 items, got 1"),
    ("a:1,b:2,c:3", NumberFormat(task="sort", max_items=2), "sorts 2 to 2 items, got 3"),
    ("a:1,c:2", NumberFormat(task="sort"), "item 2 must be labelled 'b'"),
    ("a:1,b:-2", NumberFormat(task="sort"), "sort items look like"),
    ("1,2", NumberFormat(task="sort"), "sort items look like"),
    ("a:1;b:2", NumberFormat(task="sort"), "sort items look like 'a:31,b:7', got 'a:1;b:2'"),
    ("5*3*2", NumberFormat(task="mul"), "two numbers joined by one '*', got 2 '*' signs"),
    ("1+2+3", NumberFormat(), "two numbers joined by one '+', got 2 '+' signs"),
    (12, NumberFormat(), "must be a string"),
])
def test_parse_errors_are_one_line_format_errors(text, fmt, message):
    with pytest.raises(FormatError) as info:
        parse_problems([text], fmt)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_parse_rejects_operands_wider_than_operand_width():
    fmt = NumberFormat(operand_width=5)
    assert parse_problems(["12345+1"], fmt).lengths.tolist() == [[5, 1]]
    with pytest.raises(FormatError, match=r"'123456\+1': an operand has more than 5 base-10 digits") as info:
        parse_problems(["12345+1", "123456+1"], fmt)
    assert "\n" not in str(info.value)
    # Widths count digits in the format's base: 65535 is 4 hex digits, 65536 is 5.
    hex_fmt = NumberFormat(base=16, operand_width=4)
    assert parse_problems(["65535+1"], hex_fmt).lengths.tolist() == [[4, 1]]
    with pytest.raises(FormatError, match="base-16"):
        parse_problems(["65536+1"], hex_fmt)


@pytest.mark.parametrize("text", ["١٢+3", "１２+3"])
def test_parse_rejects_non_ascii_digits(text):
    with pytest.raises(FormatError, match="is not a decimal digit"):
        parse_problem(text, NumberFormat())


def test_parse_too_many_sort_items_is_a_format_error():
    text = ",".join(f"{c}:1" for c in "abcdefghijklmnopqrstuvwxyz") + ",a:1"
    with pytest.raises(FormatError, match="items"):
        parse_problem(text, NumberFormat(task="sort"))


# -- decoding ---------------------------------------------------------------------------------
FORMATS = [
    dict(),
    dict(reverse_operands=False, reverse_answer=False),
    dict(operand_width=12, answer_width=25, end_token=False),
    dict(base=16, reverse_answer=False, answer_width=25),
    dict(base=2),
    dict(base=36, end_token=False),
    dict(negative_answers="complement"),
    dict(negative_answers="complement", base=16, reverse_answer=False, end_token=False),
    dict(scratchpad="running_sums"),
    dict(scratchpad="running_sums", base=16, reverse_operands=False, reverse_answer=False, end_token=False),
    dict(scratchpad="shifted_sums"),
    dict(scratchpad="shifted_sums", base=16, reverse_operands=False, reverse_answer=False, end_token=False),
    dict(scratchpad="radix_passes"),
    dict(scratchpad="radix_passes", base=16, reverse_operands=False, end_token=False),
    dict(scratchpad="radix_keys"),
    dict(scratchpad="radix_keys", base=16, reverse_operands=False, end_token=False),
    dict(scratchpad="transposition_rounds"),
    dict(scratchpad="transposition_marked"),
    dict(scratchpad="transposition_keys"),
    dict(scratchpad="transposition_next_keys"),
    dict(scratchpad="transposition_next_unmarked"),
]


@pytest.mark.parametrize("settings", FORMATS)
@pytest.mark.parametrize("task", ["add", "sub", "mul", "sort"])
def test_decode_answer_round_trips(task, settings):
    if task == "sort":
        settings = {k: v for k, v in settings.items() if k != "answer_width"}
    if task != "sub" and "negative_answers" in settings:
        pytest.skip("complement answers are for subtraction")
    if "scratchpad" in settings and SCRATCHPAD_TASKS[settings["scratchpad"]] != task:
        pytest.skip("each scratchpad is for one task")
    fmt = NumberFormat(task=task, **settings)
    spec = ProblemSpec(task=task, min_digits=1, max_digits=12, base=fmt.base, min_items=2, max_items=8)
    problems = sample(spec, 200, np.random.default_rng(0), split=None)
    decoded = [decode_answer(tokens, fmt) for tokens in answer_tokens(problems, fmt)]
    assert decoded == problems.answer_text()


def test_decode_stops_at_eos_or_pad():
    fmt = NumberFormat()
    assert decode_answer(["2", "1", EOS_TOKEN, "9"], fmt) == "12"
    assert decode_answer(["2", "1", EOS_TOKEN, PAD_TOKEN], fmt) == "12"
    assert decode_answer(["0", "0", "1", EOS_TOKEN], fmt) == "100"
    assert decode_answer(["0", "0", "1", EOS_TOKEN], NumberFormat(reverse_answer=False)) == "1"
    assert decode_answer(["-", "7", "0", EOS_TOKEN], NumberFormat(task="sub")) == "-7"
    # Formats without an end token: the answer is every token written, up to any padding.
    fixed = NumberFormat(answer_width=3, end_token=False)
    assert decode_answer(["2", "1", "0"], fixed) == "12"
    assert decode_answer(["2", "1", PAD_TOKEN, PAD_TOKEN], NumberFormat(end_token=False)) == "12"
    assert decode_answer(["F", "F"], NumberFormat(base=16, end_token=False)) == "255"


def test_an_answer_without_its_end_token_is_none():
    """An answer cut off by the token budget (or ended by <pad>) is not read as a number."""
    fmt = NumberFormat()
    assert decode_answer(["8"] + ["9"] * 19, fmt) is None  # 20 of a 31-digit sum's tokens, no <eos>
    assert decode_answer(["8"] + ["9"] * 19 + [EOS_TOKEN], fmt) == "9" * 19 + "8"
    assert decode_answer(["2", "1", PAD_TOKEN, EOS_TOKEN], fmt) is None
    assert decode_answer(["a", "b"], NumberFormat(task="sort")) is None
    assert decode_answer(["a", "b", EOS_TOKEN], NumberFormat(task="sort")) == "ab"


def test_a_sort_answer_has_one_line_per_digit_place_only_in_the_radix_forms():
    """The order written at once is one line whatever the numbers' lengths ('a:13,b:9' = 'ba'); radix passes
    write one line per digit place of the longest number."""
    lengths = np.array([2, 1])
    plain = NumberFormat(task="sort", scratchpad="none")
    assert decode_answer(["b", "a", EOS_TOKEN], plain, lengths) == "ba"
    assert decode_answer(["b", EOS_TOKEN], plain, lengths) is None  # an item left out
    passes = NumberFormat(task="sort", scratchpad="radix_passes")
    assert decode_answer(["b", "a", EOS_TOKEN], passes, lengths) is None  # one pass of two
    assert decode_answer(["a", "b", "=", "b", "a", EOS_TOKEN], passes, lengths) == "ba"


@pytest.mark.parametrize("tokens,fmt", [
    ([], NumberFormat()),
    ([EOS_TOKEN, "1"], NumberFormat()),
    (["1", "+"], NumberFormat()),
    (["-", "5"], NumberFormat()),
    (["-"], NumberFormat(task="sub")),
    (["-", "0"], NumberFormat(task="sub")),
    (["1", "-", "2"], NumberFormat(task="sub")),
    (["A"], NumberFormat()),
    (["G"], NumberFormat(base=16)),
    (["2"], NumberFormat(base=2)),
    (["a", "a"], NumberFormat(task="sort")),
    (["a", "c"], NumberFormat(task="sort", max_items=2)),
    (["a", "1"], NumberFormat(task="sort")),
    ([EOS_TOKEN], NumberFormat(task="sort")),
])
def test_decode_malformed_returns_none(tokens, fmt):
    assert decode_answer(tokens, fmt) is None


# -- the format itself -----------------------------------------------------------------------
@pytest.mark.parametrize("settings,message", [
    (dict(task="div"), "unknown task"),
    (dict(base=1), "base must be"),
    (dict(base=37), "base must be"),
    (dict(operand_width=-1), "operand_width"),
    (dict(answer_width=2.5), "answer_width"),
    (dict(task="sort", answer_width=3), "answer_width does not apply"),
    (dict(max_items=27), "max_items"),
    (dict(negative_answers="twos"), "negative_answers must be one of"),
    (dict(task="add", negative_answers="complement"), "applies to subtraction only, not addition"),
    (dict(task="sub", negative_answers="complement", answer_width=5), "answer_width does not apply to complement"),
    (dict(task="mul", scratchpad="sums"), "scratchpad must be one of"),
    (dict(task="add", scratchpad="running_sums"), "applies to multiplication only, not addition"),
    (dict(task="mul", scratchpad="radix_passes"), "applies to sorting only, not multiplication"),
    (dict(task="mul", scratchpad="running_sums", answer_width=10), "answer_width does not apply to running_sums"),
    (dict(task="mul", scratchpad="shifted_sums", answer_width=10), "answer_width does not apply to shifted_sums"),
])
def test_bad_formats(settings, message):
    with pytest.raises(FormatError, match=message) as info:
        NumberFormat(**settings)
    assert "\n" not in str(info.value)


def test_format_dict_round_trip():
    fmt = NumberFormat(task="sub", base=16, operand_width=3, end_token=False)
    assert NumberFormat.from_dict(fmt.to_dict()) == fmt
    with pytest.raises(FormatError, match="unknown number_format keys"):
        NumberFormat.from_dict({"task": "add", "colour": "red"})


@pytest.mark.parametrize("text, task, operands", [
    ("12*034", "mul", ["12", "34"]), (" 9 - 4 ", "sub", ["9", "4"]), ("1+2", "add", ["1", "2"]),
    ("a:31,b:7,c:120", "sort", ["31", "7", "120"]),
])
def test_the_task_of_a_typed_problem_is_the_one_whose_syntax_reads_it(text, task, operands):
    from hf_arith.data.formatting import task_of

    assert task_of(text) == (task, operands)


@pytest.mark.parametrize("text, message", [
    ("12x4", "'12x4' is not a problem: type A+B, A-B, A*B, a:31,b:7,c:120"),
    ("3*4x", "'3*4x': 'x' is not a decimal digit"),  # the task its sign names says what is wrong
    ("a:5,b", "a:5,b"), ("", "empty problem"), (None, "a problem must be a string"),
    # The sign typed first names the task, though a later '-' is subtraction's sign too.
    ("3*-2", "'3*-2': negative numbers are not supported"),
    ("a:-5,b:3", "'a:-5,b:3': sort items look like 'a:31,b:7', got 'a:-5'"),
    ("12+3=", "'12+3=': type the problem without '='"),
])
def test_a_problem_no_task_reads_is_one_line_from_the_task_its_sign_names(text, message):
    from hf_arith.data.formatting import task_of

    with pytest.raises(FormatError, match=re.escape(message)):
        task_of(text)
