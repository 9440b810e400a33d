"""The looped family: shared abacus positions, recurrence, input injection, KV cache, progressive
loss, remote code and the presets through the Trainer."""

import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from remote_code import run_remote_code
from test_abacus_model import share_of_weights_changed
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, DynamicCache, Trainer, TrainingArguments

import hf_arith
from hf_arith import (
    AbacusGPT2Config,
    AbacusGPT2ForCausalLM,
    ArithTokenizer,
    LoopedConfig,
    LoopedForCausalLM,
    NumberFormat,
)
from hf_arith.families import family_classes
from hf_arith.models import abacus_positions, modeling_abacus_gpt2, modeling_looped
from hf_arith.models.configuration_looped import MAX_RECURRENCES
from hf_arith.models.modeling_looped import LoopedModel
from hf_arith.runtime.decoding import greedy_decode
from hf_arith.runtime.saving import save_checkpoint

REVERSED = NumberFormat(task="add", reverse_operands=True, reverse_answer=True, end_token=True)
PROBLEMS = ["1342+879", "5+12345", "0+0", "99999999+1"]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models run fastest on one thread (and far faster than on cores shared with other jobs)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def make(seed=2, spread=True, **overrides):
    torch.manual_seed(seed)
    tok = ArithTokenizer(number_format=REVERSED, model_max_length=256)
    kwargs = dict(vocab_size=len(tok), num_digit_tokens=10, hidden_size=32, num_hidden_layers=2,
                  num_attention_heads=4, num_recurrences=3, abacus_max_digits=40, pad_token_id=tok.pad_token_id,
                  eos_token_id=tok.eos_token_id, tie_word_embeddings=False)
    kwargs.update(overrides)
    model = LoopedForCausalLM(LoopedConfig(**kwargs)).eval()
    if spread:
        # Spread the weights (norms keep their identity init) so that greedy outputs differ
        # between rows, steps and loop counts: a random small-init model repeats one token.
        with torch.no_grad():
            for name, p in model.named_parameters():
                if ".ln_" not in name:
                    p.normal_(0, 0.5)
    return model, tok


def labelled(tok, texts=PROBLEMS):
    enc = tok(texts, padding=True, padding_side="right", return_tensors="pt")
    return enc, enc.input_ids.masked_fill(enc.attention_mask == 0, -100)


# -- shared positions, shapes, recurrence --------------------------------------------------------
def test_positions_are_the_abacus_familys_one_function():
    assert modeling_abacus_gpt2.abacus_position_ids is abacus_positions.abacus_position_ids
    assert LoopedModel.embed is modeling_abacus_gpt2.AbacusGPT2Model.embed  # the same embedding code
    assert LoopedForCausalLM.position_ids_from_input_ids is AbacusGPT2ForCausalLM.position_ids_from_input_ids
    assert issubclass(LoopedConfig, AbacusGPT2Config)
    for module in (modeling_looped, sys.modules[LoopedConfig.__module__]):
        source = open(module.__file__).read()
        assert "def abacus_position_ids" not in source and "cummax" not in source  # no copy
    model, tok = make(abacus_align_answer=True, answer_start_token_id=tok_id("="))
    enc = tok(PROBLEMS, padding=True, return_tensors="pt")
    assert torch.equal(model.position_ids_from_input_ids(enc.input_ids),
                       abacus_positions.abacus_position_ids(enc.input_ids, 10, tok_id("=")))


def tok_id(token):
    return ArithTokenizer(number_format=REVERSED).convert_tokens_to_ids(token)


@pytest.mark.parametrize("layers, loops", [(1, 16), (8, 2), (16, 1)])
def test_the_papers_shapes_build_and_reuse_their_layers(layers, loops):
    model, tok = make(spread=False, hidden_size=16, num_hidden_layers=layers, num_recurrences=loops,
                      intermediate_size=16)
    assert len(model.transformer.h) == layers
    model.set_attn_implementation("eager")  # the path that materialises attention weights
    calls = []
    hooks = [b.register_forward_hook(lambda m, a, o, i=i: calls.append(i)) for i, b in enumerate(model.transformer.h)]
    out = model(**tok(["12+345"], return_tensors="pt"), output_attentions=True)
    for hook in hooks:
        hook.remove()
    assert calls == list(range(layers)) * loops  # K blocks in order, N times
    assert len(out.attentions) == layers * loops and out.attentions[-1].shape == (1, 4, 7, 7)


