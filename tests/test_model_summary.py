"""Model summary: parameter counts with and without tying, and multiply-adds checked against a
count by hand from the minimal family's shapes."""

from __future__ import annotations

import json

import pytest
from test_grid import FAMILY_PRESETS, random_model
from transformers import GPT2Config, GPT2LMHeadModel

from hf_arith.cli import main
from hf_arith.evaluation.model_summary import (
    model_summary,
    multiply_adds,
    parameter_counts,
    parameter_table,
    tied_groups,
)
from hf_arith.runtime.loading import load_checkpoint


@pytest.fixture(scope="module")
def tiny(add10):
    return load_checkpoint(add10)


def test_minimal_counts_its_tied_head_once(tiny):
    model, _ = tiny
    counts = parameter_counts(model)
    assert counts["unique"] == model.num_parameters()
    embedding = sum(p.numel() for p in model.get_input_embeddings().parameters())
    assert counts["total"] == counts["unique"] + embedding  # the head reads the embedding table
    rows = parameter_table(model)
    assert sum(r["parameters"] - r["tied"] for r in rows) == counts["unique"]
    assert rows[-1]["module"] == "(output head)" and rows[-1]["tied"] == embedding
    assert tied_groups(model) == [["(output head)", "model.embed_tokens"]]


def test_registered_tying_is_found_by_name():
    model = GPT2LMHeadModel(GPT2Config(vocab_size=20, n_embd=8, n_layer=1, n_head=2, n_positions=16))
    counts = parameter_counts(model)
    assert counts["unique"] == model.num_parameters()
    assert counts["total"] - counts["unique"] == 20 * 8
    assert ["lm_head.weight", "transformer.wte.weight"] in tied_groups(model)


def expected_macs(config, prompt: int, generated: int) -> tuple[int, int]:
    """Matrix multiply-adds of the minimal family by hand: (prompt pass, all decoding steps)."""
    d, f, h, kv, hd, v = (config.hidden_size, config.intermediate_size, config.num_attention_heads,
                          config.num_key_value_heads, config.head_dim, config.vocab_size)
    if config.digit_logits_only:  # the head scores the digit rows only
        v = config.num_digit_tokens
    keys_values = 2 * d * kv * hd  # k, v
    per_token = keys_values + d * h * hd + h * hd * d + 3 * d * f  # q, o, gate, up, down
    layers = config.num_hidden_layers

    def attention(queries: int, keys: int) -> int:  # scores and mixing, every head (K/V repeated)
        return 2 * h * hd * queries * keys

    # The last layer of the prompt pass computes keys and values everywhere but outputs only for the
    # last position (logits_to_keep=1), then the logits of that position.
    prefill = ((layers - 1) * (prompt * per_token + attention(prompt, prompt))
               + (prompt - 1) * keys_values + per_token + attention(1, prompt) + d * v)
    steps = sum(layers * (per_token + attention(1, prompt + t)) + d * v for t in range(1, generated))
    return prefill, steps


def test_multiply_adds_match_a_count_by_hand(tiny):
    model, tok = tiny
    c = multiply_adds(model, tok, "9999999999+9999999999")
    assert c["prompt_tokens"] == 22 and c["generated_tokens"] == 11
    prefill, steps = expected_macs(model.config, 22, 11)
    assert c["prefill_macs"] == prefill
    assert c["total_macs"] == prefill + steps
    assert c["macs_per_decoding_step"] == pytest.approx(steps / 10)
    assert c["macs_per_generated_token"] == pytest.approx((prefill + steps) / 11)
    assert model.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("family", sorted(FAMILY_PRESETS))
def test_every_family_is_summarised(family):
    model, tok = random_model(FAMILY_PRESETS[family])
    problem = "a:1,b:22" if tok.arith_format.task == "sort" else "123+45"
    summary = model_summary(model, tok, problem)
    counts = summary["parameters"]
    assert counts["unique"] == model.num_parameters()
    assert sum(r["parameters"] - r["tied"] for r in summary["modules"]) == counts["unique"]
    assert counts["total"] - counts["unique"] == sum(r["tied"] for r in summary["modules"])
    c = summary["compute"]
    assert 0 < c["prefill_macs"] <= c["total_macs"] and c["macs_per_generated_token"] > 0


def test_looped_multiply_adds_grow_by_one_pass_per_recurrence():
    model, tok = random_model(FAMILY_PRESETS["looped"])
    # Embedding, injection and head cost the same at any depth; each recurrence adds one pass of the blocks.
    prefill = [multiply_adds(model, tok, "123+45", {"num_recurrences": n})["prefill_macs"] for n in (1, 2, 3)]
    assert prefill[2] - prefill[1] == prefill[1] - prefill[0] > 0


def test_summary_command(add10, tmp_path, capsys):
    target = tmp_path / "s.json"
    code = main(["summary", str(add10), "--json", str(target)])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(target.read_text())
    model, _ = load_checkpoint(add10)
    assert data["parameters"]["unique"] == model.num_parameters()
    assert data["compute"]["problem"] == "9999999999+9999999999"
    assert f"{model.num_parameters():,} unique" in out and "per generated token" in out
    assert json.dumps(model_summary(model, load_checkpoint(add10)[1], data["compute"]["problem"])) == json.dumps(data)


@pytest.mark.parametrize(("problem", "words"), [("7-2", ["'7-2'", "subtraction"]), ("12345678901+1", ["more than 10"])])
def test_summary_command_problem_the_format_cannot_express(add10, capsys, problem, words):
    code = main(["summary", str(add10), "--problem", problem])
    _, err = capsys.readouterr()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("hf-arith: error: ")
    assert all(w in err for w in words)


def test_summary_command_bad_json_folder(add10, tmp_path, capsys):
    code = main(["summary", str(add10), "--json", str(tmp_path / "missing" / "s.json")])
    _, err = capsys.readouterr()
    assert code == 2 and "--json" in err and len(err.splitlines()) == 1
