"""The minimal family: a tiny decoder-only transformer for exact 10-digit addition.

Layout follows transformers' own model files (attention chosen through
ALL_ATTENTION_FUNCTIONS, `Cache` objects, `GenerationMixin`, `CausalLMOutputWithPast`).
Shipped as Hub remote code: imports only torch, transformers and sibling files.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .abacus_positions import abacus_position_ids
from .configuration_minimal import MinimalConfig
from .modeling_common import (
    CACHE_FIELD,
    causal_mask,
    check_prompt,
    eager_attention_forward,
    kept_queries,
    positions_from_mask,
    resolve_cache,
)


class Projection(nn.Module):
    """A linear map, optionally factorised as two rank-r matrices (`projection_rank`).

    `transposed` applies the transpose, which is how O = Q^T reuses the query weights.
    """

    def __init__(self, in_features: int, out_features: int, rank: int, bias: bool):
        super().__init__()
        self.low_rank = 0 < rank < min(in_features, out_features)
        if self.low_rank:
            self.down = nn.Parameter(torch.empty(rank, in_features))
            self.up = nn.Parameter(torch.empty(out_features, rank))
        else:
            self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None

    def forward(self, x):
        if self.low_rank:
            return F.linear(F.linear(x, self.down), self.up, self.bias)
        return F.linear(x, self.weight, self.bias)

    def transposed(self, x):
        if self.low_rank:
            return F.linear(F.linear(x, self.up.t()), self.down.t())
        return F.linear(x, self.weight.t())


class Norm(nn.Module):
    """RMSNorm, LayerNorm or identity, chosen by `norm_type`."""

    def __init__(self, dim: int, kind: str, eps: float):
        super().__init__()
        self.kind, self.eps = kind, eps
        self.weight = nn.Parameter(torch.ones(dim)) if kind != "none" else None
        self.bias = nn.Parameter(torch.zeros(dim)) if kind == "layernorm" else None

    def forward(self, x):
        if self.kind == "rmsnorm":  # one fused kernel: a tiny model's decode step is mostly op overhead
            if x.dtype == torch.float32:  # no casts to dispatch
                return self.weight * F.rms_norm(x, x.shape[-1:], eps=self.eps)
            return self.weight * F.rms_norm(x.float(), x.shape[-1:], eps=self.eps).to(x.dtype)
        if self.kind == "layernorm":
            return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)
        return x


class TokenEmbedding(nn.Module):
    """Token table; with `circular_arc`, digit rows are points on an arc (three parameters).

    With `special_embedding="arc"` the other tokens continue the arc after the digits, and with
    "digit0" they share digit 0's point; either way the table has no rows of its own (`weight` is None).
    """

    def __init__(self, config: MinimalConfig):
        super().__init__()
        self.arc = config.digit_embedding == "circular_arc"
        self.arc_tokens = config.arc_tokens
        # A split residual (token_dims > 0) embeds tokens in their own dimensions only.
        self.hidden_size = config.token_dims or config.hidden_size
        self.arc_init = config.arc_init
        self.specials_at_zero = config.special_embedding == "digit0"  # MinimalConfig: only with the arc
        self.vocab_size = config.vocab_size
        rows = 0 if self.specials_at_zero else config.vocab_size - self.arc_tokens
        self.weight = nn.Parameter(torch.empty(rows, self.hidden_size)) if rows else None
        if self.arc:
            self.arc_params = nn.Parameter(self.default_arc())

    def default_arc(self) -> torch.Tensor:
        """radius, start angle, angle step: `arc_init`, or the arc's tokens over most of a circle."""
        if self.arc_init is not None:
            return torch.tensor([float(v) for v in self.arc_init])
        return torch.tensor([1.0, 0.0, 2 * math.pi / (self.arc_tokens + 1)])

    def table(self) -> torch.Tensor:
        if not self.arc:
            return self.weight
        radius, start, step = self.arc_params
        angles = start + step * torch.arange(self.arc_tokens, device=start.device, dtype=start.dtype)
        points = torch.stack([radius * angles.cos(), radius * angles.sin()], dim=-1)
        points = F.pad(points, (0, self.hidden_size - 2))
        if self.specials_at_zero:
            return torch.cat([points, points[:1].expand(self.vocab_size - self.arc_tokens, -1)], dim=0)
        return points if self.weight is None else torch.cat([points, self.weight], dim=0)

    def forward(self, input_ids):
        return F.embedding(input_ids, self.table())


