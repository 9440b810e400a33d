"""The length grid, the answer perplexity, the loops curve and `hf-arith eval --grid/--loops/--stress`.

Models are trained for a few steps only, so tests check plumbing and numbers computed by hand
or by an independent route, never accuracy.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import evaluate
import numpy as np
import pytest
import torch
from cli_contract import fails
from test_plots import assert_png

import hf_arith.evaluation.held_out as evaluation
from hf_arith.cli import main
from hf_arith.data.formatting import FormatError, NumberFormat, problems_from_ints, render
from hf_arith.data.problems import reference_answer, split_of, with_answers
from hf_arith.data.streaming import worst_case_length
from hf_arith.evaluation.grid import (
    answer_perplexity,
    cell_problems,
    grid_report,
    length_grid,
    parse_length_range,
    plain_text,
    solved_up_to,
    sort_cell_problems,
    stack,
)
from hf_arith.evaluation.metrics import metric_path
from hf_arith.evaluation.plots import GRID_SIZE, LOOPS_SIZE
from hf_arith.families import FAMILIES
from hf_arith.runtime.limits import model_limits, training_range
from hf_arith.runtime.loading import load_checkpoint
from hf_arith.runtime.saving import save_checkpoint
from hf_arith.training.recipe import list_presets, load_recipe
from hf_arith.training.run import build_model, build_tokenizer, check_recipe, recipe_spec


@pytest.fixture(scope="module")
def tiny(add10):
    return load_checkpoint(add10)


def family_presets() -> dict[str, str]:
    """The first preset (by name) of each model family: the tests that run on every family use it."""
    found = {}
    for name in list_presets():
        found.setdefault(load_recipe(name, []).family, name)
    return found


FAMILY_PRESETS = family_presets()


def random_model(preset: str, seed: int = 0):
    """An untrained model of a preset, weights spread out (norms keep their init) so that outputs
    differ between positions and rows: the default small init predicts almost uniformly."""
    recipe = load_recipe(preset, [])
    fmt = check_recipe(recipe)
    context = worst_case_length(recipe_spec(recipe, fmt), fmt)
    tok = build_tokenizer(fmt, context)
    model = build_model(recipe, tok, context).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" not in name and ".ln_" not in name:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
    return model, tok


def test_every_family_has_a_preset():
    # A family added later is covered by the every-family tests once it has a preset.
    assert set(FAMILY_PRESETS) == set(FAMILIES)


# -- spec and problems ----------------------------------------------------------------------
def test_parse_length_range():
    assert parse_length_range("1:30") == (1, 30)
    assert parse_length_range(" 4 : 4 ") == (4, 4)
    for bad in ("3-5", "5:3", "0:4", "a:b", "1:", "1:2:3", ""):
        with pytest.raises(FormatError, match="expected A:B"):
            parse_length_range(bad)


@pytest.mark.parametrize(("len_a", "len_b"), [(1, 1), (2, 3), (7, 12)])
def test_cell_problems_have_exact_lengths_and_are_held_out(len_a, len_b):
    problems, info = cell_problems("add", 10, len_a, len_b, 50, seed=3)
    texts, _ = plain_text(with_answers(problems))
    assert all(len(t.split("+")[0]) == len_a and len(t.split("+")[1]) == len_b for t in texts)
    assert split_of(problems).all() and info["heldout"]
    assert 1 <= info["distinct"] <= 50
    again, _ = cell_problems("add", 10, len_a, len_b, 50, seed=3)
    assert np.array_equal(again.operands, problems.operands)  # a cell is the same in every grid


def test_tiny_cells_reuse_their_few_held_out_problems():
    problems, info = cell_problems("add", 10, 1, 1, 100, seed=0)
    # 1x1 has 100 problems; the held-out split holds about a tenth of them, all of which get used.
    every = problems_from_ints("add", [[a, b] for a in range(10) for b in range(10)], 10)
    held_out = int(split_of(every).sum())
    assert len(problems) == 100 and split_of(problems).all()
    assert info["distinct"] == len({tuple(r.ravel()) for r in problems.operands}) == held_out < 100
    _, no_split = cell_problems("add", 10, 1, 1, 10, test_fraction=0.0)
    assert not no_split["heldout"]


@pytest.mark.parametrize(("items", "digits"), [(2, 1), (3, 4), (5, 6)])
def test_sort_cells_hold_lists_of_that_size_with_every_number_that_long(items, digits):
    problems, info = sort_cell_problems(10, items, digits, 40, seed=2)
    texts, answers = plain_text(problems)
    for text, answer in zip(texts, answers):
        numbers = [item.split(":")[1] for item in text.split(",")]
        assert len(numbers) == items and all(len(n) == digits for n in numbers), text
        assert answer == reference_answer(text, NumberFormat(task="sort", max_items=8))
    assert split_of(problems).all() and info["heldout"] and 1 <= info["distinct"] <= 40
    again, _ = sort_cell_problems(10, items, digits, 40, seed=2)
    assert np.array_equal(again.operands, problems.operands)  # a cell is the same in every grid


def test_a_sorting_grid_has_list_sizes_for_rows_and_item_digits_for_columns():
    from hf_arith.evaluation.plots import plot_grid

    model, tok = random_model("abacus-gpt2-sort")
    result = length_grid(model, tok, (1, 3), samples_per_cell=4, items=(2, 4), train_range=(1, 2),
                         train_items=(2, 3), keep_problems=True)
    assert result["axes"] == ["items", "digits"] and result["items"] == [2, 4] and result["train_items"] == [2, 3]
    assert np.asarray(result["matrices"]["exact_match"]).shape == (3, 3)  # rows: 2-4 items; columns: 1-3 digits
    problems = result["problems"]
    for p in problems:  # every list is as long as its row says, every number as long as its column says
        numbers = [item.split(":")[1] for item in p["problem"].split(",")]
        assert len(numbers) == p["items"] and {len(n) for n in numbers} == {p["digits"]}
    for cell in result["cells"]:
        mine = [p for p in problems if (p["items"], p["digits"]) == (cell["items"], cell["digits"])]
        assert len(mine) == 4 and cell["exact_match"] == np.mean([p["prediction"] == p["answer"] for p in mine])
        row, column = cell["items"] - 2, cell["digits"] - 1
        assert result["matrices"]["exact_match"][row][column] == cell["exact_match"]
    inside = [p["prediction"] == p["answer"] for p in problems if p["items"] <= 3 and p["digits"] <= 2]
    assert len(inside) == 16 and result["summary"]["in_training_range_exact_match"] == np.mean(inside)
    assert "solved_up_to_99" not in result["summary"]  # no diagonal of equal lengths in items x digits
    fig = plot_grid(result)
    assert fig.axes[0].get_ylabel() == "numbers in the list" and fig.axes[0].get_xlabel() == "digits of every number"
    assert "red box: trained on lists of 2-3 numbers of 1-2 digits" in fig.axes[0].get_title()


def test_a_grid_with_views_answers_each_list_by_their_vote():
    """With views, every list is decoded (view one's teacher-forced check no longer decides its answer)
    and its prediction is the one `solve` gives with the same views; its perplexity stays view one's."""
    from hf_arith.runtime.solving import solve

    model, tok = random_model("abacus-gpt2-sort")
    one = length_grid(model, tok, (1, 2), samples_per_cell=3, items=(2, 3), keep_problems=True, views=1)
    voted = length_grid(model, tok, (1, 2), samples_per_cell=3, items=(2, 3), keep_problems=True, views=3)
    assert (one["views"], voted["views"]) == (1, 3) and voted["summary"]["decoded"] == 12
    texts = [p["problem"] for p in voted["problems"]]
    assert [p["problem"] for p in one["problems"]] == texts
    assert [p["prediction"] for p in voted["problems"]] == solve(model, tok, texts, views=3, warn_beyond_training=False)
    assert [p["perplexity"] for p in voted["problems"]] == [p["perplexity"] for p in one["problems"]]
    with pytest.raises(FormatError, match="views must be an integer from 1 to 16"):
        length_grid(model, tok, (1, 2), samples_per_cell=1, items=(2, 3), views=17)


@pytest.mark.parametrize(("task", "base"), [("add", 10), ("sub", 10), ("mul", 7)])
def test_plain_text_matches_the_reference_conversion(task, base):
    problems = with_answers(stack([cell_problems(task, base, a, b, 20, seed=1)[0] for a, b in ((1, 3), (4, 2))]))
    texts, answers = plain_text(problems)
    assert texts == problems.to_text()
    assert answers == problems.answer_text()


def test_grid_rejects_formats_it_cannot_draw(tiny):
    model, tok = tiny
    with pytest.raises(FormatError, match="fixed width of 10"):
        length_grid(model, tok, (1, 11))
    sort_tok = build_tokenizer(NumberFormat(task="sort"), 64)
    with pytest.raises(FormatError, match="another number format"):  # not this model's tokenizer
        length_grid(model, sort_tok, (1, 3))
    sort_model = types.SimpleNamespace(config=types.SimpleNamespace(max_position_embeddings=64))  # no fingerprint
    with pytest.raises(FormatError, match="^grid items 2:9: lists must hold 2 to 8 items"):
        length_grid(sort_model, sort_tok, (1, 3), items=(2, 9))
    with pytest.raises(FormatError, match="^grid items 2:8 with items of 6 digits: .*context of 64 positions"):
        length_grid(sort_model, sort_tok, (1, 6))  # every list size the format writes, the longest last
    with pytest.raises(FormatError, match="^grid items: item counts apply to sorting; this model does addition"):
        length_grid(model, tok, (1, 3), items=(2, 3))


def test_training_range_from_summary_or_width(tmp_path):
    assert training_range(NumberFormat(operand_width=10)) == (1, 10)
    assert training_range(NumberFormat()) is None
    (tmp_path / "training_summary.json").write_text(json.dumps({"train_digits": [1, 20]}))
    assert training_range(NumberFormat(), tmp_path) == (1, 20)


# -- numbers --------------------------------------------------------------------------------
def test_grid_report_by_hand():
    # Cells 1x1, 1x2, 2x1, 2x2 with two problems each.
    lengths = [(1, 1), (1, 1), (1, 2), (1, 2), (2, 1), (2, 1), (2, 2), (2, 2)]
    answers = ["5", "9", "12", "15", "21", "30", "101", "99"]
    predictions = ["5", "9", "12", None, "20", "30", "111", "98"]
    perplexity = [1, 1, 1, 9, 3, 1, 2, 4]
    report = grid_report(predictions, answers, lengths, perplexity, 1, 2, train_range=(1, 1))
    cells = report["cells"]
    assert [cells[k]["exact_match"] for k in [(1, 1), (1, 2), (2, 1), (2, 2)]] == [1.0, 0.5, 0.5, 0.0]
    assert [cells[k]["mean_perplexity"] for k in [(1, 1), (1, 2), (2, 1), (2, 2)]] == [1.0, 5.0, 2.0, 3.0]
    assert cells[(1, 2)]["malformed"] == 0.5
    assert cells[(2, 2)]["per_digit_accuracy"] == pytest.approx(3 / 5)  # 111 vs 101: 2 of 3; 98 vs 99: 1 of 2
    s = report["summary"]
    assert s["exact_match"] == pytest.approx(4 / 8)
    assert s["in_training_range_exact_match"] == 1.0
    assert s["beyond_training_range_exact_match"] == pytest.approx(2 / 6)
    assert s["solved_up_to_99"] == 1


def test_solved_up_to():
    cells = {(a, b): {"exact_match": 1.0 if max(a, b) <= 3 else 0.5} for a in range(1, 6) for b in range(1, 6)}
    assert solved_up_to(cells, 1, 5) == 3
    cells[(1, 1)]["exact_match"] = 0.0
    assert solved_up_to(cells, 1, 5) == 0


def test_metric_and_grid_agree_on_the_same_predictions(tiny):
    model, tok = tiny
    result = length_grid(model, tok, (2, 4), samples_per_cell=15, seed=5, keep_problems=True)
    problems = result["problems"]
    metric = evaluate.load(metric_path())
    scores = metric.compute(predictions=[p["prediction"] for p in problems],
                            references=[p["answer"] for p in problems],
                            problems=[p["problem"] for p in problems])
    for cell in result["cells"]:
        key = f"{cell['len_a']}x{cell['len_b']}"
        assert scores["by_operand_lengths"][key] == cell["exact_match"]
        assert scores["count_by_operand_lengths"][key] == cell["n"] == 15
    assert scores["exact_match"] == pytest.approx(result["summary"]["exact_match"])
    matrix = np.array(result["matrices"]["exact_match"])
    assert matrix.shape == (3, 3)
    assert matrix[1, 2] == scores["by_operand_lengths"]["3x4"]  # row len_a 3, column len_b 4
    # The predictions are the model's own: solve on the same problems gives the same answers.
    from hf_arith import solve

    sample = problems[::7]
    assert solve(model, tok, [p["problem"] for p in sample]) == [p["prediction"] for p in sample]


class UniformModel(torch.nn.Module):
    """Equal logits everywhere: every answer token has probability 1/V, so perplexity is V."""

    def __init__(self, vocab: int):
        super().__init__()
        self.vocab = vocab
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.config = types.SimpleNamespace()

    def forward(self, input_ids, attention_mask=None, **kwargs):
        return types.SimpleNamespace(logits=torch.zeros(*input_ids.shape, self.vocab) + self.weight)


def test_answer_perplexity_of_a_uniform_model_is_the_vocabulary_size(tiny):
    _, tok = tiny
    problems = with_answers(stack([cell_problems("add", 10, a, b, 3)[0] for a, b in ((1, 1), (3, 7))]))
    vocab = len(tok.arith_format.vocab())
    assert np.allclose(answer_perplexity(UniformModel(vocab), tok, problems), vocab)


def test_answer_perplexity_matches_an_unbatched_forward(tiny):
    model, tok = tiny
    problems = with_answers(stack([cell_problems("add", 10, a, b, 2, seed=9)[0] for a, b in ((1, 2), (6, 3))]))
    batched = answer_perplexity(model, tok, problems, batch_size=3)
    from hf_arith.data.formatting import render

    ids, lengths, prompts = render(problems, tok.arith_format, with_answer=True)
    for i in range(len(problems)):
        row = torch.tensor(ids[i, : lengths[i]])[None]
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=row).logits[0, :-1], -1)
        targets = row[0, 1:]
        nll = -logp[torch.arange(len(targets)), targets][prompts[i] - 1 :].mean()
        assert batched[i] == pytest.approx(float(torch.exp(nll)), rel=1e-4)


