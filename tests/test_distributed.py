"""Several processes: `torchrun --nproc_per_node 2` on CPU (gloo) runs `hf-arith train` unchanged.

The two-process run is compared with a one-process run of the same recipe (same global batch):
each rank must see its own disjoint slice of the global batch, the slices together must be the
one-process batch, the curriculum must agree across ranks, the losses must agree, and the saved
checkpoint must load. Bad launches (an indivisible batch, more processes than devices) fail in
one line before any training.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from hf_arith.cli import main
from hf_arith.training.recipe import RecipeError, load_recipe
from hf_arith.training.run import available_cpu_cores, check_launch, check_recipe

# Runs the CLI and records, on every rank, what each training step received and the curriculum range.
RECORDER = r'''
import json, os, sys
import hf_arith.training.run as training
from hf_arith.cli import main

seen = []
original = training.ArithTrainer.training_step

def training_step(self, model, inputs, num_items_in_batch=None):
    curriculum = next(cb for cb in self.callback_handler.callbacks if isinstance(cb, training.CurriculumCallback))
    seen.append({"step": self.state.global_step, "input_ids": inputs["input_ids"].tolist(),
                 "range": [curriculum.state.min_digits, curriculum.state.max_digits]})
    return original(self, model, inputs, num_items_in_batch)

training.ArithTrainer.training_step = training_step
code = main(sys.argv[2:])
with open(os.path.join(sys.argv[1], f"rank{os.environ.get('RANK', '0')}.json"), "w") as f:
    json.dump(seen, f)
sys.exit(code)
'''

STEPS, BATCH, SWITCH = 24, 64, 10
# 5-10 digit operands: ~1e10 possible problems, so two ranks can only share one through a bug.
# The curriculum switches at step 10; chunks of 100 examples straddle steps.
RECIPE = [
    # No long warmup (the preset's is hundreds of steps): the loss must move within these few steps.
    f"optim.steps={STEPS}", f"optim.batch_size={BATCH}", "optim.warmup_steps=2", "optim.compile=false", "optim.threads=1",
    "optim.save_steps=12", "optim.logging_steps=1", "eval.samples=50", "eval.verify=false",
    "data.min_digits=5", "data.chunk_size=100", f"data.curriculum=[{{until_step: {SWITCH}, min_digits: 5, max_digits: 6}}]",
]
# Adam on identical data; only the order of float additions differs (the gradient all-reduce).
LOSS_TOLERANCE = 1e-4


def _run(tmp_path, name: str, launcher: list[str]) -> tuple[dict, list[list[dict]], str]:
    record = tmp_path / name
    record.mkdir()
    script = tmp_path / "record.py"
    script.write_text(RECORDER)
    args = ["train", "minimal-add10", "--output-dir", str(record / "out")]
    for item in RECIPE:
        args += ["--set", item]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([*launcher, str(script), str(record), *args], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    state = json.loads((record / "out" / f"checkpoint-{STEPS}" / "trainer_state.json").read_text())
    ranks = sorted(record.glob("rank*.json"))
    return state, [json.loads(p.read_text()) for p in ranks], proc.stdout


@pytest.mark.slow  # three training processes
@pytest.mark.skipif(available_cpu_cores() < 2 and not torch.cuda.is_available(), reason="needs two CPU cores")
def test_torchrun_two_processes_match_one_process(tmp_path):
    from hf_arith.runtime.loading import load_checkpoint

    single_state, (single,), _ = _run(tmp_path, "one", [sys.executable])
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    multi_state, (rank0, rank1), stdout = _run(tmp_path, "two", torchrun)

    # Only rank 0 talks and saves the final checkpoint.
    assert stdout.count("Checkpoint saved to") == 1 and "2 processes" in stdout
    assert [r["step"] for r in rank0] == [r["step"] for r in rank1] == list(range(STEPS))
    for step, (one, a, b) in enumerate(zip(single, rank0, rank1, strict=True)):
        assert len(a["input_ids"]) == len(b["input_ids"]) == BATCH // 2
        # Disjoint slices of the same global batch the single process trained on.
        assert a["input_ids"] + b["input_ids"] == one["input_ids"], step
        rows0, rows1 = {tuple(r) for r in a["input_ids"]}, {tuple(r) for r in b["input_ids"]}
        assert not rows0 & rows1
        # Both ranks in the same curriculum phase, the one the recipe names for this step.
        assert a["range"] == b["range"] == one["range"] == ([5, 6] if step < SWITCH else [5, 10])
    all0 = {tuple(r) for s in rank0 for r in s["input_ids"]}
    all1 = {tuple(r) for s in rank1 for r in s["input_ids"]}
    assert len(all0) == len(all1) == STEPS * BATCH // 2 and not all0 & all1

    losses = [[e["loss"] for e in state["log_history"] if "loss" in e] for state in (single_state, multi_state)]
    assert len(losses[0]) == len(losses[1]) == STEPS
    assert losses[0][0] - losses[0][-1] > 0.05  # it trains, so agreeing losses mean something
    assert max(abs(a - b) for a, b in zip(*losses)) < LOSS_TOLERANCE, losses

    model, _ = load_checkpoint(tmp_path / "two" / "out" / "final")
    reference, _ = load_checkpoint(tmp_path / "one" / "out" / "final")
    for (name, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(p, q, atol=1e-4, rtol=1e-3, msg=name)
    # Both ranks' RNG states are in the checkpoint, so the run resumes on two processes.
    checkpoint = tmp_path / "two" / "out" / f"checkpoint-{STEPS}"
    assert (checkpoint / "rng_state_0.pth").is_file() and (checkpoint / "rng_state_1.pth").is_file()


def _launched(monkeypatch, world: int, local: int | None = None):
    monkeypatch.setenv("WORLD_SIZE", str(world))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local if local is not None else world))


def test_a_global_batch_that_does_not_split_across_ranks_is_refused(monkeypatch):
    _launched(monkeypatch, 3, 1)  # three nodes of one process: any machine has the device for that
    with pytest.raises(RecipeError, match=r"batch_size 128 .* across the 3 processes; use a multiple of 3"):
        check_launch(load_recipe("minimal-add10", ["optim.batch_size=128"]))
    check_launch(load_recipe("minimal-add10", ["optim.batch_size=129"]))


def test_length_buckets_in_several_processes_are_refused_before_training(monkeypatch):
    _launched(monkeypatch, 2, 1)
    with pytest.raises(RecipeError, match="data.length_buckets works in one training process; set it to 0 to train in 2"):
        check_launch(load_recipe("minimal-add10", ["optim.batch_size=128", "data.length_buckets=4"]))
    check_launch(load_recipe("minimal-add10", ["optim.batch_size=128", "data.length_buckets=0"]))


def test_more_processes_than_cpu_cores_is_refused(monkeypatch):
    cores = available_cpu_cores()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    _launched(monkeypatch, cores + 1)
    with pytest.raises(RecipeError, match=f"{cores + 1} processes per node on a CPU with {cores} core"):
        check_launch(load_recipe("minimal-add10", [f"optim.batch_size={cores + 1}"]))


def test_more_processes_than_gpus_is_refused_on_the_command_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    _launched(monkeypatch, 8, 4)
    code = main(["train", "--set", "optim.batch_size=64", "--output-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("hf-arith: error: 4 processes per node but only 2 GPU(s)") and err.count("\n") == 1
    assert "--nproc_per_node 2" in err
    assert not (tmp_path / "out").exists()  # refused before anything was created


@pytest.mark.parametrize("override, message", [
    ("trainer.num_train_epochs=2", "set by the recipe; use optim.steps"),
    ("trainer.accelerator_config={split_batches: false}", "set by the recipe"),
    ("trainer.gradient_acumulation_steps=2", "not a TrainingArguments field"),
    ("trainer.gradient_accumulation_steps=many", "must be an integer"),
    ("trainer.bf16=3", "must be true or false"),
])
def test_trainer_pass_through_refuses_what_it_cannot_honour(tmp_path, override, message):
    from hf_arith.training.run import training_arguments

    recipe = load_recipe("minimal-add10", [override])
    with pytest.raises(RecipeError, match=message):
        check_recipe(recipe)
        training_arguments(recipe, str(tmp_path))


def test_trainer_pass_through_reaches_the_training_arguments(tmp_path):
    from hf_arith.training.run import training_arguments

    recipe = load_recipe("minimal-add10", ["trainer.gradient_accumulation_steps=3", "trainer.save_total_limit=5",
                                           "trainer.logging_first_step=true"])
    check_recipe(recipe)
    args = training_arguments(recipe, str(tmp_path))
    assert (args.gradient_accumulation_steps, args.save_total_limit, args.logging_first_step) == (3, 5, True)
    assert args.max_steps == recipe.optim.steps and args.ignore_data_skip
