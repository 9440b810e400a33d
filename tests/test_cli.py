"""The `hf-arith` command line: what each subcommand prints, run in-process through `main`.

The checkpoints here are trained for a few steps only, so the tests check the structure of the
output, never accuracy. They work the same once the real bundled `minimal-add10` is installed.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

import hf_arith.bundled
from hf_arith.bundled import bundled_models
from hf_arith.cli import main
from hf_arith.data.errors import HfArithError
from hf_arith.runtime.loading import CheckpointError, checkpoint_label, load_checkpoint
from hf_arith.runtime.solving import Answer

# An answer, then '?' and a note when the model was unsure of a token (an untrained checkpoint always is).
ANSWER_LINE = re.compile(r"^(\S+) = (\d+|<malformed>)( \?  \(low confidence: [0-9.]+ %, below 90 %\))?$")




def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# -- solve ----------------------------------------------------------------------------------
def test_solve_prints_one_answer_per_line(add10, capsys):
    code, out, err = run(capsys, "solve", "1234567890+9876543210", " 0 + 0 ", "9999999999+1", "--model", add10)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 3
    matches = [ANSWER_LINE.match(line) for line in lines]
    assert all(matches), lines
    assert [m.group(1) for m in matches] == ["1234567890+9876543210", "0+0", "9999999999+1"]


def test_solve_defaults_to_the_bundled_minimal_add10(capsys, monkeypatch):
    import hf_arith.runtime.loading

    loaded = []
    monkeypatch.setattr(hf_arith.runtime.loading, "load_checkpoint", lambda name, **kw: loaded.append(name) or load_checkpoint(name, **kw))
    code, out, err = run(capsys, "solve", "1234567890+9876543210")
    assert code == 0, err
    assert loaded == ["minimal-add10"] and "minimal-add10" in bundled_models()
    assert out == "1234567890+9876543210 = 11111111100\n"


def test_solve_flags_operands_longer_than_the_training_range(capsys):
    code, out, _ = run(capsys, "solve", "123456789012+9", "99+1", "--model", "abacus-gpt2-add")
    long_line, short_line = out.splitlines()
    assert code == 0 and "beyond the 10 digits this model was trained on" in long_line
    assert short_line == "99+1 = 100"


def test_solve_names_a_bundled_model_that_holds_a_problem_beyond_the_training_range(capsys):
    # Six items: within abacus-gpt2-sort's format (8) but beyond its training (2-5); sort-10 trained on 2-10.
    code, out, _ = run(capsys, "solve", "a:5,b:3,c:9,d:1,e:7,f:2", "a:5,b:3", "--model", "abacus-gpt2-sort")
    long_line, short_line = out.splitlines()
    assert code == 0 and long_line.startswith("a:5,b:3,c:9,d:1,e:7,f:2 = ")
    assert "beyond the 5 items this model was trained on; bundled abacus-gpt2-sort-10 holds it: " \
           "--model abacus-gpt2-sort-10" in long_line
    assert short_line == "a:5,b:3 = ba"
    # Eleven-digit factors: no bundled multiplier was trained on or measured at them, so no name.
    code, out, _ = run(capsys, "solve", "12345678901*2", "--model", "abacus-gpt2-mul-10")
    assert code == 0 and "beyond the 10 digits" in out and "holds it" not in out


def test_a_refusal_for_size_names_a_bundled_model_that_holds_every_problem(capsys):
    # The second problem is the one refused; the model named must hold it, not only the first.
    code, _, err = run(capsys, "solve", "1+1", "12345678901234567890+1", "--model", "minimal-add10")
    assert code == 2 and "more than 10 base-10 digits" in err
    assert "; bundled abacus-gpt2-add holds it: --model abacus-gpt2-add;" in err  # measured to 30 digits
    code, _, err = run(capsys, "solve", "a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:1,i:3,j:3", "--model", "abacus-gpt2-sort")
    assert code == 2 and "sorts 2 to 8 items, got 10; bundled abacus-gpt2-sort-10 holds it" in err
    # Nothing bundled takes a 5,000-digit sum, and a problem in another syntax names no model.
    code, _, err = run(capsys, "solve", "1" * 5000 + "+1")
    assert code == 2 and "abacus range of 4096 digits" in err and "holds it" not in err
    code, _, err = run(capsys, "solve", "12*34", "--model", "abacus-gpt2-sort")
    assert code == 2 and "look like 'a:31,b:7'" in err and "holds it" not in err


def test_solve_without_a_model_answers_each_problem_with_the_bundled_model_for_its_task_and_size(capsys, monkeypatch):
    import hf_arith.runtime.loading

    loaded = []
    monkeypatch.setattr(hf_arith.runtime.loading, "load_checkpoint", lambda name, **kw: loaded.append(name) or load_checkpoint(name, **kw))
    problems = ["12*34", "a:5,b:3,c:9,d:1,e:7,f:2", "1+2", "a:31,b:7,c:120", "9-4", "123*4"]
    code, out, err = run(capsys, "solve", *problems)
    assert code == 0, err
    # Six items are past abacus-gpt2-sort's 2-5 and inside abacus-gpt2-sort-10's 2-10; three stay with the default.
    assert loaded == ["abacus-gpt2-mul-10", "abacus-gpt2-sort-10", "minimal-add10", "abacus-gpt2-sort", "abacus-gpt2-sub"]
    assert out.splitlines() == ["12*34 = 408", "a:5,b:3,c:9,d:1,e:7,f:2 = dfbaec", "1+2 = 3", "a:31,b:7,c:120 = bac",
                                "9-4 = 5", "123*4 = 492"]  # in the order typed, each model loaded once
    # Said on stderr only where a problem left its task's default model.
    assert err.strip() == "hf-arith: answered by abacus-gpt2-sort-10, which holds them: 1 problem(s)"
    # Past every bundled model's training but inside abacus-gpt2-add's measured 30 digits: flagged, and
    # the note names no other model, since the one chosen is the closest fit.
    code, out, err = run(capsys, "solve", "1" * 25 + "+1")
    assert code == 0 and out.startswith("1" * 25 + "+1 = " + "1" * 24 + "2 ?  (operands beyond the 10 digits")
    assert "holds it" not in out and "answered by abacus-gpt2-add" in err


def test_solve_without_a_model_sends_a_problem_no_bundled_model_holds_to_the_nearest_and_says_so(capsys):
    # An 11-digit item: past the default's 6 digits and abacus-gpt2-sort-10's 10; the nearer one answers it.
    code, out, err = run(capsys, "solve", "a:12345678901,b:3", "a:5,b:3")
    assert code == 0, err
    assert err.strip() == ("hf-arith: answered by abacus-gpt2-sort-10, the bundled model they pass by least, though "
                           "none holds them: 1 problem(s)")
    lines = out.splitlines()
    assert lines[0].startswith("a:12345678901,b:3 = ") and "beyond the 10 digits this model was trained on" in lines[0]
    assert lines[1] == "a:5,b:3 = ba"
    # 13 items: no bundled model takes them, and the refusal names the largest limit there is (12 items).
    code, out, err = run(capsys, "solve", ",".join(f"{c}:{i}" for i, c in enumerate("abcdefghijklm")))
    assert code == 2 and out == "" and "this format sorts 2 to 12 items, got 13" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("problem, message", [
    ("12x4", "'12x4' is not a problem: type A+B, A-B, A*B, a:31,b:7,c:120"),
    ("12+x", "'12+x': 'x' is not a decimal digit"),
    ("5--3", "negative numbers are not supported"),
    ("a:1", "sorts 2 to 26 items, got 1"),
])
def test_solve_without_a_model_refuses_a_problem_no_task_reads_in_one_line(capsys, problem, message):
    code, out, err = run(capsys, "solve", problem)
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


def test_solve_marks_malformed_answers(add10, capsys, monkeypatch):
    import hf_arith.runtime.solving

    monkeypatch.setattr(hf_arith.runtime.solving, "solve", lambda model, tok, problems, **options: [Answer(None, 0.2), Answer("3", 0.99)])
    code, out, _ = run(capsys, "solve", "1+1", "1+2", "--model", add10)
    assert code == 0
    assert out.splitlines() == ["1+1 = <malformed>", "1+2 = 3"]


def test_the_command_line_shows_no_weight_loading_bars(capsys, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import hf_arith.runtime.loading

    def raw_load(name, **_):  # transformers' own loading, which draws a "Loading weights" bar by default
        path = hf_arith.bundled.bundled_path(name)
        return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)

    raw_load("minimal-add10")
    assert "Loading weights" in capsys.readouterr().err  # outside the command line the bar shows
    monkeypatch.setattr(hf_arith.runtime.loading, "load_checkpoint", raw_load)
    code, out, err = run(capsys, "solve", "1+2")
    assert code == 0 and out == "1+2 = 3\n"
    assert "Loading weights" not in err


def test_threads_default_to_one_and_follow_the_option(add10, capsys, monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    assert run(capsys, "solve", "1+2", "--model", add10)[0] == 0
    assert run(capsys, "--threads", "2", "solve", "1+2", "--model", add10)[0] == 0
    assert run(capsys, "solve", "1+2", "--model", add10, "--threads", "3")[0] == 0
    assert calls == [1, 2, 3]


# -- eval -----------------------------------------------------------------------------------
def test_eval_prints_a_table_per_operand_length_and_writes_json(add10, tmp_path, capsys):
    report = tmp_path / "report.json"
    code, out, err = run(capsys, "eval", add10, "--samples", 300, "--json", report)
    assert code == 0, err
    assert "addition, base 10" in out and "1-10 digits" in out
    assert re.search(r"Held-out exact match: \d+\.\d\d% of 300 problems", out)
    rows = re.findall(r"^\s+(\d+)\s+(\d+\.\d\d)%\s+(\d+)$", out, flags=re.M)
    assert [int(r[0]) for r in rows] == list(range(1, 11))
    assert sum(int(r[2]) for r in rows) == 300
    data = json.loads(report.read_text())
    assert data["n"] == 300 and data["task"] == "add" and data["base"] == 10
    assert 0.0 <= data["exact_match"] <= 1.0 and 0.0 <= data["malformed"] <= 1.0
    assert sorted(int(k) for k in data["by_max_operand_length"]) == list(range(1, 11))
    # The report records how it was made: the command, the machine and the library versions.
    assert data["command"] == f"hf-arith eval {add10} --samples 300 --min-digits 1 --max-digits 10 --seed 1234 " \
                              f"--json {report}"
    assert {"cpu_count", "machine", "threads", "torch"} <= set(data["machine"])
    assert data["versions"]["hf_arith"] == hf_arith.__version__ and data["versions"]["torch"] == torch.__version__
    # ... and that command makes the same report again.
    again = tmp_path / "again.json"
    argv = shlex.split(data["command"])[1:]
    argv[argv.index("--json") + 1] = str(again)
    code, _, err = run(capsys, *argv)
    assert code == 0, err
    remade = json.loads(again.read_text())
    for key in ("n", "seed", "exact_match", "per_digit_accuracy", "by_max_operand_length", "by_operand_lengths"):
        assert remade[key] == data[key], key


def test_eval_digit_range_and_seed(add10, capsys):
    code, out, err = run(capsys, "eval", add10, "--samples", 50, "--min-digits", 3, "--max-digits", 4, "--seed", 7)
    assert code == 0, err
    assert "3-4 digits" in out and "seed 7" in out
    rows = re.findall(r"^\s+(\d+)\s+\d+\.\d\d%\s+\d+$", out, flags=re.M)
    assert {int(r) for r in rows} <= {3, 4}


def test_eval_items_sets_how_many_items_a_sorting_list_holds(tmp_path, capsys):
    report = tmp_path / "items.json"
    code, out, err = run(capsys, "eval", "abacus-gpt2-sort", "--samples", 30, "--items", "6:8", "--max-digits", 3,
                         "--json", report)
    assert code == 0, err
    assert "lists of 6-8 items, operands of 1-3 digits" in out
    data = json.loads(report.read_text())
    assert data["items"] == [6, 8] and "--items 6:8" in data["command"] and data["n"] == 30
    # The report's own command remakes it.
    remade = tmp_path / "remade.json"
    argv = shlex.split(data["command"])[1:]
    argv[argv.index("--json") + 1] = str(remade)
    assert run(capsys, *argv)[0] == 0
    assert json.loads(remade.read_text())["exact_match"] == data["exact_match"]


def test_eval_grid_items_are_checked_at_the_grid_lengths_not_the_held_out_ones(tmp_path, capsys):
    # A checkpoint that records no training range (a run's checkpoint-N) holds out up to its hard limit,
    # where lists of 8 items do not fit its context; a grid of 8 one-digit items does, and runs.
    import shutil

    folder = tmp_path / "sort"
    shutil.copytree(hf_arith.bundled.bundled_path("abacus-gpt2-sort"), folder)
    (folder / "training_summary.json").unlink()
    code, _, err = run(capsys, "eval", folder, "--items", "8:8", "--samples", 5)
    assert code == 2 and "--items 8:8 with items of 21 digits" in err, err  # the held-out lists do not fit
    code, out, err = run(capsys, "eval", folder, "--items", "8:8", "--lengths", 1, "--samples-per-cell", 2,
                         "--output-dir", tmp_path / "grid")
    assert code == 0, err
    assert re.search(r"^\s+8 x 1\s+\d+\.\d\d% of 2$", out, flags=re.M), out


def test_eval_views_sets_how_many_views_of_each_list_vote(tmp_path, capsys):
    reports = {}
    for views in (None, 1):
        path = tmp_path / f"views-{views}.json"
        extra = [] if views is None else ["--views", views]
        code, _, err = run(capsys, "eval", "abacus-gpt2-sort", "--samples", 20, "--max-digits", 3, *extra, "--json", path)
        assert code == 0, err
        reports[views] = json.loads(path.read_text())
    assert reports[None]["answer_views"] == 5 and "--views" not in reports[None]["command"]  # the model's default
    assert reports[1]["answer_views"] == 1 and "--views 1" in reports[1]["command"]
    assert reports[1]["n"] == reports[None]["n"] == 20
    for argv, message in [
        (["--views", 17], "views must be an integer from 1 to 16 (or None: the model's default, 5), got 17"),
        (["--views", 3, "--stress"], "--views: the held-out evaluation and the grid vote over views, --loops and "
                                     "--stress answer one; add --heldout"),
    ]:
        code, _, err = run(capsys, "eval", "abacus-gpt2-sort", "--samples", 5, *argv)
        assert code == 2 and err.splitlines() == [f"hf-arith: error: {message}"], err


def test_eval_defaults_to_the_lengths_the_model_was_trained_on(capsys):
    """abacus-gpt2-sort trained on numbers of 1-6 digits, though its context holds 21: a plain eval scores
    1-6, not a mixture with lengths it never saw; --min-digits beyond them moves the default along."""
    code, out, err = run(capsys, "eval", "abacus-gpt2-sort", "--samples", 20)
    assert code == 0, err
    assert "operands of 1-6 digits" in out
    code, out, err = run(capsys, "eval", "abacus-gpt2-sort", "--samples", 5, "--min-digits", 8)
    assert code == 0, err
    assert "operands of 8-8 digits" in out


def test_eval_items_out_of_range_or_on_another_task_is_one_line(add10, capsys):
    for argv, message in [
        (["abacus-gpt2-sort", "--items", "2:9"], "--items 2:9: lists must hold 2 to 8 items (the format's max_items)"),
        (["abacus-gpt2-sort", "--items", "1:3"], "--items 1:3: lists must hold 2 to 8 items (the format's max_items)"),
        ([add10, "--items", "2:3"], "--items: item counts apply to sorting; this model does addition"),
    ]:
        code, _, err = run(capsys, "eval", *argv, "--samples", 5)
        assert code == 2 and err.splitlines() == [f"hf-arith: error: {message}"], err
    code, _, err = run(capsys, "eval", add10, "--items", "8:6")
    assert code == 2 and "expected A:B with A <= B items" in err and len(err.splitlines()) <= 3


# -- verify ---------------------------------------------------------------------------------
def test_verify_prints_the_tiny_adder_protocol(add10, capsys):
    code, out, err = run(capsys, "verify", add10)
    assert code == 0, err
    assert "seed 2025" in out
    assert re.search(r"accuracy\s+\d+\.\d\d%", out)
    assert re.search(r"correct\s+\d+ / 10010", out)
    assert re.search(r"edge cases\s+\d+ / 10", out)
    params = load_checkpoint(add10)[0].num_parameters()
    assert re.search(rf"unique params\s+{params}$", out, flags=re.M)
    assert re.search(r"additions/s\s+[\d,]+", out)


# -- models ---------------------------------------------------------------------------------
def test_models_lists_bundled_checkpoints(capsys):
    code, out, err = run(capsys, "models")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split()[:2] == ["name", "task"]
    row = next(r for r in rows if r.startswith("minimal-add10 "))
    assert "addition, base 10" in row
    assert re.search(r"\s\d+\s", row)  # unique parameters
    assert row.rstrip().endswith("minimal-add10")  # the path
    assert "minimal" in row.split()  # the family
    # Under each model, what to use it for: one default per task among them.
    uses = [line for line in rows if line.startswith("  use it for: ")]
    assert len(uses) == len(hf_arith.bundled_models()) and "-" not in [u.split(": ", 1)[1] for u in uses]
    assert sum("default for" in u for u in uses) == len(hf_arith.bundled.DEFAULT_MODELS)


def test_models_shows_each_models_syntax_example_and_ranges(capsys):
    from hf_arith.runtime.limits import model_limits

    code, out, err = run(capsys, "models")
    assert code == 0, err
    formats = out.split("Problem formats")[1]
    assert "quote a problem with '*'" in formats
    rows = {line.split()[0]: line for line in formats.splitlines()[1:] if line.strip()}
    assert set(rows) == set(bundled_models())
    for name, syntax in (("abacus-gpt2-mul", "A*B, e.g. "), ("abacus-gpt2-sub", "A-B, e.g. "),
                         ("abacus-gpt2-sort", "a:N,b:N,... (2 to "), ("minimal-add10", "A+B, e.g. ")):
        model, tok = load_checkpoint(name)
        limits = model_limits(model, tok, hf_arith.bundled.bundled_path(name))
        example = rows[name].split("e.g. ")[1].split(";")[0]
        assert syntax in rows[name] and f"operands of 1-{limits.max_digits:,} digits" in rows[name]
        # Two numbers: what it accepts (its hard limit), and where it was measured at >= 99 %.
        assert 0 < limits.measured_max_digits <= limits.max_digits
        assert f"(hard limit; measured >= 99 % on 1-{limits.measured_max_digits:,})" in rows[name]
        assert f"trained on {limits.training_range[0]}-{limits.training_range[1]}" in rows[name]
        assert run(capsys, "solve", example, "--model", name)[0] == 0  # the example is a problem it takes


def test_models_with_nothing_bundled(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(hf_arith.bundled, "BUNDLED_DIR", tmp_path / "none")
    code, out, _ = run(capsys, "models")
    assert code == 0
    assert "No bundled models" in out


# -- train ----------------------------------------------------------------------------------
def test_train_then_resume(tmp_path, capsys):
    out_dir = tmp_path / "run"
    small = ["--set", "optim.steps=3", "--set", "optim.compile=false", "--set", "eval.samples=30", "--set", "optim.save_steps=1000"]
    code, out, err = run(capsys, "train", *small, "--set", "eval.verify=true", "--output-dir", out_dir)
    assert code == 0, err
    assert out.startswith("Training minimal-add10:")  # the default preset
    assert re.search(r"Trained 3 steps", out)
    assert re.search(r"Held-out exact match: \d+\.\d\d% of 30 problems", out)
    rows = re.findall(r"^\s+(\d+)\s+\d+\.\d\d%\s+\d+$", out, flags=re.M)
    assert rows and all(1 <= int(r) <= 10 for r in rows)
    assert re.search(r"correct\s+\d+ / 10010", out) and "unique params" in out
    assert f"Checkpoint saved to {out_dir / 'final'}" in out
    model, tokenizer = load_checkpoint(out_dir / "final")
    assert tokenizer.arith_format.task == "add"
    mode = (out_dir / "final" / "config.json").stat().st_mode & 0o777  # the weights are as readable as the rest
    assert (out_dir / "final" / "model.safetensors").stat().st_mode & 0o777 == mode

    code, out, err = run(capsys, "train", "minimal-add10", *small, "--set", "optim.steps=5",
                         "--set", "eval.verify=false", "--output-dir", out_dir, "--resume")
    assert code == 0, err
    assert f"Resuming from {out_dir / 'checkpoint-3'}" in out
    assert "Trained 5 steps" in out
    assert "10010" not in out  # no verify this time
    assert (out_dir / "checkpoint-5").is_dir()


def test_train_from_a_yaml_recipe_file(tmp_path, capsys):
    recipe = tmp_path / "sub.yaml"
    recipe.write_text(
        "name: tiny-sub\nfamily: minimal\nmodel: {hidden_size: 4}\n"
        "format: {task: sub, operand_width: 0, answer_width: 0, end_token: true}\n"
        "data: {min_digits: 1, max_digits: 3}\noptim: {steps: 2, batch_size: 16, save_steps: 1000}\n"
        "eval: {samples: 20, verify: false}\n"
    )
    code, out, err = run(capsys, "train", recipe, "--output-dir", tmp_path / "out", "--threads", 1)
    assert code == 0, err
    assert out.startswith("Training tiny-sub: minimal family, subtraction")
    assert "Trained 2 steps" in out
    assert (tmp_path / "out" / "final" / "config.json").is_file()


# -- data export ----------------------------------------------------------------------------
def test_data_export_passes_the_options_on(tmp_path, capsys, monkeypatch):
    calls = []

    def fake_export(out_dir, overwrite=False, **kwargs):
        calls.append((out_dir, dict(kwargs, overwrite=overwrite)))
        out = Path(out_dir)
        if out.exists() and not overwrite:
            raise HfArithError(f"{out_dir} already holds files; pass overwrite=True")
        (out / "data").mkdir(parents=True, exist_ok=True)
        (out / "data" / "train-00000.parquet").write_bytes(b"PAR1")
        return out

    monkeypatch.setitem(sys.modules, "hf_arith.data.dataset_export", types.SimpleNamespace(export_parquet=fake_export))
    target = tmp_path / "x"
    code, out, err = run(capsys, "data", "export", target, "--task", "mul", "--train-size", 10,
                         "--test-size", 5, "--seed", 3, "--min-digits", 2, "--max-digits", 4, "--base", 16)
    assert code == 0, err
    assert calls == [(str(target), dict(task="mul", train_size=10, test_size=5, seed=3, min_digits=2,
                                        max_digits=4, base=16, overwrite=False))]
    assert str(target) in out and "train-00000.parquet" in out
    calls.clear()
    code, _, err = run(capsys, "data", "export", target)
    assert calls == [(str(target), dict(overwrite=False))]  # unset options: the exporter's own defaults
    assert code == 2 and err.splitlines() == [f"hf-arith: error: {target} already holds files; pass overwrite=True"]
    assert run(capsys, "data", "export", target, "--overwrite")[0] == 0


def test_data_export_writes_parquet(tmp_path, capsys):
    out_dir = tmp_path / "ds"
    code, out, err = run(capsys, "data", "export", out_dir, "--train-size", 40, "--test-size", 10, "--max-digits", 3)
    assert code == 0, err
    assert list(out_dir.rglob("*.parquet"))
    assert str(out_dir) in out and ".parquet" in out
    assert out.startswith(f"Exported add problems to {out_dir}")  # the task by name, the exporter's default
    code, _, err = run(capsys, "data", "export", out_dir, "--train-size", 40, "--test-size", 10)
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("hf-arith: error: ")
    assert run(capsys, "data", "export", out_dir, "--train-size", 40, "--test-size", 10, "--overwrite")[0] == 0


# -- the command itself ---------------------------------------------------------------------
def test_help_lists_the_subcommands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("train", "eval", "verify", "solve", "models", "data"):
        assert command in out


def test_console_script_reports_errors_in_one_line(add10):
    # The installed console script sits next to the interpreter running the tests (the venv's bin/).
    exe = Path(sys.executable).parent / ("hf-arith.exe" if sys.platform == "win32" else "hf-arith")
    assert exe.is_file(), f"the hf-arith console script is not installed next to {sys.executable}"
    done = subprocess.run([str(exe), "solve", "-5+3", "--model", str(add10)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("hf-arith: error: '-5+3': negative numbers are not supported; this model takes A+B, e.g. ")


def test_checkpoint_error_is_a_value_error():
    assert issubclass(CheckpointError, ValueError)


def test_checkpoint_label_names_a_run_by_its_folder_not_final():
    assert checkpoint_label("runs/minimal-add10/final") == "minimal-add10"
    assert checkpoint_label("minimal-add10-split-wide-arc") == "minimal-add10-split-wide-arc"
    assert checkpoint_label("runs/minimal-add10/checkpoint-2000") == "checkpoint-2000"
    assert checkpoint_label("final") == "final"  # no parent folder to name it by


# -- eval --grid ----------------------------------------------------------------------------
def test_eval_grid_runs_the_held_out_evaluation_only_when_asked(add10, tmp_path, capsys, monkeypatch):
    import hf_arith.evaluation.held_out

    evaluate = hf_arith.evaluation.held_out.evaluate_model
    calls = []
    monkeypatch.setattr(hf_arith.evaluation.held_out, "evaluate_model", lambda *a, **k: calls.append(k) or evaluate(*a, **k))
    argv = ["eval", add10, "--grid", "1:2", "--samples-per-cell", 2, "--samples", 20, "--output-dir", tmp_path / "g"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert calls == [] and "Held-out" not in out and "Length grid 1-2 x 1-2" in out
    assert "heldout" not in json.loads((tmp_path / "g" / "summary.json").read_text())
    code, out, err = run(capsys, *argv, "--heldout")
    assert code == 0, err
    assert len(calls) == 1 and "Held-out exact match" in out and "Length grid 1-2 x 1-2" in out
    assert json.loads((tmp_path / "g" / "summary.json").read_text())["heldout"]["n"] == 20


def test_eval_builds_the_model_limits_once_for_every_run_it_makes(add10, tmp_path, capsys, monkeypatch):
    """One `eval --grid --stress --heldout` reads the model's limits once and passes them down."""
    import hf_arith.evaluation.grid
    import hf_arith.evaluation.held_out
    import hf_arith.evaluation.stress
    import hf_arith.runtime.limits
    import hf_arith.runtime.solving

    built = []
    real = hf_arith.runtime.limits.model_limits
    counting = lambda *a, **k: built.append(1) or real(*a, **k)  # noqa: E731
    # the CLI imports it when the command runs; the others hold it from their import
    for module in (hf_arith.runtime.limits, hf_arith.evaluation.grid, hf_arith.evaluation.held_out,
                   hf_arith.evaluation.stress, hf_arith.runtime.solving):
        monkeypatch.setattr(module, "model_limits", counting)
    code, out, err = run(capsys, "eval", add10, "--grid", "1:2", "--samples-per-cell", 2, "--samples", 20, "--heldout",
                         "--stress", "--output-dir", tmp_path / "g")
    assert code == 0, err
    assert "Length grid 1-2 x 1-2" in out and "Held-out exact match" in out and "stress set" in out
    assert len(built) == 1
