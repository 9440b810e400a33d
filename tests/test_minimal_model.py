"""The minimal family: registration, unique parameter counting, decoding paths, remote code."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from remote_code import BLOCK_HF_ARITH
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

import hf_arith
from hf_arith import ArithTokenizer, MinimalConfig, MinimalForCausalLM, NumberFormat
from hf_arith.runtime.decoding import greedy_decode

# The 58-parameter design: an experiment, whose recipe lives with the benchmarks.
TINY_RECIPE = str(Path(__file__).resolve().parents[1] / "bench" / "recipes" / "minimal-add10-tiny.yaml")

FMT10 = NumberFormat(operand_width=10, answer_width=11, end_token=False)


def make(seed=0, fmt=FMT10, **overrides):
    """A minimal-family model with spread-out random weights and its tokenizer."""
    torch.manual_seed(seed)
    tok = ArithTokenizer(number_format=fmt, model_max_length=64)
    kwargs = dict(vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                  answer_start_token_id=tok.convert_tokens_to_ids("="))
    kwargs.update(overrides)
    model = MinimalForCausalLM(MinimalConfig(**kwargs)).eval()
    # Spread the weights so greedy outputs differ between rows and steps (not all one token).
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.7)
    return model, tok


def test_auto_classes_resolve_the_minimal_family(tmp_path):
    model, tok = make()
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    assert isinstance(AutoConfig.from_pretrained(tmp_path), MinimalConfig)
    assert type(AutoModelForCausalLM.from_pretrained(tmp_path)) is MinimalForCausalLM
    assert type(AutoModel.from_pretrained(tmp_path)).__name__ == "MinimalModel"
    assert type(AutoTokenizer.from_pretrained(tmp_path)) is ArithTokenizer
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    for (name, a), b in zip(model.state_dict().items(), reloaded.state_dict().values()):
        assert torch.equal(a, b), name


def count(module):
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("flags", [
    {},
    {"tie_kv": True},
    {"tie_qo": True},
    {"tie_kv": True, "tie_qo": True},
    {"projection_rank": 2},
    {"digit_embedding": "circular_arc"},
    {"tie_word_embeddings": False},
    {"position_embedding": "learned", "norm_type": "layernorm", "mlp_type": "plain", "hidden_act": "gelu"},
])
def test_num_parameters_counts_unique_weights(flags):
    model, _ = make(**flags)
    c = model.config
    d, h, kv, hd, f, v = c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.intermediate_size, c.vocab_size
    r = c.projection_rank

    def proj(i, o):
        return r * (i + o) if 0 < r < min(i, o) else i * o

    attn = proj(d, h * hd) + proj(d, kv * hd)
    attn += 0 if c.tie_kv else proj(d, kv * hd)
    attn += 0 if c.tie_qo else proj(h * hd, d)
    mlp = proj(d, f) * (3 if c.mlp_type == "gated" else 2)
    norm = {"rmsnorm": d, "layernorm": 2 * d, "none": 0}[c.norm_type]
    norms = 2 * norm + (norm if c.final_norm else 0) + (2 * norm // d * hd if c.qk_norm else 0)
    emb = (v - 10) * d + 3 if c.digit_embedding == "circular_arc" else v * d
    head = 0 if c.tie_word_embeddings else v * d
    pos = c.max_position_embeddings * d if c.position_embedding == "learned" else 0
    expected = emb + attn + mlp + norms + head + pos
    assert model.num_parameters() == expected == count(model)


def test_tied_kv_and_qo_share_storage_not_copies():
    model, _ = make(tie_kv=True, tie_qo=True)
    attn = model.model.layers[0].self_attn
    assert attn.v_proj is None and attn.o_proj is None
    assert model.num_parameters() < make()[0].num_parameters()


def test_circular_arc_embedding_puts_digits_on_an_arc():
    model, _ = make(digit_embedding="circular_arc")
    table = model.model.embed_tokens.table().detach()
    radius = model.model.embed_tokens.arc_params[0].abs().item()
    norms = table[:10, :2].norm(dim=-1)
    assert torch.allclose(norms, torch.full((10,), radius), atol=1e-5)
    assert torch.count_nonzero(table[:10, 2:]) == 0


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_greedy_decoder_matches_generate_and_cache_matches_no_cache(attn):
    model, tok = make(seed=1)
    model.set_attn_implementation(attn)
    enc = tok(["12+34", "9999999999+1", "5+5", "123456+654321"], padding=True, return_tensors="pt")
    reference = model.generate(**enc, max_new_tokens=11, do_sample=False)[:, enc.input_ids.shape[1]:]
    stop = dict(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)  # as generate() does
    cached = greedy_decode(model, enc.input_ids, enc.attention_mask, 11, use_cache=True, **stop)
    uncached = greedy_decode(model, enc.input_ids, enc.attention_mask, 11, use_cache=False, **stop)
    assert torch.equal(cached, reference)
    assert torch.equal(uncached, reference)
    assert len(set(map(tuple, reference.tolist()))) > 1  # the rows really differ


def test_eager_and_sdpa_agree():
    model, tok = make(seed=2)
    enc = tok(["1+2", "999+1"], padding=True, return_tensors="pt")
    model.set_attn_implementation("eager")
    eager = model(**enc).logits
    model.set_attn_implementation("sdpa")
    sdpa = model(**enc).logits
    assert torch.allclose(eager, sdpa, atol=1e-5)


def test_left_padding_does_not_change_a_rows_output():
    fmt = NumberFormat(end_token=True)  # unpadded operands: prompts differ in length
    tok = ArithTokenizer(number_format=fmt)
    torch.manual_seed(0)
    model = MinimalForCausalLM(MinimalConfig(vocab_size=len(tok), eos_token_id=tok.eos_token_id)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.7)
    alone = tok(["7+8"], return_tensors="pt")
    batch = tok(["7+8", "123456+7"], padding=True, return_tensors="pt")
    a = greedy_decode(model, alone.input_ids, alone.attention_mask, 6)
    b = greedy_decode(model, batch.input_ids, batch.attention_mask, 6)
    assert batch.attention_mask[0, 0] == 0  # row 0 really is left-padded
    assert torch.equal(a[0], b[0])


def test_solve_returns_plain_decimal_or_none():
    model, tok = make(seed=3)
    answers = hf_arith.solve(model, tok, ["1234567890+9876543210", "0+0"])
    assert len(answers) == 2
    assert all(a is None or a.isdigit() for a in answers)


def test_context_overflow_is_a_clear_error():
    model, _ = make(max_position_embeddings=16)
    ids = torch.zeros((1, 20), dtype=torch.long)
    with pytest.raises(ValueError, match="longer than this model's context"):
        model(input_ids=ids)


@pytest.mark.parametrize("bad, field", [
    ({"hidden_size": 0}, "hidden_size"),
    ({"num_attention_heads": 3, "num_key_value_heads": 2}, "num_key_value_heads"),
    ({"norm_type": "batchnorm"}, "norm_type"),
    ({"position_embedding": "alibi"}, "position_embedding"),
    ({"projection_rank": -1}, "projection_rank"),
    ({"head_dim": 3}, "rope"),
    ({"digit_logits_only": "yes"}, "digit_logits_only"),
])
def test_malformed_config_names_the_field(bad, field):
    with pytest.raises(ValueError, match=field):
        MinimalConfig(**bad)


def test_bundled_minimal_add10_solves_the_issue_example():
    path = hf_arith.bundled_path("minimal-add10")
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    assert model.num_parameters() <= 777
    assert hf_arith.solve(model, tok, ["1234567890+9876543210", "0+0"]) == ["11111111100", "0"]


def test_unknown_bundled_name_lists_the_known_ones():
    with pytest.raises(FileNotFoundError, match="minimal-add10"):
        hf_arith.bundled_path("nope")


# The split residual of the minimal-add10-split preset (MicroAdder's layout).
SPLIT = dict(hidden_size=5, token_dims=2, num_attention_heads=1, num_key_value_heads=1, head_dim=4,
             intermediate_size=2, hidden_act="gelu", mlp_type="plain", norm_sharing="all", qk_norm=False,
             position_embedding="spiral", tie_qk_rotation=True, o_proj_rank=1, tie_down_head=True,
             digit_embedding="circular_arc", special_embedding="arc", digit_logits_only=True)


@pytest.mark.parametrize("flags", [{}, SPLIT], ids=["rope", "split"])
def test_remote_code_loads_without_hf_arith(tmp_path, flags):
    model, tok = make(seed=4, **flags)
    folder = tmp_path / "hub_folder"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    assert "AutoModelForCausalLM" in config["auto_map"]
    for name in ("modeling_minimal.py", "configuration_minimal.py", "tokenization_arith.py", "formatting.py"):
        source = (folder / name).read_text()
        assert "hf_arith" not in source.replace("hf_arith_minimal", ""), name
    enc = tok(["1234567890+9876543210", "7+5"], padding=True, return_tensors="pt")
    expected = greedy_decode(model, enc.input_ids, enc.attention_mask, 11,
                             eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id).tolist()
    script = BLOCK_HF_ARITH + textwrap.dedent(f"""
        import json, torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        model = AutoModelForCausalLM.from_pretrained({str(folder)!r}, trust_remote_code=True).eval()
        tok = AutoTokenizer.from_pretrained({str(folder)!r}, trust_remote_code=True)
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        enc = tok(["1234567890+9876543210", "7+5"], padding=True, return_tensors="pt")
        out = model.generate(**enc, max_new_tokens=11, do_sample=False)[:, enc.input_ids.shape[1]:]
        print(json.dumps({{"ids": out.tolist(), "answers": tok.decode_answers(out), "params": model.num_parameters()}}))
    """)
    env = {**__import__("os").environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home")}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["ids"] == expected
    assert loaded["params"] == model.num_parameters()
    assert loaded["answers"] == tok.decode_answers(torch.tensor(expected))


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_no_mask_equals_an_all_ones_mask(attn):
    """Training batches of fixed-width formats carry no mask; the model must read that as causal."""
    model, tok = make(seed=5)
    model.set_attn_implementation(attn)
    enc = tok(["12+34", "9999999999+1"], padding=True, return_tensors="pt")
    assert enc.attention_mask.all()
    with_mask = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask).logits
    without = model(input_ids=enc.input_ids).logits
    assert torch.allclose(with_mask, without, atol=1e-5)
    # and causal: changing the last token leaves every earlier position's logits alone
    changed = enc.input_ids.clone()
    changed[:, -1] = 0
    assert torch.allclose(model(input_ids=changed).logits[:, :-1], without[:, :-1], atol=1e-6)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("keep", [1, 2])
def test_prompt_pass_with_logits_to_keep_computes_the_same_logits_and_cache(attn, layers, padded, keep):
    """The last layer skips the outputs of positions whose logits are not kept; nothing else changes."""
    from transformers import DynamicCache

    fmt = NumberFormat(end_token=True) if padded else FMT10  # unpadded operands: prompts differ in length
    tok = ArithTokenizer(number_format=fmt)
    torch.manual_seed(layers)
    model = MinimalForCausalLM(MinimalConfig(vocab_size=len(tok), eos_token_id=tok.eos_token_id,
                                             pad_token_id=tok.pad_token_id, num_hidden_layers=layers)).eval()
    model.set_attn_implementation(attn)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.7)
    enc = tok(["7+8", "123456+7", "99+1"], padding=True, return_tensors="pt")
    assert bool((enc.attention_mask == 0).any()) == padded
    full_cache, kept_cache = DynamicCache(), DynamicCache()
    with torch.no_grad():
        full = model(**enc, past_key_values=full_cache, use_cache=True).logits
        kept = model(**enc, past_key_values=kept_cache, use_cache=True, logits_to_keep=keep).logits
    assert kept.shape[1] == keep
    assert torch.allclose(kept, full[:, -keep:], atol=1e-5)
    if keep == 1:  # the last layer really computed one position (more need a mask, which sdpa may drop)
        assert model.model(**enc, keep_last=keep).last_hidden_state.shape[1] == 1
    for a, b in zip(full_cache.layers, kept_cache.layers, strict=True):
        assert torch.allclose(a.keys, b.keys, atol=1e-6) and torch.allclose(a.values, b.values, atol=1e-6)
    # Attention maps (eager: sdpa returns none) are asked for every position, so nothing is skipped then.
    model.set_attn_implementation("eager")
    with torch.no_grad():
        maps = model(**enc, logits_to_keep=keep, output_attentions=True).attentions
    assert maps[-1].shape[-2] == enc.input_ids.shape[1]


def test_ids_outside_the_vocabulary_or_the_rotary_table_are_one_line_errors():
    model, _ = make(position_embedding="rope")
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="input_ids must lie in"):
        model(input_ids=torch.tensor([[1, 99]]))
    limit = model.config.max_position_embeddings
    with pytest.raises(ValueError, match=rf"position_ids must lie in \[0, {limit}\)"):
        model(input_ids=ids, position_ids=torch.tensor([[0, 1, limit]]))
    # The tabulated rotary angles are the ones computed on the fly.
    rotary = model.model.rotary_emb
    positions = torch.tensor([[0, 5, limit - 1]])
    inv_freq = 1.0 / (rotary.theta ** (torch.arange(0, rotary.dim, 2, dtype=torch.float) / rotary.dim))
    angles = positions[..., None].float() * inv_freq
    cos, sin = rotary(torch.zeros(1), positions)
    assert torch.equal(cos, torch.cat([angles, angles], -1).cos()) and torch.equal(sin, torch.cat([angles, angles], -1).sin())


@pytest.mark.parametrize("flags", [{}, SPLIT], ids=["rope", "split"])
def test_a_compiled_training_step_is_one_graph(flags):
    # The id and position checks read tensor values; under torch.compile they would split the
    # training step's graph in pieces, each a separate compiled call per step.
    model, tok = make(**flags)
    ids = torch.randint(0, 10, (2, 35))
    ids[:, 10], ids[:, 21] = tok.convert_tokens_to_ids("+"), tok.convert_tokens_to_ids("=")
    explained = torch._dynamo.explain(lambda x: model(input_ids=x, labels=x).loss)(ids)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


def test_digit_logits_only_scores_digits_and_never_writes_another_token():
    model, tok = make(seed=4, digit_embedding="circular_arc", special_embedding="arc")
    masked, _ = make(seed=4, digit_embedding="circular_arc", special_embedding="arc", digit_logits_only=True)
    masked.load_state_dict(model.state_dict())
    ids = tok(["123+456", "9999999999+1"])["input_ids"]
    full, digits_only = model(torch.tensor(ids)).logits, masked(torch.tensor(ids)).logits
    torch.testing.assert_close(digits_only[..., :10], full[..., :10])  # the digits' scores are the model's own
    assert (digits_only[..., 10:] == torch.finfo(full.dtype).min).all()
    assert (full[..., 10:].max(-1).values > full[..., :10].max(-1).values).any()  # unmasked, a delimiter can win
    labels = torch.full_like(torch.tensor(ids), -100)
    labels[:, -3:] = 7
    loss = masked(torch.tensor(ids), labels=labels).loss
    assert torch.isfinite(loss)
    out = greedy_decode(masked, torch.tensor(ids), None, 11, eos_token_id=tok.eos_token_id)
    assert (out < 10).all()  # only digits are written
    assert masked.num_parameters() == model.num_parameters()  # a fixed mask, no parameters


def test_digit_logits_only_needs_a_digits_only_format():
    from hf_arith.training.recipe import RecipeError, check_recipe, load_recipe

    check_recipe(load_recipe(TINY_RECIPE, ["model.digit_logits_only=true"]))
    for override in ("format.end_token=true", "format.answer_width=0"):
        with pytest.raises(RecipeError, match="model.digit_logits_only needs answers of digits only"):
            check_recipe(load_recipe(TINY_RECIPE, ["model.digit_logits_only=true", override]))
