"""Recipes that state only their differences: `extend:` a base recipe, `stages:` of a chain, and the
catalogue keys (`about:`, `train_time:`); a chain trained stage by stage, resumed per stage."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from hf_arith.training.recipe import PRESETS_DIR, RecipeError, list_presets, load_recipe, load_stages, preset_catalogue

# A short minimal-add10 run: every stage of the chains below trains this little (overrides reach every stage).
SHORT = ["--set", "optim.steps=2", "--set", "optim.save_steps=1", "--set", "optim.compile=false",
         "--set", "eval.samples=20", "--set", "eval.verify=false"]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def test_extend_merges_mappings_key_by_key_and_replaces_values_and_lists(tmp_path):
    base = load_recipe("minimal-add10")
    path = write(tmp_path, "child", "extend: minimal-add10\nname: child\noptim:\n  steps: 7\n"
                                    "data:\n  curriculum: [{until_step: 3, min_digits: 1, max_digits: 2}]\n")
    child = load_recipe(str(path))
    assert child.optim.steps == 7 and child.name == "child"
    # Keys the child does not state keep the base's, in the sections it changes and the others.
    assert child.optim.learning_rate == base.optim.learning_rate and child.model == base.model
    assert [p.until_step for p in child.data.curriculum] == [3]  # a list replaces the base's
    assert child.output_dir == base.output_dir  # the base's output_dir unless the child states its own


def test_extend_finds_a_file_beside_the_recipe_and_chains_of_extends(tmp_path):
    write(tmp_path, "a", "extend: minimal-add10\noptim:\n  steps: 5\n")
    write(tmp_path, "b", "extend: a.yaml\noptim:\n  seed: 9\n")
    recipe = load_recipe(str(tmp_path / "b.yaml"))
    assert (recipe.optim.steps, recipe.optim.seed) == (5, 9)


def test_stages_state_what_changes_from_the_stage_before(tmp_path):
    path = write(tmp_path, "chain", f"extend: minimal-add10\noutput_dir: {tmp_path / 'out'}\n"
                                    "stages:\n  - stage: first\n    optim: {steps: 10}\n"
                                    "  - stage: second\n    optim: {learning_rate: 0.001}\n"
                                    "  - stage: third\n    data: {hard_fraction: 0.25}\n")
    stages = load_stages(str(path))
    # The recipe it extends is the first stage, labelled by its name.
    assert [s.label for s in stages] == ["minimal-add10", "first", "second", "third"]
    assert [s.recipe.optim.steps for s in stages] == [3000, 10, 10, 10]  # kept from the stage before
    assert [s.recipe.optim.learning_rate for s in stages][2:] == [0.001, 0.001]
    assert [s.recipe.data.hard_fraction for s in stages] == [0.0, 0.0, 0.0, 0.25]
    # Earlier stages train into their own folders; each later one starts from the final model before it.
    out = str(tmp_path / "out")
    assert [s.recipe.output_dir for s in stages] == [f"{out}-minimal-add10", f"{out}-first", f"{out}-second", out]
    assert [s.recipe.init_from for s in stages] == ["", f"{out}-minimal-add10/final", f"{out}-first/final",
                                                    f"{out}-second/final"]
    assert load_recipe(str(path)).stages[-1].recipe == stages[-1].recipe


def test_a_preset_extending_a_chain_appends_stages_or_changes_its_last(tmp_path):
    write(tmp_path, "chain", "extend: minimal-add10\nstages:\n  - stage: one\n  - stage: two\n    optim: {seed: 3}\n")
    longer = load_stages(str(write(tmp_path, "longer", "extend: chain.yaml\nstages:\n  - stage: three\n"
                                                           "    optim: {steps: 9}\n")))
    assert [s.label for s in longer] == ["minimal-add10", "one", "two", "three"]
    assert (longer[-1].recipe.optim.seed, longer[-1].recipe.optim.steps) == (3, 9)
    changed = load_stages(str(write(tmp_path, "changed", "extend: chain.yaml\noptim: {seed: 5}\n")))
    assert [s.label for s in changed] == ["minimal-add10", "one", "two"]
    assert [s.recipe.optim.seed for s in changed] == [0, 0, 5]


def test_a_first_stage_restating_the_bases_last_label_changes_that_stage(tmp_path):
    write(tmp_path, "chain", "extend: minimal-add10\nstages:\n  - stage: one\n    optim: {seed: 3}\n  - stage: two\n")
    path = write(tmp_path, "restated", "extend: chain.yaml:one\noutput_dir: out\noptim: {learning_rate: 0.001}\n"
                                       "stages:\n  - stage: one\n    optim: {steps: 9}\n  - stage: more\n"
                                       "    optim: {seed: 4}\n")
    stages = load_stages(str(path))
    assert [s.label for s in stages] == ["minimal-add10", "one", "more"]
    # 'one' keeps its seed and its place in the chain, and takes the keys outside stages: and its own.
    assert [(s.recipe.optim.seed, s.recipe.optim.steps, s.recipe.optim.learning_rate) for s in stages][1:] == [
        (3, 9, 0.001), (4, 9, 0.001)]
    assert stages[0].recipe.optim.learning_rate != 0.001
    assert [s.recipe.init_from for s in stages][1:] == ["out-minimal-add10/final", "out-one/final"]


def test_overrides_apply_to_every_stage_and_init_from_to_the_first(tmp_path):
    path = write(tmp_path, "chain", "extend: minimal-add10\nstages:\n  - stage: one\n")
    stages = load_stages(str(path), ["optim.steps=4", "init_from=minimal-add10", "output_dir=elsewhere"])
    assert [s.recipe.optim.steps for s in stages] == [4, 4]
    assert [s.recipe.init_from for s in stages] == ["minimal-add10", "elsewhere-minimal-add10/final"]
    assert stages[-1].recipe.output_dir == "elsewhere"


@pytest.mark.parametrize("text,message", [
    ("extend: no-such-preset\n", "extend no-such-preset: no preset or file named 'no-such-preset'"),
    ("extend: [a]\n", "extend must name a preset"),
    ("extend: loop.yaml\n", "extend: goes round in a circle"),
    ("extend: minimal-add10\nstages: {stage: a}\n", "stages must be a list of mappings"),
    ("extend: minimal-add10\nstages: []\n", "stages must be a list of mappings"),
    ("extend: minimal-add10\nstages:\n  - optim: {steps: 3}\n", "stages[0] needs a stage: label"),
    ("extend: minimal-add10\nstages:\n  - stage: a\n    output_dir: x\n", "stages[0] sets ['output_dir']"),
    ("extend: minimal-add10\nstages:\n  - stage: a\n  - stage: a\n", "stage label 'a' must be unique"),
    ("extend: minimal-add10\nstages:\n  - stage: a\n  - stage: minimal-add10\n", "stage label 'minimal-add10' must be unique"),
    ("extend: minimal-add10\nstages:\n  - stage: A/b\n", "stage label 'A/b'"),
    ("extend: minimal-add10\nstages:\n  - stage: a\n  - stage: b\n    optim: {stepz: 3}\n",
     "stage b: unknown key(s) ['stepz'] in optim"),
    ("extend: minimal-add10\nabout: [not, a, line]\n", "about must be one line of text"),
    ("extend: abacus-gpt2-add:nope\n", "abacus-gpt2-add has no stage 'nope'; its stages: trunk, separated, hardcases"),
])
def test_a_malformed_chain_is_one_line_naming_the_key(tmp_path, text, message):
    write(tmp_path, "loop", "extend: me.yaml\n")
    path = write(tmp_path, "me", text)
    with pytest.raises(RecipeError) as err:
        load_stages(str(path))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_every_preset_is_in_the_catalogue_with_a_line_and_a_training_time():
    rows = {row["name"]: row for row in preset_catalogue()}
    assert list(rows) == list_presets() and len(rows) <= 16
    for name, row in rows.items():
        assert row["about"] and row["train_time"] and "\n" not in row["about"], name
        recipe = load_recipe(name)
        assert (row["task"], row["family"]) == (recipe.format["task"], recipe.family)
        assert row["stages"] == ([s.label for s in recipe.stages] if len(recipe.stages) > 1 else [])


def test_extend_base_stage_takes_the_chain_up_to_that_stage(tmp_path):
    path = write(tmp_path, "partial", "extend: abacus-gpt2-add:trunk\nstages:\n  - stage: more\n    optim: {seed: 4}\n")
    stages = load_stages(str(path))
    whole = load_stages("abacus-gpt2-add")
    assert [s.label for s in stages] == ["trunk", "more"]
    assert stages[0].recipe.optim == whole[0].recipe.optim and stages[1].recipe.optim.seed == 4


def test_train_list_prints_every_preset_with_its_line_time_and_stages(capsys):
    from hf_arith.cli import main

    assert main(["train", "--list"]) == 0
    out = capsys.readouterr().out
    for row in preset_catalogue():
        assert f"{row['name']}  (" in out and row["about"] in out and row["train_time"] in out
    assert "stages: trunk -> separated -> hardcases -> window-10 -> k2 -> polish -> polish-2" in out


def run_chain(tmp_path, *args):
    from hf_arith.cli import main

    text = (f"extend: minimal-add10\noutput_dir: {tmp_path / 'out'}\n"
            "stages:\n  - stage: second\n    optim: {learning_rate: 0.001}\n")
    return main(["train", str(write(tmp_path, "chain", text)), *SHORT, *args])


def test_a_two_stage_chain_trains_each_stage_once_the_second_from_the_first(tmp_path, capsys):
    assert run_chain(tmp_path) == 0
    assert f"Training earlier stage 1 of 1 first, into {tmp_path / 'out-minimal-add10'}" in capsys.readouterr().out
    first = tmp_path / "out-minimal-add10" / "final"
    summary = json.loads((tmp_path / "out" / "final" / "training_summary.json").read_text())
    assert summary["init_from"] == {"name": str(first), "kind": "folder"}
    assert [stage["steps"] for stage in summary["earlier_stages"]] == [2]
    assert summary["recipe"]["optim"]["learning_rate"] == 0.001
    # The first stage's model is there now: training the chain again does not train it again.
    before = (first / "model.safetensors").stat().st_mtime_ns
    assert run_chain(tmp_path, "--overwrite", "--threads", "2") == 0
    assert "earlier stage" not in capsys.readouterr().out
    assert (first / "model.safetensors").stat().st_mtime_ns == before


def test_resume_continues_the_stage_a_chain_stopped_in(tmp_path, capsys):
    """A chain killed in its first stage: --resume continues that stage from its checkpoint, then
    trains the second from the start (its folder was never made)."""
    import shutil

    assert run_chain(tmp_path) == 0
    shutil.rmtree(tmp_path / "out")
    shutil.rmtree(tmp_path / "out-minimal-add10" / "final")
    shutil.rmtree(tmp_path / "out-minimal-add10" / "checkpoint-2")
    capsys.readouterr()
    assert run_chain(tmp_path, "--resume", "--threads", "2") == 0
    out = capsys.readouterr().out
    assert "Training earlier stage 1 of 1 first" in out
    first = json.loads((tmp_path / "out-minimal-add10" / "final" / "training_summary.json").read_text())
    assert first["steps"] == 2 and first["recipe"]["optim"]["threads"] == 2  # the command's threads, every stage
    assert (tmp_path / "out" / "final" / "model.safetensors").is_file()


def test_every_bundled_model_is_the_last_stage_of_the_preset_of_its_name():
    """Each bundled model's training record holds the recipe of its last run: the preset of its name
    must give that recipe as its last stage (thread counts and checkpoint spacing change no weight),
    with as many stages before it as the record lists."""
    from hf_arith.bundled import BUNDLED_DIR, bundled_models
    from hf_arith.training.recipe import recipe_from_dict

    sections = ("family", "model", "format", "data", "optim", "eval", "trainer")
    run_only = {"threads", "save_steps", "logging_steps"}
    for name in bundled_models():
        assert (PRESETS_DIR / f"{name}.yaml").is_file(), f"no preset named as the bundled {name}"
        summary = json.loads((BUNDLED_DIR / name / "training_summary.json").read_text())
        stages = load_stages(name)
        last = stages[-1].recipe
        if "recipe" not in summary:  # recorded before training summaries held the recipe: its steps
            assert (summary["steps"], len(stages)) == (last.optim.steps, 1), name
            continue
        # Read back as a recipe, so keys added to recipes since then take their defaults (which change nothing).
        recorded = summary["recipe"]
        ran = dataclasses.asdict(recipe_from_dict({**{k: recorded[k] for k in sections if k in recorded},
                                                   "init_from": last.init_from}))
        preset = dataclasses.asdict(last)
        for section in sections:
            if section == "optim":
                ran[section] = {k: v for k, v in ran[section].items() if k not in run_only}
                preset[section] = {k: v for k, v in preset[section].items() if k not in run_only}
            assert ran[section] == preset[section], (name, section)
        # A record older than the earlier_stages key has them in its notes, copied from its warm start.
        notes = BUNDLED_DIR / name / "notes.json"
        earlier = summary.get("earlier_stages", json.loads(notes.read_text()).get("earlier_stages") if notes.is_file() else None)
        assert len(earlier) == len(stages) - 1, name
        # optim.stop_exact ends a stage once held-out problems are all right: the record says where.
        stopped = (summary.get("held_out_best") or {}).get("stopped_at_step")
        assert summary["steps"] == (stopped or last.optim.steps) <= last.optim.steps, name


def test_a_sort_chain_is_trained_on_the_union_of_its_stages_list_sizes(tmp_path, capsys):
    """A last stage on lists of one size after stages on 2-4 items: the model's trained range (warnings,
    the grid's box, the card) is 2-4 items, not the last stage's alone."""
    from hf_arith.cli import main
    from hf_arith.data.formatting import parse_problems
    from hf_arith.records import read_summary
    from hf_arith.runtime.limits import model_limits
    from hf_arith.runtime.loading import load_checkpoint

    text = (f"family: abacus_gpt2\noutput_dir: {tmp_path / 'out'}\n"
            "model: {hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2, intermediate_size: 32,"
            " abacus_max_digits: 8, max_position_embeddings: 128}\n"
            "format: {task: sort, reverse_operands: true, reverse_answer: true, end_token: true, max_items: 5,"
            " scratchpad: radix_passes}\n"
            "data: {min_digits: 1, max_digits: 2, min_items: 2, max_items: 4}\n"
            "stages:\n  - stage: lists\n  - stage: four\n    data: {min_items: 4, max_items: 4}\n")
    assert main(["train", str(write(tmp_path, "sort-chain", text)), *SHORT]) == 0
    final = tmp_path / "out" / "final"
    summary = read_summary(final)
    assert summary["recipe"]["data"]["min_items"] == 4 and summary["earlier_stages"][-1]["train_items"] == [2, 4]
    limits = model_limits(*load_checkpoint(final), folder=final)
    assert limits.training_items == (2, 4)
    lists = parse_problems(["a:1,b:2,c:3", "a:1,b:2,c:3,d:4,e:5"], limits.fmt)
    assert limits.beyond_training(lists).tolist() == [False, True]  # three items are inside the chain's range
    # Held-out lists default to those sizes too (2-5 is the default only where nothing is recorded).
    capsys.readouterr()
    assert main(["eval", str(final), "--samples", "8", "--threads", "1"]) == 0
    assert "lists of 2-4 items, operands of 1-2 digits" in capsys.readouterr().out
    # A damaged record of an earlier stage's list sizes is an error naming the file, never a guess.
    summary["earlier_stages"][-1]["train_items"] = [4, 2]
    (final / "training_summary.json").write_text(json.dumps(summary))
    with pytest.raises(ValueError, match="corrupt file, an earlier stage's train_items"):
        read_summary(final)
