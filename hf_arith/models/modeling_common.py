"""Model plumbing every family shares, defined once.

Each family's modeling file imports these with `from .modeling_common import ...`; save_pretrained
copies this file beside the family's own into a saved folder, so Hub remote code finds it there.
Imports only torch and transformers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers.cache_utils import Cache, DynamicCache
from transformers.masking_utils import create_causal_mask
from transformers.modeling_outputs import BaseModelOutputWithPast

# The label of tokens that carry no loss (transformers' loss functions skip it): training masks
# everything but the answer with it.
IGNORE_INDEX = -100

# transformers 5.24 renamed the KV cache argument and output field `past_key_values` -> `cache`
# (generate() passes `cache=`); earlier 5.x releases use the old name. Forward takes either name
# and fills the output field the installed release defines.
CACHE_FIELD = "cache" if "cache" in BaseModelOutputWithPast.__dataclass_fields__ else "past_key_values"


def resolve_cache(past_key_values: Cache | None, cache: Cache | None, use_cache: bool | None) -> Cache | None:
    """The KV cache a forward received under either name; a new one when caching starts here."""
    past_key_values = past_key_values if cache is None else cache
    if use_cache and past_key_values is None:
        past_key_values = DynamicCache()
    return past_key_values


def check_prompt(config, input_ids: torch.Tensor | None, length: int, past_length: int) -> None:
    """One clear error for a sequence beyond the context or an id beyond the vocabulary, instead of an
    index error deep in torch. Token ids are checked on the prompt: later cached steps feed back the
    model's own tokens."""
    if length + past_length > config.max_position_embeddings:
        raise ValueError(f"sequence of {length + past_length} tokens is longer than this model's context "
                         f"({config.max_position_embeddings} positions)")
    if (input_ids is not None and not past_length and input_ids.numel()
            and (input_ids.min() < 0 or input_ids.max() >= config.vocab_size)):
        raise ValueError(f"input_ids must lie in [0, {config.vocab_size}); got ids outside it")


def positions_from_mask(attention_mask, length: int, past_length: int, device) -> torch.Tensor:
    """Position ids for the last `length` tokens, counted over real tokens so left padding is skipped."""
    if attention_mask is None:
        return torch.arange(past_length, past_length + length, device=device).unsqueeze(0)
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -length:]


def causal_mask(config, hidden_states, attention_mask, past_key_values, past_length: int):
    """The attention mask of a forward pass; None means plain causal attention.

    Unpadded input needs none, nor does a single new token, which sees every cached one. The mask
    builder gets no position ids: it would read per-digit or reset positions as packed sequences.
    The cache goes by position: its keyword changed name in transformers 5.24.
    """
    if attention_mask is None and (not past_length or hidden_states.shape[1] == 1):
        return None
    return create_causal_mask(config, hidden_states, attention_mask, past_key_values, position_ids=None)


def restricted_causal_mask(allowed: torch.Tensor, attention_mask, past_length: int, dtype) -> torch.Tensor:
    """An additive mask [batch, 1, queries, keys] that also keeps each query to the keys `allowed`
    [batch, queries, keys] permits (a family's own restriction), on top of causality and padding.

    Additive floats suit both the eager and the sdpa attention. A row with nothing allowed (a
    padding query) gets equal, finite scores, as transformers' own masks give it.
    """
    queries, keys = allowed.shape[-2:]
    position = torch.arange(keys, device=allowed.device)
    keep = allowed & (position[None, None, :] <= position[past_length:past_length + queries, None][None])
    if attention_mask is not None:
        if attention_mask.dim() != 2 or attention_mask.shape[-1] != keys:
            raise ValueError(f"attention_mask must be [batch, {keys}] (past and new tokens), got {tuple(attention_mask.shape)}")
        keep = keep & attention_mask[:, None, :].bool()
    mask = torch.zeros(keep.shape, dtype=dtype, device=allowed.device)
    return mask.masked_fill_(~keep, torch.finfo(dtype).min)[:, None]


def kept_queries(keep_last: int, length: int, mask, output_attentions: bool) -> int:
    """How many last positions a model's topmost blocks compute outputs for (0: all of them).

    With `logits_to_keep`, the outputs of the other positions are never read, though their keys
    and values still go to the cache. Attention maps want every position; and without a mask only
    a single query may skip the rest (sdpa would align a causal block of several top-left).
    """
    if not 0 < keep_last < length or output_attentions or (mask is None and keep_last > 1):
        return 0
    return keep_last


def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    """[batch, kv_heads, length, dim] -> [batch, kv_heads * n_rep, length, dim] (grouped-query attention)."""
    if n_rep == 1:
        return hidden_states
    batch, heads, length, dim = hidden_states.shape
    hidden_states = hidden_states[:, :, None].expand(batch, heads, n_rep, length, dim)
    return hidden_states.reshape(batch, heads * n_rep, length, dim)


def eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Attention in plain torch ops, the fallback of ALL_ATTENTION_FUNCTIONS and what draws attention maps."""
    groups = getattr(module, "num_key_value_groups", 1)
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    else:  # no mask from the builder means plain causal attention
        q_len, k_len = scores.shape[-2:]
        causal = torch.ones(q_len, k_len, dtype=torch.bool, device=scores.device).tril(k_len - q_len)
        scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = F.dropout(weights, p=dropout, training=module.training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


__all__ = ["CACHE_FIELD", "IGNORE_INDEX", "causal_mask", "check_prompt", "eager_attention_forward", "kept_queries",
           "positions_from_mask", "repeat_kv", "resolve_cache", "restricted_causal_mask"]
