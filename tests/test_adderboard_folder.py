"""`hf-arith adderboard MODEL --output DIR`: a submission folder a maintainer can accept as it is.

The bundled 54-parameter adder is written into a folder; the tensors of the written submission file are
counted here without the package (the file's WEIGHTS literal read with `ast`, and the model its
build_model() returns), and that count must be the parameter table's total and the leaderboard row's.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import math
import re

import pytest
from cli_contract import fails

from hf_arith.cli import main
from hf_arith.evaluation.held_out import verify_text, verify_tiny_adder
from hf_arith.publishing import adderboard_folder
from hf_arith.publishing.adderboard_folder import ParameterCountError, write_submission_folder
from hf_arith.publishing.leaderboard import README_COLUMNS, TRAINED_TABLE_DATE, trained_rank
from hf_arith.records import SUMMARY_FILE
from hf_arith.runtime.loading import load_checkpoint, resolve_checkpoint

MODEL = "minimal-add10-split-wide-arc"
PARAMS = 54
FILES = {"README.md", "parameters.md", "parameters.json", "verify.txt", "verify.json", "train_command.txt",
         SUMMARY_FILE, "leaderboard_row.md", "leaderboard_row.json", f"submission_{PARAMS}p.py"}


def run_cli(*argv) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([str(a) for a in argv])
    return code, out.getvalue()


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint(MODEL)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The folder the CLI writes for the bundled adder (a new folder, no --folder: the path has no .py)."""
    folder = tmp_path_factory.mktemp("adderboard") / "entry"
    code, out = run_cli("adderboard", MODEL, "--output", folder, "--author", "tester")
    assert code == 0, out
    return folder, out


