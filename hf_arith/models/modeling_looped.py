"""The looped family: a block of K abacus GPT-2 layers applied N times, with input injection.

McLeish et al. 2024 (arXiv 2405.17399), "Transformers Can Do Arithmetic with the Right Embeddings":
abacus positions plus a recurrent block. Everything but the loop is the abacus GPT-2 family's:
the same embeddings (`AbacusGPT2Model.embed`: token + abacus ids from the one shared
`abacus_positions.abacus_position_ids`, with its random training offset), the same
`AbacusGPT2Block`, the same N(0, 0.02) init and the same tied head.

Recurrence (`LoopedModel.recur`): the state starts at zero; before each of the N passes the
embedded input e is added to it (input injection), then the K blocks run in order:
`h_r = blocks(h_{r-1} + e)`, `h_0 = 0`. The final norm and the head read `h_N`. N is the
config's `num_recurrences` unless forward / generate get another one.

KV cache: pass r of block i writes cache layer `r * K + i`, so one forward writes N * K
layers. A plain `DynamicCache()` grows to that lazily; `generate` is given one (its own
`DynamicCache(config=...)` would pre-allocate K layers only). A cache must be read with the loop
count that filled it; a mismatch is an error.

Progressive loss (`LoopedForCausalLM.forward` in training mode with labels): see
`progressive_loss` below. It lives in the model's forward, so any Trainer uses it unchanged, and
it passes the Trainer's `num_items_in_batch` to every loss term, so gradient accumulation is
normalised as for a plain causal LM. Shipped as Hub remote code: imports only torch,
transformers and sibling files.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast

from .configuration_looped import LoopedConfig, check_num_recurrences
from .modeling_abacus_gpt2 import AbacusGPT2ForCausalLM, AbacusGPT2Model
from .modeling_common import CACHE_FIELD, kept_queries, resolve_cache


class CacheSlots:
    """A view of a cache for one recurrence: block i's `update(k, v, i)` goes to layer `offset + i`."""

    def __init__(self, cache: Cache, offset: int):
        self.cache, self.offset = cache, offset

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        return self.cache.update(key_states, value_states, self.offset + layer_idx, *args, **kwargs)


