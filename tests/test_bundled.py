"""Every bundled checkpoint: weights and data only (no source), and it answers correctly."""

import json
import re
import threading
from pathlib import Path

import pytest
import torch

import hf_arith
from hf_arith.bundled import bundled_models
from hf_arith.data.problems import ProblemSpec, held_out_problems
from hf_arith.runtime.limits import model_limits
from hf_arith.runtime.loading import load_checkpoint

PACKAGE = Path(hf_arith.__file__).parent


@pytest.mark.parametrize("name", bundled_models())
def test_bundled_checkpoint_carries_weights_and_data_but_no_source(name):
    """Remote code is written when a folder is saved or pushed for others, never kept in the package:
    a bundled folder holds safetensors weights, JSON, tokenizer files and pictures only, and its
    configs name no remote-code files that are not there."""
    folder = Path(hf_arith.bundled_path(name))
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert "model.safetensors" in files
    unexpected = [f for f in files if not f.endswith((".json", ".png")) and f != "model.safetensors"]
    assert not unexpected, f"bundled {name} holds {unexpected}"
    for config in ("config.json", "tokenizer_config.json"):
        assert "auto_map" not in json.loads((folder / config).read_text()), f"{name}/{config} points at remote code"


@pytest.mark.parametrize("name", bundled_models())
def test_training_summaries_hold_the_runs_record_and_notes_go_beside_them(name):
    """A training summary is what the run wrote: its recipe's init_from is a name or a folder, as a
    recipe takes it, never prose; anything added later lives in notes.json beside it."""
    folder = Path(hf_arith.bundled_path(name))
    summary = json.loads((folder / "training_summary.json").read_text())
    init_from = (summary.get("recipe") or {}).get("init_from")
    assert not init_from or re.fullmatch(r"[\w./-]+", init_from), init_from  # "" is the recipe default: none
    if (folder / "notes.json").is_file():
        assert isinstance(json.loads((folder / "notes.json").read_text()), dict)


def test_no_python_files_under_bundled():
    assert not sorted(PACKAGE.joinpath("bundled").rglob("*.py"))


@pytest.mark.parametrize("name", bundled_models())
def test_bundled_checkpoint_solves_held_out_problems(name):
    model, tok = load_checkpoint(name)
    fmt = tok.arith_format
    trained = model_limits(model, tok, Path(hf_arith.bundled_path(name))).training_range
    top = min(10, trained[1])  # the tiny-adder lengths, or fewer where the model was trained on fewer
    held = held_out_problems(ProblemSpec(task=fmt.task, base=10, min_digits=1, max_digits=top), 300, seed=99)
    texts, answers = held.to_text(), held.answer_text()
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


def _multi_token_models() -> list[str]:
    return [n for n in bundled_models()
            if json.loads((Path(hf_arith.bundled_path(n)) / "config.json").read_text()).get("num_future_tokens", 1) > 1]


@pytest.mark.parametrize("name", _multi_token_models())
def test_bundled_multi_token_model_answers_with_fewer_forward_passes(name):
    """By default the extra heads draft and the first head verifies: one token per pass's answers and
    probabilities, in fewer passes. Raw heads (`confirm=False`) take fewer still, and are right here too."""
    from hf_arith.runtime.decoding import greedy_decode
    from hf_arith.runtime.solving import answer_budget

    model, tok = load_checkpoint(name)
    k = model.config.num_future_tokens
    held = held_out_problems(ProblemSpec(task="add", base=10, min_digits=1, max_digits=10), 300, seed=98)
    texts, answers = held.to_text(), held.answer_text()
    enc = tok(texts, padding=True, return_tensors="pt")
    budget = answer_budget(tok, texts)
    passes, outputs, probabilities = {}, {}, {}
    for mode, step, confirm in (("one", 1, True), ("drafted", k, True), ("raw", k, False)):
        new, probabilities[mode], passes[mode] = greedy_decode(
            model, enc["input_ids"], enc["attention_mask"], budget, eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id, tokens_per_step=step, return_probabilities=True, return_passes=True,
            confirm=confirm)
        outputs[mode] = tok.decode_answers(new)
        accuracy = sum(p == a for p, a in zip(outputs[mode], answers)) / len(answers)
        assert accuracy >= 0.99, f"{name}, {mode}: {accuracy:.3f}"
    assert outputs["drafted"] == outputs["one"]
    torch.testing.assert_close(probabilities["drafted"], probabilities["one"], atol=1e-5, rtol=0)
    assert passes["raw"] <= 0.55 * passes["one"]
    # The prompt pass writes one token, then each pass up to k: with every draft right, 1 + ceil((n - 1) / k).
    assert passes["drafted"] <= 0.6 * passes["one"]


