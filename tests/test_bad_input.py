"""Bad input ends in one line, `hf-arith: error: <message>` and exit status 2, never a traceback.

Covers solve, eval, verify, train, the tokenizer and checkpoint loading. Every message must name
the problem (the offending input, key or path). Checkpoints are trained for a few steps only.
"""

from __future__ import annotations

import json
import shutil

import pytest
from cli_contract import fails
from conftest import tiny_checkpoint
from transformers import AutoTokenizer

import hf_arith.bundled
from hf_arith.data.formatting import FormatError
from hf_arith.runtime.loading import CheckpointError, load_checkpoint

LONG = "1" * 40  # a 40-digit operand


@pytest.fixture(scope="session")
def sub3(tmp_path_factory):
    """Subtraction of up to 3 digits, no fixed width: its context, not a width, limits operands."""
    return tiny_checkpoint(tmp_path_factory, "sub3", [
        "format.task=sub", "format.operand_width=0", "format.answer_width=0", "format.end_token=true",
        "model.digit_logits_only=false", "data.max_digits=3", "optim.steps=2",
    ])


# Problems a user may type, and what the message must say about them.
BAD_PROBLEMS = [
    ("12a+3", ["'12a+3'", "'a'", "not a decimal digit"]),
    ("-5+3", ["'-5+3'", "negative"]),
    ("", ["empty"]),
    ("   ", ["empty"]),
    ("12345678901+1", ["'12345678901+1'", "more than 10"]),
    (f"{LONG}+1", [f"'{LONG}'... (42 characters)", "more than 10"]),  # problems are quoted up to 40 characters
    ("12+", ["'12+'", "missing operand"]),
    ("7-2", ["'7-2'", "subtraction", "addition"]),
]


# -- solve ----------------------------------------------------------------------------------
@pytest.mark.parametrize("problem, expected", BAD_PROBLEMS, ids=[p or "empty" for p, _ in BAD_PROBLEMS])
def test_solve_bad_problem(add10, capsys, problem, expected):
    message = fails(capsys, "solve", "--model", add10, "--", problem)
    for part in expected:
        assert part in message


def test_solve_negative_number_without_double_dash(add10, capsys):
    # argparse would take '-5+3' for an unknown option; the problem parser must see it.
    assert "negative numbers are not supported" in fails(capsys, "solve", "-5+3", "--model", add10)


def test_solve_one_bad_problem_among_good_ones(add10, capsys):
    message = fails(capsys, "solve", "1+2", "3x+4", "--model", add10)
    assert "'3x+4'" in message and "'x'" in message


def test_solve_operand_longer_than_the_context(sub3, capsys):
    message = fails(capsys, "solve", f"{LONG}-1", "--model", sub3)
    assert "too long" in message and "context" in message


