"""Training: the Trainer learns on the stream, the curriculum and schedule behave, runs resume."""

import dataclasses
import json

import pytest
import torch

from hf_arith.data.streaming import CurriculumState
from hf_arith.training.recipe import CurriculumPhase, RecipeError, load_recipe
from hf_arith.training.run import CurriculumCallback, cosine_with_restart, train

# A small but not tiny model on unpadded 1-2 digit addition: ~98% held-out after 1,200 steps (~15 s).
SMALL = [
    "format.operand_width=0", "format.answer_width=0", "format.end_token=true", "data.max_digits=2",
    "model.hidden_size=64", "model.head_dim=32", "model.num_key_value_heads=2", "model.intermediate_size=128",
    "model.position_embedding=learned", "model.qk_norm=false", "model.digit_logits_only=false",
    "optim.batch_size=64", "optim.learning_rate=0.002", "optim.logging_steps=100",
    "eval.verify=false", "eval.samples=400", "optim.compile=false",
]


def test_training_learns_addition_measured_on_the_held_out_split(tmp_path):
    summary = train(load_recipe("minimal-add10", SMALL + ["optim.steps=1200", "optim.save_steps=100000",
                                                          f"output_dir={tmp_path}"]))
    heldout = summary["heldout"]
    assert heldout["n"] == 400
    assert heldout["exact_match"] >= 0.9, heldout
    saved = json.loads((tmp_path / "final" / "training_summary.json").read_text())
    assert saved["heldout"]["exact_match"] == heldout["exact_match"]
    assert (tmp_path / "final" / "model.safetensors").is_file()


def test_resume_continues_from_the_last_checkpoint(tmp_path):
    common = SMALL + ["optim.save_steps=10", "eval.samples=20", f"output_dir={tmp_path}"]
    first = train(load_recipe("minimal-add10", common + ["optim.steps=20"]), evaluate=False)
    assert first["steps"] == 20
    assert (tmp_path / "checkpoint-20").is_dir()
    resumed = train(load_recipe("minimal-add10", common + ["optim.steps=30"]), resume=True, evaluate=False)
    assert resumed["steps"] == 30
    state = json.loads((tmp_path / "checkpoint-30" / "trainer_state.json").read_text())
    logged = [entry["step"] for entry in state["log_history"] if "loss" in entry]
    assert state["global_step"] == 30 and logged == sorted(logged)


def test_resume_without_a_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(RecipeError, match="no complete checkpoint"):
        train(load_recipe("minimal-add10", SMALL + ["optim.steps=5", f"output_dir={tmp_path}"]), resume=True)


def test_curriculum_phase_is_a_function_of_the_global_step():
    state = CurriculumState(1, 10)
    phases = [CurriculumPhase(until_step=100, max_digits=3), CurriculumPhase(until_step=300, max_digits=6)]
    callback = CurriculumCallback(state, phases, (1, 10))
    assert [callback.range_at(s) for s in (0, 99, 100, 299, 300, 10**6)] == [
        (1, 3), (1, 3), (1, 6), (1, 6), (1, 10), (1, 10)]

    class Step:
        global_step = 150

    callback.on_step_begin(None, Step(), None)
    assert (state.min_digits, state.max_digits) == (1, 6)
    # At the start of a (resumed) run the stream is told the step it starts from.
    Step.global_step = 320
    callback.on_train_begin(None, Step(), None)
    assert (state.min_digits, state.max_digits, state.start_step) == (1, 10, 320)


def test_cosine_schedule_restarts_at_the_second_phase():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = cosine_with_restart(opt, total=100, warmup=10, restart_at=0.6, restart_scale=0.5)
    factors = [sched.lr_lambdas[0](step) for step in range(100)]
    assert factors[9] == pytest.approx(1.0)
    assert factors[59] < 0.01  # first phase decays to ~0
    assert factors[60] == pytest.approx(0.5)  # restart at half the peak
    assert all(a >= b for a, b in zip(factors[60:], factors[61:]))


@pytest.mark.parametrize("override, message", [
    ("format.task=pow", "unknown task"),
    ("data.max_digits=0", "min_digits"),
    ("optim.learning_rate=fast", "must be a number"),
    ("optim.stepz=5", "unknown key"),
    ("model.hidden_size=-1", "hidden_size"),
    ("data.curriculum=[{until_step: 5, max_digits: 3}, {until_step: 2, max_digits: 4}]", "must increase"),
    ("eval.batch_size=-1", "eval.batch_size"),
    ("init_from=no-such-model", "init_from: no checkpoint folder"),
])
def test_bad_recipes_fail_before_training_with_the_key_named(tmp_path, override, message):
    with pytest.raises(RecipeError, match=message):
        train(load_recipe("minimal-add10", [override, "optim.steps=1", f"output_dir={tmp_path}"]))


def test_unknown_preset_and_malformed_yaml(tmp_path):
    with pytest.raises(RecipeError, match="minimal-add10"):
        load_recipe("no-such-preset")
    bad = tmp_path / "bad.yaml"
    bad.write_text("optim: {steps: 5\n")
    with pytest.raises(RecipeError, match="malformed YAML"):
        load_recipe(str(bad))


