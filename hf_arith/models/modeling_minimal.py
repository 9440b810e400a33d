"""The minimal family: a tiny decoder-only transformer for exact 10-digit addition.

The computation lives in `minimal_core.py` (plain torch, also copied into AdderBoard submissions);
this file wraps it for transformers: config, `PreTrainedModel`, initialisation, `Cache` objects,
the attention mask, the backend chosen through ALL_ATTENTION_FUNCTIONS, `GenerationMixin`.
Shipped as Hub remote code: imports only torch, transformers and sibling files.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.cache_utils import Cache
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .configuration_minimal import MinimalConfig
from .minimal_core import (
    MinimalDecoderParts,
    MinimalHeadParts,
    Norm,
    Projection,
    RotaryEmbedding,
    SpiralPositions,
    SplitAttention,
    TokenEmbedding,
)
from .modeling_common import (
    CACHE_FIELD,
    ArithModelMixin,
    causal_mask,
    check_prompt,
    eager_attention_forward,
    kept_queries,
    positions_from_mask,
    resolve_cache,
)


class MinimalPreTrainedModel(ArithModelMixin, PreTrainedModel):
    config: MinimalConfig
    config_class = MinimalConfig
    base_model_prefix = "model"
    _no_split_modules = ["MinimalDecoderLayer"]
    _supports_sdpa = True
    _supports_flash_attn = False
    _supports_attention_backend = True

    @torch.no_grad()
    def _init_weights(self, module):
        # Explicit small init: with PyTorch defaults the tied tiny models learned nothing.
        # transformers.initialization skips tensors that were loaded from a checkpoint.
        std = self.config.initializer_range
        if isinstance(module, Projection) and self.config.token_dims:
            # The split residual starts as MicroAdder's does: Xavier-uniform maps, and a low-rank map
            # whose second factor is zero, so it adds nothing until it has learned what to add.
            if module.low_rank:
                if module.down is not None:
                    init.xavier_uniform_(module.down)
                else:  # o_proj_angle: the first factor's direction starts along the first token dim
                    init.zeros_(module.angle)
                init.zeros_(module.up)
            else:
                init.xavier_uniform_(module.weight)
        elif isinstance(module, Projection):
            for p in (module.down, module.up) if module.low_rank else (module.weight,):
                init.normal_(p, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, SpiralPositions):
            if module.answer_start is not None:
                init.normal_(module.answer_start, mean=0.0, std=std)
            if module.shape is not None:
                init.copy_(module.shape, module.default_shape())
        elif isinstance(module, SplitAttention) and module.q_rotation is not None:
            init.zeros_(module.q_rotation)
        elif isinstance(module, TokenEmbedding):
            if module.weight is not None:
                init.normal_(module.weight, mean=0.0, std=std)
            if module.arc:
                init.copy_(module.arc_params, module.default_arc())
        elif isinstance(module, Norm) and module.weight is not None:
            init.ones_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, RotaryEmbedding):
            # Non-persistent buffers are not in the checkpoint: from_pretrained leaves them
            # uninitialised unless they are recomputed here.
            for buffer, table in zip((module.cos_table, module.sin_table), module.compute_tables()):
                init.copy_(buffer, table)
        elif isinstance(module, (nn.Embedding, nn.Linear)):
            init.normal_(module.weight, mean=0.0, std=std)


class MinimalModel(MinimalPreTrainedModel, MinimalDecoderParts):
    def __init__(self, config: MinimalConfig):
        super().__init__(config)
        self.build_decoder(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                inputs_embeds=None, use_cache=None, output_attentions=False, cache: Cache | None = None,
                keep_last: int = 0, **kwargs) -> BaseModelOutputWithPast:
        """`keep_last` > 0 (the LM head's `logits_to_keep`): the last layer computes outputs for the last
        `keep_last` positions only, while every position still fills the cache. With one layer, that is
        most of a prompt pass: only the keys and values of the rest are needed."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids or inputs_embeds")
        past_key_values = resolve_cache(past_key_values, cache, use_cache)
        past_length = past_key_values.get_seq_length() if past_key_values is not None else 0
        length = (input_ids if inputs_embeds is None else inputs_embeds).shape[1]
        check_prompt(self.config, input_ids, length, past_length)
        if self.spiral is not None:
            if input_ids is None:
                raise ValueError("spiral positions need input_ids (they are computed from the digits)")
            if position_ids is None:
                if past_length:
                    raise ValueError("with a KV cache, pass position_ids computed from the whole sequence "
                                     "(model.position_ids_from_input_ids); generate() does this itself")
                position_ids = self.digit_columns(input_ids)
        inputs_embeds = self.embed(input_ids, inputs_embeds, position_ids)
        if position_ids is None:
            position_ids = positions_from_mask(attention_mask, length, past_length, inputs_embeds.device)
        elif (not past_length and position_ids.numel() and not torch.compiler.is_compiling()
              and (position_ids.min() < 0 or position_ids.max() >= self.config.max_position_embeddings)):
            # Checked on the prompt (the rotary table has one row per position); later steps
            # are bounded by the context check above.
            raise ValueError(f"position_ids must lie in [0, {self.config.max_position_embeddings}); got ids outside it")
        mask = causal_mask(self.config, inputs_embeds, attention_mask, past_key_values, past_length)
        attention = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
        hidden_states, attentions = self.run_layers(
            inputs_embeds, position_ids, mask, past_key_values, kept_queries(keep_last, length, mask, output_attentions),
            attention, output_attentions, **kwargs)
        return BaseModelOutputWithPast(
            last_hidden_state=hidden_states,
            **{CACHE_FIELD: past_key_values if use_cache else None},
            attentions=tuple(attentions) if output_attentions else None,
        )


