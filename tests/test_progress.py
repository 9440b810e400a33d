"""Long jobs show progress on stderr (`hf_arith.text.progress_bar`): nothing for a quick one, and without a
terminal (a log, CI) a line at most every PROGRESS_INTERVAL_NO_TTY seconds, not one per batch."""

from __future__ import annotations

import hf_arith
import hf_arith.text as text
from hf_arith.data.problems import ProblemSpec, held_out_problems
from hf_arith.runtime.loading import load_checkpoint


def test_a_quick_call_prints_no_progress(capsys):
    model, tok = load_checkpoint("minimal-add10")
    hf_arith.solve(model, tok, ["1+1", "2+2"], progress=True)
    assert capsys.readouterr().err == ""


def test_a_long_call_without_a_terminal_prints_a_few_lines(capsys, monkeypatch):
    monkeypatch.setattr(text, "PROGRESS_DELAY", 0.0)  # as if the job had run long already
    model, tok = load_checkpoint("minimal-add10")
    problems = held_out_problems(ProblemSpec(min_digits=1, max_digits=10), 600, seed=3).to_text()
    hf_arith.solve(model, tok, problems, batch_size=16, progress=True)  # 38 batches
    err = capsys.readouterr().err
    assert "\r" not in err  # in a log each update is a line of its own, not carriage-return redraws
    updates = [u for u in err.splitlines() if u.strip()]
    assert updates and updates[-1].startswith("solving: 100%") and "600/600" in updates[-1]
    assert len(updates) <= 3, updates  # the first draw and the last, not one per batch
    assert capsys.readouterr().err == ""
