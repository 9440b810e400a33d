"""The command line's two kinds of failure (a user error: one line, exit 2; a bug: its traceback,
exit 1), and a start-up that answers --help and --version without torch."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cli_contract import fails

import hf_arith.runtime.solving
from hf_arith.cli import command_paths, main

ADD10 = "minimal-add10"


def plant(monkeypatch, error: BaseException) -> None:
    """Make `solve` raise `error`, as a bug inside it would."""
    def broken(*_, **__):
        raise error
    monkeypatch.setattr(hf_arith.runtime.solving, "solve", broken)


def test_a_bug_inside_solve_propagates_with_its_traceback(monkeypatch, capsys):
    plant(monkeypatch, KeyError("planted"))
    with pytest.raises(KeyError, match="planted"):
        main(["solve", "1+2", "--model", ADD10])
    assert "hf-arith: error" not in capsys.readouterr().err


def test_a_bug_exits_1_with_a_traceback_and_bad_input_exits_2_with_one_line():
    script = ("import sys\nimport hf_arith.runtime.solving as s\n"
              "def broken(*a, **k):\n    raise KeyError('planted')\n"
              "s.solve = broken\nfrom hf_arith.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    bug = subprocess.run([sys.executable, "-c", script, "solve", "1+2"], capture_output=True, text=True, timeout=600)
    assert bug.returncode == 1
    assert "Traceback (most recent call last)" in bug.stderr and "KeyError: 'planted'" in bug.stderr
    assert "hf-arith: error" not in bug.stderr
    bad = subprocess.run([sys.executable, "-c", script, "solve", "1+x"], capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert len(bad.stderr.splitlines()) == 1 and bad.stderr.startswith("hf-arith: error: '1+x'")


def test_an_os_error_on_a_named_path_is_the_users(monkeypatch, capsys):
    plant(monkeypatch, PermissionError(13, "Permission denied", "/data/runs"))
    message = fails(capsys, "solve", "1+2", "--model", ADD10)
    assert "Permission denied" in message and "/data/runs" in message


def test_an_os_error_without_a_path_is_a_bug(monkeypatch):
    plant(monkeypatch, ConnectionResetError("the peer went away"))
    with pytest.raises(ConnectionResetError):
        main(["solve", "1+2", "--model", ADD10])


def test_every_user_error_class_is_the_package_error_type():
    from hf_arith.data.errors import CLIError, HfArithError
    from hf_arith.data.formatting import FormatError
    from hf_arith.publishing.adderboard import ProtocolFailure
    from hf_arith.publishing.adderboard_folder import ParameterCountError
    from hf_arith.publishing.hub_folder import PublishError
    from hf_arith.publishing.space_build import SpaceError
    from hf_arith.runtime.loading import CheckpointError
    from hf_arith.training.recipe import RecipeError
    from hf_arith.training.warm_start import WarmStartError

    for cls in (FormatError, CheckpointError, RecipeError, WarmStartError, PublishError, SpaceError,
                ProtocolFailure, ParameterCountError, CLIError):
        assert issubclass(cls, HfArithError) and issubclass(cls, ValueError), cls


def test_an_unknown_set_key_lists_every_valid_key(capsys):
    from dataclasses import fields

    from hf_arith.training.recipe import OptimRecipe

    message = fails(capsys, "train", "--set", "optim.nonsense=1")
    assert "more characters" not in message and "'nonsense'" in message
    assert message.endswith(", ".join(sorted(f.name for f in fields(OptimRecipe))))


def test_the_parsers_constants_agree_with_the_modules_that_own_them():
    from hf_arith.cli import common
    from hf_arith.runtime.loading import DTYPES

    assert common.DTYPE_NAMES == tuple(DTYPES)
    assert common.LOW_CONFIDENCE == hf_arith.runtime.solving.LOW_CONFIDENCE


def every_help() -> list[list[str]]:
    """--version, --help, and --help of every command and subcommand."""
    return [["--version"], ["--help"], *([*path, "--help"] for path in command_paths())]


def test_help_and_version_answer_without_torch_or_transformers():
    argvs = every_help()
    assert ["data", "export", "--help"] in argvs and ["solve", "--help"] in argvs
    # As the console script starts: sys.argv[0] is the command's own file.
    script = ("import sys\nsys.argv = ['/venv/bin/hf-arith']\nimport contextlib, io\nfrom hf_arith.cli import main\n"
              f"for argv in {argvs!r}:\n"
              "    with contextlib.redirect_stdout(io.StringIO()):\n        assert main(argv) == 0, argv\n"
              "print(sorted(m for m in ('torch', 'transformers', 'matplotlib') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_import_hf_arith_registers_the_families_in_a_fresh_process():
    script = ("import hf_arith\nfrom transformers import AutoConfig, AutoTokenizer\n"
              "config = AutoConfig.for_model(hf_arith.MinimalConfig.model_type)\n"
              "print(type(config).__name__)\n"
              "print(type(AutoTokenizer.from_pretrained(hf_arith.bundled_path('minimal-add10'))).__name__)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["MinimalConfig", "ArithTokenizer"]


def test_solve_help_points_to_the_formats_and_the_shell_quoting(capsys):
    assert main(["solve", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "hf-arith models" in out and "'12*34'" in out


def test_a_model_name_given_as_a_problem_is_told_to_go_after_model(capsys):
    # `hf-arith solve abacus-gpt2-mul 5*3`: the name is read as a problem, and the default adder
    # would call it subtraction; the message says what was meant instead.
    message = fails(capsys, "solve", "abacus-gpt2-mul", "5*3")
    assert message.startswith("'abacus-gpt2-mul' is a bundled model, not a problem")
    assert "--model abacus-gpt2-mul" in message
    assert "not a problem" not in fails(capsys, "solve", "5+3", "--model", "abacus-gpt2-mul")  # a plain wrong syntax
