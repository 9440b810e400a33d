"""The sparse length grid (`hf-arith eval --lengths`), chunks sized to the sequence length, and answers
that run out of their token budget.

The bundled abacus-gpt2-add-window-10-k2 (trained on 1-10 digits, takes up to 126) runs the command
at small lengths; accuracy is not what these tests check, the plumbing is.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_contract import fails
from test_plots import assert_png

import hf_arith
import hf_arith.runtime.decoding as decoding
from hf_arith.cli import main
from hf_arith.data.formatting import FormatError
from hf_arith.data.problems import problem_hash, split_of
from hf_arith.evaluation.grid import cell_problems, length_grid, parse_length_list, solved_up_to
from hf_arith.evaluation.plots import GRID_SIZE, plot_grid
from hf_arith.runtime.decoding import (
    decode_row_bytes,
    default_batch_size,
    row_bytes,
    row_chunks,
    rows_within_budget,
)
from hf_arith.runtime.limits import model_limits
from hf_arith.runtime.solving import solve

K2 = "abacus-gpt2-add-window-10-k2"


@pytest.fixture(scope="module")
def k2():
    return hf_arith.load(K2)


# -- parsing --------------------------------------------------------------------------------
def test_parse_length_list():
    assert parse_length_list("1,10,100,200,500,1000") == [1, 10, 100, 200, 500, 1000]
    assert parse_length_list("100:1000:100") == list(range(100, 1001, 100))
    assert parse_length_list("1, 5:20:5 ,7") == [1, 5, 7, 10, 15, 20]  # sorted, ranges and single lengths mixed
    assert parse_length_list("3:5") == [3, 4, 5] and parse_length_list("10,10,1") == [1, 10]
    assert parse_length_list("10:25:10") == [10, 20]  # B is where the steps stop, not a length of its own
    for bad, words in (("a,b", "expected lengths"), ("", "expected lengths"), ("1,,2", "expected lengths"),
                       ("1.5", "expected lengths"), ("0", "at least 1"), ("0,5", "at least 1"),
                       ("1000:100:100", "runs upwards"), ("10:100:0", "runs upwards"),
                       ("100:10:-10", "expected lengths"), ("1:1000", "at most 100 lengths"),
                       ("1:100000000000", "at most 100 lengths")):
        with pytest.raises(FormatError, match=words):
            parse_length_list(bad)


# -- chunk sizes ----------------------------------------------------------------------------
def test_chunk_size_shrinks_as_sequences_grow(k2):
    model, _ = k2
    lengths = [10, 100, 300, 1000, 3000, 10_000]
    rows = [rows_within_budget(model, t) for t in lengths]
    assert rows == sorted(rows, reverse=True) and rows[0] > rows[-1] == 1
    for t, n in zip(lengths, rows):  # as many rows as fit the budget, one at least
        assert n == 1 or n * row_bytes(model, t) <= decoding.BATCH_MEMORY_BUDGET < (n + 1) * row_bytes(model, t)
    # Short sequences keep the model's own batch size; long ones take fewer rows.
    assert default_batch_size(model, 30) == default_batch_size(model) == 128
    assert default_batch_size(model, 3004) == rows_within_budget(model, 3004) < 16


def test_row_chunks_cover_every_row_once_within_the_batch_windows_and_the_budget(k2):
    model, _ = k2
    rng = np.random.default_rng(0)
    tokens = sorted(rng.integers(5, 40, size=300).tolist() + rng.integers(40, 6000, size=400).tolist())
    chunks = list(row_chunks(tokens, model, batch_size=128))
    assert [i for c in chunks for i in range(c.start, c.stop)] == list(range(700))
    sizes = [c.stop - c.start for c in chunks]
    assert max(sizes) == 128 and sizes[-1] < 16  # short rows fill a batch, the longest go a few at a time
    for c in chunks:
        assert c.start // 128 == (c.stop - 1) // 128  # never across a window check_problems checked
        assert c.stop - c.start == 1 or (c.stop - c.start) * row_bytes(model, max(tokens[c])) \
            <= decoding.BATCH_MEMORY_BUDGET


def test_memory_grows_with_the_chunk_not_the_batch(k2, monkeypatch):
    # A budget of 3 rows of 100-digit problems: the grid's teacher-forced pass and its decoding (every
    # row is decoded when teacher forcing is switched off) never run more rows at once, and give the
    # answers one batch of everything gives.
    model, tok = k2
    texts = [f"{'9' * 99}{i}+{'1' * 100}" for i in range(10)]
    limits = model_limits(model, tok)
    parsed = limits.check_problems(texts)
    tokens, prompt = int(limits.sequence_tokens(parsed).max()), int(limits.prompt_tokens(parsed).max())
    # cached decoding: a pass over the prompt and, per token, the cache (decode_row_bytes)
    monkeypatch.setattr(decoding, "BATCH_MEMORY_BUDGET", 3 * decode_row_bytes(model, prompt, tokens))
    seen = []
    forward = model.forward

    def counting(*args, **kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        seen.append(ids.shape[0])
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", counting)
    answers = solve(model, tok, texts, warn_beyond_training=False)
    assert seen and max(seen) == 3
    assert answers == [str(int(t.split("+")[0]) + int(t.split("+")[1])) for t in texts]
    seen.clear()
    result = length_grid(model, tok, length_list=[100], samples_per_cell=7)
    assert seen and max(seen) <= 3 and result["summary"]["n"] == 7
    seen.clear()
    assert solve(model, tok, texts, warn_beyond_training=False, use_cache=False) == answers
    assert max(seen) == rows_within_budget(model, tokens)  # without a cache every step is a pass over the rows


def test_cached_decoding_takes_as_many_rows_as_its_prompt_pass_and_cache_allow(k2):
    # A long answer after a short prompt (a long sort's working): a pass over the whole sequence would take
    # one row at a time, cached decoding holds only the prompt's pass and the cache, so it takes several.
    model, _ = k2
    tokens, prompts = [8000] * 40, [300] * 40
    assert row_bytes(model, 8000) > decoding.BATCH_MEMORY_BUDGET // 2
    assert [c.stop - c.start for c in row_chunks(tokens, model)] == [1] * 40
    sizes = [c.stop - c.start for c in row_chunks(tokens, model, prompts=prompts)]
    n, cost = sizes[0], decode_row_bytes(model, 300, 8000)
    assert sum(sizes) == 40 and n > 2 and n * cost <= decoding.BATCH_MEMORY_BUDGET < (n + 1) * cost


# -- answers that run out of budget ---------------------------------------------------------
def test_an_answer_that_runs_out_of_its_token_budget_is_none_never_a_truncated_number(k2, monkeypatch):
    model, tok = k2
    problems = ["123456789+987654321", "5+5", "9999999999+1"]
    assert solve(model, tok, problems) == ["1111111110", "10", "10000000000"]
    limits_class = type(model_limits(model, tok))
    budgets = limits_class.answer_budgets
    monkeypatch.setattr(limits_class, "answer_budgets", lambda self, parsed: budgets(self, parsed) - 1)
    # One token short: every answer loses its end token (or a digit), and none comes back cut short.
    assert solve(model, tok, problems) == [None, None, None]


# -- problems of a cell ---------------------------------------------------------------------
def test_large_cells_hold_distinct_problems():
    problems, info = cell_problems("add", 10, 3, 4, 2000, seed=5)  # 900 x 9,000: sampled, not enumerated
    assert len(problems) == 2000 == info["distinct"] == len(np.unique(problem_hash(problems)))
    assert split_of(problems).all()


def test_solved_up_to_of_a_sparse_grid_names_a_listed_length():
    cells = {(a, b): {"exact_match": 1.0 if max(a, b) <= 10 else 0.5} for a in (1, 10, 100) for b in (1, 10, 100)}
    assert solved_up_to(cells, 1, 100) == 10
    diagonal = {(n, n): {"exact_match": 1.0} for n in (1, 10, 100)}
    assert solved_up_to(diagonal, 1, 100) == 100


# -- the command ----------------------------------------------------------------------------
def test_eval_lengths_writes_every_cell_asked_for(tmp_path, capsys):
    out = tmp_path / "lengths"
    code = main(["eval", K2, "--lengths", "1,5,20", "--samples-per-cell", "2", "--output-dir", str(out), "--threads", "1"])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    assert "Length grid at 1, 5, 20 digits (every pair), 2 problems per cell" in stdout
    assert "\r" not in err  # progress, if the run is long enough to show any, as lines: no terminal here
    result = json.loads((out / "lengths.json").read_text())
    assert result["lengths"] == result["rows"] == result["columns"] == [1, 5, 20]
    assert result["sparse"] is True and result["diagonal"] is False and result["samples_per_cell"] == 2
    assert sorted((c["len_a"], c["len_b"]) for c in result["cells"]) == [(a, b) for a in (1, 5, 20) for b in (1, 5, 20)]
    assert np.array(result["matrices"]["exact_match"]).shape == (3, 3)
    problems = [json.loads(line) for line in (out / "lengths_problems.jsonl").read_text().splitlines()]
    for cell in result["cells"]:
        mine = [p for p in problems if (p["len_a"], p["len_b"]) == (cell["len_a"], cell["len_b"])]
        assert len(mine) == cell["n"] == cell["distinct"] == 2 and cell["heldout"]
        assert len({p["problem"] for p in mine}) == 2  # distinct problems, as many as the cell says
        for p in mine:  # both operands exactly as long as the cell says
            a, b = p["problem"].split("+")
            assert (len(a), len(b)) == (cell["len_a"], cell["len_b"])
            assert all(len(x) == 1 or x[0] != "0" for x in (a, b))  # no leading zero makes up the length
            assert p["answer"] == str(int(a) + int(b))
    # The run's record: the command that remakes it, the machine, and the process's peak memory.
    assert result["command"] == (f"hf-arith eval {K2} --lengths 1,5,20 --samples-per-cell 2 --seed 1234 "
                                 f"--output-dir {out} --threads 1")
    assert result["machine"]["cpu_count"] >= 1 and "torch" in result["versions"]
    assert 100 < result["peak_resident_memory_mib"] < 4096 and "ru_maxrss" in result["peak_resident_memory"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["lengths"]["lengths"] == [1, 5, 20] and summary["lengths"]["n"] == 18
    assert_png(out / "lengths.png", GRID_SIZE)


def test_eval_lengths_diagonal_runs_equal_lengths_only(tmp_path, capsys):
    out = tmp_path / "diagonal"
    code = main(["eval", K2, "--lengths", "1:21:10", "--diagonal", "--output-dir", str(out), "--threads", "1"])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads((out / "lengths.json").read_text())
    assert result["lengths"] == [1, 11, 21] and result["diagonal"] is True and result["samples_per_cell"] == 20
    assert [(c["len_a"], c["len_b"], c["n"]) for c in result["cells"]] == [(1, 1, 20), (11, 11, 20), (21, 21, 20)]
    matrix = result["matrices"]["exact_match"]
    assert [[v is None for v in row] for row in matrix] == [[i != j for j in range(3)] for i in range(3)]
    assert "--diagonal" in result["command"] and "equal lengths only" in stdout
    assert "11 x 11" in stdout


def test_a_sparse_grid_picture_is_labelled_by_its_lengths(k2):
    model, tok = k2
    result = length_grid(model, tok, length_list=[1, 5, 20], samples_per_cell=2, diagonal=True, train_range=(1, 10))
    accuracy, perplexity = [ax for ax in plot_grid(result).axes if ax.images]
    for ax in (accuracy, perplexity):
        assert [t.get_text() for t in ax.get_xticklabels()] == [t.get_text() for t in ax.get_yticklabels()] == \
            ["1", "5", "20"]
    data = accuracy.images[0].get_array()
    assert np.ma.is_masked(data[0, 1]) and data[2, 2] == result["matrices"]["exact_match"][2][2]  # blank off the diagonal
    box = [p for p in accuracy.patches if type(p).__name__ == "Rectangle"][0]  # trained 1-10: lengths 1 and 5
    assert box.get_xy() == (-0.5, -0.5) and box.get_width() == box.get_height() == 2


@pytest.mark.parametrize(("value", "words"), [
    ("a,b", ["--lengths", "'a,b'", "expected lengths"]),
    ("0", ["--lengths", "at least 1"]),
    ("0,5", ["--lengths", "at least 1"]),
    ("1000:100:100", ["--lengths", "runs upwards"]),
    ("1,127", ["--lengths 127", "abacus range of 128", "at most 126 digits"]),
    ("100:200:50", ["--lengths 150", "at most 126 digits"]),
])
def test_bad_lengths_are_one_line_before_any_work(tmp_path, capsys, monkeypatch, value, words):
    monkeypatch.setattr("hf_arith.evaluation.held_out.evaluate_model", lambda *_, **__: pytest.fail("evaluated first"))
    monkeypatch.setattr("hf_arith.evaluation.grid.length_grid", lambda *_, **__: pytest.fail("ran the grid"))
    message = fails(capsys, "eval", K2, "--heldout", "--lengths", value, "--output-dir", tmp_path / "out")
    for word in words:
        assert word in message


@pytest.mark.parametrize(("argv", "words"), [
    (["--grid", "1:3", "--lengths", "1,2"], ["--grid and --lengths"]),
    (["--diagonal"], ["--diagonal: only with --lengths"]),
    (["--grid", "1:3", "--diagonal"], ["--diagonal: only with --lengths"]),
])
def test_lengths_option_conflicts_are_one_line(tmp_path, capsys, argv, words):
    message = fails(capsys, "eval", K2, *argv, "--output-dir", tmp_path / "out")
    for word in words:
        assert word in message


def test_a_sorting_model_takes_lengths_by_list_size_but_no_diagonal(tmp_path, capsys):
    out = tmp_path / "sort"
    code = main(["eval", "abacus-gpt2-sort", "--lengths", "1,3", "--items", "2:3", "--samples-per-cell", "2",
                 "--output-dir", str(out), "--threads", "1"])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads((out / "lengths.json").read_text())
    assert result["axes"] == ["items", "digits"] and result["rows"] == [2, 3] and result["columns"] == [1, 3]
    assert sorted((c["items"], c["digits"]) for c in result["cells"]) == [(2, 1), (2, 3), (3, 1), (3, 3)]
    assert "Grid of lists of 2-3 numbers x 1, 3 digits each" in stdout
    message = fails(capsys, "eval", "abacus-gpt2-sort", "--lengths", "1,3", "--diagonal", "--output-dir", tmp_path / "x")
    assert message.startswith("diagonal: a sorting model's grid has list sizes for rows")