def test_parameters_do_not_grow_with_recurrences():
    counts = {n: make(spread=False, num_recurrences=n)[0].num_parameters() for n in (1, 4, 16)}
    assert len(set(counts.values())) == 1
    # ... and equal those of an abacus GPT-2 with the same K layers: the loop adds no weights.
    model, _ = make(spread=False)
    plain = AbacusGPT2ForCausalLM(AbacusGPT2Config(**{k: v for k, v in model.config.to_dict().items()
                                                     if k in AbacusGPT2Config().to_dict()}))
    assert plain.num_parameters() == counts[1]
    # The init is the explicit small one, not PyTorch's default.
    assert 0.015 < float(model.transformer.wte.weight.detach().std()) < 0.025
    assert abs(float(model.transformer.h[0].attn.c_attn.weight.detach().std()) - 0.02) < 0.005


def test_recurrence_and_input_injection_follow_the_formula():
    model, tok = make(num_recurrences=3)
    enc = tok(["1342+879"], return_tensors="pt")
    t = model.transformer
    with torch.no_grad():
        e = t.embed(enc.input_ids, None, None, 0)[0]
        h = torch.zeros_like(e)
        for _ in range(3):  # h_r = blocks(h_{r-1} + e), h_0 = 0
            h = h + e
            for block in t.h:
                h = block(h, None)[0]
        expected = model.lm_head(t.ln_f(h))
        assert torch.allclose(model(**enc).logits, expected, atol=1e-5)
        # Without injection only the first pass sees the input: same at 1 loop, different after.
        plain, _ = make(input_injection=False)
        plain.load_state_dict(model.state_dict())
        assert torch.equal(plain(**enc, num_recurrences=1).logits, model(**enc, num_recurrences=1).logits)
        assert not torch.allclose(plain(**enc).logits, model(**enc).logits, atol=1e-3)
        # and the loop count matters
        assert not torch.allclose(model(**enc, num_recurrences=2).logits, model(**enc).logits, atol=1e-3)


@pytest.mark.parametrize("bad", [0, -1, MAX_RECURRENCES + 1, 2.5, True, "4"])
def test_bad_num_recurrences_is_a_one_line_error(bad):
    model, tok = make(spread=False)
    enc = tok(["12+3"], return_tensors="pt")
    message = f"num_recurrences must be an integer between 1 and {MAX_RECURRENCES}"
    with pytest.raises(ValueError, match=message):
        model(**enc, num_recurrences=bad)
    with pytest.raises(ValueError, match=message):
        model.generate(**enc, max_new_tokens=2, num_recurrences=bad)
    with pytest.raises(ValueError, match=message):
        greedy_decode(model, enc.input_ids, None, 2, model_kwargs={"num_recurrences": bad})
    with pytest.raises(ValueError, match=message):
        LoopedConfig(vocab_size=14, num_recurrences=bad)


@pytest.mark.parametrize("bad, field", [
    ({"progressive_loss_alpha": 1.5}, "progressive_loss_alpha"),
    ({"progressive_max_k": 0}, "progressive_max_k"),
    ({"num_future_tokens": 2}, "num_future_tokens"),
    ({"input_injection": "yes"}, "input_injection"),
    ({"hidden_size": 30, "num_attention_heads": 4}, "hidden_size"),  # the abacus family's checks apply
    ({"abacus_max_offset": -1}, "abacus_max_offset"),
    ({"abacus_align_answer": True}, "answer_start_token_id"),
    ({"abacus_window_layers": 1, "abacus_attention_window": 2}, "abacus_window_layers"),  # every loop reads it
])
def test_malformed_config_names_the_field(bad, field):
    with pytest.raises(ValueError, match=field):
        LoopedConfig(vocab_size=14, **bad)