def test_solve_missing_model(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(hf_arith.bundled, "BUNDLED_DIR", tmp_path / "no-bundled")
    missing = tmp_path / "nowhere"
    assert str(missing) in fails(capsys, "solve", "1+2", "--model", missing)
    # the default model, when it is not installed
    assert "'minimal-add10'" in fails(capsys, "solve", "1+2")


def test_solve_needs_a_problem(capsys):
    assert "PROBLEM" in fails(capsys, "solve")


# -- the tokenizer --------------------------------------------------------------------------
@pytest.mark.parametrize("problem, expected", BAD_PROBLEMS, ids=[p or "empty" for p, _ in BAD_PROBLEMS])
def test_tokenizer_bad_problem(add10, problem, expected):
    tokenizer = AutoTokenizer.from_pretrained(add10)
    with pytest.raises(FormatError) as info:
        tokenizer(problem)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert "\n" not in message
    for part in expected:
        assert part in message


def test_tokenizer_batch_names_the_bad_problem(add10):
    tokenizer = AutoTokenizer.from_pretrained(add10)
    with pytest.raises(FormatError, match=r"'4\+x'"):
        tokenizer(["1+2", "4+x"], padding=True)


# -- checkpoints (eval, verify and solve all load through load_checkpoint) -------------------
def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


@pytest.fixture
def broken(add10, tmp_path):
    """Folders that are not usable hf_arith checkpoints, and what the message must mention."""
    cases = {}
    cases["missing"] = (tmp_path / "does-not-exist", ["does-not-exist", "no checkpoint folder"])
    empty = tmp_path / "empty"
    empty.mkdir()
    cases["no config"] = (empty, ["no config.json"])
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    cases["other model_type"] = (gpt2, ["incompatible", "'gpt2'"])
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "config.json").write_text("{this is not json")
    cases["garbage config"] = (garbage, ["config.json", "not valid JSON"])
    no_tok = _copy(add10, tmp_path / "no-tokenizer")
    (no_tok / "tokenizer_config.json").unlink()
    cases["no tokenizer"] = (no_tok, ["incompatible", "tokenizer"])
    foreign_tok = _copy(add10, tmp_path / "foreign-tokenizer")
    config = json.loads((foreign_tok / "tokenizer_config.json").read_text())
    del config["number_format"]
    (foreign_tok / "tokenizer_config.json").write_text(json.dumps(config))
    cases["tokenizer without number_format"] = (foreign_tok, ["incompatible", "number_format"])
    bad_weights = _copy(add10, tmp_path / "bad-weights")
    (bad_weights / "model.safetensors").write_bytes(b"\x00" * 100)
    cases["corrupt weights"] = (bad_weights, ["bad-weights", "cannot load the model"])
    no_weights = _copy(add10, tmp_path / "no-weights")
    (no_weights / "model.safetensors").unlink()
    cases["no weights"] = (no_weights, ["no-weights", "cannot load the model"])
    bad_tok = _copy(add10, tmp_path / "bad-tokenizer-json")
    (bad_tok / "tokenizer.json").write_text("garbage{")
    cases["corrupt tokenizer.json"] = (bad_tok, ["bad-tokenizer-json", "tokenizer"])
    run_dir = add10.parent  # the run folder instead of its final/ checkpoint
    cases["run folder"] = (run_dir, ["no config.json", "final"])
    return cases


CASES = ["missing", "no config", "other model_type", "garbage config", "no tokenizer",
         "tokenizer without number_format", "corrupt weights", "no weights", "corrupt tokenizer.json", "run folder"]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("command", ["eval", "verify", "solve"])
def test_unusable_checkpoint(broken, capsys, command, case):
    path, expected = broken[case]
    argv = ["solve", "1+2", "--model", path] if command == "solve" else [command, path]
    message = fails(capsys, *argv)
    for part in expected:
        assert part in message


@pytest.mark.parametrize("case", CASES)
def test_load_checkpoint_raises_checkpoint_error(broken, case):
    path, expected = broken[case]
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    assert "\n" not in str(info.value)
    for part in expected:
        assert part in str(info.value)


def test_mismatched_weights(add10, tmp_path, capsys):
    import torch
    from safetensors.torch import load_file, save_file

    folder = _copy(add10, tmp_path / "mismatch")
    tensors = load_file(folder / "model.safetensors")
    tensors["model.embed_tokens.weight"] = torch.zeros(3, 3)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    message = fails(capsys, "eval", folder)
    assert "mismatched" in message and "model.embed_tokens.weight" in message


# -- eval -----------------------------------------------------------------------------------
def test_eval_digits_beyond_the_fixed_width(add10, capsys):
    message = fails(capsys, "eval", add10, "--max-digits", 11)
    assert "--max-digits 11" in message and "10 digits" in message


def test_eval_digits_beyond_the_context(sub3, capsys):
    message = fails(capsys, "eval", sub3, "--max-digits", 40)
    assert "--max-digits 40" in message and "context" in message


@pytest.mark.parametrize("argv, expected", [
    (["--min-digits", 5, "--max-digits", 2], ["--min-digits", "5", "2"]),
    (["--min-digits", 0], ["--min-digits", "0"]),
    (["--samples", 0], ["--samples", "'0'"]),
    (["--samples", "abc"], ["--samples", "'abc'"]),
    (["--seed", "x"], ["--seed", "'x'"]),
])
def test_eval_bad_options(add10, capsys, argv, expected):
    message = fails(capsys, "eval", add10, *argv)
    for part in expected:
        assert part in message


