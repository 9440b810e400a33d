"""Warm starts (`init_from`): weights from a trained checkpoint, new heads seeded from the trunk,
frozen loaded weights with `optim.freeze_init`, and one-line refusals of unusable checkpoints."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from hf_arith.bundled import bundled_path
from hf_arith.data.streaming import worst_case_length
from hf_arith.training.recipe import RecipeError, load_recipe, load_stages
from hf_arith.training.run import build_model, build_tokenizer, check_recipe, recipe_spec, train
from hf_arith.training.warm_start import WarmStartError, warm_start


def model_of(preset: str, overrides=()):
    recipe = load_recipe(preset, list(overrides))
    fmt = check_recipe(recipe)
    context = worst_case_length(recipe_spec(recipe, fmt), fmt)
    return build_model(recipe, build_tokenizer(fmt, context), context), fmt


def test_extra_heads_on_the_bundled_trunk_start_as_copies_of_its_last_block():
    model, fmt = model_of("abacus-gpt2-add", ["model.num_future_tokens=4"])
    fresh = warm_start(model, "abacus-gpt2-add", fmt.to_dict())
    saved = load_file(f"{bundled_path('abacus-gpt2-add')}/model.safetensors")
    state = model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in saved.items())
    assert fresh and all(k.startswith("transformer.future_heads.") for k in fresh)
    last = model.transformer.h[-1].state_dict()
    for head in model.transformer.future_heads:
        assert all(torch.equal(v, last[k]) for k, v in head.state_dict().items())
    assert torch.equal(model.lm_head.weight, model.transformer.wte.weight)  # still tied


def test_a_longer_abacus_table_keeps_the_trained_indices_and_learns_the_new_ones():
    model, fmt = model_of("abacus-gpt2-add", ["model.abacus_max_digits=120", "model.max_position_embeddings=512"])
    fresh = warm_start(model, "abacus-gpt2-add", fmt.to_dict())
    saved = load_file(f"{bundled_path('abacus-gpt2-add')}/model.safetensors")["transformer.abacus.weight"]
    table = model.transformer.abacus.weight.detach()
    assert fresh == ["transformer.abacus.weight"] and table.shape[0] == 121 > saved.shape[0]
    assert torch.equal(table[:len(saved)], saved)
    new_rows = table[len(saved):]
    assert 0.5 < new_rows.std() / saved.std() < 2  # new indices start at the trained ones' scale
    shorter, fmt = model_of("abacus-gpt2-add", ["model.abacus_max_digits=30"])
    with pytest.raises(WarmStartError, match="transformer.abacus.weight of shape"):
        warm_start(shorter, "abacus-gpt2-add", fmt.to_dict())


def test_more_segments_keep_the_trained_rows_and_learn_the_new_lines():
    # Multiplication's running sums give each line its own segment: longer operands mean more lines.
    model, fmt = model_of("abacus-gpt2-mul", ["model.abacus_num_segments=16"])
    fresh = warm_start(model, "abacus-gpt2-mul", fmt.to_dict())
    saved = load_file(f"{bundled_path('abacus-gpt2-mul')}/model.safetensors")["transformer.segment.weight"]
    table = model.transformer.segment.weight.detach()
    assert fresh == ["transformer.segment.weight"] and table.shape[0] == 16 > saved.shape[0]
    assert torch.equal(table[:len(saved)], saved)
    fewer, fmt = model_of("abacus-gpt2-mul", ["model.abacus_num_segments=4"])
    with pytest.raises(WarmStartError, match="transformer.segment.weight of shape"):
        warm_start(fewer, "abacus-gpt2-mul", fmt.to_dict())


@pytest.mark.parametrize(("preset", "overrides", "words"), [
    ("abacus-gpt2-add", ["model.hidden_size=32", "model.intermediate_size=128"], "shape"),
    (str(Path(__file__).parents[1] / "bench" / "recipes" / "abacus-gpt2-add-hex.yaml"), [], "number format"),
    ("looped-add", [], "hf_arith_abacus_gpt2"),
])
def test_checkpoints_that_cannot_initialise_the_model_are_refused_in_one_line(preset, overrides, words):
    model, fmt = model_of(preset, overrides)
    with pytest.raises(WarmStartError) as err:
        warm_start(model, "abacus-gpt2-add", fmt.to_dict())
    assert words in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(RecipeError, match="no checkpoint folder"):
        warm_start(model, "no-such-model", fmt.to_dict())


def test_freeze_init_trains_only_the_new_heads(tmp_path):
    # A second output head (as the k2 stage of abacus-gpt2-add-window-10-k2 adds), started from the bundled trunk.
    stage = load_stages("abacus-gpt2-add", ["model.num_future_tokens=2", "optim.steps=3", "optim.batch_size=16",
                                            "optim.save_steps=1000", "eval.samples=50", f"output_dir={tmp_path}"])[0]
    recipe = stage.recipe
    summary = train(dataclasses.replace(recipe, init_from="abacus-gpt2-add",
                                        optim=dataclasses.replace(recipe.optim, freeze_init=True)))
    after = load_file(f"{summary['output']}/model.safetensors")
    before = load_file(f"{bundled_path('abacus-gpt2-add')}/model.safetensors")
    assert all(torch.equal(after[k], v) for k, v in before.items())
    head = "transformer.future_heads.0.mlp.c_fc.weight"
    assert not torch.equal(after[head], before[head.replace("future_heads.0", "h.3")])
    assert summary["heldout"]["exact_match"] == 1.0  # the frozen trunk still answers every problem
    # The run records the training behind its starting point, so a card can add up every stage.
    trunk = json.loads((Path(bundled_path("abacus-gpt2-add")) / "training_summary.json").read_text())
    assert summary["earlier_stages"][-1]["steps"] == trunk["steps"]
    notes = json.loads((Path(bundled_path("abacus-gpt2-add")) / "notes.json").read_text())
    assert summary["earlier_stages"][:-1] == (trunk.get("earlier_stages") or notes["earlier_stages"])


def test_freeze_init_without_init_from_is_refused():
    with pytest.raises(RecipeError, match="freeze_init"):
        load_recipe("abacus-gpt2-add", ["optim.freeze_init=true"])


def test_a_checkpoint_saved_before_a_format_field_existed_matches_its_default(tmp_path):
    # A checkpoint saved before NumberFormat.negative_answers existed has no such key in its tokenizer config.
    import shutil

    folder = tmp_path / "older"
    shutil.copytree(bundled_path("abacus-gpt2-add"), folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["number_format"].pop("negative_answers", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    model, fmt = model_of("abacus-gpt2-add", [])
    assert fmt.to_dict()["negative_answers"] == "sign"
    assert warm_start(model, str(folder), fmt.to_dict()) == []


def test_an_earlier_mining_stage_keeps_its_mining_record(tmp_path):
    """A stage that mined before training took that time too: the next stage's record keeps it."""
    from hf_arith.training.warm_start import earlier_stages

    folder = tmp_path / "stage"
    folder.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        source = Path(bundled_path("abacus-gpt2-sort")) / name
        (folder / name).write_bytes(source.read_bytes())
    mined = {"threshold": 0.99, "seed": 2, "kinds": {}, "pool": 10, "seconds": 41.5}
    summary = {"name": "sort", "steps": 10, "train_seconds": 5.0, "machine": {"cpu_count": 2}, "mined": mined}
    (folder / "training_summary.json").write_text(json.dumps(summary))
    assert earlier_stages(str(folder))[-1]["mined"] == mined
    del summary["mined"]  # a stage that did not mine records no mining
    (folder / "training_summary.json").write_text(json.dumps(summary))
    assert "mined" not in earlier_stages(str(folder))[-1]