# -- KV cache and generation --------------------------------------------------------------------
@pytest.mark.parametrize("attn, align, window", [("eager", False, 0), ("sdpa", True, 0), ("sdpa", True, 2)])
def test_cached_equals_uncached_and_decoder_equals_generate(attn, align, window):
    model, tok = make(abacus_align_answer=align, answer_start_token_id=tok_id("="), abacus_attention_window=window)
    model.set_attn_implementation(attn)
    enc = tok(PROBLEMS, padding=True, return_tensors="pt")
    assert not enc.attention_mask.all()  # left padding
    steps, outputs = 8, {}
    for n in (1, 2, 5):
        kw = dict(max_new_tokens=steps, do_sample=False, eos_token_id=None, pad_token_id=tok.pad_token_id,
                  num_recurrences=n)
        generated = model.generate(**enc, **kw)[:, enc.input_ids.shape[1]:]
        uncached_generate = model.generate(**enc, use_cache=False, **kw)[:, enc.input_ids.shape[1]:]
        cached = greedy_decode(model, enc.input_ids, enc.attention_mask, steps, pad_token_id=tok.pad_token_id,
                               model_kwargs={"num_recurrences": n})
        uncached = greedy_decode(model, enc.input_ids, enc.attention_mask, steps, pad_token_id=tok.pad_token_id,
                                 use_cache=False, model_kwargs={"num_recurrences": n})
        assert torch.equal(generated, cached) and torch.equal(cached, uncached)
        assert torch.equal(generated, uncached_generate)
        outputs[n] = cached
    assert len(set(torch.cat(list(outputs.values())).flatten().tolist())) > 2  # non-trivial outputs
    assert not torch.equal(outputs[1], outputs[5])  # the loop count reaches generation


def test_cache_holds_one_layer_per_recurrence_and_block_and_logits_match():
    model, tok = make()
    enc = tok(PROBLEMS, padding=True, return_tensors="pt")
    cache = DynamicCache()
    prompt = model(**enc, past_key_values=cache, use_cache=True, num_recurrences=4)
    assert len(cache.layers) == 4 * 2
    # Cached layers differ between passes: every (recurrence, block) pair has its own keys.
    assert not torch.allclose(cache.layers[0].keys, cache.layers[2].keys)
    nxt = prompt.logits[:, -1].argmax(-1, keepdim=True)
    full = torch.cat([enc.input_ids, nxt], 1)
    mask = torch.cat([enc.attention_mask, torch.ones_like(nxt)], 1)
    step = model(input_ids=nxt, attention_mask=mask, past_key_values=cache, use_cache=True, num_recurrences=4,
                 position_ids=model.position_ids_from_input_ids(full)[:, -1:])
    whole = model(input_ids=full, attention_mask=mask, num_recurrences=4)
    assert torch.allclose(step.logits[:, -1], whole.logits[:, -1], atol=1e-4)
    with pytest.raises(ValueError, match="decode with the loop count that filled it"):
        model(input_ids=nxt, attention_mask=mask, past_key_values=cache, num_recurrences=3,
              position_ids=model.position_ids_from_input_ids(full)[:, -1:])


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("problems", [PROBLEMS, PROBLEMS[:1]], ids=["padded", "unpadded"])
def test_prompt_pass_with_logits_to_keep_computes_the_same_logits_and_cache(attn, problems):
    """Only the last pass's last block skips the positions whose logits are not kept."""
    model, tok = make(seed=9)
    model.set_attn_implementation(attn)
    enc = tok(problems, padding=True, return_tensors="pt")
    full_cache, kept_cache = DynamicCache(), DynamicCache()
    with torch.no_grad():
        full = model(**enc, past_key_values=full_cache, use_cache=True).logits
        kept = model(**enc, past_key_values=kept_cache, use_cache=True, logits_to_keep=1).logits
        hidden = model.transformer(**enc, keep_last=1).last_hidden_state
    assert kept.shape[1] == 1 and hidden.shape[1] == 1
    assert torch.allclose(kept, full[:, -1:], atol=1e-5)
    assert len(kept_cache.layers) == len(full_cache.layers) == 6  # 3 passes x 2 blocks
    for a, b in zip(full_cache.layers, kept_cache.layers, strict=True):
        assert torch.allclose(a.keys, b.keys, atol=1e-6) and torch.allclose(a.values, b.values, atol=1e-6)


