"""Generation defaults: a saved generation config has room for the model's longest answer, so plain
`model.generate(**enc)` writes whole answers; an answer cut off before its end token reads as None."""

import json
from pathlib import Path

import pytest
import torch

import hf_arith
from hf_arith import ArithTokenizer, MinimalConfig, MinimalForCausalLM, NumberFormat
from hf_arith.data.problems import reference_answer
from hf_arith.runtime.decoding import greedy_decode
from hf_arith.runtime.limits import model_limits
from hf_arith.runtime.loading import load_checkpoint
from hf_arith.runtime.saving import save_checkpoint


def plain_generate(model, tok, problem: str, **kwargs) -> torch.Tensor:
    """The new tokens of `model.generate` with nothing but the saved generation config (and `kwargs`)."""
    enc = tok([problem], return_tensors="pt")
    with torch.no_grad():
        return model.generate(**enc, **kwargs)[:, enc.input_ids.shape[1]:]


@pytest.mark.parametrize("name", hf_arith.bundled_models())
def test_bundled_generation_configs_cover_the_longest_answer(name):
    model, tok = load_checkpoint(name)
    limits = model_limits(model, tok)
    config = json.loads((Path(hf_arith.bundled_path(name)) / "generation_config.json").read_text())
    assert config["max_new_tokens"] == limits.max_answer_tokens == tok.answer_budget([limits.longest_problem()])
    assert config["do_sample"] is False
    assert (config["eos_token_id"], config["pad_token_id"]) == (tok.eos_token_id, tok.pad_token_id)
    assert model.generation_config.max_new_tokens == limits.max_answer_tokens


@pytest.mark.parametrize("name", hf_arith.bundled_models())
def test_plain_generate_writes_the_whole_answer_to_the_longest_problem(name):
    """On the longest problem the model accepts, generate() with the saved config writes every token
    the shared decoder writes with the full answer budget, end token included."""
    model, tok = load_checkpoint(name)
    limits = model_limits(model, tok)
    problem = limits.longest_problem()
    new = plain_generate(model, tok, problem)
    enc = tok([problem], return_tensors="pt")
    end = tok.eos_token_id if tok.arith_format.end_token else None
    full = greedy_decode(model, enc.input_ids, enc.attention_mask, limits.max_answer_tokens, eos_token_id=end,
                         pad_token_id=tok.pad_token_id)
    assert new.tolist() == full.tolist()
    # With the problem, written working is held to its shape (as many lines as b has digits), as solve holds it.
    assert tok.decode_answers(new, [problem]) == [hf_arith.solve(model, tok, problem)]


@pytest.mark.parametrize("name", hf_arith.bundled_models())
def test_plain_generate_answers_the_longest_problem_it_was_trained_on(name):
    """The right answer from generate() alone, on the longest problem the model accepts when it
    answers that one right (the fixed-width minimal adders: 10 digits, all they accept), else on
    the longest problem of its training range: the abacus and looped models accept 38-digit operands
    (their abacus range) but, trained on 1-10 (or 1-20) digits, get the all-nines 38-digit sum wrong."""
    model, tok = load_checkpoint(name)
    limits = model_limits(model, tok, hf_arith.bundled_path(name))
    trained = limits.training_range[1]
    fixed_width = tok.arith_format.operand_width > 0
    assert limits.max_digits == trained if fixed_width else limits.max_digits > trained
    digits = limits.max_digits if fixed_width else trained
    problem = limits.worst_case(digits).to_text()[0]
    assert tok.decode_answers(plain_generate(model, tok, problem)) == [reference_answer(problem, tok.arith_format)]


@pytest.mark.parametrize("name", ["abacus-gpt2-add", "looped-add-window"])
def test_a_thirty_digit_sum_is_whole_and_a_cut_off_one_is_none(name):
    """The issue's case: 30-digit all-nines sums stopped at 20 new tokens read as '999...98'."""
    model, tok = load_checkpoint(name)
    problem = "9" * 30 + "+" + "9" * 30
    assert tok.decode_answers(plain_generate(model, tok, problem)) == [reference_answer(problem, tok.arith_format)]
    cut = plain_generate(model, tok, problem, max_new_tokens=20)
    assert cut.shape[1] == 20 and tok.eos_token_id not in cut.tolist()[0]
    assert tok.decode_answers(cut) == [None]


def test_save_checkpoint_sets_max_new_tokens_from_the_limits(tmp_path):
    """A model whose limit is its context: 9-digit products fit 40 positions, 10-digit ones do not."""
    tok = ArithTokenizer(number_format=NumberFormat(task="mul"))
    model = MinimalForCausalLM(MinimalConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id,
                                             eos_token_id=tok.eos_token_id, max_position_embeddings=40))
    limits = model_limits(model, tok)
    assert limits.max_digits == 9 and limits.max_answer_tokens == 19  # 18 digits and <eos>
    save_checkpoint(model, tok, tmp_path)
    config = json.loads((tmp_path / "generation_config.json").read_text())
    assert config["max_new_tokens"] == 19 and config["do_sample"] is False
    assert config["eos_token_id"] == tok.eos_token_id


def test_sorting_budgets_for_the_most_items_the_format_takes():
    tok = ArithTokenizer(number_format=NumberFormat(task="sort", max_items=7))
    model = MinimalForCausalLM(MinimalConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id,
                                             eos_token_id=tok.eos_token_id, max_position_embeddings=64))
    limits = model_limits(model, tok)
    assert limits.max_answer_tokens == 8  # seven labels and <eos>
    assert limits.max_answer_tokens == tok.answer_budget([",".join(f"{c}:1" for c in "abcdefg")])


def test_a_training_run_saves_the_generation_defaults(add10):
    config = json.loads((add10 / "generation_config.json").read_text())
    assert config["max_new_tokens"] == 11  # minimal-add10's fixed 11-digit answers, no end token
    assert json.loads((add10 / "config.json").read_text())["custom_pipelines"]["arithmetic"]["type"] == "text"
    assert (add10 / "pipeline_arithmetic.py").is_file()
