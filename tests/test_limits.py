"""`hf_arith.runtime.limits`: each limit against what the model, `solve` or an independent route says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import hf_arith
from hf_arith import solve
from hf_arith.data.formatting import OPERATORS, SORT_LABELS, FormatError, NumberFormat, parse_problems, quote, render
from hf_arith.data.problems import example_problem
from hf_arith.data.streaming import worst_case_length
from hf_arith.models import MAX_RECURRENCES
from hf_arith.runtime.limits import SORT_ITEMS, ModelLimits, model_limits, problem_spec
from hf_arith.runtime.loading import load_checkpoint

BUNDLED = hf_arith.bundled_models()


@pytest.fixture(scope="module", params=BUNDLED)
def bundled(request):
    name = request.param
    return (name, *load_checkpoint(name))


def widest_problem(fmt, digits: int) -> str:
    """Two operands (sorting: as many items as eval draws) of `digits` digits, every digit the
    base's largest, written in decimal."""
    top = fmt.base**digits - 1
    if fmt.task == "sort":
        return ",".join(f"{label}:{top}" for label in SORT_LABELS[:min(SORT_ITEMS, fmt.max_items)])
    return f"{top}{OPERATORS[fmt.task]}{top}"


def limit_phrase(model, fmt, problem: str) -> str:
    """What the refusal of a too-long `problem` must name: the limit that binds first (the context,
    which written working such as running sums fills first, then the abacus range)."""
    if fmt.operand_width:
        return f"more than {fmt.operand_width} base-{fmt.base} digits"
    parsed = parse_problems([problem], fmt)
    prompt = int(render(parsed, fmt, with_answer=False)[2][0])
    if prompt + fmt.max_answer_tokens(parsed) > model.config.max_position_embeddings:
        return f"context of {model.config.max_position_embeddings} positions"
    if getattr(model.config, "abacus_max_digits", None) is not None:
        return f"abacus range of {model.config.abacus_max_digits} digits"
    return f"context of {model.config.max_position_embeddings} positions"


def test_max_digits_is_the_longest_operand_solve_takes(bundled):
    name, model, tok = bundled
    fmt = tok.arith_format
    digits = model_limits(model, tok).max_digits
    assert digits >= 10  # every bundled model takes the tiny-adder protocol's lengths
    answer = solve(model, tok, [widest_problem(fmt, digits)])[0]
    assert answer is None or (answer.isalpha() if fmt.task == "sort" else answer.lstrip("-").isdigit())
    too_long = widest_problem(fmt, digits + 1)
    with pytest.raises(FormatError) as info:
        solve(model, tok, [too_long])
    message = str(info.value)
    assert "\n" not in message and quote(too_long) in message and limit_phrase(model, fmt, too_long) in message, message


def test_an_operand_past_the_hard_limit_is_refused_beside_a_short_one(bundled):
    # The stated hard limit holds for every operand: a lopsided problem past it is refused even where
    # its tokens would fit the context and abacus range.
    name, model, tok = bundled
    fmt = tok.arith_format
    digits = model_limits(model, tok).max_digits
    longer = str(fmt.base**digits)  # digits + 1 digits in the model's base, written in decimal
    lopsided = f"a:{longer},b:1" if fmt.task == "sort" else f"{longer}{OPERATORS[fmt.task]}1"
    with pytest.raises(FormatError) as info:
        solve(model, tok, [lopsided])
    message = str(info.value)
    assert "\n" not in message and quote(lopsided) in message, message
    assert any(phrase in message for phrase in (f"hard limit of {digits:,}", "abacus range of", "context of",
                                                f"more than {fmt.operand_width} base-")), message


@pytest.mark.parametrize("task", ["add", "sub", "mul", "sort", "mul running_sums"])
@pytest.mark.parametrize("context", [30, 33, 100])
def test_max_digits_matches_the_worst_case_length_of_the_training_data(task, context):
    # streaming.worst_case_length sizes training rows: an independent route to the same limit.
    task, _, scratchpad = task.partition(" ")
    fmt = NumberFormat(task=task, scratchpad=scratchpad or "none")
    limits = ModelLimits(fmt=fmt, context=context, abacus_max_digits=None, abacus_answer_offset=0,
                         loops=None, tokens_per_step=(1, 1))
    fitting = [d for d in range(1, context + 1) if worst_case_length(problem_spec(fmt, 1, d), fmt) <= context]
    assert limits.max_digits == max(fitting)
    limits.check_digit_range(1, limits.max_digits)
    with pytest.raises(FormatError, match=f"max_digits {limits.max_digits + 1}: .*context of {context} positions"):
        limits.check_digit_range(1, limits.max_digits + 1)