@pytest.mark.parametrize("family", sorted(FAMILY_PRESETS))
def test_answer_perplexity_matches_an_unbatched_forward_in_every_family(family):
    # Problems of different lengths in one batch: left padding must not move positions (absolute,
    # rotary or abacus) or leak into the answer's likelihood.
    model, tok = random_model(FAMILY_PRESETS[family])
    fmt = tok.arith_format
    problems = with_answers(stack([cell_problems(fmt.task, fmt.base, a, b, 2, seed=9)[0] for a, b in ((1, 2), (6, 3))]))
    batched = answer_perplexity(model, tok, problems, batch_size=4)
    ids, lengths, prompts = render(problems, fmt, with_answer=True)
    for i in range(len(problems)):
        row = torch.tensor(ids[i, : lengths[i]])[None]
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=row).logits[0, :-1].float(), -1)
        targets = row[0, 1:]
        nll = -logp[torch.arange(len(targets)), targets][prompts[i] - 1 :].mean()
        assert batched[i] == pytest.approx(float(torch.exp(nll)), rel=1e-3)
    assert batched.min() > 1.5  # spread weights: far from certain, so a wrong token would show


@pytest.mark.parametrize("family", sorted(FAMILY_PRESETS))
def test_small_grid_runs_in_every_family(family, capsys, monkeypatch):
    import hf_arith.text

    monkeypatch.setattr(hf_arith.text, "PROGRESS_DELAY", 0.0)  # a bar from the start, however quick the grid
    model, tok = random_model(FAMILY_PRESETS[family])
    result = length_grid(model, tok, (1, 2), samples_per_cell=3, keep_problems=True, progress=True)
    assert np.array(result["matrices"]["mean_perplexity"]).shape == (2, 2)
    assert len(result["problems"]) == 12 and result["summary"]["n"] == 12
    # The progress bar counts the teacher-forced pass over every problem, then the decoded ones
    # (an untrained model gets none right, so all of them).
    assert result["summary"]["decoded"] == 12
    err = capsys.readouterr().err
    assert "grid" in err and "24/24" in err


