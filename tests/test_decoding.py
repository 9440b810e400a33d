"""The shared decoder's cache (preallocated per layer) and its batch-size rule."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from hf_arith.runtime.decoding import (
    PreallocatedLayer,
    confirmed_greedy_decode,
    decoding_cache,
    default_batch_size,
    default_threads,
    greedy_decode,
    prefill_buckets,
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
    assert default_batch_size(tiny) == 4096
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


def test_confirmed_multi_token_decoding_writes_what_one_token_per_pass_writes():
    """The extra heads only propose: beyond the 100 digits where its answers are measured exact, the
    bundled k2's second head often guesses wrong, and the first head's pass sends those rows back to
    one token per pass. Within them, every way of decoding writes the true sums."""
    from hf_arith import solve
    from hf_arith.data.problems import ProblemSpec, held_out_problems
    from hf_arith.runtime.limits import answer_budget

    name = "abacus-gpt2-add-window-10-k2"
    model, tok = load_checkpoint(name)
    measured = model.config.measured_max_digits  # 100
    texts = (held_out_problems(ProblemSpec(min_digits=1, max_digits=measured), 60, seed=11).to_text()
             + held_out_problems(ProblemSpec(min_digits=measured + 6, max_digits=measured + 15), 20, seed=11).to_text())
    sums = [str(int(a) + int(b)) for a, b in (t.split("+") for t in texts)]  # the oracle
    inside = [i for i, t in enumerate(texts) if max(len(x) for x in t.split("+")) <= measured]
    assert len(inside) == 60 < len(texts)  # both kinds of problem are here
    budget = answer_budget(tok, texts)

    def true_inside(answers) -> bool:
        return [answers[i] for i in inside] == [sums[i] for i in inside]

    enc = tok(texts, padding=True, return_tensors="pt")
    eos, pad = tok.eos_token_id, tok.pad_token_id
    one, one_p, one_passes = greedy_decode(model, enc["input_ids"], enc["attention_mask"], budget, eos, pad,
                                           return_passes=True, return_probabilities=True)
    raw = greedy_decode(model, enc["input_ids"], enc["attention_mask"], budget, eos, pad, tokens_per_step=2)
    two, two_p, two_passes = confirmed_greedy_decode(model, enc["input_ids"], enc["attention_mask"], budget, eos, pad,
                                                     tokens_per_step=2, return_passes=True, return_probabilities=True)
    assert true_inside(tok.decode_answers(one)) and true_inside(tok.decode_answers(raw))
    assert tok.decode_answers(raw) != tok.decode_answers(one)  # the case this guards
    assert tok.decode_answers(two) == tok.decode_answers(one)
    torch.testing.assert_close(two_p.min(1).values, one_p.min(1).values, atol=1e-4, rtol=0)
    assert two_passes < 2 * one_passes
    # solve confirms by default; confirm=False gives the heads' own tokens.
    confirmed = solve(model, tok, texts, tokens_per_step=2, warn_beyond_training=False, return_confidence=True)
    single = solve(model, tok, texts, warn_beyond_training=False, return_confidence=True)
    assert [a.answer for a in confirmed] == [a.answer for a in single]
    assert true_inside([a.answer for a in single])
    assert [a.confidence for a in confirmed] == pytest.approx([a.confidence for a in single], abs=1e-4)
    unconfirmed = solve(model, tok, texts, tokens_per_step=2, warn_beyond_training=False, confirm=False)
    assert true_inside(unconfirmed) and unconfirmed != [a.answer for a in single]