def weights_literal(path) -> dict:
    """The submission file's WEIGHTS, read as a literal from its source (nothing of the file is run)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["WEIGHTS"]:
            return ast.literal_eval(node.value)
    raise AssertionError("no WEIGHTS in the submission file")


def recount(path) -> tuple[int, dict]:
    """The learned scalars of the submission file, counted twice without hf_arith: the WEIGHTS literal
    (each tensor's values, which must fill its shape), and the unique parameters of the model it builds."""
    weights = weights_literal(path)
    for name, (shape, values) in weights.items():
        assert math.prod(shape) == len(values), name
    from_literal = sum(len(values) for _, values in weights.values())
    spec = importlib.util.spec_from_file_location("written_submission", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, _ = module.build_model()
    built = sum({id(p): p.numel() for p in model.parameters() if p.requires_grad}.values())
    assert from_literal == built
    return from_literal, weights


def test_the_folder_holds_every_file_and_the_cli_lists_them(written):
    folder, out = written
    assert {p.name for p in folder.iterdir()} == FILES  # nothing else: no partial folder, no recipe.yaml
    lines = out.splitlines()
    assert lines[0].startswith(f"Wrote the AdderBoard submission folder for {MODEL} to {folder}: {PARAMS} unique")
    assert {line.split()[0] for line in lines[1:-1]} == FILES
    assert lines[-1].endswith(f"python verify.py {folder / f'submission_{PARAMS}p.py'}")


def test_the_tables_total_and_the_rows_count_are_the_files_own_tensors(written):
    folder, _ = written
    n, weights = recount(folder / f"submission_{PARAMS}p.py")
    assert n == PARAMS
    table = json.loads((folder / "parameters.json").read_text())
    counted = [r for r in table["tensors"] if r["status"] == "learned, counted"]
    assert table["total"] == n == sum(r["numel"] for r in counted)
    assert {r["name"]: tuple(r["shape"]) for r in counted} == {name: tuple(s) for name, (s, _) in weights.items()}
    assert all(r["why"] for r in table["tensors"] + table["fixed_tables"])
    assert any("spiral" in r["name"] for r in table["fixed_tables"])  # fixed positions: listed, not counted
    markdown = (folder / "parameters.md").read_text()
    assert f"**Total counted: {n}**" in markdown
    assert all(f"`{name}`" in markdown for name in weights)
    row = json.loads((folder / "leaderboard_row.json").read_text())
    assert row["params"] == n and f"| {n} |" in row["row"]
    assert f"{n} unique parameters" in (folder / "README.md").read_text()


def test_the_verify_files_hold_three_seeds_that_a_fresh_verify_repeats(written, bundled):
    folder, _ = written
    record = json.loads((folder / "verify.json").read_text())
    assert [s["seed"] for s in record["seeds"]] == [2025, 0, 1] and record["qualifies"]
    text = (folder / "verify.txt").read_text()
    assert re.findall(r"\(seed (\d+)\):", text) == ["2025", "0", "1"]
    assert text.count(f"$ hf-arith verify {MODEL} --seed ") == 3
    model, tokenizer = bundled
    fresh = verify_tiny_adder(model, tokenizer, seed=0)
    saved = record["seeds"][1]
    assert (saved["correct"], saved["total"], saved["edge_cases_correct"]) == \
        (fresh["correct"], fresh["total"], fresh["edge_cases_correct"]) == (10_010, 10_010, 10)
    printed = verify_text(fresh, MODEL).rsplit("\n", 1)[0]  # all but the additions/s line, which is a timing
    assert printed in text
    readme = (folder / "README.md").read_text()
    assert readme.count("10,010 / 10,010 (100.00 %)") == 3


def test_the_training_command_retrains_it_and_the_record_is_copied(written):
    folder, _ = written
    assert (folder / "train_command.txt").read_text() == f"hf-arith train {MODEL}\n"
    source = resolve_checkpoint(MODEL)
    assert json.loads((folder / SUMMARY_FILE).read_text()) == json.loads((source / SUMMARY_FILE).read_text())
    readme = (folder / "README.md").read_text()
    assert f"hf-arith train {MODEL}" in readme and "no training log" in readme


def test_a_warm_started_models_readme_counts_every_stages_training(tmp_path):
    """The 35-parameter adder is narrowed from a trained 54: its record's own seconds are the last stage's
    only, so the README names each stage and the whole chain's time, as its record holds them."""
    model = "minimal-add10-split-narrow"
    code, out = run_cli("adderboard", model, "--output", tmp_path / "entry")
    assert code == 0, out
    summary = json.loads((resolve_checkpoint(model) / SUMMARY_FILE).read_text())
    stages = [*summary["earlier_stages"], summary]
    assert len(stages) == 2
    line = next(x for x in (tmp_path / "entry" / "README.md").read_text().splitlines()
                if x.startswith(f"{SUMMARY_FILE}, copied here"))
    parts = [f"{s['steps']:,} steps in {s['train_seconds']:,.0f} s" for s in stages]
    assert f"2 stages, {parts[0]}, then {parts[1]}" in line
    assert f"{sum(s['train_seconds'] for s in stages):,.0f} s of training in all" in line
    assert "the last stage's mean training loss" in line


def test_the_leaderboard_row_has_the_boards_columns(written):
    folder, _ = written
    header, rule, row = (folder / "leaderboard_row.md").read_text().splitlines()[:3]
    assert header == "| " + " | ".join(README_COLUMNS) + " |"
    cells = [c.strip() for c in row.strip("|").split(" | ")]
    assert len(cells) == len(README_COLUMNS) == 8
    rank = trained_rank(PARAMS, 1.0)
    assert cells[:4] == [f"{rank} (on the {TRAINED_TABLE_DATE} snapshot)", str(PARAMS), "100%", "tester"]
    assert cells[5].startswith("1L decoder, d=5") and cells[7] == f"[submission_{PARAMS}p.py](submission_{PARAMS}p.py)"
    assert row in (folder / "README.md").read_text()


def test_a_count_that_disagrees_with_the_files_tensors_is_an_error(tmp_path, capsys, monkeypatch, bundled):
    counts = adderboard_folder.parameter_counts
    monkeypatch.setattr(adderboard_folder, "parameter_counts",
                        lambda model: {**counts(model), "unique": counts(model)["unique"] + 1})
    message = fails(capsys, "adderboard", MODEL, "--output", tmp_path / "entry")
    assert message.startswith(f"AdderBoard export: the parameter table counts {PARAMS + 1} but the submission file's "
                              f"WEIGHTS hold {PARAMS} values")
    assert not (tmp_path / "entry").exists()  # created by the command, removed with everything in it
    (tmp_path / "kept").mkdir()
    model, tokenizer = bundled
    with pytest.raises(ParameterCountError) as err:
        write_submission_folder(model, tokenizer, tmp_path / "kept", model_name=MODEL)
    assert "\n" not in str(err.value) and list((tmp_path / "kept").iterdir()) == []


def test_a_folder_that_is_not_empty_is_replaced_only_with_overwrite(tmp_path, capsys):
    target = tmp_path / "entry.py"  # a folder all the same, with --folder
    target.mkdir()
    (target / "mine.txt").write_text("mine\n")
    (target / "submission_999p.py").write_text("an earlier export\n")
    message = fails(capsys, "adderboard", MODEL, "--output", target, "--folder")
    assert message == f"--output {target}: is not empty; pass --overwrite to replace an export there"
    assert sorted(p.name for p in target.iterdir()) == ["mine.txt", "submission_999p.py"]
    code, out = run_cli("adderboard", MODEL, "--output", target, "--folder", "--overwrite")
    assert code == 0, out
    assert {p.name for p in target.iterdir()} == FILES | {"mine.txt"}  # the earlier export's file is gone
    assert "is a file, not a folder" in fails(capsys, "adderboard", MODEL, "--output", target / "README.md")


def test_a_model_below_99_percent_is_refused_unless_forced(tmp_path, capsys):
    from tests.test_adderboard import TINY, random_model

    model, tok = random_model(**TINY, digit_embedding="circular_arc", special_embedding="arc")
    source = tmp_path / "random"
    model.save_pretrained(source)
    tok.save_pretrained(source)
    capsys.readouterr()
    message = fails(capsys, "adderboard", source, "--output", tmp_path / "entry")
    assert "below the 99 % a submission needs" in message and "--force" in message
    assert not (tmp_path / "entry").exists()
    code, out = run_cli("adderboard", source, "--output", tmp_path / "entry", "--force")
    assert code == 0, out
    folder = tmp_path / "entry"
    n, _ = recount(next(folder.glob("submission_*p.py")))
    assert n == model.num_parameters() == json.loads((folder / "parameters.json").read_text())["total"]
    assert "| - (below 99 %) |" in (folder / "leaderboard_row.md").read_text()
    assert "does not qualify" in (folder / "README.md").read_text()
    assert (folder / "train_command.txt").read_text().startswith("# The checkpoint records no recipe")