def test_grid_decodes_only_what_teacher_forcing_cannot_confirm_and_matches_full_decoding():
    # abacus-gpt2-add is right up to 20 digits (trained on 10) and often wrong from about 33, so
    # this grid mixes confirmed and decoded rows; every prediction must be greedy decoding's own.
    from hf_arith import solve

    model, tok = load_checkpoint("abacus-gpt2-add")
    result = length_grid(model, tok, (30, 35), samples_per_cell=4, seed=3, keep_problems=True)
    problems = result["problems"]
    decoded = result["summary"]["decoded"]
    assert 0 < decoded < len(problems)
    assert result["summary"]["exact_match"] < 1.0
    assert solve(model, tok, [p["problem"] for p in problems]) == [p["prediction"] for p in problems]
    # Confirmed rows are correct ones. A decoded row may still come out right: a non-canonical
    # token sequence (an extra leading 0) that reads as the correct number.
    assert len(problems) - decoded <= sum(p["prediction"] == p["answer"] for p in problems)


def test_grid_checks_what_the_model_can_take_before_running():
    model, tok = random_model(FAMILY_PRESETS["abacus_gpt2"])
    limit = model.config.abacus_max_digits  # a sum of two limit-digit numbers has limit + 1 digits
    with pytest.raises(FormatError, match=f"grid up to {limit} digits: .*abacus range of {limit}"):
        length_grid(model, tok, (limit, limit), samples_per_cell=1)
    context = model.config.max_position_embeddings
    with pytest.raises(FormatError, match=f"grid up to {context} digits: .*context of {context}"):
        length_grid(model, tok, (1, context), samples_per_cell=1)


