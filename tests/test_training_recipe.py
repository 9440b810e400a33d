"""docs/training.md's plain-Trainer recipe runs as written (with fewer steps) and learns: a bundled family's
config from the Auto classes, trained by a plain `transformers.Trainer` on the package's problem stream and
collator, saved by `Trainer.save_model` and scored with the package's `evaluate` metric."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Your own Trainer"
STEPS = 600  # the block's 1,000 cut for time: about 10 s of training; at 400 a loaded machine once ended at 47.8 %


def recipe() -> str:
    text = (ROOT / "docs" / "training.md").read_text()
    section = text[text.index(SECTION):]
    return re.search(r"^```python\n(.*?)^```", section, re.S | re.M).group(1)


def test_the_recipe_is_short_and_uses_only_public_names():
    code = recipe()
    assert len(code.strip().splitlines()) < 30
    assert "max_steps=1000" in code and "Trainer(" in code and "stack_examples" in code
    assert not re.search(r"\b_[a-z]", code.replace("__", "")), "the recipe reaches a private name"


def test_the_plain_trainer_recipe_trains_saves_and_scores(tmp_path):
    code = recipe().replace("max_steps=1000", f"max_steps={STEPS}")
    env = {k: v for k, v in os.environ.items() if k.startswith(("HF_", "PYTHONPATH", "PATH", "HOME", "TMP", "OMP"))}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    match = re.fullmatch(r"exact match ([0-9.]+)% on 500 held-out problems", done.stdout.strip().splitlines()[-1])
    assert match, done.stdout[-500:]
    assert float(match.group(1)) >= 50, done.stdout  # untrained: ~0 %; the block's 1,000 steps: 100 %
    final = tmp_path / "my-adder" / "final"
    config = json.loads((final / "config.json").read_text())
    assert "arithmetic" in config["custom_pipelines"] and (final / "pipeline_arithmetic.py").is_file()
    assert json.loads((final / "generation_config.json").read_text())["max_new_tokens"] == config["max_answer_tokens"]
