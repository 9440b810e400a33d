"""Attention maps of one problem: every layer and head, tokens in the model's own format.

The model first answers the problem (greedy decoding, as `solve` does); then one forward pass
over prompt + answer with eager attention returns the weights. Used by `hf-arith attention`,
which checks the problem against the model's limits (`hf_arith.runtime.limits`) first. The Gradio Space
draws its maps with the same `plot_attention` and `attention_labels` (hf_arith/evaluation/plots.py).
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from ..data.errors import HfArithError
from ..data.formatting import EOS_TOKEN, PAD_TOKEN, FormatError, quote
from ..runtime.decoding import greedy_decode
from ..runtime.limits import answer_budget
from .plots import attention_labels, plot_attention


@contextlib.contextmanager
def eager_attention(model):
    """Run `model` with eager attention for a while: only that path materialises the weights
    (and runs attention as plain matrix products, which flop counting needs too)."""
    before = getattr(model.config, "_attn_implementation", None)
    switch = before not in (None, "eager")
    if switch:
        model.set_attn_implementation("eager")
    try:
        yield model
    finally:
        if switch:
            model.set_attn_implementation(before)


# The most tokens (prompt and answer) a map is drawn for: each layer and head is a T x T picture with a
# label per token, and drawing grows with T (matplotlib took seconds at 20 tokens on a busy 2-core machine).
MAX_ATTENTION_TOKENS = 128


def answer_ids(model, tokenizer, problem: str) -> tuple[list[int], list[int]]:
    """(prompt ids, generated answer ids up to and including the end token) for one problem, refused
    (FormatError) before decoding when prompt and answer could exceed MAX_ATTENTION_TOKENS."""
    enc = tokenizer([problem], return_tensors="pt")  # a problem the format cannot write fails here
    prompt = enc["input_ids"]
    budget = answer_budget(tokenizer, [problem])
    if prompt.shape[1] + budget > MAX_ATTENTION_TOKENS:
        raise FormatError(f"{quote(problem)}: {prompt.shape[1]} prompt + up to {budget} answer tokens; attention maps "
                          f"are drawn for at most {MAX_ATTENTION_TOKENS} tokens, so give a shorter problem")
    device = next(model.parameters()).device
    end = tokenizer.eos_token_id if tokenizer.arith_format.end_token else None
    new = greedy_decode(model, prompt.to(device), enc["attention_mask"].to(device), budget,
                        eos_token_id=end, pad_token_id=tokenizer.pad_token_id)[0].tolist()
    answer = []
    for token in new:
        if token == tokenizer.pad_token_id:
            break
        answer.append(token)
        if token == end:
            break
    return prompt[0].tolist(), answer


@torch.inference_mode()
def attention_maps(model, tokenizer, problem: str) -> tuple[list[str], list[np.ndarray]]:
    """Tokens of the prompt and the model's answer, and one [heads, T, T] array per layer
    (row = query position, column = key position; rows sum to 1)."""
    prompt, answer = answer_ids(model, tokenizer, problem)
    vocab = tokenizer.arith_format.vocab()
    ids = prompt + answer
    device = next(model.parameters()).device
    with eager_attention(model):
        out = model(input_ids=torch.tensor([ids], device=device), output_attentions=True, use_cache=False)
    if not out.attentions:
        raise HfArithError(f"{type(model).__name__} does not return attention weights (output_attentions)")
    tokens = [{EOS_TOKEN: "<eos>", PAD_TOKEN: "<pad>"}.get(vocab[i], vocab[i]) for i in ids]
    return tokens, [a[0].float().cpu().numpy() for a in out.attentions]


def map_labels(model, n_maps: int) -> list[str]:
    """Names of the maps: 'layer i', or 'pass p, layer i' for a model that runs its layers several
    times (a looped model returns its maps pass by pass, so there are more maps than layers)."""
    return attention_labels(n_maps, getattr(model.config, "num_hidden_layers", None))


__all__ = ["MAX_ATTENTION_TOKENS", "answer_ids", "attention_maps", "eager_attention", "map_labels", "plot_attention"]
