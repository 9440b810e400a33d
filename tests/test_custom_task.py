"""Adding a task is one file: a task defined here, registered through the public API, trains,
evaluates and solves through the package without any change to it."""

from __future__ import annotations

import numpy as np
import pytest
from transformers import pipeline

import hf_arith
from hf_arith.data.formatting import FormatError, NumberFormat, parse_problems
from hf_arith.data.problems import ProblemSpec, sample
from hf_arith.data.tasks import Task, get_task, register_task, task_names, unregister_task
from hf_arith.training.recipe import load_recipe
from hf_arith.training.run import recipe_held_out, train


class Larger(Task):
    """'a^b', answered by the larger of the two numbers."""

    name, title, hash_id, operator = "larger", "the larger of two numbers", 77, "^"

    def answer_digits(self, lengths):
        return lengths.max(axis=1)

    def solve(self, operands, lengths, base):
        n = len(operands)
        # Digits past a number's length are 0, so the most significant differing digit decides.
        diff = np.sign(operands[:, 0].astype(np.int64) - operands[:, 1].astype(np.int64))[:, ::-1]
        b_larger = diff[np.arange(n), np.argmax(diff != 0, axis=1)] < 0
        answer = np.where(b_larger[:, None], operands[:, 1], operands[:, 0]).astype(np.int8)
        return answer, np.where(b_larger, lengths[:, 1], lengths[:, 0]), np.zeros(n, dtype=bool)

    def reference(self, values):
        return str(max(values))


@pytest.fixture(scope="module")
def larger():
    register_task(Larger())
    yield get_task("larger")
    unregister_task("larger")  # the other tests see the built-in tasks only


def test_a_registered_task_is_known_by_name_and_an_unknown_name_is_one_line(larger):
    assert isinstance(larger, Larger) and "larger" in task_names()
    with pytest.raises(FormatError, match=r"^unknown task 'nope'; known tasks: add, sub, mul, sort, larger$"):
        get_task("nope")


def test_the_format_and_the_generator_ask_the_registered_task(larger):
    fmt = NumberFormat(task="larger")
    assert "^" in fmt.vocab() and "+" not in fmt.vocab()
    problems = sample(ProblemSpec(task="larger", max_digits=6), 200, np.random.default_rng(0))
    texts, answers = problems.to_text(), problems.answer_text()
    assert all("^" in t for t in texts)
    assert answers == [larger.reference([int(v) for v in t.split("^")]) for t in texts]
    with pytest.raises(FormatError, match="is addition, but this model does the larger of two numbers"):
        parse_problems(["1+2"], fmt)


def test_a_new_task_trains_evaluates_and_solves_without_editing_the_package(larger, tmp_path):
    recipe = load_recipe("abacus-gpt2-add", [
        "format.task=larger", "data.max_digits=4", "data.random_prefix=0", "model.hidden_size=16",
        "model.num_hidden_layers=1", "model.num_attention_heads=2", "model.intermediate_size=32",
        "optim.steps=200", "optim.batch_size=32", "optim.logging_steps=100", "optim.save_steps=1000",
        "eval.samples=50", f"output_dir={tmp_path}"])
    summary = train(recipe)
    report = summary["heldout"]  # the held-out evaluation of the saved model
    assert report["n"] == 50 == sum(report["count_by_operand_lengths"].values())
    assert 0.0 <= report["exact_match"] <= 1.0 and np.isfinite(summary["train_loss"])
    heldout = recipe_held_out(recipe, NumberFormat(task="larger"), 50, seed=0)
    assert heldout.task == "larger" and all("^" in t for t in heldout.to_text())

    model, tokenizer = hf_arith.load(str(tmp_path / "final"))
    assert tokenizer.arith_format.task == "larger"
    problems = ["12^345", "9^8", "4000^4001"]
    answers = hf_arith.solve(model, tokenizer, problems)
    assert len(answers) == 3
    for answer in answers:
        assert answer is None or answer.isdigit()
    solver = pipeline("arithmetic", model=model, tokenizer=tokenizer)
    assert [out["answer"] for out in solver(problems)] == answers
