"""Issue 19, training side: the Trainer evaluates on held-out problems during training, reports to
TensorBoard and Trackio, reads TrainingArguments names as recipe keys, and the cards of warm-started
models say what they started from (`base_model` for a Hub repo)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from huggingface_hub import ModelCard

import hf_arith
from hf_arith.cli import main
from hf_arith.data.formatting import parse_problems
from hf_arith.data.problems import split_of
from hf_arith.data.streaming import ProblemStream, worst_case_length
from hf_arith.models.modeling_common import IGNORE_INDEX
from hf_arith.publishing.hub_folder import build_model_folder
from hf_arith.training.recipe import ARGUMENT_RECIPE_KEYS, RecipeError, load_recipe, recipe_from_dict
from hf_arith.training.run import (
    HeldoutExamples,
    build_tokenizer,
    prepare_run,
    recipe_spec,
    train,
    training_arguments,
    warm_start_source,
)

# A few steps of the default preset, small batches, no compile: seconds on a 2-core CPU.
TINY = ["optim.steps=4", "optim.batch_size=32", "optim.compile=false", "optim.save_steps=1000",
        "optim.logging_steps=2", "eval.samples=20", "eval.verify=false", "eval.during_training_samples=64"]
EVAL = ["trainer.eval_strategy=steps", "trainer.eval_steps=2"]


def log_history(output_dir: Path) -> list[dict]:
    (state,) = Path(output_dir).glob("checkpoint-*/trainer_state.json")
    return json.loads(state.read_text())["log_history"]


# -- evaluation during training ------------------------------------------------------------------
def test_eval_strategy_steps_logs_exact_match_per_length_on_test_split_problems(tmp_path):
    recipe = load_recipe("minimal-add10", [*TINY, *EVAL, f"output_dir={tmp_path}"])
    run = prepare_run(recipe)
    # The eval problems: all from the test split, over the recipe's whole digit range.
    problems = run.eval_problems
    texts = problems.to_text()
    assert len(texts) == 64 and split_of(parse_problems(texts, run.fmt), recipe.data.test_fraction).all()
    assert set(problems.lengths.max(axis=1).tolist()) <= set(range(1, 11)) and problems.lengths.max() > 5

    train(recipe)
    evals = [e for e in log_history(tmp_path) if "eval_exact_match" in e]
    assert [e["step"] for e in evals] == [2, 4]
    for entry in evals:
        assert 0.0 <= entry["eval_exact_match"] <= 1.0 and "eval_per_digit_accuracy" in entry
        lengths = {int(k.rsplit("_", 1)[1]) for k in entry if k.startswith("eval_exact_match_len_")}
        assert lengths == set(problems.lengths.max(axis=1).tolist())


def test_the_eval_set_is_rendered_like_the_training_batches(tmp_path):
    recipe = load_recipe("minimal-add10", [*TINY, *EVAL, "eval.during_training_samples=16"])
    run = prepare_run(recipe, tmp_path)
    spec = recipe_spec(recipe, run.fmt)
    stream = ProblemStream(spec, run.fmt)
    eval_set = HeldoutExamples(run.eval_problems, stream)
    tokenizer = build_tokenizer(run.fmt, worst_case_length(spec, run.fmt))
    training_example = next(iter(stream))
    texts, answers = run.eval_problems.to_text(), run.eval_problems.answer_text()
    prompts = tokenizer(texts)["input_ids"]
    assert len(eval_set) == 16
    for i, (prompt, answer) in enumerate(zip(prompts, answers)):
        example = eval_set[i]
        assert example.keys() == training_example.keys()
        assert example["input_ids"].shape == training_example["input_ids"].shape
        # The problem as the tokenizer writes it, then its answer; labels on the answer only.
        assert example["input_ids"][: len(prompt)].tolist() == prompt
        labels = example["labels"]
        assert (labels[: len(prompt)] == IGNORE_INDEX).all()
        assert tokenizer.decode_answers([labels[labels != IGNORE_INDEX].tolist()]) == [answer]


def test_teacher_forced_exact_match_of_a_trained_model_is_perfect_from_the_first_evaluation(tmp_path):
    """The bundled adder gets every held-out answer right: eval_on_start must say 1.0 (the metric
    lines predictions up with the answer tokens), and the summary records the warm start."""
    summary = train(load_recipe("minimal-add10", [
        *TINY, "optim.steps=1", "optim.learning_rate=0.000000001", "optim.warmup_steps=0",
        "init_from=minimal-add10", "trainer.eval_on_start=true", f"output_dir={tmp_path}"]), evaluate=False)
    (first, *_) = [e for e in log_history(tmp_path) if "eval_exact_match" in e]
    assert first["step"] == 0 and first["eval_exact_match"] == 1.0 and first["eval_exact_match_len_10"] == 1.0
    assert summary["init_from"] == {"name": "minimal-add10", "kind": "bundled"}


def test_default_training_does_not_evaluate(tmp_path):
    recipe = load_recipe("minimal-add10", TINY)
    assert prepare_run(recipe, tmp_path).eval_problems is None


@pytest.mark.parametrize("overrides, message", [
    (["data.max_digits=1", "data.test_fraction=0.001"], "evaluation during training (eval.during_training_samples=64): "
                                                        "could not draw 64 test problems"),
    (["eval.during_training_samples=0"], "eval.during_training_samples must be from 1 to"),
    (["trainer.eval_strategy=epoch"], "trainer.eval_strategy=epoch never evaluates"),
    (["trainer.eval_strategy=sometimes"], "trainer.eval_strategy must be no or steps"),
])
def test_an_evaluation_that_cannot_work_is_refused_before_training(tmp_path, capsys, overrides, message):
    args = ["train", "--output-dir", str(tmp_path / "out")]
    for item in [*TINY, *EVAL[:1], *overrides]:
        args += ["--set", item]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hf-arith: error: {message}") and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


# -- report_to ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, package", [("tensorboard", "tensorboard"), ("trackio", "trackio")])
def test_report_to_without_its_package_is_one_line_naming_it(tmp_path, monkeypatch, capsys, name, package):
    import hf_arith.training.recipe as train_config

    installed = train_config._installed
    monkeypatch.setattr(train_config, "_installed", lambda module: module.lower() not in (
        "tensorboard", "tensorboardx", "trackio") and installed(module))
    assert main(["train", "--set", f"trainer.report_to={name}", "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err == (f"hf-arith: error: trainer.report_to={name} needs the {package} package "
                   f"(pip install {package}, or pip install 'hf_arith[tracking]')\n")
    assert not (tmp_path / "out").exists()
    with pytest.raises(RecipeError, match=f"report_to={name} needs"):  # a list names it as well
        train(load_recipe("minimal-add10", [f"trainer.report_to=[{name}]", f"output_dir={tmp_path}"]))


def test_report_to_an_unknown_integration_is_refused(tmp_path):
    with pytest.raises(RecipeError, match="unknown integration 'tensorbord'; known: .*tensorboard.*trackio"):
        prepare_run(load_recipe("minimal-add10", ["trainer.report_to=tensorbord"]), tmp_path)


def test_report_to_tensorboard_writes_the_training_and_eval_scalars(tmp_path):
    pytest.importorskip("tensorboard", reason="the test extra installs it: pip install -e '.[test]'")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    train(load_recipe("minimal-add10", [*TINY, *EVAL, "trainer.report_to=tensorboard", f"output_dir={tmp_path}"]),
          evaluate=False)
    (events,) = {p.parent for p in (tmp_path / "runs").glob("*/events.out.tfevents.*")}
    accumulator = EventAccumulator(str(events))
    accumulator.Reload()
    scalars = accumulator.Tags()["scalars"]
    assert {"train/loss", "eval/exact_match", "eval/exact_match_len_10"} <= set(scalars)
    assert [e.step for e in accumulator.Scalars("eval/exact_match")] == [2, 4]


def test_the_final_held_out_and_verify_figures_go_to_report_to(tmp_path):
    """What the run prints and records at the end (its summary's held-out and verify figures) reaches the
    report_to loggers too, under test/."""
    pytest.importorskip("tensorboard", reason="the test extra installs it: pip install -e '.[test]'")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    summary = train(load_recipe("minimal-add10", [*TINY, "eval.samples=50", "eval.verify=true",
                                                  "trainer.report_to=tensorboard", f"output_dir={tmp_path}"]))
    events = {p.parent for p in (tmp_path / "runs").glob("*/events.out.tfevents.*")}
    scalars = {}
    for folder in events:
        accumulator = EventAccumulator(str(folder))
        accumulator.Reload()
        for tag in accumulator.Tags()["scalars"]:
            scalars[tag] = accumulator.Scalars(tag)[-1]
    assert scalars["test/exact_match"].value == pytest.approx(summary["heldout"]["exact_match"])
    assert scalars["test/verify_accuracy"].value == pytest.approx(summary["verify"]["accuracy"])
    assert scalars["test/exact_match"].step == 4  # the last training step
    assert "test/exact_match_len_10" in scalars


def test_report_to_trackio_logs_the_eval_metrics_locally(tmp_path):
    pytest.importorskip("trackio", reason="the test extra installs it: pip install -e '.[test]'")
    import sqlite3

    from trackio.utils import TRACKIO_DIR

    project = f"hf-arith-test-{tmp_path.name}"
    train(load_recipe("minimal-add10", [*TINY, *EVAL, "trainer.report_to=trackio", f"trainer.project={project}",
                                        f"output_dir={tmp_path}"]), evaluate=False)
    database = Path(TRACKIO_DIR) / f"{project}.db"
    with sqlite3.connect(database) as db:
        logged = [json.loads(row[0]) for row in db.execute("select metrics from metrics")]
    assert [m["train/global_step"] for m in logged if "eval/exact_match" in m] == [2, 4]
    for leftover in Path(TRACKIO_DIR).glob(f"{project}.*"):  # this test's project only
        leftover.unlink()


# -- TrainingArguments names ----------------------------------------------------------------------
VALUES = {"max_steps": 7, "learning_rate": 0.004, "per_device_train_batch_size": 16, "weight_decay": 0.1,
          "warmup_steps": 3, "adam_beta2": 0.95, "max_grad_norm": 0.5, "logging_steps": 3, "save_steps": 6,
          "seed": 5, "torch_compile": False}


@pytest.mark.parametrize("name", sorted(ARGUMENT_RECIPE_KEYS))
def test_a_training_arguments_name_is_read_as_its_recipe_key(tmp_path, monkeypatch, name):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    value = VALUES.get(name, str(tmp_path / "elsewhere"))
    key = ARGUMENT_RECIPE_KEYS[name]
    recipe = load_recipe("minimal-add10", [f"trainer.{name}={value}"])
    section, _, leaf = key.rpartition(".")
    assert getattr(getattr(recipe, section) if section else recipe, leaf) == value
    assert recipe.trainer == {}
    said = {"output_dir": f"trainer.output_dir is the recipe's output_dir (--output-dir overrides it): using "
                          f"output_dir={value}",
            "per_device_train_batch_size": "trainer.per_device_train_batch_size is per process and the recipe's "
                                           "optim.batch_size is the global batch: using optim.batch_size=16 (1 process)"}
    assert recipe.notes == (said.get(name, f"trainer.{name} is the recipe's {key}: using {key}={value}"),)
    if name != "output_dir":  # and it is what the Trainer gets
        assert getattr(training_arguments(recipe, str(tmp_path)), name) == value


def test_the_note_is_printed_once_and_training_uses_the_value(tmp_path, monkeypatch, capsys):
    import hf_arith.training.run as training

    ran = []
    monkeypatch.setattr(training, "run_training", lambda run, evaluate=True: ran.append(run) or {
        "steps": 1, "unique_params": 1, "output": str(tmp_path / "final")})
    assert main(["train", "--set", "trainer.learning_rate=0.004", "--output-dir", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert err == "hf-arith: trainer.learning_rate is the recipe's optim.learning_rate: using optim.learning_rate=0.004\n"
    assert ran[0].recipe.optim.learning_rate == 0.004


def test_per_device_batch_is_multiplied_by_the_processes(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    recipe = load_recipe("minimal-add10", ["trainer.per_device_train_batch_size=64"])
    assert recipe.optim.batch_size == 128
    assert recipe.notes == ("trainer.per_device_train_batch_size is per process and the recipe's optim.batch_size "
                            "is the global batch: using optim.batch_size=128 (2 processes)",)


def test_only_a_conflicting_double_setting_is_refused(tmp_path):
    # On the command line: both, with different values.
    with pytest.raises(RecipeError, match=r"--set optim.steps=10 and --set trainer.max_steps=20 both set optim.steps"):
        load_recipe("minimal-add10", ["optim.steps=10", "trainer.max_steps=20"])
    assert load_recipe("minimal-add10", ["optim.steps=10", "trainer.max_steps=10"]).optim.steps == 10
    # The command line overrides the preset's optim.steps (3000) without a conflict.
    assert load_recipe("minimal-add10", ["trainer.max_steps=20"]).optim.steps == 20
    # In a recipe file: both, with different values; a command-line override still wins over the file.
    recipe_file = tmp_path / "r.yaml"
    recipe_file.write_text(yaml.safe_dump({"optim": {"steps": 10}, "trainer": {"max_steps": 20}}))
    with pytest.raises(RecipeError, match=r"trainer.max_steps=20 and optim.steps=10 both set optim.steps"):
        load_recipe(str(recipe_file))
    recipe_file.write_text(yaml.safe_dump({"trainer": {"max_steps": 20}}))
    assert load_recipe(str(recipe_file)).optim.steps == 20
    assert load_recipe(str(recipe_file), ["optim.steps=30"]).optim.steps == 30
    with pytest.raises(RecipeError, match=r"trainer.learning_rate=0.1 and optim.learning_rate=0.2 both set"):
        recipe_from_dict({"optim": {"learning_rate": 0.2}, "trainer": {"learning_rate": 0.1}})


@pytest.mark.parametrize("override, message", [
    ("trainer.max_steps=many", r"trainer.max_steps \(the recipe's optim.steps\) must be an integer"),
    ("trainer.torch_compile=3", r"trainer.torch_compile \(the recipe's optim.compile\) must be true or false"),
    ("trainer.num_train_epochs=2", "trainer.num_train_epochs is set by the recipe; use optim.steps"),
    ("trainer.dataloader_num_workers=2", "trainer.dataloader_num_workers is set by the recipe"),
    ("trainer.lr_scheduler_type=linear", "trainer.lr_scheduler_type is set by the recipe"),
])
def test_names_that_cannot_be_honoured_are_refused_with_the_reason(tmp_path, override, message):
    with pytest.raises(RecipeError, match=message):
        prepare_run(load_recipe("minimal-add10", [override]), tmp_path)


def test_a_fixed_argument_given_with_the_value_the_recipe_uses_is_accepted(tmp_path):
    recipe = load_recipe("minimal-add10", ["trainer.dataloader_num_workers=0", "trainer.remove_unused_columns=false"])
    assert recipe.trainer == {} and recipe.notes == ()
    prepare_run(recipe, tmp_path)


# -- warm starts in the model card -----------------------------------------------------------------
def test_warm_start_sources_are_told_apart(tmp_path, monkeypatch):
    (tmp_path / "config.json").write_text("{}")
    assert warm_start_source(str(tmp_path))["kind"] == "folder"
    assert warm_start_source("minimal-add10") == {"name": "minimal-add10", "kind": "bundled"}
    assert warm_start_source("someone/adder") == {"name": "someone/adder", "kind": "hub", "repo_id": "someone/adder"}
    monkeypatch.chdir(tmp_path)  # a local folder that looks like a repo id is a folder, as loading takes it
    (tmp_path / "someone" / "adder").mkdir(parents=True)
    assert warm_start_source("someone/adder")["kind"] == "folder"


def _card_of(tmp_path, init_from: dict | None, label: str):
    checkpoint = tmp_path / label
    shutil.copytree(hf_arith.bundled_path("minimal-add10"), checkpoint)
    summary = json.loads((checkpoint / "training_summary.json").read_text())
    if init_from:
        summary["init_from"] = init_from
    (checkpoint / "training_summary.json").write_text(json.dumps(summary))
    folder = build_model_folder(checkpoint, tmp_path / f"{label}-out", repo_id="me/x", grid_samples=0)
    return ModelCard.load(folder / "README.md")


def test_a_warm_start_from_a_hub_repo_is_the_cards_base_model(tmp_path):
    card = _card_of(tmp_path, {"name": "someone/adder", "kind": "hub", "repo_id": "someone/adder"}, "hub")
    assert card.data.base_model == "someone/adder"
    assert "| initialised from | [`someone/adder`](https://huggingface.co/someone/adder) on the Hub" in card.text


@pytest.mark.parametrize("kind, words", [("bundled", "a checkpoint bundled with hf_arith"),
                                         ("folder", "a local checkpoint folder (not on the Hub)")])
def test_a_local_or_bundled_warm_start_is_named_in_the_card_text(tmp_path, kind, words):
    card = _card_of(tmp_path, {"name": "runs/first/final", "kind": kind}, kind)
    assert card.data.base_model is None and "base_model" not in card.data.to_dict()
    assert f"| initialised from | `runs/first/final`, {words}" in card.text
    assert "base_model:" not in _card_of(tmp_path, None, f"{kind}-scratch").content


def _own_report(final):
    """A card's report for `final`: minimal-add10's numbers, named as this folder's (push refuses a report
    that names another model, or whose weights fingerprint is another model's: it is left out)."""
    report = json.loads((Path(hf_arith.bundled_path("minimal-add10")) / "eval_results.json").read_text())
    report.pop("weights_fingerprint", None)
    (final / "eval_results.json").write_text(json.dumps({**report, "model": str(final)}))


def test_a_warm_started_run_records_its_start_and_its_card_names_it(tmp_path, add10):
    train(load_recipe("minimal-add10", [*TINY, "optim.steps=2", f"init_from={add10}", f"output_dir={tmp_path}"]),
          evaluate=False)
    final = tmp_path / "final"
    summary = json.loads((final / "training_summary.json").read_text())
    assert summary["init_from"] == {"name": str(add10), "kind": "folder"}
    assert summary["earlier_stages"][-1]["steps"] == 5  # the add10 fixture's run
    _own_report(final)
    folder = build_model_folder(final, tmp_path / "out", repo_id="me/y", grid_samples=0)
    card = ModelCard.load(folder / "README.md")
    assert card.data.base_model is None
    assert f"| initialised from | `{add10}`, a local checkpoint folder" in card.text
    assert np.isfinite(summary["train_loss"])


def test_a_warm_start_from_a_cached_hub_repo_becomes_the_cards_base_model(tmp_path, add10, hf_offline_tmp_home):
    """init_from names a Hub repo (read offline from a cache laid out as huggingface_hub lays it out)."""
    storage = hf_offline_tmp_home / "hub" / "models--someone--adder"
    shutil.copytree(add10, storage / "snapshots" / ("a" * 40))
    (storage / "refs").mkdir()
    (storage / "refs" / "main").write_text("a" * 40)
    train(load_recipe("minimal-add10", [*TINY, "optim.steps=2", "init_from=someone/adder", f"output_dir={tmp_path}"]),
          evaluate=False)
    final = tmp_path / "final"
    summary = json.loads((final / "training_summary.json").read_text())
    assert summary["init_from"] == {"name": "someone/adder", "kind": "hub", "repo_id": "someone/adder"}
    _own_report(final)
    card = ModelCard.load(build_model_folder(final, tmp_path / "out", repo_id="me/z", grid_samples=0) / "README.md")
    assert card.data.base_model == "someone/adder"
