"""The shared decoder: its cache (preallocated per layer), its batch-size rule, and self-speculative
decoding of multi-token models (the answers of one token per pass)."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

import hf_arith.runtime.decoding as decoding
from hf_arith import AbacusGPT2Config, AbacusGPT2ForCausalLM, ArithTokenizer, NumberFormat
from hf_arith.runtime.decoding import (
    PreallocatedLayer,
    decoding_cache,
    default_batch_size,
    default_threads,
    greedy_decode,
    prefill_buckets,
    speculative_decode,
)
from hf_arith.runtime.hardware import available_cpu_cores
from hf_arith.runtime.loading import load_checkpoint


def test_preallocated_layer_returns_what_dynamic_layer_returns_and_grows_past_capacity():
    torch.manual_seed(0)
    chunks = [torch.randn(3, 2, n, 4) for n in (5, 1, 1, 2, 1)]  # 10 tokens; capacity 8
    grown, fixed = DynamicCache(), decoding_cache(8)
    for chunk in chunks:
        want = grown.update(chunk, -chunk, 1)
        got = fixed.update(chunk, -chunk, 1)
        assert all(torch.equal(w, g) for w, g in zip(want, got))
        assert fixed.get_seq_length(1) == grown.get_seq_length(1)
    assert isinstance(fixed.layers[1], PreallocatedLayer) and len(fixed.layers) == 2  # layers made lazily
    # Reordering rows (as generate's beam search does) leaves a cache that still grows correctly.
    order = torch.tensor([2, 0])
    for cache in (grown, fixed):
        cache.batch_select_indices(order)
    extra = torch.randn(2, 2, 1, 4)
    assert torch.equal(grown.update(extra, extra, 1)[0], fixed.update(extra, extra, 1)[0])


def test_cached_decoding_through_the_preallocated_cache_matches_uncached_decoding():
    model, tok = load_checkpoint("abacus-gpt2-add")
    enc = tok(["12+9", "99999+1", "4096+123456789"], padding=True, return_tensors="pt")
    args = (model, enc["input_ids"], enc["attention_mask"], 12)
    kwargs = {"eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}
    cached = greedy_decode(*args, use_cache=True, **kwargs)
    assert torch.equal(cached, greedy_decode(*args, use_cache=False, **kwargs))
    assert tok.decode_answers(cached) == ["21", "100000", "123460885"]


def test_default_batch_size_shrinks_with_the_models_width():
    tiny, _ = load_checkpoint("minimal-add10")
    wide, _ = load_checkpoint("abacus-gpt2-add")
    assert default_batch_size(tiny) == 2**15 // tiny.config.intermediate_size == 2048
    assert default_batch_size(wide) == 2**15 // wide.config.intermediate_size == 128


def test_default_threads_one_for_tiny_models_every_core_for_wider_ones():
    tiny, _ = load_checkpoint("minimal-add10")
    wide, _ = load_checkpoint("abacus-gpt2-add")
    assert default_threads(tiny) == 1
    assert default_threads(wide) == available_cpu_cores() >= 1


def test_finished_rows_leave_the_batch_and_the_answers_match_generate():
    model, tok = load_checkpoint("abacus-gpt2-add")
    problems = ["1+1", "7+8", "12+34", "99+1", "123+456", "5+5", "98765+4321", "123456789+987654321"] * 8
    enc = tok(problems, padding=True, return_tensors="pt")
    eos, pad = tok.eos_token_id, tok.pad_token_id
    shapes = []
    hook = model.register_forward_pre_hook(lambda _, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)),
                                           with_kwargs=True)
    try:
        decoded = greedy_decode(model, enc["input_ids"], enc["attention_mask"], 12, eos_token_id=eos, pad_token_id=pad)
    finally:
        hook.remove()
    prefill = [shape for shape in shapes if shape[1] > 1]
    steps = [rows for rows, length in shapes if length == 1]
    # The prompts (3 to 19 tokens) were prefilled in buckets of similar length: every row once,
    # on fewer tokens than the padded batch holds.
    assert 1 < len(prefill) and sum(rows for rows, _ in prefill) == len(problems)
    assert sum(rows * length for rows, length in prefill) < enc["input_ids"].numel()
    assert steps[0] == len(problems) and steps[-1] < len(problems)  # short answers left early
    generated = model.generate(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], max_new_tokens=12,
                               do_sample=False, eos_token_id=eos, pad_token_id=pad)[:, enc["input_ids"].shape[1]:]
    assert torch.equal(decoded, generated)
    assert tok.decode_answers(decoded) == [str(eval(p)) for p in problems]


def test_prefill_buckets_minimise_padding_with_few_calls():
    assert prefill_buckets([5] * 10) == [5]
    assert prefill_buckets([3, 3, 20, 20], call_cost=0) == [3, 20]
    assert prefill_buckets([3, 3, 20, 20], call_cost=64) == [20]  # a second call costs more than it saves
    lengths = [3] * 50 + [4] * 50 + [12] * 50 + [13] * 50 + [22] * 5
    bounds = prefill_buckets(lengths, max_buckets=3, call_cost=0)
    assert bounds[-1] == 22 and len(bounds) <= 3
    padded = sum(min(b for b in bounds if b >= n) for n in lengths)
    assert padded < 0.6 * len(lengths) * 22 and bounds == [4, 13, 22]


@pytest.mark.parametrize("name", ["abacus-gpt2-add", "looped-add-window", "minimal-add10"])
@pytest.mark.parametrize("keyword", ["cache", "past_key_values"])
def test_models_take_the_kv_cache_under_either_name(name, keyword):
    # transformers 5.24's generate() passes `cache=`; 5.23 passed `past_key_values=`. A model
    # that missed the cache would decode from the last token alone.
    model, tok = load_checkpoint(name)
    enc = tok(["12+34"], return_tensors="pt")
    cache = DynamicCache()
    out = model(input_ids=enc["input_ids"], use_cache=True, **{keyword: cache})
    assert cache.get_seq_length() == enc["input_ids"].shape[1]
    field = "cache" if "cache" in type(out).__dataclass_fields__ else "past_key_values"
    assert getattr(out, field) is cache


# -- self-speculative decoding of multi-token models -------------------------------------------------
K2 = "abacus-gpt2-add-window-10-k2"
REVERSED = NumberFormat(task="add", reverse_operands=True, reverse_answer=True, end_token=True)
PROBLEMS = ["1342+879", "5+12345", "0+0", "99999999+1", "123+456", "77777+88", "31415926+27182818", "9+9"]


def test_preallocated_layer_takes_back_tokens_and_selects_positions_in_its_buffer():
    torch.manual_seed(1)
    grown, fixed = DynamicCache(), decoding_cache(12)
    chunk = torch.randn(2, 3, 6, 4)
    for cache in (grown, fixed):
        cache.update(chunk, -chunk, 0)
        cache.crop(-2)  # rejected drafts
    assert fixed.get_seq_length() == grown.get_seq_length() == 4
    assert torch.equal(fixed.layers[0].keys, grown.layers[0].keys)
    index = torch.tensor([[0, 2, 3], [1, 1, 3]])
    fixed.layers[0].select_positions(index)
    kept = chunk[:, :, :4].gather(2, index[:, None, :, None].expand(-1, 3, -1, 4))
    assert torch.equal(fixed.layers[0].keys, kept) and torch.equal(fixed.layers[0].values, -kept)
    more = torch.randn(2, 3, 2, 4)
    keys, _ = fixed.update(more, more, 0)
    assert torch.equal(keys, torch.cat([kept, more], dim=2))
    assert fixed.layers[0].key_buffer is not None  # still writing into its one buffer


def test_self_speculative_decoding_of_the_bundled_k2_writes_what_one_token_per_pass_writes():
    """Within the measured 100 digits the second head's drafts are right; beyond them it often guesses
    wrong (its raw tokens give other answers), and the first head rejects those drafts. Either way the
    tokens and probabilities are one token per pass's, batched (rows of different lengths) and alone."""
    from hf_arith.data.problems import ProblemSpec, held_out_problems
    from hf_arith.runtime.limits import answer_budget

    model, tok = load_checkpoint(K2)
    inside = held_out_problems(ProblemSpec(min_digits=1, max_digits=100), 40, seed=11).to_text()
    texts = inside + held_out_problems(ProblemSpec(min_digits=106, max_digits=115), 12, seed=11).to_text()
    eos, pad = tok.eos_token_id, tok.pad_token_id
    for batch in (texts, texts[:1], texts[-1:]):
        enc = tok(batch, padding=True, return_tensors="pt")
        args = (model, enc["input_ids"], enc["attention_mask"], answer_budget(tok, batch), eos, pad)
        one, one_p, one_passes = greedy_decode(*args, return_passes=True, return_probabilities=True)
        two, two_p, two_passes = greedy_decode(*args, tokens_per_step=2, return_passes=True, return_probabilities=True)
        assert torch.equal(two, one)
        torch.testing.assert_close(two_p, one_p, atol=1e-5, rtol=0)
        assert two_passes <= 0.6 * one_passes
    enc = tok(texts, padding=True, return_tensors="pt")
    args = (model, enc["input_ids"], enc["attention_mask"], answer_budget(tok, texts), eos, pad)
    raw = tok.decode_answers(greedy_decode(*args, tokens_per_step=2, confirm=False))
    sums = [str(int(a) + int(b)) for a, b in (t.split("+") for t in inside)]
    assert raw[: len(inside)] == sums  # within the measured range the raw heads are right too
    assert raw != tok.decode_answers(greedy_decode(*args))  # beyond it they are not: what verification guards