# -- loops ----------------------------------------------------------------------------------
def test_loops_curve_by_hand(tiny, monkeypatch):
    model, tok = tiny
    texts, answers = ["1+1", "2+2", "3+3", "4+4"], ["2", "4", "6", "8"]
    inside = [True, True, False, False]

    def fake_solve(model, tokenizer, problems, batch_size, model_kwargs, checked, limits=None):
        assert checked  # loops_curve checked the problems once, before the first run
        n = model_kwargs["num_recurrences"]  # n loops get the first n problems right
        return [a if i < n else None for i, a in enumerate(answers)]

    monkeypatch.setattr(evaluation, "solve", fake_solve)
    with pytest.raises(FormatError, match="no recurrence"):
        evaluation.loops_curve(model, tok, texts, answers, [1, 2])
    monkeypatch.setattr(model.config, "num_recurrences", 1, raising=False)
    curve = evaluation.loops_curve(model, tok, texts, answers, [1, 2, 4], inside=inside)
    assert curve["exact_match"] == [0.25, 0.5, 1.0]
    assert curve["in_training_range"] == [0.5, 1.0, 1.0]
    assert curve["beyond_training_range"] == [0.0, 0.0, 1.0]


# -- the command line -----------------------------------------------------------------------
def test_eval_grid_stress_writes_json_png_and_summary(add10, tmp_path, capsys):
    out = tmp_path / "ev"
    code = main(["eval", str(add10), "--heldout", "--samples", "50", "--grid", "1:3", "--samples-per-cell", "6",
                 "--stress", "--output-dir", str(out)])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    assert "Length grid 1-3 x 1-3" in stdout and "carry_chains" in stdout
    grid = json.loads((out / "grid.json").read_text())
    assert np.array(grid["matrices"]["exact_match"]).shape == (3, 3)
    assert grid["train_range"] == [1, 10] and grid["samples_per_cell"] == 6
    problems = [json.loads(line) for line in (out / "grid_problems.jsonl").read_text().splitlines()]
    assert len(problems) == 9 * 6
    summary = json.loads((out / "summary.json").read_text())
    assert summary["grid"]["exact_match"] == grid["summary"]["exact_match"]
    assert set(summary["stress"]) >= {"commutativity", "carry_chains", "zero_operands", "max_length"}
    assert summary["unique_params"] > 0 and summary["heldout"]["n"] == 50
    assert_png(out / "grid.png", GRID_SIZE)