@pytest.mark.parametrize("name", bundled_models())
def test_each_bundled_models_reach_is_its_trained_or_measured_range(name):
    """`bundled_reach` reads what the CLI's notes promise: the task, base and longest operands each bundled
    model was trained on or measured exact on, and for sorting the list sizes it was trained on."""
    from hf_arith.bundled import bundled_reach

    model, tokenizer = load_checkpoint(name)
    limits = model_limits(model, tokenizer, hf_arith.bundled_path(name))
    reach = bundled_reach(name)
    assert (reach["task"], reach["base"]) == (tokenizer.arith_format.task, tokenizer.arith_format.base)
    assert reach["digits"] == max(limits.training_range[1], limits.measured_max_digits or 0) <= limits.max_digits
    assert reach["max_digits"] == limits.max_digits and reach["max_items"] == tokenizer.arith_format.max_items
    if tokenizer.arith_format.task_rules.item_list:
        assert reach["items"] == limits.training_items


def test_the_bundled_model_for_a_problem_is_the_default_else_the_closest_fit():
    from hf_arith.bundled import bundled_model_for

    assert bundled_model_for("mul", 10, 8) == "abacus-gpt2-mul-10"  # the default holds it
    assert bundled_model_for("mul", 10, 4, exclude="abacus-gpt2-mul-10") == "abacus-gpt2-mul"
    assert bundled_model_for("mul", 10, 11) is None
    assert bundled_model_for("add", 10, 20) == "abacus-gpt2-add"  # measured to 30: the shortest reach that holds 20
    assert bundled_model_for("add", 10, 20, exclude="abacus-gpt2-add") not in (None, "abacus-gpt2-add")
    assert bundled_model_for("sort", 10, 3, items=5) == "abacus-gpt2-sort"
    assert bundled_model_for("sort", 10, 3, items=7) == "abacus-gpt2-sort-10"  # more items than the default's 2-5
    assert bundled_model_for("sort", 10, 3, items=11) is None
    assert bundled_model_for("add", 16, 3) is None  # no bundled model counts in base 16


def test_a_problem_no_bundled_model_holds_goes_to_the_one_that_accepts_it_and_reaches_nearest():
    from hf_arith.bundled import bundled_reach, nearest_bundled_model

    # 11 digits: abacus-gpt2-sort-10 reaches 10, the default 6; both accept it.
    assert nearest_bundled_model("sort", 10, 11, items=2) == "abacus-gpt2-sort-10"
    assert nearest_bundled_model("sort", 10, 3, items=12) == "abacus-gpt2-sort-10"  # the only one that takes 12 items
    # 13 items: none takes them, so the one that takes most, whose refusal names 12.
    assert nearest_bundled_model("sort", 10, 3, items=13) == "abacus-gpt2-sort-10"
    assert bundled_reach("abacus-gpt2-sort-10")["max_items"] == 12 < 13
    # 150 digits: past every adder's measured 100; only the periodic table takes them.
    assert nearest_bundled_model("add", 10, 150) == "abacus-gpt2-add-periodic"
    assert nearest_bundled_model("mul", 10, 12) == "abacus-gpt2-mul-10"  # reaches 10, abacus-gpt2-mul-5-to-10 9
    assert nearest_bundled_model("mul", 10, 10_000) == "abacus-gpt2-mul-10"  # none takes it: the largest limits
    assert nearest_bundled_model("add", 16, 3) is None


@pytest.mark.parametrize("problem, name", [
    ("12*34", "abacus-gpt2-mul-10"), ("9-4", "abacus-gpt2-sub"), ("1+2", "minimal-add10"),
    ("1" * 20 + "+1", "abacus-gpt2-add"),  # past the default's 10 digits, inside abacus-gpt2-add's measured 30
    ("a:5,b:3", "abacus-gpt2-sort"), ("a:5,b:3,c:9,d:1,e:7,f:2", "abacus-gpt2-sort-10"),
    ("a:1234567,b:3", "abacus-gpt2-sort-10"),  # a 7-digit item: past the default's 6
    ("1" * 101 + "+1", "abacus-gpt2-add-periodic"),  # held by none: the one that takes it, reaching nearest
    ("1" * 5000 + "+1", "abacus-gpt2-add-periodic"),  # taken by none: the largest limits, which then refuse it
    ("a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8,i:9,j:1,k:2", "abacus-gpt2-sort-10"),  # 11 items: held by none
])
def test_the_model_for_a_typed_problem_is_read_from_its_syntax_and_size(problem, name):
    from hf_arith.runtime.loading import bundled_model_for_problem

    assert bundled_model_for_problem(problem) == name == hf_arith.bundled_model_for_problem(f" {problem} ")


def test_a_problem_of_a_task_no_bundled_model_does_is_refused_naming_the_task(monkeypatch):
    import hf_arith.runtime.loading as loading
    from hf_arith.data.formatting import FormatError

    monkeypatch.setattr(loading, "DEFAULT_MODELS", {})
    monkeypatch.setattr(loading, "bundled_model_for", lambda *args, **kwargs: None)
    monkeypatch.setattr(loading, "nearest_bundled_model", lambda *args, **kwargs: None)
    with pytest.raises(FormatError, match=r"^'12\*34' is multiplication, which no bundled model does: name a model$"):
        loading.bundled_model_for_problem("12*34")