def test_solve_and_the_pipeline_decode_a_multi_token_model_with_verified_drafts_by_default():
    from transformers import pipeline

    from hf_arith import bundled_path, solve
    from hf_arith.data.problems import ProblemSpec, held_out_problems

    model, tok = load_checkpoint(K2)
    texts = held_out_problems(ProblemSpec(min_digits=106, max_digits=115), 6, seed=11).to_text() + ["12+34", "9+1"]
    one = solve(model, tok, texts, tokens_per_step=1, warn_beyond_training=False, return_confidence=True)
    passes = []
    hook = model.register_forward_pre_hook(lambda *_: passes.append(1))
    try:
        drafted = solve(model, tok, texts, warn_beyond_training=False, return_confidence=True)
    finally:
        hook.remove()
    assert [a.answer for a in drafted] == [a.answer for a in one]
    assert [a.confidence for a in drafted] == pytest.approx([a.confidence for a in one], abs=1e-5)
    assert len(passes) < 0.6 * tok.answer_budget(texts)
    raw = solve(model, tok, texts, warn_beyond_training=False, confirm=False)  # the explicit opt-in
    assert raw != [a.answer for a in one]
    pipe = pipeline("arithmetic", model=bundled_path(K2))
    assert [r["answer"] for r in pipe(texts)] == [a.answer for a in one]