def test_left_padding_does_not_change_a_rows_output():
    model, tok = make(seed=3)
    alone = tok(["5+12345"], return_tensors="pt")
    batch = tok(["5+12345", "1234567890123+1"], padding=True, return_tensors="pt")
    for n in (2, 4):
        kw = dict(pad_token_id=tok.pad_token_id, model_kwargs={"num_recurrences": n})
        a = greedy_decode(model, alone.input_ids, alone.attention_mask, 8, **kw)
        b = greedy_decode(model, batch.input_ids, batch.attention_mask, 8, **kw)
        assert torch.equal(a[0], b[0])


# `solve` with a loop count against the model's own generate(): test_recurrences.py.


# -- progressive loss ----------------------------------------------------------------------------
def fixed_draw(monkeypatch, n, k):
    monkeypatch.setattr(LoopedForCausalLM, "draw_progressive_depths", lambda self, total: (n, k))


def test_progressive_draws_respect_k_at_most_half_and_the_total():
    model, _ = make(spread=False)
    torch.manual_seed(0)
    draws = [model.draw_progressive_depths(8) for _ in range(400)]
    assert {k for _, k in draws} == {1, 2, 3, 4} and {n for n, _ in draws} == set(range(8))
    assert all(n + k <= 8 for n, k in draws)
    assert model.draw_progressive_depths(1) == (0, 1)
    capped, _ = make(spread=False, progressive_max_k=2)
    assert {k for _, k in (capped.draw_progressive_depths(8) for _ in range(100))} == {1, 2}


def test_progressive_loss_runs_n_loops_without_gradient_then_k_with(monkeypatch):
    # No random abacus offset and no dropout, so training and eval forwards compute the same values.
    model, tok = make(num_recurrences=8, progressive_loss_alpha=0.0, abacus_max_offset=0)
    enc, labels = labelled(tok)
    n, k = 3, 2
    fixed_draw(monkeypatch, n, k)
    graph = []
    hook = model.transformer.h[0].register_forward_hook(lambda m, a, o: graph.append(o[0].requires_grad))
    model.train()
    out = model(**enc, labels=labels)
    hook.remove()
    assert graph == [False] * n + [True] * k  # the first n passes build no autograd graph
    assert out.progressive_depths == (n, k) and out.full_depth_loss is None
    # Value: the loss after n + k passes.
    model.eval()
    with torch.no_grad():
        assert torch.allclose(out.loss, model(**enc, labels=labels, num_recurrences=n + k).loss, atol=1e-5)
    # Gradient: a manual computation that detaches the state after n passes.
    model.train()
    model.zero_grad()
    out.loss.backward()
    got = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    t = model.transformer
    e = t.embed(enc.input_ids, enc.attention_mask, None, 0)[0]
    mask = t.prepare(enc.input_ids, enc.attention_mask, None, None, 8)[1]
    h = torch.zeros_like(e)
    for r in range(n + k):
        if r == n:
            h = h.detach()
        h = h + e
        for block in t.h:
            h = block(h, mask)[0]
    logits = model.lm_head(t.ln_f(h))
    F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1)).backward()
    expected = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    assert got.keys() == expected.keys() and "transformer.h.0.attn.c_attn.weight" in got
    for name in got:
        assert torch.allclose(got[name], expected[name], atol=1e-5), name