def test_a_model_that_takes_nothing_says_so():
    limits = ModelLimits(fmt=NumberFormat(), context=4, abacus_max_digits=None, abacus_answer_offset=0,
                         loops=None, tokens_per_step=(1, 1))
    with pytest.raises(FormatError, match="takes no problem at all.*context of 4 positions"):
        _ = limits.max_digits


def test_problems_that_fit_alone_but_not_decoded_together():
    # Sorting answers with a label per item: seven one-digit items have the longest answer, five
    # three-digit ones the longest prompt; each alone fits the 37 positions, within the hard limit.
    limits = ModelLimits(fmt=NumberFormat(task="sort", max_items=12), context=37, abacus_max_digits=None,
                         abacus_answer_offset=0, loops=None, tokens_per_step=(1, 1))
    assert limits.max_digits == 3
    long_answer = ",".join(f"{label}:9" for label in SORT_LABELS[:7])
    long_prompt = ",".join(f"{label}:999" for label in SORT_LABELS[:5])
    texts = [long_answer, long_prompt]
    limits.check_problems(texts, batch_size=1)
    with pytest.raises(FormatError) as info:
        limits.check_problems(texts)
    message = str(info.value)
    assert quote(long_prompt) in message and quote(long_answer) in message and "context of 37" in message


def test_training_range_read_from_a_bundled_checkpoint():
    for name in BUNDLED:
        model, tok = load_checkpoint(name)
        folder = Path(hf_arith.bundled_path(name))
        summary = json.loads((folder / "training_summary.json").read_text())
        width = tok.arith_format.operand_width
        expected = tuple(summary["train_digits"]) if "train_digits" in summary else (1, width) if width else None
        assert model_limits(model, tok, folder).training_range == expected, name
        assert model_limits(model, tok).training_range == ((1, width) if width else None)  # no folder: width only
    assert any(model_limits(*load_checkpoint(n), hf_arith.bundled_path(n)).training_range == (1, 10) for n in BUNDLED)