def random_multi_token_model(k: int, window: int, seed: int, context: int):
    """A tiny untrained k-head model: spread weights so greedy outputs vary (its extra heads guess mostly
    wrong), and a louder end token, so rows end at different times."""
    torch.manual_seed(seed)
    tok = ArithTokenizer(number_format=REVERSED, model_max_length=256)
    config = AbacusGPT2Config(vocab_size=len(tok), num_digit_tokens=10, hidden_size=32, num_hidden_layers=2,
                              num_attention_heads=4, abacus_max_digits=40, pad_token_id=tok.pad_token_id,
                              eos_token_id=tok.eos_token_id, tie_word_embeddings=False, num_future_tokens=k,
                              abacus_attention_window=window, abacus_align_answer=bool(window),
                              answer_start_token_id=tok.convert_tokens_to_ids("="), max_position_embeddings=context)
    model = AbacusGPT2ForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" not in name:  # norms keep their identity init, or their biases decide the output
                p.normal_(0, 0.5)
        model.lm_head.weight[tok.eos_token_id] *= 1.6
    return model, tok


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("window", [0, 2])
@pytest.mark.parametrize("commit", ["row", "min"])
def test_self_speculative_decoding_of_random_models_writes_what_one_token_per_pass_writes(k, window, commit,
                                                                                           monkeypatch):
    """Drafts are mostly wrong here, rows accept different numbers of them and end at different
    times, and the answers run to the end of the context, so the cache's holes must be squeezed out."""
    squeezed = []  # cache columns each compaction freed
    compact = decoding._Speculation.compact

    def counted(state):
        before = state.length
        compact(state)
        squeezed.append(before - state.length)

    monkeypatch.setattr(decoding._Speculation, "compact", counted)
    raw_differs, ends = 0, set()
    for seed in range(3):
        model, tok = random_multi_token_model(k, window, seed, context=48)
        for batch in (PROBLEMS, PROBLEMS[3:4]):
            enc = tok(batch, padding=True, return_tensors="pt")
            args = (model, enc["input_ids"], enc["attention_mask"], 48 - enc["input_ids"].shape[1],
                    tok.eos_token_id, tok.pad_token_id)
            one, one_p, one_passes = greedy_decode(*args, return_probabilities=True, return_passes=True)
            two, two_p, passes = speculative_decode(*args, tokens_per_step=k, commit=commit)
            assert torch.equal(two, one), (seed, batch)
            torch.testing.assert_close(two_p, one_p, atol=1e-5, rtol=0)
            assert passes <= one_passes
            raw_differs += not torch.equal(greedy_decode(*args, tokens_per_step=k, confirm=False), one)
            ends |= {len(row) for row in tok.decode_answers(one) if row is not None}
    assert raw_differs  # unverified drafts write other tokens: a decoder that skipped verification fails here
    assert len(ends) > 2  # rows ended at different times
    assert max(squeezed, default=0) > 0 or commit == "min"  # "min" leaves holes in finished rows only


