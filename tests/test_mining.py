"""Hard-example mining: the pool holds what the model gets wrong or is unsure of, from the training
split only; the stream draws its share from it; a resumed run trains on the saved pool."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from hf_arith.data.formatting import PROMPT_END, NumberFormat, decode_answer, problems_from_ints
from hf_arith.data.problems import ProblemSpec, split_of, with_answers
from hf_arith.data.streaming import ProblemStream
from hf_arith.models import IGNORE_INDEX
from hf_arith.runtime.loading import load_checkpoint
from hf_arith.runtime.solving import solve
from hf_arith.training.mining import MINED_FILE, load_pool, mine_problems, mining_kinds, save_pool
from hf_arith.training.recipe import RecipeError, check_recipe, load_recipe, load_stages
from hf_arith.training.run import mining_spec, recipe_spec, train

TINY = ["optim.steps=2", "optim.batch_size=16", "optim.compile=false", "optim.save_steps=1",
        "eval.samples=20", "eval.verify=false"]


@pytest.fixture(scope="module")
def adder():
    return load_checkpoint("abacus-gpt2-add")


@pytest.mark.parametrize("threshold", [0.0, 0.9999])
def test_the_pool_is_the_training_problems_answered_wrong_or_below_the_threshold(adder, threshold):
    model, tok = adder
    spec = ProblemSpec(task="add", min_digits=1, max_digits=10)
    pool, report = mine_problems(model, tok, spec, 100, threshold, seed=4, test_fraction=0.1)
    kinds = report["kinds"]
    assert {k: v["drawn"] for k, v in kinds.items()} == {"uniform": 100, "repeated": 10, "chains": 10}
    assert report["seconds"] > 0
    assert len(pool) == report["pool"] == sum(v["wrong"] + v["right_below_threshold"] for v in kinds.values())
    assert not split_of(pool).any()  # held-out problems are never mined
    answered = solve(model, tok, pool.to_text(), return_confidence=True, warn_beyond_training=False)
    for got, expected in zip(answered, pool.answer_text()):
        assert got.answer != expected or got.confidence < threshold
    if threshold == 0.0:  # only wrong answers: the bundled adder has none here
        assert len(pool) == 0
    else:  # some right answers fall short of 0.9999, most do not
        assert 0 < len(pool) < 60


def test_the_stream_draws_the_mined_share_from_the_pool_with_exact_labels():
    fmt = NumberFormat(task="add", reverse_operands=True, reverse_answer=True)
    spec = ProblemSpec(task="add", min_digits=1, max_digits=10)
    pool = with_answers(problems_from_ints("add", [[123456789, 987654321], [5, 99999]], 10))
    plain = ProblemStream(spec, fmt, seed=3, chunk_size=1000)
    off = ProblemStream(spec, fmt, seed=3, chunk_size=1000, mined=pool, mined_fraction=0.0)
    np.testing.assert_array_equal(plain.chunk(0)[0], off.chunk(0)[0])  # off: the stream as without a pool
    mixed = ProblemStream(spec, fmt, seed=3, chunk_size=1000, mined=pool, mined_fraction=0.3)
    ids, _, labels = mixed.chunk(0)
    vocab = fmt.vocab()
    pooled = 0
    for row, label in zip(ids, labels):
        tokens = [vocab[i] for i in row]
        prompt = "".join(tokens[:tokens.index(PROMPT_END)])
        a, b = (int(n[::-1]) for n in prompt.split("+"))
        answer = decode_answer([vocab[i] for i in label[label != IGNORE_INDEX]], fmt)
        assert answer == str(a + b)
        pooled += (a, b) in ((123456789, 987654321), (5, 99999))
    assert 0.24 < pooled / len(ids) < 0.36
    np.testing.assert_array_equal(ids, mixed.chunk(0)[0])  # the same chunk every time


def test_a_saved_pool_reads_back_and_a_pool_of_another_task_is_refused(tmp_path):
    pool = with_answers(problems_from_ints("add", [[12, 34], [5, 5]], 10))
    save_pool(pool, tmp_path)
    back = load_pool(tmp_path, ProblemSpec(task="add", min_digits=1, max_digits=10))
    assert back.to_text() == pool.to_text() and back.answer_text() == ["46", "10"]
    with pytest.raises(ValueError, match="holds add problems"):
        load_pool(tmp_path, ProblemSpec(task="mul", min_digits=1, max_digits=10))
    (tmp_path / MINED_FILE).write_bytes(b"not an npz")
    with pytest.raises(ValueError, match="cannot read the mined problems"):
        load_pool(tmp_path, ProblemSpec(task="add", min_digits=1, max_digits=10))


def test_a_mining_stage_records_its_pool_and_resumes_on_the_saved_one(tmp_path, add10):
    common = [*TINY, f"init_from={add10}", "data.mine_problems=50", "data.mined_fraction=0.5",
              f"output_dir={tmp_path}"]
    summary = train(load_recipe("minimal-add10", common), evaluate=False)
    mined = summary["mined"]
    assert mined["kinds"]["uniform"]["drawn"] == 50 and mined["pool"] > 0  # a five-step model is mostly wrong
    saved = json.loads((tmp_path / "final" / "training_summary.json").read_text())
    assert saved["mined"] == mined
    assert (tmp_path / MINED_FILE).is_file()
    resumed = train(load_recipe("minimal-add10", [*common, "optim.steps=3"]), resume=True, evaluate=False)
    assert resumed["steps"] == 3 and "mined" not in resumed  # read from the folder, not mined again
    (tmp_path / MINED_FILE).write_bytes(b"not an npz")  # refused before training, in one line
    with pytest.raises(RecipeError, match="--resume: cannot read the mined problems"):
        train(load_recipe("minimal-add10", [*common, "optim.steps=4"]), resume=True, evaluate=False)
    (tmp_path / MINED_FILE).unlink()
    with pytest.raises(RecipeError, match=f"has no {MINED_FILE}"):
        train(load_recipe("minimal-add10", [*common, "optim.steps=4"]), resume=True, evaluate=False)


@pytest.mark.parametrize("overrides,message", [
    (["data.mine_problems=100"], "go together"),
    (["data.mined_fraction=0.2"], "go together"),
    (["data.mine_problems=100", "data.mined_fraction=0.2"], "has no init_from"),
    (["data.mine_problems=-1", "data.mined_fraction=0.2"], "data.mine_problems must be"),
    (["data.mined_fraction=1.0", "data.mine_problems=10"], "data.mined_fraction must be"),
    (["data.mined_confidence=2", "data.mine_problems=10", "data.mined_fraction=0.1"], "data.mined_confidence must be"),
    (["data.mine_kinds=[bogus]"], "data.mine_kinds must be a list"),
    (["data.mine_kinds=near_ties"], "data.mine_kinds must be a list"),
    (["data.mine_max_digits=5"], "mines nothing"),
])
def test_a_malformed_mining_recipe_is_one_line(overrides, message):
    with pytest.raises(RecipeError, match=message):
        load_recipe("minimal-add10", overrides)


def test_a_mine_kind_the_task_does_not_draw_is_refused_in_one_line():
    with pytest.raises(RecipeError, match="data.mine_kinds: 'near_ties' is not a kind addition draws"):
        check_recipe(load_recipe("minimal-add10", ["data.mine_kinds=[near_ties]"]))


def test_mine_kinds_names_the_hard_kinds_mined_beside_the_uniform_draw():
    add, sort = ProblemSpec(task="add", min_digits=1, max_digits=10), ProblemSpec(task="sort", min_digits=1, max_digits=6)
    assert mining_kinds(add, 100) == [("uniform", 100), ("repeated", 10), ("chains", 10)]
    assert mining_kinds(sort, 100) == [("uniform", 100), ("repeated", 10)]  # the default: sort has no chains
    assert mining_kinds(sort, 100, ["tie_heavy", "near_ties"]) == [("uniform", 100), ("tie_heavy", 10), ("near_ties", 10)]


def test_the_mining_stages_of_the_sort_chain_start_from_the_stage_before():
    stages = load_stages("abacus-gpt2-sort")
    mining = [k for k, stage in enumerate(stages) if stage.recipe.data.mine_problems]
    assert mining and 0 not in mining
    for k in mining:
        check_recipe(stages[k].recipe)
        assert stages[k].recipe.init_from == f"{stages[k - 1].recipe.output_dir}/final"
        assert 0 < stages[k].recipe.data.mined_fraction < 1


def mined_sort_stage(**corner):
    """The mined stage of the abacus-gpt2-sort-10 chain, mining inside `corner` (data keys)."""
    recipe = next(stage.recipe for stage in load_stages("abacus-gpt2-sort-10") if stage.label == "mined")
    recipe.data = dataclasses.replace(recipe.data, **corner)
    return recipe


def test_mining_inside_a_corner_draws_only_there_while_training_keeps_the_whole_range():
    recipe = mined_sort_stage(mine_max_digits=6, mine_max_items=5)
    check_recipe(recipe)
    fmt = NumberFormat.from_dict(recipe.format)
    whole = recipe_spec(recipe, fmt)
    mined = mining_spec(whole, recipe)
    assert (mined.max_digits, mined.max_items) == (6, 5) and (whole.max_digits, whole.max_items) == (10, 10)
    assert (mined.min_digits, mined.min_items, mined.sample_by) == (whole.min_digits, whole.min_items, whole.sample_by)


@pytest.mark.parametrize("corner,message", [
    ({"mine_max_digits": 11}, r"data.mine_max_digits must be 0 \(the stage's own\) or from data.min_digits"),
    ({"mine_max_digits": -1}, "data.mine_max_digits must be"),
    ({"mine_max_items": 11}, "data.mine_max_items must be"),
    ({"mine_max_items": 1}, "data.mine_max_items must be"),
])
def test_a_mining_corner_outside_the_stage_is_one_line(corner, message):
    with pytest.raises(RecipeError, match=message):
        check_recipe(mined_sort_stage(**corner))


def test_a_mining_corner_of_list_sizes_is_refused_for_a_task_without_lists(add10):
    recipe = load_recipe("minimal-add10", [f"init_from={add10}", "data.mine_problems=10", "data.mined_fraction=0.1",
                                           "data.mine_max_items=3"])
    with pytest.raises(RecipeError, match="for a list task"):
        check_recipe(recipe)


def test_a_mining_stage_inside_a_corner_mines_only_there(tmp_path, add10):
    overrides = [*TINY, f"init_from={add10}", "data.min_digits=1", "data.mine_problems=60", "data.mined_fraction=0.5",
                 "data.mine_max_digits=3", f"output_dir={tmp_path}"]
    recipe = load_recipe("minimal-add10", overrides)
    summary = train(recipe, evaluate=False)
    assert summary["mined"]["pool"] > 0  # a two-step model answers most sums wrong
    pool = load_pool(tmp_path, recipe_spec(recipe, NumberFormat.from_dict(recipe.format)))
    assert int(pool.lengths.max()) <= 3 < recipe.data.max_digits  # mined in the corner, trained on 1-10 digits