def test_loops_range_is_the_models_own(bundled):
    name, model, tok = bundled
    limits = model_limits(model, tok)
    if not hasattr(model.config, "num_recurrences"):
        assert limits.loops is None
        with pytest.raises(FormatError, match="--loops: .*no recurrence"):
            limits.check_loops([1, 2], what="--loops")
        return
    assert limits.loops == (1, MAX_RECURRENCES)
    assert limits.check_loops([1, MAX_RECURRENCES]) == [1, MAX_RECURRENCES]
    token = tok(["1+1"], return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        model(input_ids=token, num_recurrences=MAX_RECURRENCES)  # the model takes the top of the range
        for bad in (0, MAX_RECURRENCES + 1):  # and refuses just beyond it, as the limits do
            with pytest.raises(ValueError, match="num_recurrences"):
                model(input_ids=token, num_recurrences=bad)
            with pytest.raises(FormatError, match=f"--loops {bad}: num_recurrences .* between 1 and {MAX_RECURRENCES}"):
                limits.check_loops([1, bad], what="--loops")


def test_tokens_per_step_up_to_the_models_heads(bundled):
    name, model, tok = bundled
    heads = getattr(model.config, "num_future_tokens", 1) or 1
    assert model_limits(model, tok).tokens_per_step == (1, heads)
    problem = example_problem(tok.arith_format, 2)  # one of the model's own task
    assert solve(model, tok, [problem], tokens_per_step=heads) == solve(model, tok, [problem])
    with pytest.raises(FormatError, match=rf"tokens_per_step={heads + 1} .*num_future_tokens={heads}\)"):
        solve(model, tok, [problem], tokens_per_step=heads + 1)


def test_grid_and_digit_range_name_the_option_and_the_limit(bundled):
    name, model, tok = bundled
    limits = model_limits(model, tok)
    top = limits.max_digits
    if tok.arith_format.task == "sort":  # rows: list sizes; the limit is the longest list at the longest numbers
        limits.check_grid((1, top), items=(2, 5))
        with pytest.raises(FormatError, match=f"^grid items 2:5 with items of {top + 1} digits: "):
            limits.check_grid((1, top + 1), items=(2, 5))
    else:
        limits.check_grid((1, top))
        with pytest.raises(FormatError, match=f"^grid up to {top + 1} digits: "):
            limits.check_grid((1, top + 1))
    with pytest.raises(FormatError, match=f"^--max-digits {top + 1}: "):
        limits.check_digit_range(1, top + 1, names=("--min-digits", "--max-digits"))
    with pytest.raises(FormatError, match="need 1 <= --min-digits <= --max-digits, got 3 and 2"):
        limits.check_digit_range(3, 2, names=("--min-digits", "--max-digits"))


@pytest.mark.parametrize("task", ["add", "sub", "mul"])
def test_the_longest_accepted_problem_decodes_even_when_every_answer_token_is_a_digit(task):
    # A model that writes digits only (no sign, no end token) uses every answer token for digits;
    # the abacus must place all of them: a subtraction answer without its sign has one digit more.
    from hf_arith.data.tokenization_arith import ArithTokenizer
    from tests.test_abacus_model import make

    fmt = NumberFormat(task=task, reverse_operands=True, reverse_answer=True, end_token=True)
    tok = ArithTokenizer(number_format=fmt)
    model, tok = make(fmt=fmt, abacus_align_answer=True, answer_start_token_id=tok.convert_tokens_to_ids("="))
    digit = tok.convert_tokens_to_ids("9")
    with torch.no_grad():
        model.lm_head.weight.zero_()
    model.lm_head.bias = torch.nn.Parameter(torch.zeros(len(tok)).index_fill_(0, torch.tensor([digit]), 1.0))
    digits = model_limits(model, tok).max_digits
    answer = solve(model, tok, widest_problem(fmt, digits))
    assert answer is None or set(answer.lstrip("-")) == {"9"}


def test_running_sums_that_overrun_the_abacus_table_decode_as_none():
    # A multiplication model that writes only digits: its answer runs past the abacus table (the
    # budget of a 5x5 product with its running sums is 45 tokens, the table 24), which the decoder
    # must survive, and the answer is malformed, not an error and not a number.
    from hf_arith.data.tokenization_arith import ArithTokenizer
    from tests.test_abacus_model import make

    fmt = NumberFormat(task="mul", scratchpad="running_sums")
    tok = ArithTokenizer(number_format=fmt)
    model, tok = make(fmt=fmt, abacus_align_answer=True, answer_start_token_id=tok.convert_tokens_to_ids("="),
                      abacus_max_digits=24)
    digit = tok.convert_tokens_to_ids("9")
    with torch.no_grad():
        model.lm_head.weight.zero_()
    model.lm_head.bias = torch.nn.Parameter(torch.zeros(len(tok)).index_fill_(0, torch.tensor([digit]), 1.0))
    assert model_limits(model, tok).max_digits >= 5
    assert solve(model, tok, ["12345*67890", "3*4"]) == [None, None]
    with pytest.raises(FormatError, match="abacus range of 24 digits"):
        solve(model, tok, ["9" * 12 + "*" + "9" * 12])  # a product of 24 digits: the limits refuse it first
    # Operands that fit the table but whose working does not: the refusal names both lengths.
    with pytest.raises(FormatError, match="its operands of up to 20 digits need numbers of 2[1-9] digits in the "
                                          "answer, beyond this model's abacus range of 24 digits"):
        solve(model, tok, ["9" * 20 + "*" + "9" * 5])


def test_running_sums_must_have_the_problems_shape():
    from hf_arith.data.tokenization_arith import ArithTokenizer

    tok = ArithTokenizer(number_format=NumberFormat(task="mul", scratchpad="running_sums"))
    written = [tok.convert_tokens_to_ids(list(text)) + [tok.eos_token_id]
               for text in ("5160=53550", "53550", "51600=535509")]
    assert tok.decode_answers(written) == ["5535", "5535", "905535"]
    # 123*45 has two sums, of 4 and 5 digits: one sum alone, or sums too wide, are not its answer.
    assert tok.decode_answers(written, ["123*45"] * 3) == ["5535", None, None]
    with pytest.raises(FormatError, match="3 rows of generated ids answer 1 problems"):
        tok.decode_answers(written, ["123*45"])


def test_radix_passes_budget_covers_the_longest_items():
    # Plain sorting answers one label per item, so the most items bound the answer; with radix
    # passes the longest items write the most lines, and the budget must cover them too.
    for scratchpad in ("none", "radix_passes", "radix_keys"):
        fmt = NumberFormat(task="sort", scratchpad=scratchpad)
        limits = ModelLimits(fmt=fmt, context=256, abacus_max_digits=None, abacus_answer_offset=0,
                             loops=None, tokens_per_step=(1, 1))
        worst = limits.answer_budget(limits.worst_case(limits.max_digits))
        assert limits.max_answer_tokens == max(worst, fmt.max_items + 1)
    assert limits.max_answer_tokens > fmt.max_items + 1


# -- the measured range, beside the hard limit ------------------------------------------------------
def test_measured_range_pools_the_report_and_the_grid_by_longest_operand():
    from hf_arith.runtime.limits import measured_accuracy, measured_max_digits

    report = {"by_max_operand_length": {"1": 1.0, "2": 1.0}, "count_by_max_operand_length": {"1": 100, "2": 100}}
    grid = {"lengths": [1, 3], "samples_per_cell": 10, "matrices": {"exact_match": [
        [1.0, 1.0, 1.0], [1.0, 1.0, 0.5], [1.0, 0.5, 0.0]]}}
    accuracy = measured_accuracy(report, grid)
    assert accuracy[2] == 1.0 and accuracy[3] == pytest.approx((10 + 10 + 5 + 5 + 0) / 50)
    assert measured_max_digits(report, grid) == 2 and measured_max_digits(report) == 2
    assert measured_max_digits({"by_max_operand_length": {"2": 1.0}}) is None  # 1 digit was not measured
    sort = {"axes": ["items", "digits"], "items": [2, 4], "train_items": [2, 3], "lengths": [1, 2],
            "samples_per_cell": 10, "matrices": {"exact_match": [[1.0, 1.0], [1.0, 1.0], [0.0, 0.0]]}}
    assert measured_max_digits(None, sort) == 2  # lists beyond the trained sizes are not its range


@pytest.mark.parametrize("name", hf_arith.bundled_models())
def test_bundled_configs_record_their_hard_limit_and_measured_range(name):
    """Two numbers: what the model accepts (max_operand_digits, from its context and abacus range) and where
    its held-out answers were measured at >= 99 % (measured_max_digits, from the files it ships)."""
    from hf_arith.publishing.model_card import EVAL_FILE, GRID_FILE, load_grid
    from hf_arith.runtime.limits import MEASURED_EXACT, measured_accuracy, measured_max_digits

    folder = Path(hf_arith.bundled_path(name))
    saved = json.loads((folder / "config.json").read_text())
    model, tok = load_checkpoint(name)
    limits = model_limits(model, tok)
    assert saved["max_operand_digits"] == limits.max_digits and saved["max_answer_tokens"] == limits.max_answer_tokens
    report, grid = json.loads((folder / EVAL_FILE).read_text()), load_grid(folder / GRID_FILE)
    measured = measured_max_digits(report, grid)
    assert saved["measured_max_digits"] == measured == limits.measured_max_digits
    accuracy = measured_accuracy(report, grid)
    if measured is None:  # no range: 1 digit itself short of 99 % (abacus-gpt2-sort-10: ten one-digit numbers)
        assert accuracy[1] < MEASURED_EXACT
        return
    assert 1 <= measured <= limits.max_digits
    assert all(accuracy[n] >= MEASURED_EXACT for n in range(1, measured + 1))
    assert accuracy.get(measured + 1, 0.0) < MEASURED_EXACT