# -- a long teacher-forced pass in column spans (chunked prefill) -------------------------------------
def forward_widths(model, monkeypatch) -> list[int]:
    """The number of columns of every forward call `model` gets from now on."""
    widths, forward = [], model.forward

    def counting(*args, **kwargs):
        widths.append(kwargs["input_ids"].shape[1])
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", counting)
    return widths


def budget_for_span(monkeypatch, model, rows: int, width: int, span: int) -> None:
    """Set BATCH_MEMORY_BUDGET so that `query_span` gives `span` columns of `rows` rows of `width` tokens."""
    per_query = rows * (width * decoding.pair_bytes(model) + decoding.TOKEN_BYTES * decoding.widest_layer(model))
    monkeypatch.setattr(decoding, "BATCH_MEMORY_BUDGET", span * per_query)
    assert decoding.query_span(model, rows, width) == span


@pytest.mark.parametrize("name, spec", [("abacus-gpt2-add", dict(task="add", min_digits=3, max_digits=9)),
                                        ("looped-add-window", dict(task="add", min_digits=3, max_digits=9)),
                                        ("abacus-gpt2-sort-10", dict(task="sort", min_digits=1, max_digits=4))])
def test_a_teacher_forced_pass_too_big_for_the_budget_runs_in_column_spans_with_one_passs_scores(name, spec,
                                                                                                monkeypatch):
    # Left-padded rows of several lengths: the spans read the columns before them from the cache, with the
    # positions one pass computes, so the perplexities and the agreement with greedy decoding are the same.
    import numpy as np

    from hf_arith.data.formatting import render
    from hf_arith.data.problems import ProblemSpec, sample, with_answers
    from hf_arith.evaluation.grid import teacher_forced

    model, tok = load_checkpoint(name)
    problems = with_answers(sample(ProblemSpec(**spec), 6, np.random.default_rng(3), split="test"))
    whole_perplexity, whole_agrees = teacher_forced(model, tok, problems, batch_size=6)
    lengths = render(problems, tok.arith_format, with_answer=True)[1]
    # A budget below one row of the longest: the rows run one at a time (row_chunks), each in spans.
    budget_for_span(monkeypatch, model, 1, int(lengths.max()), int(lengths.max()) // 3)
    widths = forward_widths(model, monkeypatch)
    perplexity, agrees = teacher_forced(model, tok, problems, batch_size=6)
    assert sum(widths) == lengths.sum() and len(widths) >= 2 * len(problems)  # every column once, in spans
    np.testing.assert_allclose(perplexity, whole_perplexity, rtol=1e-4)
    assert np.array_equal(agrees, whole_agrees) and agrees.any()


def test_a_relation_window_models_logits_are_those_of_one_pass_in_any_span(monkeypatch):
    # The line window with relation bias (what a 20-item sort of 20 digits, 16,860 tokens, runs under): each
    # span's queries gather their window's keys from the cache, the bias of each key's relation included.
    from test_abacus_model import make, relation_window_settings

    tok, settings = relation_window_settings("transposition_next_keys", abacus_relation_bias=True, abacus_max_digits=8)
    model, _ = make(**settings, abacus_digit_places="narrow", seed=2)
    model.transformer.relation_bias.weight.data.normal_(0, 2.0)
    text = list("a:13,b:7,c:021=A1b7c0=a1C0b7=c2a3B0=C2a3b0=c2B0a3=b0c1A0=B0c1a0=b0A0c1=b0a0C0") + ["<eos>"]
    short = list("a:5,b:5,c:9=a5b5c9=a5b5c9=")
    pad = [tok.pad_token] * (len(text) - len(short))
    ids = torch.tensor([tok.convert_tokens_to_ids(text), tok.convert_tokens_to_ids(pad + short)])
    mask = (ids != tok.pad_token_id).long()
    with torch.no_grad():
        whole = model(input_ids=ids, attention_mask=mask).logits
    assert model.config.abacus_relation_bias and decoding.pair_bytes(model) == decoding.PAIR_BYTES + decoding.RELATION_PAIR_BYTES
    for span in (1, 7, 40):
        budget_for_span(monkeypatch, model, 2, ids.shape[1], span)
        widths = forward_widths(model, monkeypatch)
        got = decoding.forced_logits(model, ids, mask)
        assert sum(widths) == ids.shape[1] and max(widths) == span
        real = mask.bool()  # a pad column's own output is never read
        assert torch.allclose(got[real], whole[real], atol=1e-5)
        monkeypatch.undo()
