"""The mutation check (scripts/mutation_check.py) can plant every bug it lists in today's code.

Only its pattern-matching step runs here (no pytest runs): a refactor that moves the code a
mutation rewrites fails this test, by the mutation's name, instead of the check going stale.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("mutation_check", ROOT / "scripts" / "mutation_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


def test_every_mutation_matches_its_file_exactly_once(check):
    assert check.stale_patterns(ROOT) == []


def test_every_mutation_changes_its_file_and_names_existing_tests(check):
    names = [m.name for m in check.MUTATIONS]
    assert len(names) == len(set(names))
    for m in check.MUTATIONS:
        assert m.old != m.new, m.name
        assert m.tests and all((ROOT / t).is_file() for t in m.tests), m.name


def test_stale_patterns_names_every_mutation_that_does_not_match_once(check, tmp_path):
    (tmp_path / "a.py").write_text("x = 1\ny = 2\ny = 2\n")
    mutations = [check.Mutation("once", "", "a.py", "x = 1", "x = 2", ("t",)),
                 check.Mutation("twice", "", "a.py", "y = 2", "y = 3", ("t",)),
                 check.Mutation("never", "", "a.py", "z = 3", "z = 4", ("t",)),
                 check.Mutation("no-file", "", "b.py", "x = 1", "x = 2", ("t",))]
    stale = check.stale_patterns(tmp_path, mutations)
    assert [line.split(":")[0] for line in stale] == ["twice", "never", "no-file"]
    assert "2 times" in stale[0] and "0 times" in stale[1] and "does not exist" in stale[2]


@pytest.fixture
def ran(check, monkeypatch) -> list[str]:
    """What the check started: copying the tree or running pytest is recorded, and stops it there."""
    started: list[str] = []

    def refuse(what):
        def stop(*args, **kwargs):
            started.append(what)
            raise RuntimeError(f"the check went on to {what}")
        return stop

    monkeypatch.setattr(check, "copy_tree", refuse("copy"))
    monkeypatch.setattr(check, "pytest", refuse("pytest"))
    return started


def test_the_check_stops_before_running_anything_when_a_pattern_is_stale(check, monkeypatch, ran):
    stale = [check.Mutation("gone-a", "", "hf_arith/evaluation/grid.py", "no such text a", "", ("tests/test_grid.py",)),
             check.Mutation("gone-b", "", "hf_arith/evaluation/grid.py", "no such text b", "", ("tests/test_grid.py",))]
    monkeypatch.setattr(check, "MUTATIONS", [*check.MUTATIONS, *stale])
    with pytest.raises(SystemExit) as stop:
        check.main(["--only", check.MUTATIONS[0].name])
    assert "gone-a:" in str(stop.value) and "gone-b:" in str(stop.value) and ran == []


def test_save_records_only_a_complete_run(check, capsys, ran):
    for argv in (["--save", "--only", check.MUTATIONS[0].name], ["--save", "--no-baseline"]):
        with pytest.raises(SystemExit):
            check.main(argv)
        assert "complete run" in capsys.readouterr().err
    assert ran == []