class RotaryEmbedding(nn.Module):
    """cos and sin of every position's rotation angles, tabulated once for the whole (short) context.

    A decode step of a tiny model is mostly per-op overhead, so a lookup beats recomputing them.
    """

    def __init__(self, config: MinimalConfig):
        super().__init__()
        self.dim, self.theta, self.length = config.head_dim, config.rope_theta, config.max_position_embeddings
        cos, sin = self.compute_tables()
        self.register_buffer("cos_table", cos, persistent=False)
        self.register_buffer("sin_table", sin, persistent=False)

    def compute_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.dim, 2, dtype=torch.float) / self.dim))
        freqs = torch.arange(self.length, dtype=torch.float)[:, None] * inv_freq
        angles = torch.cat((freqs, freqs), dim=-1)
        return angles.cos(), angles.sin()

    @torch.no_grad()
    def forward(self, x, position_ids):
        cos, sin = F.embedding(position_ids, self.cos_table), F.embedding(position_ids, self.sin_table)
        if cos.dtype != x.dtype:
            cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        return cos, sin


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(x, cos, sin):
    """Rotate [batch, heads, length, dim] by the angles of its last `length` positions."""
    length = x.shape[2]
    cos, sin = cos[:, None, -length:], sin[:, None, -length:]
    return x * cos + rotate_half(x) * sin


class SpiralPositions(nn.Module):
    """The position part of a split residual: digit column c sits at (A cos(2 pi c / P), A sin(2 pi c / P), s c).

    The column is the digit's index within its number (abacus ids), so digit i of both operands and
    of the answer share one point, and the token that predicts answer digit i + 1 (answer digit i)
    sits one column before the operand digits it needs. These points are fixed, or with `learn_spiral`
    a spiral of learned amplitude, phase, slope and offset (four parameters). Other tokens sit at
    the origin, except the answer-start token, which predicts the first answer digit from its own
    learned point.
    """

    def __init__(self, config: MinimalConfig):
        super().__init__()
        self.amplitude, self.period, self.slope = (float(v) for v in config.spiral)
        self.answer_start_token_id = config.answer_start_token_id
        self.answer_start = nn.Parameter(torch.zeros(3))
        self.shape = nn.Parameter(self.default_shape()) if config.learn_spiral else None

    def default_shape(self) -> torch.Tensor:
        """amplitude, phase, slope, offset of the fixed spiral (where a learned one starts)."""
        return torch.tensor([self.amplitude, 0.0, self.slope, 0.0])

    def forward(self, input_ids, position_ids):
        """`position_ids`: abacus ids (1 + the digit's column; 0 for every other token)."""
        column = (position_ids - 1).to(self.answer_start.dtype)
        angle = column * (2 * math.pi / self.period)
        if self.shape is None:
            points = torch.stack([self.amplitude * angle.cos(), self.amplitude * angle.sin(), self.slope * column], -1)
        else:
            amplitude, phase, slope, offset = self.shape
            angle = angle + phase
            points = torch.stack([amplitude * angle.cos(), amplitude * angle.sin(), slope * column + offset], -1)
        points = points * (position_ids > 0)[..., None]
        return torch.where((input_ids == self.answer_start_token_id)[..., None], self.answer_start, points)


def rotate_pairs(x, angle):
    """Turn each pair of dimensions (0, 1), (2, 3), ... of x by `angle`; an odd last dimension stays as it is."""
    even = x.shape[-1] - x.shape[-1] % 2
    pairs = x[..., :even].unflatten(-1, (-1, 2))
    first, second = pairs[..., 0], pairs[..., 1]
    cos, sin = angle.cos(), angle.sin()
    turned = torch.stack([first * cos - second * sin, first * sin + second * cos], dim=-1).flatten(-2)
    return torch.cat([turned, x[..., even:]], dim=-1)


