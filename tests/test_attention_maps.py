"""Attention maps: the tokens are the model's own format, the weights are real attention
(causal, rows summing to 1, uniform where the queries are zeroed by hand), and the CLI writes
the PNG grid."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from test_grid import FAMILY_PRESETS, random_model
from test_plots import assert_png

from hf_arith import solve
from hf_arith.cli import main
from hf_arith.data.formatting import OPERATORS, FormatError
from hf_arith.evaluation.attention_maps import attention_maps, map_labels, plot_attention
from hf_arith.evaluation.plots import attention_figsize, save_figure
from hf_arith.runtime.loading import load_checkpoint


@pytest.fixture(scope="module")
def tiny(add10):
    return load_checkpoint(add10)


def test_tokens_are_the_prompt_and_the_models_answer(tiny):
    model, tok = tiny
    tokens, maps = attention_maps(model, tok, "101+1002")
    prompt = tok.format_problem("101+1002")
    assert "".join(tokens[: len(prompt)]) == prompt
    answer = tokens[len(prompt):]
    assert len(answer) == tok.arith_format.answer_width  # this format has no end token
    assert tok.decode_answers([[tok.arith_format.token_id(t) for t in answer]]) == [solve(model, tok, "101+1002")]
    assert len(maps) == model.config.num_hidden_layers
    for weights in maps:
        assert weights.shape == (model.config.num_attention_heads, len(tokens), len(tokens))
        assert np.allclose(weights.sum(-1), 1.0, atol=1e-5)
        assert np.allclose(np.triu(weights, k=1), 0.0)  # causal: no query sees a later key
    assert model.config._attn_implementation == "sdpa"  # switched to eager only while reading the maps


@pytest.mark.parametrize("family", sorted(FAMILY_PRESETS))
def test_every_family_gives_causal_maps_of_every_layer(family):
    model, tok = random_model(FAMILY_PRESETS[family])
    task = tok.arith_format.task
    problem = "a:12,b:3" if task == "sort" else f"345{OPERATORS[task]}12"
    tokens, maps = attention_maps(model, tok, problem)
    prompt = tok.format_problem(problem)
    assert "".join(tokens[: len(prompt)]) == prompt  # the model's own format, not the plain text
    # A looped model runs its layers once per recurrence and returns the maps pass by pass.
    passes = getattr(model.config, "num_recurrences", 1)
    assert len(maps) == passes * model.config.num_hidden_layers
    for weights in maps:
        assert weights.shape == (model.config.num_attention_heads, len(tokens), len(tokens))
        assert np.allclose(weights.sum(-1), 1.0, atol=1e-5)
        assert np.allclose(np.triu(weights, k=1), 0.0)
    labels = map_labels(model, len(maps))
    assert len(set(labels)) == len(maps)
    assert labels[-1] == (f"pass {passes}, layer {model.config.num_hidden_layers}" if passes > 1
                          else f"layer {model.config.num_hidden_layers}")


def test_zero_queries_attend_uniformly_to_the_past(tiny):
    model, tok = tiny
    flat = copy.deepcopy(model)
    with torch.no_grad():
        for layer in flat.model.layers:
            layer.self_attn.q_proj.weight.zero_()  # every score is 0, so softmax is uniform over the past
    tokens, maps = attention_maps(flat, tok, "12+345")
    n = len(tokens)
    expected = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    for weights in maps:
        assert np.allclose(weights, expected[None], atol=1e-6)


def test_a_problem_the_format_cannot_express_is_a_format_error(tiny):
    model, tok = tiny
    with pytest.raises(FormatError, match="more than 10"):
        attention_maps(model, tok, "12345678901+1")


def test_plot_of_real_maps(tiny, tmp_path):
    model, tok = tiny
    tokens, maps = attention_maps(model, tok, "7+8")
    path = save_figure(plot_attention(tokens, maps), tmp_path / "a.png")
    assert_png(path, attention_figsize(len(maps), maps[0].shape[0], len(tokens)))


def test_cli_attention_writes_the_png(add10, tmp_path, capsys):
    target = tmp_path / "att.png"
    code = main(["attention", str(add10), "101+1002", "--output", str(target)])
    out, err = capsys.readouterr()
    assert code == 0, err
    model, _ = load_checkpoint(add10)
    assert "1 0 1 0 0 0 0 0 0 0 + 2 0 0 1 0 0 0 0 0 0 =" in out
    assert_png(target, attention_figsize(model.config.num_hidden_layers, model.config.num_attention_heads, 33))


@pytest.mark.parametrize(("problem", "words"), [("1+2+3", ["'1+2+3'"]), ("12345678901+1", ["more than 10"]),
                                                ("-5+3", ["negative"])])
def test_cli_attention_bad_problem(add10, tmp_path, capsys, problem, words):
    code = main(["attention", str(add10), problem, "--output", str(tmp_path / "a.png")])
    _, err = capsys.readouterr()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("hf-arith: error: ")
    assert all(w in err for w in words)


def test_cli_attention_unwritable_output(add10, tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    code = main(["attention", str(add10), "1+2", "--output", str(tmp_path / "file" / "a.png")])
    _, err = capsys.readouterr()
    assert code == 2 and "--output" in err and "cannot write" in err and len(err.splitlines()) == 1
