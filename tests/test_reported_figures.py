"""Every reported figure is the one it says it is, on made-up results whose figures all differ.

A bundled model scores 1.0 on exact match, per-digit accuracy and every length, so a card, a
report or a grid cell that shows the wrong figure (another metric, another length, another cell)
still looks right on it. Here the answers come from a made-up model whose exact match,
per-digit accuracy and malformed share differ, overall and from one length or cell to the next,
and the expected figures are counted here from the answers themselves (not with hf_arith.evaluation.metrics).
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest
from huggingface_hub import ModelCard

import hf_arith
import hf_arith.evaluation.grid as grid
import hf_arith.evaluation.held_out as evaluation
from hf_arith.cli import main
from hf_arith.data.formatting import NumberFormat
from hf_arith.data.problems import reference_answer
from hf_arith.publishing.hub_folder import build_model_folder
from hf_arith.publishing.model_card import EVAL_FILE, model_card
from hf_arith.runtime.loading import load_checkpoint
from hf_arith.runtime.solving import Answer


# -- the made-up model --------------------------------------------------------------------------
def true_answer(problem: str) -> str:
    """The oracle: Python's own sum, or for a sorting list (labels:values) the labels by value."""
    if "+" in problem:
        a, b = problem.split("+")
        return str(int(a) + int(b))
    return reference_answer(problem, NumberFormat(task="sort", max_items=8))


def made_up(problem: str, answer: str) -> str | None:
    """About half right, a sixth malformed, the rest with the last character wrong (same length)."""
    kind = zlib.crc32(problem.encode()) % 6
    if kind < 3:
        return answer
    if kind == 3:
        return None
    last = answer[-1]
    return answer[:-1] + ("1" if last == "0" else "0" if last.isdigit() else ("a" if last != "a" else "b"))


def figures(problems: list[str]) -> dict:
    """Exact match, per-digit accuracy and malformed share of the made-up answers, counted directly:
    a right answer has all its characters right, a wrong one all but the last, a malformed one none."""
    answers = [true_answer(p) for p in problems]
    got = [made_up(p, a) for p, a in zip(problems, answers)]
    right = sum(len(a) if g == a else 0 if g is None else len(a) - 1 for g, a in zip(got, answers))
    return {"exact_match": sum(g == a for g, a in zip(got, answers)) / len(problems),
            "per_digit_accuracy": right / sum(len(a) for a in answers),
            "malformed": sum(g is None for g in got) / len(problems), "n": len(problems)}


def longest_operand(problem: str) -> int:
    return max(len(x) for x in problem.split("+"))


def test_the_made_up_model_tells_the_figures_apart():
    problems = [f"{a}+{b}" for a in range(100, 160) for b in range(1000, 1010)]
    f = figures(problems)
    assert len({round(f["exact_match"], 6), round(f["per_digit_accuracy"], 6), round(f["malformed"], 6)}) == 3
    assert 0.3 < f["exact_match"] < 0.7 < f["per_digit_accuracy"] < 1 and 0.05 < f["malformed"] < 0.3


# -- hf-arith eval --json -----------------------------------------------------------------------
def test_eval_json_reports_each_figure_of_the_answers(tmp_path, monkeypatch, capsys):
    asked: list[str] = []

    def answering(model, tokenizer, problems, *args, **kwargs):
        asked.extend(problems)
        return [Answer(made_up(p, true_answer(p)), 0.5) for p in problems]

    monkeypatch.setattr(evaluation, "solve", answering)
    path = tmp_path / "report.json"
    assert main(["eval", "minimal-add10", "--samples", "400", "--seed", "3", "--json", str(path)]) == 0, \
        capsys.readouterr().err
    report = json.loads(path.read_text())
    assert len(asked) == report["n"] == 400
    expected = figures(asked)
    for key in ("exact_match", "per_digit_accuracy", "malformed"):
        assert report[key] == pytest.approx(expected[key]), key
    by_length: dict[int, list[str]] = {}
    for p in asked:
        by_length.setdefault(longest_operand(p), []).append(p)
    assert sorted(int(k) for k in report["by_max_operand_length"]) == sorted(by_length)
    for length, problems in by_length.items():
        assert report["by_max_operand_length"][str(length)] == pytest.approx(figures(problems)["exact_match"]), length
        assert report["count_by_max_operand_length"][str(length)] == len(problems), length
    assert len({round(v, 6) for v in report["by_max_operand_length"].values()}) > 3  # lengths differ


