"""bench/sort_line_probe.py's miss census files each label under the comparison that wrote it."""

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from hf_arith.data.formatting import NumberFormat

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture
def probe(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_sort_line_probe_under_test", BENCH / "sort_line_probe.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


class Copier:
    """A stand-in model whose most likely token at t is the one at t + 1 - `back` (0: the next token itself, an
    oracle; a line's width: the label at the same slot of the line before, a model that never swaps)."""

    def __init__(self, vocab_size: int, back: int):
        self.vocab_size, self.back = vocab_size, back
        self.config = SimpleNamespace()  # no width, heads or window: one pass over a whole list

    def __call__(self, input_ids, **kwargs):
        target = torch.roll(input_ids, shifts=self.back - 1, dims=-1)  # position t predicts t + 1 - back
        return SimpleNamespace(logits=torch.nn.functional.one_hot(target, self.vocab_size).float())


@pytest.mark.parametrize("spread", [False, True])
def test_a_model_that_never_swaps_misses_only_labels_whose_digits_differ(probe, spread):
    fmt = NumberFormat(task="sort", scratchpad="transposition_next_unmarked", max_items=20)
    items, digits = 5, 3
    census = probe.round_census(Copier(len(fmt.vocab()), 2 * items + 1), fmt, items, digits, 30, spread=spread)
    classes = census["classes"]
    lines = items * digits
    assert census["label_tokens"] == 30 * (lines - 1) * items  # every label after the first line, once
    assert all(classes[k]["misses"] == 0 for k in classes if k.startswith("tie") or k == "unpaired")
    assert sum(classes[k]["misses"] for k in classes if k.startswith("differ")) > 0
    assert all(w["kind"].startswith("differ") for w in census["where"])
    ties = sum(classes[k]["labels"] for k in classes if k.startswith("tie"))
    for table in ("ties_by_window", "ties_by_carry"):  # every tie once more, none missed
        assert sum(c["labels"] for c in census[table].values()) == ties > 0
        assert all(c["misses"] == 0 for c in census[table].values())


def test_an_oracle_misses_nothing(probe):
    fmt = NumberFormat(task="sort", scratchpad="transposition_next_unmarked", max_items=20)
    census = probe.round_census(Copier(len(fmt.vocab()), 0), fmt, 4, 2, 10)
    assert census["misses"] == 0 and census["label_tokens"] == 10 * 7 * 4


def test_carried_ties_are_rare_in_short_uniform_lists_and_common_in_the_kind_that_writes_them(probe):
    import numpy as np

    from hf_arith.data.problems import ProblemSpec, sample

    spec = ProblemSpec(task="sort", min_digits=1, max_digits=6, min_items=2, max_items=5)
    uniform = probe.carried_ties_per_list(sample(spec, 400, np.random.default_rng(0), split=None))
    carried = probe.carried_ties_per_list(sample(spec, 400, np.random.default_rng(0), split=None, kind="carried_ties"))
    assert uniform < 0.3 < 1.0 < carried
    three = ProblemSpec(task="sort", min_digits=1, max_digits=6, min_items=2, max_items=3)
    assert probe.carried_ties_per_list(sample(three, 200, np.random.default_rng(0), split=None, kind="carried_ties")) == 0