def test_eval_json_into_a_missing_folder(add10, tmp_path, capsys):
    target = tmp_path / "no" / "such" / "report.json"
    assert str(target) in fails(capsys, "eval", add10, "--json", target)


# -- verify ---------------------------------------------------------------------------------
def test_verify_a_non_addition_model(sub3, capsys):
    message = fails(capsys, "verify", sub3)
    assert "10-digit decimal addition" in message and "subtraction" in message


# -- train ----------------------------------------------------------------------------------
@pytest.fixture
def safe(tmp_path):
    """Options that keep a train command tiny should it wrongly start training."""
    return ["--set", "optim.steps=1", "--set", "optim.compile=false", "--set", "eval.samples=10", "--output-dir", tmp_path / "out"]


def test_train_unknown_task(capsys, safe):
    message = fails(capsys, "train", "--set", "format.task=pow", *safe)
    assert "'pow'" in message and "task" in message


def test_train_unknown_preset(capsys, safe):
    message = fails(capsys, "train", "no-such-preset", *safe)
    assert "'no-such-preset'" in message and "minimal-add10" in message and "hf-arith train --list" in message
    assert "did you mean abacus-gpt2-sort" in fails(capsys, "train", "abacus-gpt2-srot", *safe)


def test_train_malformed_yaml(tmp_path, capsys, safe):
    recipe = tmp_path / "broken.yaml"
    recipe.write_text("optim:\n  steps: [1,\n")
    message = fails(capsys, "train", recipe, *safe)
    assert str(recipe) in message and "malformed YAML" in message


def test_train_binary_recipe_file(tmp_path, capsys, safe):
    recipe = tmp_path / "binary.yaml"
    recipe.write_bytes(b"\xff\xfe\x00garbage")
    message = fails(capsys, "train", recipe, *safe)
    assert str(recipe) in message


@pytest.mark.parametrize("override, expected", [
    ("optim.stepz=3", ["'stepz'", "optim"]),
    ("colour=blue", ["'colour'"]),
    ("model.hiden_size=8", ["'hiden_size'", "model"]),
    ("optim.steps.x=1", ["optim.steps.x=1"]),
    ("optim", ["'optim'", "section.key=value"]),
    ("optim.steps=abc", ["optim.steps", "'abc'"]),
    ("family=transformer-xl", ["'transformer-xl'", "famil"]),
])
def test_train_bad_override(capsys, safe, override, expected):
    message = fails(capsys, "train", *safe, "--set", override)
    for part in expected:
        assert part in message


def test_train_unknown_key_in_a_yaml_file(tmp_path, capsys, safe):
    recipe = tmp_path / "typo.yaml"
    recipe.write_text("optim:\n  learning_rat: 0.1\n")
    message = fails(capsys, "train", recipe, *safe)
    assert "'learning_rat'" in message


def test_train_digits_wider_than_the_format(capsys, safe):
    message = fails(capsys, "train", *safe, "--set", "format.operand_width=5")
    assert "max_digits" in message and "operand_width 5" in message


def test_train_verify_on_a_non_addition_recipe(capsys, safe):
    message = fails(capsys, "train", *safe, "--set", "format.task=sub", "--set", "eval.verify=true")
    assert "eval.verify" in message and "subtraction" in message


def test_train_resume_without_a_checkpoint(tmp_path, capsys, safe):
    message = fails(capsys, "train", *safe, "--resume")
    assert "--resume" in message and str(tmp_path / "out") in message


def test_train_output_dir_is_a_file(tmp_path, capsys):
    target = tmp_path / "a-file"
    target.write_text("x")
    message = fails(capsys, "train", "--set", "optim.steps=1", "--output-dir", target)
    assert str(target) in message and "not a folder" in message


# -- the command line itself ----------------------------------------------------------------
def test_unknown_command(capsys):
    assert "'frobnicate'" in fails(capsys, "frobnicate")


def test_no_command(capsys):
    assert "required" in fails(capsys)


def test_bad_threads(capsys):
    assert "--threads" in fails(capsys, "--threads", 0, "models")