class LoopedModel(AbacusGPT2Model):
    """The abacus GPT-2 trunk (embeddings, K blocks `h`, final norm `ln_f`) run as a recurrent block."""

    config: LoopedConfig
    config_class = LoopedConfig

    def resolve_recurrences(self, num_recurrences) -> int:
        """The loop count of a call: the config's default for None, else a checked int in [1, MAX]."""
        return check_num_recurrences(self.config.num_recurrences if num_recurrences is None else num_recurrences)

    def prepare(self, input_ids, attention_mask, position_ids, past_key_values, num_recurrences: int,
                key_position_ids=None, output_attentions: bool = False):
        """Embedded input (the injection, abacus offsets drawn in training), the attention mask and the keys
        it covers (`AbacusGPT2Model.attention_mask_for`)."""
        if input_ids is None:
            raise ValueError("looped models need input_ids (positions are computed from the digits)")
        past_length = past_key_values.get_seq_length() if past_key_values is not None else 0
        slots = num_recurrences * len(self.h)
        filled = len(getattr(past_key_values, "layers", ()))
        if past_length and filled != slots:
            raise ValueError(f"this KV cache holds {filled} layers, but num_recurrences={num_recurrences} with "
                             f"{len(self.h)} layers reads {slots}: decode with the loop count that filled it")
        injected, placed = self.embed(input_ids, attention_mask, position_ids, past_length)
        return injected, *self.attention_mask_for(injected, placed, attention_mask, past_key_values, past_length,
                                                  key_position_ids, output_attentions)

    def recur(self, state, injected, mask, start: int, count: int, past_key_values=None, attentions=None,
              keep: int = 0, **kwargs):
        """Run passes `start .. start + count - 1` from `state` (None: the zero state before pass 0).

        Each pass adds `injected` to the state (input injection; without it only the first pass
        sees the input) and applies the K blocks; pass r writes cache layers r * K .. r * K + K - 1.
        Attention weights are appended to `attentions` when it is a list. `keep` > 0: the very last
        block computes outputs for the last `keep` positions only (see `kept_queries`).
        """
        for r in range(start, start + count):
            if state is None:
                state = injected
            elif self.config.input_injection:
                state = state + injected
            cache = CacheSlots(past_key_values, r * len(self.h)) if past_key_values is not None else None
            for i, block in enumerate(self.h):
                last = r == start + count - 1 and i == len(self.h) - 1
                state, weights = block(state, mask, cache, keep if last else 0, **kwargs)
                if attentions is not None:
                    attentions.append(weights)
        return state

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                use_cache=None, output_attentions=False, num_recurrences: int | None = None,
                cache: Cache | None = None, keep_last: int = 0, key_position_ids=None,
                **kwargs) -> BaseModelOutputWithPast:
        """`attentions` (with output_attentions): N * K tensors, pass by pass, block by block. `keep_last` > 0
        (the LM head's `logits_to_keep`): the last pass's last block computes outputs for the last
        `keep_last` positions only; every position still fills the cache."""
        n = self.resolve_recurrences(num_recurrences)
        past_key_values = resolve_cache(past_key_values, cache, use_cache)
        injected, mask, key_index = self.prepare(input_ids, attention_mask, position_ids, past_key_values, n,
                                                 key_position_ids, output_attentions)
        attentions = [] if output_attentions else None
        keep = kept_queries(keep_last, input_ids.shape[1], mask, output_attentions)
        state = self.recur(None, injected, mask, 0, n, past_key_values, attentions, keep, key_index=key_index,
                           **kwargs)
        return BaseModelOutputWithPast(
            last_hidden_state=self.ln_f(state),
            **{CACHE_FIELD: past_key_values if use_cache else None},
            attentions=tuple(attentions) if output_attentions else None,
        )


@dataclass
class LoopedCausalLMOutputWithPast(CausalLMOutputWithPast):
    """In training with the progressive loss also: the two terms (detached, for logging) and the
    draw (n recurrences without gradient, k with gradient)."""

    full_depth_loss: torch.FloatTensor | None = None
    progressive_loss: torch.FloatTensor | None = None
    progressive_depths: tuple[int, int] | None = None


