"""Resume after SIGKILL: the resumed run ends where an uninterrupted one does, in every respect.

A `hf-arith train` subprocess is killed (SIGKILL) a few steps after it wrote a checkpoint, with
a half-written later checkpoint left behind as a kill during saving would. `--resume` must pick
the last complete checkpoint and then train exactly as the uninterrupted run did: the same
batches in the same curriculum phases, the same losses, the same final step count, weights and
optimizer state. Resuming with a different model or recipe is refused in one line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from hf_arith.cli import main
from hf_arith.training.recipe import RecipeError, load_recipe
from hf_arith.training.run import last_checkpoint, train

# Runs the CLI, appending (step, curriculum range, batch digest) per training step to a log;
# with BLOCK_AT set it stops making progress at that step (so the test can kill it there).
RECORDER = r'''
import hashlib, json, os, sys, time
import hf_arith.training.run as training
from hf_arith.cli import main

log = open(sys.argv[1], "a", buffering=1)
block_at = int(os.environ.get("BLOCK_AT", "-1"))
original = training.ArithTrainer.training_step

def training_step(self, model, inputs, num_items_in_batch=None):
    step = self.state.global_step
    if step == block_at:
        open(sys.argv[1] + ".blocked", "w").close()
        while True:
            time.sleep(1)
    curriculum = next(cb for cb in self.callback_handler.callbacks if isinstance(cb, training.CurriculumCallback))
    digest = hashlib.sha1(inputs["input_ids"].numpy().tobytes()).hexdigest()
    log.write(json.dumps({"step": step, "range": [curriculum.state.min_digits, curriculum.state.max_digits],
                          "batch": digest}) + "\n")
    return original(self, model, inputs, num_items_in_batch)

training.ArithTrainer.training_step = training_step
sys.exit(main(sys.argv[2:]))
'''

STEPS, SAVE, BLOCK_AT, SWITCH = 120, 20, 47, 30
RECIPE = [
    f"optim.steps={STEPS}", "optim.batch_size=32", "optim.compile=false", "optim.threads=1",
    f"optim.save_steps={SAVE}", "optim.logging_steps=5", "eval.samples=20", "eval.verify=false",
    "data.chunk_size=100", f"data.curriculum=[{{until_step: {SWITCH}, max_digits: 3}}]",
]


def _cli_args(out_dir) -> list[str]:
    args = ["train", "minimal-add10", "--output-dir", str(out_dir)]
    for item in RECIPE:
        args += ["--set", item]
    return args


def _records(path) -> dict[int, dict]:
    return {r["step"]: r for r in map(json.loads, path.read_text().splitlines())}


def _losses(checkpoint) -> list[tuple[int, float]]:
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    return [(e["step"], e["loss"]) for e in state["log_history"] if "loss" in e]


def test_resume_after_sigkill_continues_exactly(tmp_path):
    script = tmp_path / "record.py"
    script.write_text(RECORDER)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    killed_dir, log = tmp_path / "killed", tmp_path / "killed.jsonl"

    proc = subprocess.Popen([sys.executable, str(script), str(log), *_cli_args(killed_dir)],
                            env={**env, "BLOCK_AT": str(BLOCK_AT)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    blocked = tmp_path / "killed.jsonl.blocked"
    deadline = time.monotonic() + 240
    while not blocked.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert blocked.exists(), proc.stderr.read()[-3000:] if proc.poll() is not None else "timed out"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not (killed_dir / "final").exists()
    last_saved = (BLOCK_AT // SAVE) * SAVE  # 40: steps 40..46 were trained after it and are lost
    assert last_checkpoint(killed_dir).endswith(f"checkpoint-{last_saved}")
    # A kill while saving leaves a later folder without trainer_state.json (written last); skip it.
    partial = killed_dir / f"checkpoint-{last_saved + SAVE}"
    partial.mkdir()
    (partial / "config.json").write_text("{}")
    assert last_checkpoint(killed_dir).endswith(f"checkpoint-{last_saved}")
    before_resume = _records(log)
    assert max(before_resume) == BLOCK_AT - 1

    resumed = subprocess.run([sys.executable, str(script), str(log), *_cli_args(killed_dir), "--resume"],
                             env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"Resuming from {killed_dir / f'checkpoint-{last_saved}'}" in resumed.stdout
    after_resume = [json.loads(line) for line in log.read_text().splitlines()][len(before_resume):]
    assert [r["step"] for r in after_resume] == list(range(last_saved, STEPS))

    # The uninterrupted reference run.
    reference_dir, reference_log = tmp_path / "reference", tmp_path / "reference.jsonl"
    done = subprocess.run([sys.executable, str(script), str(reference_log), *_cli_args(reference_dir)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # Same batches in the same curriculum phase at every step: before the kill, and after resuming.
    reference = _records(reference_log)
    for record in [*before_resume.values(), *after_resume]:
        assert record == reference[record["step"]], record["step"]
    assert reference[SWITCH - 1]["range"] == [1, 3] and reference[SWITCH]["range"] == [1, 10]
    assert reference[last_saved]["batch"] != reference[last_saved + 1]["batch"]

    resumed_ckpt, reference_ckpt = killed_dir / f"checkpoint-{STEPS}", reference_dir / f"checkpoint-{STEPS}"
    # Same final step count.
    assert json.loads((resumed_ckpt / "trainer_state.json").read_text())["global_step"] == STEPS
    # A continuous loss curve: one entry every 5 steps, none repeated, equal to the reference.
    losses, expected = _losses(resumed_ckpt), _losses(reference_ckpt)
    assert [s for s, _ in losses] == list(range(5, STEPS + 1, 5))
    assert expected[0][1] - expected[-1][1] > 0.1  # it learns, so equal curves are not a coincidence
    for (step, loss), (_, ref) in zip(losses, expected, strict=True):
        assert loss == pytest.approx(ref, rel=1e-5, abs=1e-6), step
    # Optimizer state (Adam moments and step counts) and weights as if never interrupted.
    opt = torch.load(resumed_ckpt / "optimizer.pt", weights_only=True)
    ref_opt = torch.load(reference_ckpt / "optimizer.pt", weights_only=True)
    assert opt["state"].keys() == ref_opt["state"].keys()
    for key, state in opt["state"].items():
        assert int(state["step"]) == STEPS
        for name in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(state[name], ref_opt["state"][key][name], rtol=1e-5, atol=1e-8)
    from safetensors.torch import load_file

    weights, ref_weights = load_file(resumed_ckpt / "model.safetensors"), load_file(reference_ckpt / "model.safetensors")
    for name, tensor in weights.items():
        torch.testing.assert_close(tensor, ref_weights[name], rtol=1e-5, atol=1e-7)
    assert (killed_dir / "final" / "model.safetensors").is_file()


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("short")
    common = ["optim.steps=4", "optim.save_steps=4", "optim.compile=false", "optim.batch_size=16",
              "eval.verify=false", f"output_dir={out}"]
    train(load_recipe("minimal-add10", common), evaluate=False)
    return out, common


@pytest.mark.parametrize("override, message", [
    ("model.hidden_size=4", r"different model \(hidden_size: 8 -> 4"),
    ("model.rope_theta=10.0", r"different model \(rope_theta: 3.0 -> 10.0"),
    ("optim.learning_rate=0.02", r"different recipe \(optim.learning_rate: 0.03 -> 0.02"),
    ("data.max_digits=5", r"different (model|recipe)"),
    ("format.reverse_answer=false", r"different recipe \(format.reverse_answer: True -> False"),
])
def test_resuming_with_another_model_or_recipe_is_refused(short_run, override, message):
    out, common = short_run
    with pytest.raises(RecipeError, match=message):
        train(load_recipe("minimal-add10", [*common, "optim.steps=8", override]), resume=True, evaluate=False)


def test_resume_may_extend_the_run_and_cli_errors_are_one_line(short_run, tmp_path, capsys):
    out, common = short_run
    assert last_checkpoint(out).endswith("checkpoint-4")
    code = main(["train", "--output-dir", str(out), "--resume", "--set", "model.hidden_size=4",
                 *[x for c in common if not c.startswith("output_dir") for x in ("--set", c)]])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("hf-arith: error: --resume: ") and err.count("\n") == 1
    assert "different model" in err


def test_a_checkpoint_from_before_a_new_recipe_option_resumes_when_the_option_is_at_its_default(short_run, tmp_path):
    import shutil

    from hf_arith.training.run import RECIPE_FILE

    out, common = short_run
    older = tmp_path / "older"
    shutil.copytree(out, older)
    recipe_file = older / "checkpoint-4" / RECIPE_FILE
    saved = json.loads(recipe_file.read_text())
    del saved["data"]["random_prefix"]  # as written before the option existed
    recipe_file.write_text(json.dumps(saved))
    moved = [c if not c.startswith("output_dir") else f"output_dir={older}" for c in common]
    with pytest.raises(RecipeError, match=r"different recipe \(data.random_prefix: 0 -> 3"):
        train(load_recipe("minimal-add10", [*moved, "optim.steps=6", "data.random_prefix=3"]), resume=True, evaluate=False)
    summary = train(load_recipe("minimal-add10", [*moved, "optim.steps=6"]), resume=True, evaluate=False)
    assert summary["steps"] == 6
