"""bench/sweep.py draws its sets inside the box it records: the trained one, or the one --digits and --items name."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture
def sweep(monkeypatch, tmp_path):
    """The sweep module, writing its results under tmp_path and recording the sets instead of solving them."""
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_sweep_under_test", BENCH / "sweep.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "RESULTS", tmp_path)
    module.drawn = {}

    def run_set(model, tok, texts, answers, label, tokens_per_step=1):
        module.drawn[label] = texts
        return {"n": len(texts), "wrong": 0, "silent_wrong": 0, "lowest_confidence_right": 1.0, "seconds": 0.0,
                "wrong_answers": []}

    monkeypatch.setattr(module, "run_set", run_set)
    return module


def shapes(texts: list[str]) -> tuple[set[int], set[int]]:
    """The list sizes and number lengths of sort problems ("a:31,b:7")."""
    lists = [re.findall(r"[a-z]+:(\d+)", text) for text in texts]
    return {len(items) for items in lists}, {len(n) for items in lists for n in items}


def test_a_sort_sweep_stays_in_the_box_it_names_and_records_it(sweep, tmp_path):
    sweep.main(["abacus-gpt2-sort", "--random", "300", "--hard", "30", "--digits", "1:2", "--items", "2:3",
                "--threads", "1"])
    assert set(sweep.drawn) == {f"abacus-gpt2-sort {name}" for name in
                                ("random", "repeated digits", "tie-heavy lists", "near-tie lists")}
    for texts in sweep.drawn.values():
        sizes, lengths = shapes(texts)
        assert sizes <= {2, 3} and lengths <= {1, 2}
    assert shapes(sweep.drawn["abacus-gpt2-sort random"]) == ({2, 3}, {1, 2})
    table = (tmp_path / "sweep.md").read_text()
    assert "| abacus-gpt2-sort | 1-2, 2-3 items | 1 | 300 | random |" in table


@pytest.mark.parametrize("name, items, digits", [("abacus-gpt2-sort", 5, 6), ("abacus-gpt2-sort-10", 10, 10)])
def test_a_sort_sweep_defaults_to_the_box_the_model_was_trained_on(sweep, name, items, digits):
    sweep.main([name, "--random", "400", "--hard", "10", "--threads", "1"])
    sizes, lengths = shapes(sweep.drawn[f"{name} random"])
    assert sizes == set(range(2, items + 1)) and max(lengths) == digits  # as its training summary says


def test_the_sweep_refuses_a_malformed_box(sweep, capsys):
    with pytest.raises(SystemExit):
        sweep.main(["abacus-gpt2-sort", "--items", "5:2"])
    assert "expected A:B with A <= B items" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sweep.main(["minimal-add10", "--items", "2:3"])
    assert "--items: minimal-add10 does not sort lists" in capsys.readouterr().err