class MinimalForCausalLM(MinimalPreTrainedModel, GenerationMixin, MinimalHeadParts):
    def __init__(self, config: MinimalConfig):
        super().__init__(config)
        self.model = MinimalModel(config)
        self.build_head(config)
        self.post_init()

    @property
    def position_ids_from_input_ids(self):
        """With spiral positions, the function that computes position ids from a whole sequence (decoders
        with a KV cache slice the new tokens' tail). Other models have no such attribute (hasattr is
        False): their positions follow from the attention mask."""
        if self.model.spiral is None:
            raise AttributeError("position_ids_from_input_ids: this model's positions follow from the attention mask")
        return lambda input_ids, generated_from=None: self.model.digit_columns(input_ids)

    @property
    def position_inputs(self):
        """With spiral positions, the decoders' hook (as the abacus family's `position_inputs`): the
        position kwargs of a forward over the last `new_tokens` of a sequence. Absent otherwise."""
        if self.model.spiral is None:
            raise AttributeError("position_inputs: this model's positions follow from the attention mask")
        return lambda sequence, new_tokens, generated_from=None: {
            "position_ids": self.model.digit_columns(sequence)[:, -new_tokens:]}

    def prepare_inputs_for_generation(self, input_ids, **kwargs):
        # Spiral positions depend on the whole sequence: computed from the full input_ids, then the
        # generation mixin slices them to the tokens the cache has not seen.
        if self.model.spiral is not None:
            kwargs["position_ids"] = self.model.digit_columns(input_ids)
        return super().prepare_inputs_for_generation(input_ids, **kwargs)

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def get_output_embeddings(self):
        return self.lm_head

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values: Cache | None = None,
                inputs_embeds=None, labels=None, use_cache=None, logits_to_keep=0, output_attentions=False,
                cache: Cache | None = None, **kwargs) -> CausalLMOutputWithPast:
        outputs = self.model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
            past_key_values=past_key_values if cache is None else cache, inputs_embeds=inputs_embeds, use_cache=use_cache,
            output_attentions=output_attentions, keep_last=logits_to_keep if isinstance(logits_to_keep, int) else 0,
            **kwargs,
        )
        hidden = outputs.last_hidden_state
        if logits_to_keep:
            hidden = hidden[:, -logits_to_keep:]
        logits = self.logits(hidden)
        loss = None
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
        return CausalLMOutputWithPast(
            loss=loss, logits=logits, **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)}, attentions=outputs.attentions
        )


__all__ = ["MinimalForCausalLM", "MinimalModel", "MinimalPreTrainedModel"]
