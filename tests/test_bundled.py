"""Every bundled checkpoint: current remote code, safetensors only, and it answers correctly."""

import threading
from pathlib import Path

import pytest

import hf_arith
from hf_arith.bundled import bundled_models
from hf_arith.evaluation import heldout_problems
from hf_arith.loading import load_checkpoint
from hf_arith.problems import ProblemSpec

PACKAGE = Path(hf_arith.__file__).parent


@pytest.mark.parametrize("name", bundled_models())
def test_bundled_checkpoint_carries_the_current_remote_code(name):
    """Hub users load the bundled folder's own .py copies: they must match the package's sources."""
    folder = Path(hf_arith.bundled_path(name))
    copies = sorted(folder.glob("*.py"))
    assert any(p.name.startswith("modeling_") for p in copies)
    for copy in copies:
        (source,) = [p for p in PACKAGE.rglob(copy.name) if "bundled" not in p.parts]
        assert copy.read_text() == source.read_text(), f"bundled {name}/{copy.name} is stale; re-save the checkpoint"
    weights = sorted(p.name for p in folder.rglob("*") if p.suffix in (".bin", ".pt", ".pth", ".pkl", ".safetensors"))
    assert weights == ["model.safetensors"]


@pytest.mark.parametrize("name", bundled_models())
def test_bundled_checkpoint_solves_held_out_problems(name):
    model, tok = load_checkpoint(name)
    fmt = tok.arith_format
    top = fmt.operand_width or 10
    texts, answers, _ = heldout_problems(ProblemSpec(task=fmt.task, base=10, min_digits=1, max_digits=top), 300,
                                         seed=99)
    predictions = hf_arith.solve(model, tok, texts)
    accuracy = sum(p == a for p, a in zip(predictions, answers)) / len(answers)
    assert accuracy >= 0.99, f"{name}: {accuracy:.3f} on 300 held-out problems"


def test_checkpoints_load_from_several_threads_at_once():
    """The Space loads models from concurrent events; unsynchronised loads lost the tied head."""
    errors, models = [], []

    def load():
        try:
            models.append(load_checkpoint(bundled_models()[0])[0])
        except Exception as err:  # noqa: BLE001 - collected for the assertion
            errors.append(err)

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(models) == 4