def test_progressive_loss_mixes_with_the_full_depth_loss(monkeypatch):
    model, tok = make(num_recurrences=6, progressive_loss_alpha=0.3, abacus_max_offset=0)
    enc, labels = labelled(tok)
    fixed_draw(monkeypatch, 2, 3)
    model.train()
    out = model(**enc, labels=labels)
    model.eval()
    with torch.no_grad():
        full = model(**enc, labels=labels).loss
        prog = model(**enc, labels=labels, num_recurrences=5).loss
    assert torch.allclose(out.full_depth_loss, full, atol=1e-5) and torch.allclose(out.progressive_loss, prog, atol=1e-5)
    assert torch.allclose(out.loss, 0.3 * full + 0.7 * prog, atol=1e-5)
    assert out.loss.requires_grad and out.logits.shape[:2] == enc.input_ids.shape  # full-depth logits
    # alpha = 1: the plain full-depth loss, no progressive pass
    plain, _ = make(num_recurrences=6, progressive_loss_alpha=1.0, abacus_max_offset=0)
    plain.load_state_dict(model.state_dict())
    plain.train()
    out = plain(**enc, labels=labels)
    assert out.progressive_loss is None and torch.allclose(out.loss, full, atol=1e-5)


def test_progressive_term_backpropagates_through_its_last_k_passes_only(monkeypatch):
    """With alpha > 0 the progressive term starts from the full-depth pass's state after n passes,
    detached: the gradient is alpha * d(full-depth loss) + (1 - alpha) * d(loss after k more passes
    from a frozen state)."""
    model, tok = make(num_recurrences=6, progressive_loss_alpha=0.3, abacus_max_offset=0)
    enc, labels = labelled(tok)
    n, k = 2, 3
    fixed_draw(monkeypatch, n, k)
    model.train()
    model.zero_grad()
    model(**enc, labels=labels).loss.backward()
    got = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    t = model.transformer
    e = t.embed(enc.input_ids, enc.attention_mask, None, 0)[0]
    mask = t.prepare(enc.input_ids, enc.attention_mask, None, None, 6)[1]

    def passes(h, count):  # h_r = blocks(h_{r-1} + e), h_0 = 0
        for _ in range(count):
            h = h + e
            for block in t.h:
                h = block(h, mask)[0]
        return h

    def loss(h):
        logits = model.lm_head(t.ln_f(h))
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))

    zero = torch.zeros_like(e)
    (0.3 * loss(passes(zero, 6)) + 0.7 * loss(passes(passes(zero, n).detach(), k))).backward()
    expected = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    assert got.keys() == expected.keys()
    for name in got:
        assert torch.allclose(got[name], expected[name], atol=1e-5), name


def test_progressive_loss_is_normalised_by_the_trainers_item_count(monkeypatch, tmp_path):
    model, tok = make(num_recurrences=4, progressive_loss_alpha=0.5, abacus_max_offset=0)
    enc, labels = labelled(tok)
    fixed_draw(monkeypatch, 1, 2)
    model.train()
    items = int((labels[:, 1:] != -100).sum())
    mean = model(**enc, labels=labels).loss
    # Under gradient accumulation the Trainer passes the item count of all micro-batches: every
    # term is then a token sum over that count, and so is their mix.
    summed = model(**enc, labels=labels, num_items_in_batch=torch.tensor(3 * items)).loss
    assert torch.allclose(summed * 3, mean, atol=1e-5)
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    assert Trainer(model=model, args=args).model_accepts_loss_kwargs  # so it does pass num_items_in_batch


# -- registration, remote code, presets -----------------------------------------------------------
def test_family_and_auto_classes_resolve_the_looped_model(tmp_path):
    assert family_classes("looped") == (LoopedConfig, LoopedForCausalLM)
    model, tok = make(tie_word_embeddings=True)
    save_checkpoint(model, tok, tmp_path)
    config = AutoConfig.from_pretrained(tmp_path)
    assert type(config) is LoopedConfig and config.model_type == "hf_arith_looped" and config.num_recurrences == 3
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is LoopedForCausalLM
    assert loaded.lm_head.weight.data_ptr() == loaded.transformer.wte.weight.data_ptr()
    enc = tok(PROBLEMS, padding=True, return_tensors="pt")
    assert torch.equal(model(**enc, num_recurrences=5).logits, loaded(**enc, num_recurrences=5).logits)
    assert type(AutoModel.from_pretrained(tmp_path)) is LoopedModel