# -- the model card -----------------------------------------------------------------------------
REPORTS = {  # two made-up reports: each figure differs from the others, and between the two
    "exact-below-per-digit": {"exact_match": 0.5, "per_digit_accuracy": 0.8, "malformed": 0.1},
    "exact-above-per-digit": {"exact_match": 0.8125, "per_digit_accuracy": 0.4375, "malformed": 0.0625},
}


def made_up_report(kind: str, tmp_path: Path) -> tuple[dict, Path]:
    """minimal-add10's own eval report (its fingerprints) with made-up figures; (report, its file)."""
    report = json.loads((Path(hf_arith.bundled_path("minimal-add10")) / EVAL_FILE).read_text())
    report.update(REPORTS[kind])
    shift = 0 if kind.startswith("exact-below") else 5
    lengths = sorted(report["by_max_operand_length"], key=int)
    report["by_max_operand_length"] = {k: round(0.05 + 0.09 * ((i + shift) % 10), 2) for i, k in enumerate(lengths)}
    report["count_by_max_operand_length"] = {k: 100 + 7 * i for i, k in enumerate(lengths)}
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps(report))
    return report, path


def percent(value: float) -> str:
    return f"{100 * value:.2f} %"


@pytest.mark.parametrize("kind", sorted(REPORTS))
def test_card_metadata_text_and_eval_file_show_the_reports_figures(kind, tmp_path):
    report, path = made_up_report(kind, tmp_path)
    folder = build_model_folder("minimal-add10", tmp_path / "out", repo_id="someone/adder", eval_json=path,
                                grid_samples=0)
    shipped = json.loads((folder / EVAL_FILE).read_text())
    assert {k: shipped[k] for k in (*REPORTS[kind], "by_max_operand_length", "n")} == \
        {k: report[k] for k in (*REPORTS[kind], "by_max_operand_length", "n")}
    card = ModelCard.load(folder / "README.md")
    # Metadata (model-index): the overall result is exact match, each length's is that length's.
    results = {r.metric_config: r for r in card.data.eval_results}
    assert results[None].metric_type == "exact_match" and results[None].metric_value == report["exact_match"]
    per_length = {int(k.split("=")[1]): r.metric_value for k, r in results.items() if k}
    assert per_length == {int(k): v for k, v in report["by_max_operand_length"].items()}
    # Text: the headline, the malformed share and each row of the per-length table.
    text = card.text
    assert f"**Held-out exact match: {percent(report['exact_match'])}**" in text
    assert percent(report["per_digit_accuracy"]) not in text.split("## Evaluation")[0]
    assert f"Malformed answers:\n{percent(report['malformed'])}" in text or \
        f"Malformed answers: {percent(report['malformed'])}" in text
    for length, accuracy in report["by_max_operand_length"].items():
        count = report["count_by_max_operand_length"][length]
        assert f"| {length} | {percent(accuracy)} | {count} |" in text, length


def test_card_grid_summary_is_the_grids_exact_match():
    model, tok = load_checkpoint("minimal-add10")
    report = json.loads((Path(hf_arith.bundled_path("minimal-add10")) / EVAL_FILE).read_text())
    made = {"lengths": [1, 3], "samples_per_cell": 7, "train_range": [1, 2],
            "summary": {"n": 63, "exact_match": 0.375, "per_digit_accuracy": 0.6875, "malformed": 0.125}}
    text = model_card(model, tok, report, repo_id="someone/adder", grid=made).text
    assert "63 in all, 37.50 % exact match" in text
    assert "68.75 %" not in text and "12.50 %" not in text