def test_numbers_written_with_an_exponent_and_no_dot_are_numbers(tmp_path):
    # YAML 1.1, which PyYAML follows, reads 1e-7 as a string; a recipe reads it as the number it is.
    recipe = load_recipe("minimal-add10", ["optim.weight_decay=1e-7", "optim.learning_rate=3E-4"])
    assert (recipe.optim.weight_decay, recipe.optim.learning_rate) == (1e-7, 3e-4)
    path = tmp_path / "recipe.yaml"
    path.write_text("name: sci\nfamily: minimal\noptim: {learning_rate: 5e-3, weight_decay: 2.5e-2}\n")
    recipe = load_recipe(str(path))
    assert (recipe.optim.learning_rate, recipe.optim.weight_decay) == (5e-3, 0.025)
    assert load_recipe("minimal-add10", ["name=1e3x"]).name == "1e3x"


def test_misspelt_model_key_is_refused_before_training(tmp_path):
    with pytest.raises(RecipeError, match="hiden_size"):
        train(load_recipe("minimal-add10", ["model.hiden_size=8", f"output_dir={tmp_path}"]))
    assert not (tmp_path / "final").exists()


@pytest.mark.slow
def test_compiled_training_saves_a_plain_loadable_checkpoint(tmp_path):
    from hf_arith.runtime.loading import load_checkpoint

    recipe = load_recipe("minimal-add10", ["optim.steps=30", "optim.compile=true", "eval.verify=false",
                                           "eval.samples=20", "optim.save_steps=1000", f"output_dir={tmp_path}"])
    summary = train(recipe)
    model, _ = load_checkpoint(tmp_path / "final")  # refuses missing/unexpected keys (e.g. _orig_mod.*)
    assert model.num_parameters() == summary["unique_params"] > 0


def test_compile_without_a_cpp_compiler_falls_back_with_a_warning(tmp_path, monkeypatch, capsys):
    import hf_arith.training.run as training

    monkeypatch.setattr(training.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(training.shutil, "which", lambda name: None)
    args = training.training_arguments(load_recipe("minimal-add10", ["optim.compile=true"]), str(tmp_path))
    assert args.torch_compile is False
    assert "no C++ compiler" in capsys.readouterr().err


def test_each_entry_point_checks_the_recipe_and_finds_the_checkpoint_once(tmp_path, monkeypatch, capsys):
    import hf_arith.training.run as training
    from hf_arith.cli import main

    calls = []

    def counted(name, original):
        def wrapper(*args, **kwargs):
            calls.append(name)
            return original(*args, **kwargs)
        return wrapper

    for name in ("check_recipe", "check_launch", "last_checkpoint"):
        monkeypatch.setattr(training, name, counted(name, getattr(training, name)))
    trained = []
    monkeypatch.setattr(training, "run_training", lambda run, evaluate=True: trained.append(run) or {
        "steps": 3, "unique_params": 1, "output": str(tmp_path / "final")})
    checkpoint = tmp_path / "checkpoint-3"
    checkpoint.mkdir()
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 3}))
    for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth"):  # what a resume reads
        (checkpoint / name).write_bytes(b"")
    # The config and recipe are compared with the run's before it starts: the preset's own.
    recipe = load_recipe("minimal-add10")
    fmt = training.check_recipe(recipe)
    context = training.worst_case_length(training.recipe_spec(recipe, fmt), fmt)
    training.build_model(recipe, training.build_tokenizer(fmt, context), context).config.save_pretrained(checkpoint)
    (checkpoint / training.RECIPE_FILE).write_text(json.dumps(dataclasses.asdict(recipe)))
    calls.clear()

    assert main(["train", "--output-dir", str(tmp_path), "--resume", "--set", "optim.steps=5"]) == 0, capsys.readouterr()
    assert sorted(calls) == ["check_launch", "check_recipe", "last_checkpoint"]
    assert trained[-1].checkpoint == str(checkpoint) and trained[-1].fmt.task == "add"
    calls.clear()
    train(load_recipe("minimal-add10", [f"output_dir={tmp_path}"]), resume=True)
    assert sorted(calls) == ["check_launch", "check_recipe", "last_checkpoint"]


def test_one_process_trains_on_whole_batches_with_the_weights_of_the_per_example_loader(tmp_path, monkeypatch):
    """`hf-arith train` in one process reads `ProblemStream.batches`; the Trainer's own per-example loader
    (what several processes use) gives the same weights, byte for byte, across a chunk boundary."""
    from transformers import Trainer

    from hf_arith.data.streaming import StreamBatches
    from hf_arith.training.run import ArithTrainer

    read = []
    batched_iter = StreamBatches.__iter__
    monkeypatch.setattr(StreamBatches, "__iter__", lambda self: (read.append(b) or b for b in batched_iter(self)))
    common = SMALL + ["optim.steps=12", "optim.batch_size=48", "data.chunk_size=100", "optim.save_steps=100000"]
    train(load_recipe("minimal-add10", common + [f"output_dir={tmp_path / 'whole'}"]), evaluate=False)
    assert len(read) >= 12 and all(len(b["input_ids"]) == 48 for b in read)

    monkeypatch.setattr(ArithTrainer, "get_train_dataloader", Trainer.get_train_dataloader)
    read.clear()
    train(load_recipe("minimal-add10", common + [f"output_dir={tmp_path / 'each'}"]), evaluate=False)
    assert not read
    whole, each = ((tmp_path / run / "final" / "model.safetensors").read_bytes() for run in ("whole", "each"))
    assert whole == each