def test_remote_code_loads_without_hf_arith(tmp_path):
    model, tok = make(abacus_align_answer=True, answer_start_token_id=tok_id("="))
    folder = tmp_path / "hub_folder"
    save_checkpoint(model, tok, folder)
    for name in ("modeling_looped.py", "configuration_looped.py", "modeling_abacus_gpt2.py",
                 "configuration_abacus_gpt2.py", "abacus_positions.py"):
        source = (folder / name).read_text()
        assert "hf_arith" not in source.replace("hf_arith_looped", "").replace("hf_arith_abacus_gpt2", ""), name
    enc = tok(PROBLEMS, padding=True, return_tensors="pt")
    expected = {n: greedy_decode(model, enc.input_ids, enc.attention_mask, 8, pad_token_id=tok.pad_token_id,
                                 model_kwargs={"num_recurrences": n}).tolist() for n in (2, 6)}
    loaded = run_remote_code(folder, PROBLEMS, """
        out = {n: model.generate(**enc, max_new_tokens=8, do_sample=False, eos_token_id=None, num_recurrences=n)
               [:, enc.input_ids.shape[1]:].tolist() for n in (2, 6)}
        print(json.dumps({"ids": out, "params": model.num_parameters()}))
    """, tmp_path / "hf_home", OMP_NUM_THREADS="1")
    assert loaded["ids"] == {str(n): ids for n, ids in expected.items()}
    assert loaded["params"] == model.num_parameters()


RECIPES = Path(__file__).resolve().parents[1] / "bench" / "recipes"
LOOPED_MUL, LOOPED_SORT = str(RECIPES / "looped-mul.yaml"), str(RECIPES / "looped-sort.yaml")  # not presets


@pytest.mark.parametrize("preset", ["looped-add", LOOPED_MUL, LOOPED_SORT])
def test_presets_train_with_the_trainer_and_load_back(tmp_path, preset):
    from hf_arith.runtime.loading import load_checkpoint
    from hf_arith.training.recipe import load_stages
    from hf_arith.training.run import train

    overrides = ["optim.steps=3", "optim.compile=false", "optim.save_steps=1000", "optim.batch_size=16",
                 "eval.samples=8", "model.hidden_size=16", "model.num_hidden_layers=1",
                 "model.intermediate_size=32", "model.num_recurrences=2", f"output_dir={tmp_path}"]
    if preset == "looped-add":  # gradient accumulation: the progressive loss gets num_items_in_batch
        overrides.append("trainer.gradient_accumulation_steps=2")
    recipe = load_stages(preset, overrides)[0].recipe  # a chain's first stage: its stages are tested elsewhere
    summary = train(recipe, output_dir=str(tmp_path))
    assert summary["steps"] == 3 and math.isfinite(summary["train_loss"])
    model, tok = load_checkpoint(tmp_path / "final")
    assert share_of_weights_changed(recipe, model) > 0.9  # the optimizer stepped
    assert type(model) is LoopedForCausalLM and model.config.num_recurrences == 2
    assert model.config.num_digit_tokens == 10 and model.config.answer_start_token_id == tok.convert_tokens_to_ids("=")
    problem = {"looped-add": "123+45", LOOPED_MUL: "12*34", LOOPED_SORT: "a:31,b:7"}[preset]
    answers = [hf_arith.solve(model, tok, [problem], model_kwargs={"num_recurrences": n}) for n in (1, 4)]
    assert all(len(a) == 1 for a in answers)  # an answer or None: untrained, but decoding runs


def test_recipes_accept_the_abacus_options_and_refuse_misspelt_keys():
    from hf_arith.training.recipe import RecipeError, load_recipe
    from hf_arith.training.run import check_recipe

    check_recipe(load_recipe("looped-add", ["model.abacus_max_offset=3", "model.progressive_max_k=1"]))
    with pytest.raises(RecipeError, match="unknown key.*abacus_max_ofset"):
        check_recipe(load_recipe("looped-add", ["model.abacus_max_ofset=3"]))
    with pytest.raises(RecipeError, match="num_recurrences must be an integer"):
        from hf_arith.training.run import build_model, build_tokenizer

        recipe = load_recipe("looped-add", ["model.num_recurrences=0"])
        build_model(recipe, build_tokenizer(check_recipe(recipe), 64), 64)
