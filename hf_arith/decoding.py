"""Batched greedy decoding with a KV cache, shared by `solve`, eval, verify and the CLI.

Generic autoregressive decoding: it knows nothing about arithmetic. Each row stops at the
end token; rows that have stopped are filled with the pad token.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache


@torch.inference_mode()
def greedy_decode(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, max_new_tokens: int,
                  eos_token_id: int | None = None, pad_token_id: int = 0, use_cache: bool = True) -> torch.Tensor:
    """Generate up to `max_new_tokens` greedily; returns only the new tokens, [batch, <= max_new_tokens]."""
    batch = input_ids.shape[0]
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    cache = DynamicCache() if use_cache else None
    finished = torch.zeros(batch, dtype=torch.bool, device=input_ids.device)
    step_input, new_tokens = input_ids, []
    for _ in range(max_new_tokens):
        out = model(input_ids=step_input, attention_mask=attention_mask, past_key_values=cache,
                    use_cache=use_cache, logits_to_keep=1)
        token = out.logits[:, -1].argmax(-1)
        token = torch.where(finished, torch.full_like(token, pad_token_id), token)
        new_tokens.append(token)
        if eos_token_id is not None:
            finished |= token == eos_token_id
            if bool(finished.all()):
                break
        attention_mask = torch.cat([attention_mask, torch.ones_like(token)[:, None]], dim=1)
        # With a cache the model needs only the new token; without one, the whole sequence again.
        step_input = token[:, None] if use_cache else torch.cat([step_input, token[:, None]], dim=1)
    if not new_tokens:
        return input_ids.new_zeros((batch, 0))
    return torch.stack(new_tokens, dim=1)