# -- the length grid ----------------------------------------------------------------------------
def stub_the_model(monkeypatch) -> None:
    """The grid's teacher-forced pass and its decoding answer as the made-up model does: the
    teacher-forced pass confirms the right answers, decoding writes the others."""

    def teacher_forced(model, tokenizer, problems, *args, **kwargs):
        texts, answers = grid.plain_text(problems)
        agrees = np.array([made_up(t, a) == a for t, a in zip(texts, answers)])
        return np.array([1.0 + zlib.crc32(t.encode()) % 7 for t in texts]), agrees

    def solve(model, tokenizer, problems, *args, **kwargs):
        return [made_up(p, true_answer(p)) for p in problems]

    monkeypatch.setattr(grid, "teacher_forced", teacher_forced)
    monkeypatch.setattr(grid, "solve", solve)


def cell_key(problem: str) -> tuple[int, int]:
    """A problem's cell, read from its text: its operand lengths, or a list's size and its numbers' digits."""
    if "+" in problem:
        a, b = problem.split("+")
        return len(a), len(b)
    items = problem.split(",")
    return len(items), max(len(item.split(":")[1]) for item in items)


@pytest.mark.parametrize(("model_name", "lengths", "samples"), [("minimal-add10", (1, 4), 12),
                                                               ("abacus-gpt2-sort", (1, 2), 6)])
def test_grid_cells_show_their_own_figures_over_as_many_distinct_problems_as_they_say(
        monkeypatch, model_name, lengths, samples):
    stub_the_model(monkeypatch)
    model, tok = load_checkpoint(model_name)
    result = grid.length_grid(model, tok, lengths, samples_per_cell=samples, seed=4, keep_problems=True)
    rows_name, columns_name = result["axes"]
    by_cell: dict[tuple[int, int], list[str]] = {}
    for p in result["problems"]:
        by_cell.setdefault(cell_key(p["problem"]), []).append(p["problem"])
    cells = {(c[rows_name], c[columns_name]): c for c in result["cells"]}
    assert sorted(cells) == sorted(by_cell)
    seen = set()
    for key, cell in cells.items():
        problems = by_cell[key]
        expected = figures(problems)
        assert cell["n"] == len(problems) == samples, key
        for field in ("exact_match", "per_digit_accuracy", "malformed"):
            assert cell[field] == pytest.approx(expected[field]), (key, field)
        assert cell["mean_perplexity"] == pytest.approx(np.mean([1.0 + zlib.crc32(p.encode()) % 7 for p in problems]))
        # As many distinct problems as the cell says; all of them when the cell has room for them.
        assert cell["distinct"] == len(set(problems)), key
        if rows_name == "len_a" and grid.count_of_length(10, key[0]) * grid.count_of_length(10, key[1]) > \
                grid.ENUMERATE_LIMIT:  # a sampled cell, from a space too large to repeat a problem
            assert cell["distinct"] == samples, key
        seen.add(round(cell["exact_match"], 6))
    assert len(seen) > 2  # the cells' figures differ, so a figure in the wrong cell shows
    # The matrices: row = the first axis from the smallest, column = the second.
    row_values = result.get("items") or result["lengths"]
    for field in ("exact_match", "per_digit_accuracy", "malformed"):
        matrix = result["matrices"][field]
        for i, a in enumerate(range(row_values[0], row_values[1] + 1)):
            for j, b in enumerate(range(lengths[0], lengths[1] + 1)):
                assert matrix[i][j] == cells[(a, b)][field], (field, a, b)
    everything = figures([p["problem"] for p in result["problems"]])
    for field in ("exact_match", "per_digit_accuracy", "malformed"):
        assert result["summary"][field] == pytest.approx(everything[field]), field