def test_eval_grid_of_the_sorting_model_counts_list_sizes_and_digits(tmp_path, capsys):
    out = tmp_path / "sort"
    code = main(["eval", "abacus-gpt2-sort", "--heldout", "--samples", "20", "--max-digits", "6", "--grid", "1:2", "--items", "4:6",
                 "--samples-per-cell", "3", "--output-dir", str(out), "--threads", "1"])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    # Its answers are votes of the model's five views (config.answer_views), as a user of the model gets them.
    assert "Grid of lists of 4-6 numbers x 1-2 digits each, each answer the vote of 5 views, 3 problems per cell" in stdout
    grid = json.loads((out / "grid.json").read_text())
    assert grid["views"] == 5 and "--views" not in grid["command"]
    assert grid["axes"] == ["items", "digits"] and grid["items"] == [4, 6] and grid["lengths"] == [1, 2]
    assert grid["train_items"] == [2, 5] and grid["train_range"] == [1, 6]  # from its training summary
    problems = [json.loads(line) for line in (out / "grid_problems.jsonl").read_text().splitlines()]
    assert sorted({(p["items"], p["digits"]) for p in problems}) == [(i, d) for i in (4, 5, 6) for d in (1, 2)]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["grid"]["items"] == [4, 6] and summary["heldout"]["n"] == 20
    assert_png(out / "grid.png", GRID_SIZE)
    message = fails(capsys, "eval", "abacus-gpt2-sort", "--grid", "1:2", "--items", "2:9", "--output-dir", tmp_path / "x")
    assert message.startswith("grid items 2:9: lists must hold 2 to 8 items")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Untrained checkpoints of the families with per-digit positions and with loops."""
    root = tmp_path_factory.mktemp("families")
    return {family: save_checkpoint(*random_model(FAMILY_PRESETS[family]), root / family)
            for family in ("abacus_gpt2", "looped")}


def test_eval_loops_writes_the_curve(saved, tmp_path, capsys):
    out = tmp_path / "loops"
    code = main(["eval", str(saved["looped"]), "--samples", "30", "--loops", "1,2,4", "--output-dir", str(out)])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    curve = json.loads((out / "loops.json").read_text())
    assert curve["loops"] == [1, 2, 4] and len(curve["exact_match"]) == 3 and curve["n"] == 30
    assert "recurrences" in stdout
    assert_png(out / "loops.png", LOOPS_SIZE)


@pytest.mark.parametrize(("argv", "words"), [
    (["--grid", "3-5"], ["--grid", "'3-5'", "A:B"]),
    (["--grid", "5:3"], ["--grid", "'5:3'"]),
    (["--grid", "0:3"], ["--grid"]),
    (["--grid", "1:11"], ["11 digits", "fixed width of 10"]),
    (["--loops", "1,2"], ["--loops", "no recurrence"]),
    (["--loops", "1,0"], ["--loops", "'1,0'"]),
    (["--grid", "1:2", "--samples-per-cell", "0"], ["--samples-per-cell"]),
])
def test_eval_bad_options_are_one_line_errors(add10, tmp_path, capsys, argv, words):
    message = fails(capsys, "eval", add10, *argv, "--output-dir", tmp_path / "out")
    for word in words:
        assert word in message


def test_eval_beyond_the_models_limits_fails_before_evaluating(saved, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("hf_arith.evaluation.held_out.evaluate_model", lambda *_, **__: pytest.fail("evaluated first"))
    config = json.loads((saved["abacus_gpt2"] / "config.json").read_text())
    digits, context = config["abacus_max_digits"], config["max_position_embeddings"]
    message = fails(capsys, "eval", saved["abacus_gpt2"], "--grid", f"1:{digits}", "--output-dir", tmp_path / "a")
    assert f"grid up to {digits} digits" in message and f"abacus range of {digits} digits" in message
    message = fails(capsys, "eval", saved["abacus_gpt2"], "--grid", f"1:{context}", "--output-dir", tmp_path / "b")
    assert f"grid up to {context} digits" in message and f"context of {context}" in message
    message = fails(capsys, "eval", saved["looped"], "--loops", "1,2,100000", "--output-dir", tmp_path / "c")
    assert message.startswith("--loops 100000: num_recurrences")


def test_eval_unwritable_output_dir_fails_before_evaluating(add10, tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setattr("hf_arith.runtime.loading.load_checkpoint", lambda *_, **__: pytest.fail("loaded a model first"))
    message = fails(capsys, "eval", add10, "--grid", "1:2", "--output-dir", blocker / "sub")
    assert "--output-dir" in message and str(blocker / "sub") in message and "cannot write" in message


def test_default_digits_of_a_sort_model_stay_inside_its_abacus_range():
    # A sort's answer is shorter than its operands: the operands themselves must fit the abacus table.
    from hf_arith.data.problems import example_problem

    model, tok = random_model(str(Path(__file__).resolve().parents[1] / "bench" / "recipes" / "looped-sort.yaml"))
    limits = model_limits(model, tok)
    digits = limits.max_digits
    assert 1 <= digits <= model.config.abacus_max_digits
    longest = example_problem(tok.arith_format, digits)
    # The model places every digit of the longest problem inside its table, and one digit more is refused.
    ids = tok([longest], return_tensors="pt")["input_ids"]
    assert int(model.position_ids_from_input_ids(ids).max()) == digits
    limits.check_problems([longest])
    with pytest.raises(FormatError, match="abacus range"):
        limits.check_problems([example_problem(tok.arith_format, digits + 1)])