class MinimalAttention(nn.Module):
    def __init__(self, config: MinimalConfig, layer_idx: int):
        super().__init__()
        self.config, self.layer_idx = config, layer_idx
        self.head_dim = config.head_dim
        self.num_heads, self.num_kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.num_key_value_groups = self.num_heads // self.num_kv_heads
        self.scaling = self.head_dim**-0.5
        self.is_causal = True
        rank, bias, d = config.projection_rank, config.attention_bias, config.hidden_size
        self.q_proj = Projection(d, self.num_heads * self.head_dim, rank, bias)
        self.k_proj = Projection(d, self.num_kv_heads * self.head_dim, rank, bias)
        # K = V and O = Q^T share weights instead of holding copies, so parameters() stays unique.
        self.v_proj = None if config.tie_kv else Projection(d, self.num_kv_heads * self.head_dim, rank, bias)
        self.o_proj = None if config.tie_qo else Projection(self.num_heads * self.head_dim, d, rank, bias)
        self.q_norm = Norm(self.head_dim, config.norm_type, config.norm_eps) if config.qk_norm else None
        # share_qk_norm: one norm for queries and keys (no k_norm of its own).
        self.k_norm = (Norm(self.head_dim, config.norm_type, config.norm_eps)
                       if config.qk_norm and not config.share_qk_norm else None)

    def forward(self, hidden_states, position_embeddings, attention_mask, past_key_values=None, queries: int = 0,
                **kwargs):
        """`queries` > 0: keys and values for every position, queries (and output) for the last `queries` only."""
        batch, length, _ = hidden_states.shape
        query_states = hidden_states[:, -queries:] if queries else hidden_states
        q_length = query_states.shape[1]
        q = self.q_proj(query_states).view(batch, q_length, self.num_heads, self.head_dim)
        k_flat = self.k_proj(hidden_states)
        v_flat = k_flat if self.v_proj is None else self.v_proj(hidden_states)
        k = k_flat.view(batch, length, self.num_kv_heads, self.head_dim)
        v = v_flat.view(batch, length, self.num_kv_heads, self.head_dim).transpose(1, 2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), (self.q_norm if self.k_norm is None else self.k_norm)(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        if position_embeddings is not None:
            q, k = apply_rotary_pos_emb(q, *position_embeddings), apply_rotary_pos_emb(k, *position_embeddings)
        if past_key_values is not None:
            k, v = past_key_values.update(k, v, self.layer_idx)

        attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        output, weights = attention_interface(self, q, k, v, attention_mask, scaling=self.scaling, dropout=0.0, **kwargs)
        output = output.reshape(batch, q_length, -1)
        output = self.q_proj.transposed(output) if self.o_proj is None else self.o_proj(output)
        return output, weights


class SplitAttention(nn.Module):
    """One head on a split residual (`token_dims` > 0): queries and keys read the position part, values
    the token part through the head projection (`head`, hidden -> token_dims, applied transposed), so
    where to look and what to copy are separate subspaces."""

    def __init__(self, config: MinimalConfig, layer_idx: int):
        super().__init__()
        self.config, self.layer_idx = config, layer_idx
        self.token_dims, self.head_dim = config.token_dims, config.head_dim
        self.num_key_value_groups = 1
        self.scaling = self.head_dim**-0.5
        self.is_causal = True
        d, positions, rank = config.hidden_size, config.hidden_size - config.token_dims, config.projection_rank
        self.q_proj = Projection(positions, self.head_dim, rank, False)
        # tie_qk_rotation: keys use the query projection; queries are turned by one learned angle.
        self.k_proj = None if config.tie_qk_rotation else Projection(positions, self.head_dim, rank, False)
        self.q_rotation = nn.Parameter(torch.zeros(())) if config.tie_qk_rotation else None
        self.o_proj = Projection(d, d, config.o_proj_rank or rank, False)

    def forward(self, hidden_states, position_embeddings, attention_mask, past_key_values=None, queries: int = 0,
                head=None, **kwargs):
        batch, length, _ = hidden_states.shape
        tokens, positions = hidden_states[..., : self.token_dims], hidden_states[..., self.token_dims:]
        query_positions = positions[:, -queries:] if queries else positions
        q = self.q_proj(query_positions)
        k = self.q_proj(positions) if self.k_proj is None else self.k_proj(positions)
        if self.q_rotation is not None:
            q = rotate_pairs(q, self.q_rotation)
        v = head.transposed(tokens)
        q, k, v = q[:, None], k[:, None], v[:, None]  # [batch, 1 head, length, dim]
        if past_key_values is not None:
            k, v = past_key_values.update(k, v, self.layer_idx)
        attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        output, weights = attention_interface(self, q, k, v, attention_mask, scaling=self.scaling, dropout=0.0, **kwargs)
        return self.o_proj(output.reshape(batch, q.shape[2], -1)), weights


class MinimalMLP(nn.Module):
    def __init__(self, config: MinimalConfig):
        super().__init__()
        d, f, rank, bias = config.hidden_size, config.intermediate_size, config.projection_rank, config.mlp_bias
        self.gate_proj = Projection(d, f, rank, bias) if config.mlp_type == "gated" else None
        self.up_proj = Projection(d, f, rank, bias)
        # tie_down_head: the down projection is the head projection transposed, passed in as `head`.
        self.down_proj = None if config.tie_down_head else Projection(f, d, rank, bias)
        self.act_fn = ACT2FN[config.hidden_act]

    def forward(self, x, head=None):
        if self.gate_proj is None:
            hidden = self.act_fn(self.up_proj(x))
        else:
            hidden = self.act_fn(self.gate_proj(x)) * self.up_proj(x)
        return head.transposed(hidden) if self.down_proj is None else self.down_proj(hidden)


class MinimalDecoderLayer(nn.Module):
    def __init__(self, config: MinimalConfig, layer_idx: int):
        super().__init__()
        self.input_layernorm = Norm(config.hidden_size, config.norm_type, config.norm_eps)
        self.self_attn = (SplitAttention if config.token_dims else MinimalAttention)(config, layer_idx)
        # norm_sharing: the second norm is the first (no module of its own, so parameters() stays unique).
        self.post_attention_layernorm = (Norm(config.hidden_size, config.norm_type, config.norm_eps)
                                         if config.norm_sharing == "none" else None)
        self.mlp = MinimalMLP(config)

    def forward(self, hidden_states, position_embeddings, attention_mask, past_key_values=None, queries: int = 0,
                head=None, **kwargs):
        """`queries` > 0: outputs for the last `queries` positions only (all of them still fill the cache).
        `head`: the split residual's head projection, which values and the tied FFN down read. It is
        passed as a module, not its weight: a parameter among a module's inputs trips torch's module
        tracker (FlopCounterMode) under no_grad."""
        if queries and attention_mask is not None:
            attention_mask = attention_mask[:, :, -queries:]
        if head is not None:
            kwargs["head"] = head
        attn_out, weights = self.self_attn(
            self.input_layernorm(hidden_states), position_embeddings, attention_mask, past_key_values, queries, **kwargs
        )
        if queries:
            hidden_states = hidden_states[:, -queries:]
        hidden_states = hidden_states + attn_out
        second_norm = self.input_layernorm if self.post_attention_layernorm is None else self.post_attention_layernorm
        hidden_states = hidden_states + self.mlp(second_norm(hidden_states), head)
        return hidden_states, weights


class MinimalPreTrainedModel(PreTrainedModel):
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
                init.xavier_uniform_(module.down)
                init.zeros_(module.up)
            else:
                init.xavier_uniform_(module.weight)
        elif isinstance(module, Projection):
            for p in (module.down, module.up) if module.low_rank else (module.weight,):
                init.normal_(p, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, SpiralPositions):
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


class MinimalModel(MinimalPreTrainedModel):
    def __init__(self, config: MinimalConfig):
        super().__init__(config)
        self.embed_tokens = TokenEmbedding(config)
        self.embed_positions = (
            nn.Embedding(config.max_position_embeddings, config.hidden_size)
            if config.position_embedding == "learned" else None
        )
        self.rotary_emb = RotaryEmbedding(config) if config.position_embedding == "rope" else None
        self.spiral = SpiralPositions(config) if config.position_embedding == "spiral" else None
        # The split residual's head projection (hidden -> token_dims): the output head's first step,
        # and the value projection (and with tie_down_head the FFN down) of every layer.
        self.head_proj = Projection(config.hidden_size, config.token_dims, 0, False) if config.token_dims else None
        self.layers = nn.ModuleList([MinimalDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        # norm_sharing="all": the final norm is the last layer's (applied in forward, not a second module).
        self.norm = (Norm(config.hidden_size, config.norm_type, config.norm_eps)
                     if config.final_norm and config.norm_sharing != "all" else None)
        self.post_init()

    def final_norm(self) -> Norm | None:
        if not self.config.final_norm:
            return None
        return self.layers[-1].input_layernorm if self.norm is None else self.norm

    def get_input_embeddings(self):
        return self.embed_tokens

    def digit_columns(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Abacus ids of a whole sequence: the spiral positions' columns (1 + column; 0: not a digit)."""
        return abacus_position_ids(input_ids, self.config.num_digit_tokens)

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
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        if self.spiral is not None:
            inputs_embeds = torch.cat([inputs_embeds, self.spiral(input_ids, position_ids)], dim=-1)
        if position_ids is None:
            position_ids = positions_from_mask(attention_mask, length, past_length, inputs_embeds.device)
        elif not past_length and position_ids.numel() and (position_ids.min() < 0 or position_ids.max() >= self.config.max_position_embeddings):
            # Checked on the prompt (the rotary table has one row per position); later steps
            # are bounded by the context check above.
            raise ValueError(f"position_ids must lie in [0, {self.config.max_position_embeddings}); got ids outside it")
        hidden_states = inputs_embeds
        if self.embed_positions is not None:
            hidden_states = hidden_states + self.embed_positions(position_ids)
        rope = self.rotary_emb(hidden_states, position_ids) if self.rotary_emb is not None else None

        mask = causal_mask(self.config, inputs_embeds, attention_mask, past_key_values, past_length)
        keep = kept_queries(keep_last, length, mask, output_attentions)
        attentions = []
        for i, layer in enumerate(self.layers):
            queries = keep if i == len(self.layers) - 1 else 0
            hidden_states, weights = layer(hidden_states, rope, mask, past_key_values, queries, self.head_proj, **kwargs)
            if output_attentions:
                attentions.append(weights)
        final_norm = self.final_norm()
        if final_norm is not None:
            hidden_states = final_norm(hidden_states)
        return BaseModelOutputWithPast(
            last_hidden_state=hidden_states,
            **{CACHE_FIELD: past_key_values if use_cache else None},
            attentions=tuple(attentions) if output_attentions else None,
        )


class MinimalForCausalLM(MinimalPreTrainedModel, GenerationMixin):
    def __init__(self, config: MinimalConfig):
        super().__init__(config)
        self.model = MinimalModel(config)
        # Tied heads read the embedding table directly (it may be computed, e.g. a circular arc); a split
        # residual's head always does, after its head projection.
        tied = config.tie_word_embeddings or config.token_dims
        self.lm_head = None if tied else nn.Linear(config.hidden_size, config.vocab_size, bias=False)
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
        if self.model.head_proj is not None:
            hidden = self.model.head_proj(hidden)
        weight = self.model.embed_tokens.table() if self.lm_head is None else self.lm_head.weight
        if self.config.digit_logits_only:  # only digits are ever written: the other tokens are not scored
            digits = self.config.num_digit_tokens
            logits = F.pad(F.linear(hidden, weight[:digits]), (0, weight.shape[0] - digits),
                           value=torch.finfo(hidden.dtype).min)
        else:
            logits = F.linear(hidden, weight)
        loss = None
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
        return CausalLMOutputWithPast(
            loss=loss, logits=logits, **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)}, attentions=outputs.attentions
        )


__all__ = ["MinimalForCausalLM", "MinimalModel", "MinimalPreTrainedModel"]