class LoopedForCausalLM(AbacusGPT2ForCausalLM):
    """The abacus GPT-2 causal LM (tied head, abacus ids in generation) over a looped trunk."""

    config: LoopedConfig
    config_class = LoopedConfig
    trunk_class = LoopedModel

    def generate(self, *args, num_recurrences: int | None = None, **kwargs):
        """`GenerationMixin.generate` with a loop count; a cached run gets a lazily growing DynamicCache."""
        n = self.transformer.resolve_recurrences(num_recurrences)
        config = kwargs.get("generation_config") or self.generation_config
        given = any(kwargs.get(name) is not None for name in ("cache", "past_key_values"))
        if not given and kwargs.get("use_cache", config.use_cache) is not False:
            # generate's own DynamicCache(config=...) pre-allocates K layers; a looped pass writes N * K.
            kwargs[CACHE_FIELD] = DynamicCache()
        return super().generate(*args, num_recurrences=n, **kwargs)

    def draw_progressive_depths(self, num_recurrences: int) -> tuple[int, int]:
        """(n, k) for one progressive-loss step: k ~ U{1..max_k}, n ~ U{0..N - k}, so n + k <= N.

        max_k is `config.progressive_max_k`, by default N // 2 (at least 1), as in the paper.
        Drawn with torch's generator, so the Trainer's seed fixes it.
        """
        max_k = self.config.progressive_max_k or max(1, num_recurrences // 2)
        k = int(torch.randint(1, min(max_k, num_recurrences) + 1, ()))
        n = int(torch.randint(0, num_recurrences - k + 1, ()))
        return n, k

    def progressive_loss(self, input_ids, attention_mask, position_ids, labels, num_recurrences: int, **kwargs):
        """The training loss `alpha * L_full + (1 - alpha) * L_prog` (alpha = progressive_loss_alpha).

        L_full: the loss after all N passes, with gradient through every pass.
        L_prog (Bansal et al. 2022, "End-to-end algorithm synthesis with recurrent networks"):
        draw (n, k); run n passes without gradient, then k passes with gradient from that
        detached state, and take the loss after those n + k passes. The model learns to improve
        any intermediate state, which is what lets more loops at test time help; the no-grad
        prefix also keeps backpropagation shallow (k <= N/2 passes).

        Both terms share one embedding (and so one random abacus offset). With alpha > 0 the
        n-pass state is taken (detached) from the full-depth pass, so L_prog costs only k extra
        passes; with alpha = 0 the n passes run under `torch.no_grad()` and build no graph.
        Each term gets the Trainer's `num_items_in_batch` (in kwargs), so each is a token sum
        over the whole accumulated batch and their convex mix is normalised for gradient
        accumulation exactly like a plain causal-LM loss.
        """
        t, alpha = self.transformer, float(self.config.progressive_loss_alpha)
        injected, mask, _ = t.prepare(input_ids, attention_mask, position_ids, None, num_recurrences)
        n, k = self.draw_progressive_depths(num_recurrences)
        full_loss = full_logits = None
        if alpha > 0:
            start = t.recur(None, injected, mask, 0, n, **kwargs)
            full = t.recur(start, injected, mask, n, num_recurrences - n, **kwargs)
            full_logits = self.lm_head(t.ln_f(full))
            full_loss = self.loss_function(logits=full_logits, labels=labels, vocab_size=self.config.vocab_size,
                                           **kwargs)
            start = None if start is None else start.detach()
        else:
            with torch.no_grad():
                start = t.recur(None, injected, mask, 0, n, **kwargs)
        prog_logits = self.lm_head(t.ln_f(t.recur(start, injected, mask, n, k, **kwargs)))
        prog_loss = self.loss_function(logits=prog_logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
        loss = prog_loss if full_loss is None else alpha * full_loss + (1 - alpha) * prog_loss
        return LoopedCausalLMOutputWithPast(
            loss=loss, logits=prog_logits if full_logits is None else full_logits,
            full_depth_loss=None if full_loss is None else full_loss.detach(),
            progressive_loss=prog_loss.detach(), progressive_depths=(n, k),
        )

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values: Cache | None = None,
                labels=None, use_cache=None, logits_to_keep=0, output_attentions=False,
                num_recurrences: int | None = None, cache: Cache | None = None, key_position_ids=None,
                **kwargs) -> LoopedCausalLMOutputWithPast:
        """A causal-LM forward with `num_recurrences` passes (default: config.num_recurrences).

        With labels in training mode (and no cache) the loss is `progressive_loss`, unless
        progressive_loss_alpha is 1; otherwise it is the plain next-token loss at full depth.
        """
        n = self.transformer.resolve_recurrences(num_recurrences)
        past_key_values = past_key_values if cache is None else cache
        if (labels is not None and self.training and past_key_values is None
                and self.config.progressive_loss_alpha < 1):
            return self.progressive_loss(input_ids, attention_mask, position_ids, labels, n, **kwargs)
        outputs = self.transformer(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
            past_key_values=past_key_values, use_cache=use_cache, output_attentions=output_attentions,
            num_recurrences=n, keep_last=logits_to_keep if isinstance(logits_to_keep, int) else 0,
            key_position_ids=key_position_ids, **kwargs,
        )
        hidden = outputs.last_hidden_state
        logits = self.lm_head(hidden[:, -logits_to_keep:] if logits_to_keep else hidden)
        loss = None
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
        return LoopedCausalLMOutputWithPast(
            loss=loss, logits=logits, **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)}, attentions=outputs.attentions,
        )


__all__ = ["LoopedCausalLMOutputWithPast", "LoopedForCausalLM", "LoopedModel"]
