"""The minimal family's computation in plain torch: every building block and the decoder's forward pass.

One definition serves two users. `modeling_minimal.py` wraps it for transformers (config class,
PreTrainedModel, KV cache, the attention backends of ALL_ATTENTION_FUNCTIONS, passed in as
`attention`); `hf-arith adderboard` copies this file's source verbatim into a single-file AdderBoard
submission. So it imports only torch, the standard library and the torch-only `abacus_positions`
(whose function the exporter inlines). `config` is any object with MinimalConfig's attributes
(and its `arc_tokens`). Parameter names are the checkpoints' names.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from .abacus_positions import abacus_position_ids

# The activations `hidden_act` names, as plain torch functions (transformers' ACT2FN computes the same).
ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu, "tanh": torch.tanh}


def repeat_heads(x, groups: int):
    """[batch, kv_heads, length, dim] -> [batch, kv_heads * groups, length, dim] (grouped-query attention)."""
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


def causal_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Scaled dot-product attention over [batch, heads, length, dim], the attention function this module
    runs when none is passed in. With no mask, each query sees the keys up to its own position, the
    queries being the last positions. Returns (output [batch, queries, heads, dim], None)."""
    groups = getattr(module, "num_key_value_groups", 1)
    key, value = repeat_heads(key, groups), repeat_heads(value, groups)
    q_len, k_len = query.shape[2], key.shape[2]
    if attention_mask is None and q_len != k_len:
        attention_mask = torch.ones(q_len, k_len, dtype=torch.bool, device=query.device).tril(k_len - q_len)
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout,
                                            is_causal=attention_mask is None, scale=scaling)
    return output.transpose(1, 2), None


class Projection(nn.Module):
    """A linear map, optionally factorised as two rank-r matrices (`projection_rank`).

    `transposed` applies the transpose, which is how O = Q^T reuses the query weights. With `angle`
    (rank 1 from two dims), the first factor is the unit vector at one learned angle: a rank-1 map's
    scale can live in its second factor, so the first needs only its direction (one parameter, not two).
    """

    def __init__(self, in_features: int, out_features: int, rank: int, bias: bool, angle: bool = False):
        super().__init__()
        self.low_rank = angle or 0 < rank < min(in_features, out_features)
        self.angle = nn.Parameter(torch.zeros(())) if angle else None
        if self.low_rank:
            self.down = None if angle else nn.Parameter(torch.empty(rank, in_features))
            self.up = nn.Parameter(torch.empty(out_features, 1 if angle else rank))
        else:
            self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None

    def first_factor(self):
        if self.angle is None:
            return self.down
        return torch.stack([self.angle.cos(), self.angle.sin()])[None]

    def forward(self, x):
        if self.low_rank:
            return F.linear(F.linear(x, self.first_factor()), self.up, self.bias)
        return F.linear(x, self.weight, self.bias)

    def transposed(self, x):
        if self.low_rank:
            return F.linear(F.linear(x, self.up.t()), self.first_factor().t())
        return F.linear(x, self.weight.t())


class Norm(nn.Module):
    """RMSNorm, LayerNorm or identity, chosen by `norm_type`.

    With `paths` (a split residual's `SplitPaths`, RMSNorm only) it learns weights for the path dims
    alone; the other dims keep weight 1 (only queries and keys read them, and their projection
    absorbs any scale)."""

    def __init__(self, dim: int, kind: str, eps: float, paths=None):
        super().__init__()
        self.kind, self.eps, self.paths = kind, eps, paths
        width = dim if paths is None else paths.width
        self.weight = nn.Parameter(torch.ones(width)) if kind != "none" else None
        self.bias = nn.Parameter(torch.zeros(dim)) if kind == "layernorm" else None

    def forward(self, x):
        if self.kind == "rmsnorm":  # one fused kernel: a tiny model's decode step is mostly op overhead
            weight = self.weight if self.paths is None else self.paths.write(self.weight - 1) + 1
            if x.dtype == torch.float32:  # no casts to dispatch
                return weight * F.rms_norm(x, x.shape[-1:], eps=self.eps)
            return weight * F.rms_norm(x.float(), x.shape[-1:], eps=self.eps).to(x.dtype)
        if self.kind == "layernorm":
            return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)
        return x


class TokenEmbedding(nn.Module):
    """Token table; with `circular_arc`, digit rows are points on an arc (three parameters).

    With `special_embedding="arc"` the other tokens continue the arc after the digits, and with
    "digit0" they share digit 0's point; either way the table has no rows of its own (`weight` is None).
    """

    def __init__(self, config):
        super().__init__()
        self.arc = config.digit_embedding == "circular_arc"
        self.arc_tokens = config.arc_tokens
        # A split residual (token_dims > 0) embeds tokens in their own dimensions only.
        self.hidden_size = config.token_dims or config.hidden_size
        self.arc_init = config.arc_init
        self.specials_at_zero = config.special_embedding == "digit0"  # only with the arc
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

    def __init__(self, config):
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

    def __init__(self, config):
        super().__init__()
        self.amplitude, self.period, self.slope = (float(v) for v in config.spiral)
        self.answer_start_token_id = config.answer_start_token_id
        # answer_start_position="spiral": '=' sits at column -1, one column before the answer's first
        # digit, as every answer token sits one column before the digits it reads (no parameters);
        # "circle": at column -1's point of the circle, with a learned slope coordinate (one parameter).
        self.start_kind = config.answer_start_position
        learned = {"learned": 3, "spiral": 0, "circle": 1}[self.start_kind]
        self.answer_start = nn.Parameter(torch.zeros(learned)) if learned else None
        self.shape = nn.Parameter(self.default_shape()) if config.learn_spiral else None

    def default_shape(self) -> torch.Tensor:
        """amplitude, phase, slope, offset of the fixed spiral (where a learned one starts)."""
        return torch.tensor([self.amplitude, 0.0, self.slope, 0.0])

    def forward(self, input_ids, position_ids, dtype=torch.float32):
        """`position_ids`: abacus ids (1 + the digit's column; 0 for every other token); the points in `dtype`."""
        is_start = input_ids == self.answer_start_token_id
        on_spiral = position_ids > 0
        if self.start_kind != "learned":
            on_spiral = on_spiral | is_start  # abacus id 0 there, so its column is -1
        column = (position_ids - 1).to(dtype)
        angle = column * (2 * math.pi / self.period)
        if self.shape is None:
            points = torch.stack([self.amplitude * angle.cos(), self.amplitude * angle.sin(), self.slope * column], -1)
        else:
            amplitude, phase, slope, offset = self.shape
            angle = angle + phase
            points = torch.stack([amplitude * angle.cos(), amplitude * angle.sin(), slope * column + offset], -1)
        points = points * on_spiral[..., None]
        if self.answer_start is None:
            return points
        start = self.answer_start
        if self.start_kind == "circle":
            start = torch.cat([points[..., :2], start.to(dtype).expand(*points.shape[:-1], 1)], dim=-1)
        return torch.where(is_start[..., None], start, points)


class SplitPaths:
    """The residual dimensions that a split residual's head projection, attention output and FFN read and
    write (`split_paths`): "all"; "tokens", the token part alone; "tokens_and_slope", the token part and
    the spiral's last (slope) dimension, which then starts as the column and is also written to. The
    other dimensions stay as embedded. No parameters."""

    def __init__(self, config):
        self.kind, self.token_dims, self.hidden_size = config.split_paths, config.token_dims, config.hidden_size
        self.width = {"all": self.hidden_size, "tokens": self.token_dims,
                      "tokens_and_slope": self.token_dims + 1}[self.kind]

    def read(self, x):
        if self.kind == "all":
            return x
        if self.kind == "tokens":
            return x[..., : self.token_dims]
        return torch.cat([x[..., : self.token_dims], x[..., -1:]], dim=-1)

    def write(self, y):
        """A [..., width] update as a [..., hidden_size] one, zero in the dimensions the paths do not write."""
        if self.kind == "all":
            return y
        unwritten = self.hidden_size - self.width
        if self.kind == "tokens":
            return F.pad(y, (0, unwritten))
        t = self.token_dims
        return torch.cat([y[..., :t], y.new_zeros(*y.shape[:-1], unwritten), y[..., t:]], dim=-1)


def rotate_pairs(x, angle):
    """Turn each pair of dimensions (0, 1), (2, 3), ... of x by `angle`; an odd last dimension stays as it is."""
    even = x.shape[-1] - x.shape[-1] % 2
    pairs = x[..., :even].unflatten(-1, (-1, 2))
    first, second = pairs[..., 0], pairs[..., 1]
    cos, sin = angle.cos(), angle.sin()
    turned = torch.stack([first * cos - second * sin, first * sin + second * cos], dim=-1).flatten(-2)
    return torch.cat([turned, x[..., even:]], dim=-1)


class MinimalAttention(nn.Module):
    def __init__(self, config, layer_idx: int):
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
                attention=causal_attention, **kwargs):
        """`queries` > 0: keys and values for every position, queries (and output) for the last `queries` only.
        `attention`: the attention function (`causal_attention`'s signature)."""
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

        output, weights = attention(self, q, k, v, attention_mask, scaling=self.scaling, dropout=0.0, **kwargs)
        output = output.reshape(batch, q_length, -1)
        output = self.q_proj.transposed(output) if self.o_proj is None else self.o_proj(output)
        return output, weights


class SplitAttention(nn.Module):
    """One head on a split residual (`token_dims` > 0): queries and keys read the position part, values
    the token part through the head projection (`head`, hidden -> token_dims, applied transposed), so
    where to look and what to copy are separate subspaces."""

    def __init__(self, config, layer_idx: int):
        super().__init__()
        self.config, self.layer_idx = config, layer_idx
        self.token_dims, self.head_dim = config.token_dims, config.head_dim
        self.num_key_value_groups = 1
        self.scaling = self.head_dim**-0.5
        self.is_causal = True
        rank = config.projection_rank
        # query_positions="circle": queries and keys read the spiral's circle, not its slope.
        self.positions_read = 2 if config.query_positions == "circle" else 3
        self.q_proj = Projection(self.positions_read, self.head_dim, rank, False)
        # tie_qk_rotation: keys use the query projection; queries are turned by one learned angle.
        self.k_proj = None if config.tie_qk_rotation else Projection(self.positions_read, self.head_dim, rank, False)
        self.q_rotation = nn.Parameter(torch.zeros(())) if config.tie_qk_rotation else None
        # Values come out of the head projection as wide as the paths (split_paths), and so does the output.
        width = SplitPaths(config).width
        # split_values="tokens": values are the token part itself, and the output maps token_dims -> width
        # (with a low-rank output, the same maps as values through the head, for fewer parameters).
        self.values_from_head = config.split_values == "head"
        self.o_proj = Projection(width if self.values_from_head else config.token_dims, width,
                                 config.o_proj_rank or rank, False, angle=config.o_proj_angle)

    def forward(self, hidden_states, position_embeddings, attention_mask, past_key_values=None, queries: int = 0,
                head=None, attention=causal_attention, **kwargs):
        batch, length, _ = hidden_states.shape
        tokens = hidden_states[..., : self.token_dims]
        positions = hidden_states[..., self.token_dims: self.token_dims + self.positions_read]
        query_positions = positions[:, -queries:] if queries else positions
        q = self.q_proj(query_positions)
        k = self.q_proj(positions) if self.k_proj is None else self.k_proj(positions)
        if self.q_rotation is not None:
            q = rotate_pairs(q, self.q_rotation)
        v = head.transposed(tokens) if self.values_from_head else tokens
        q, k, v = q[:, None], k[:, None], v[:, None]  # [batch, 1 head, length, dim]
        if past_key_values is not None:
            k, v = past_key_values.update(k, v, self.layer_idx)
        output, weights = attention(self, q, k, v, attention_mask, scaling=self.scaling, dropout=0.0, **kwargs)
        return self.o_proj(output.reshape(batch, q.shape[2], -1)), weights


class MinimalMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        d, f, rank, bias = config.hidden_size, config.intermediate_size, config.projection_rank, config.mlp_bias
        if config.token_dims:  # a split residual's FFN reads (and writes) the dims of its paths
            d = SplitPaths(config).width
        self.gate_proj = Projection(d, f, rank, bias) if config.mlp_type == "gated" else None
        self.up_proj = Projection(d, f, rank, bias)
        # tie_down_head: the down projection is the head projection transposed, passed in as `head`.
        self.down_proj = None if config.tie_down_head else Projection(f, d, rank, bias)
        self.act_fn = ACTIVATIONS[config.hidden_act]

    def forward(self, x, head=None):
        if self.gate_proj is None:
            hidden = self.act_fn(self.up_proj(x))
        else:
            hidden = self.act_fn(self.gate_proj(x)) * self.up_proj(x)
        return head.transposed(hidden) if self.down_proj is None else self.down_proj(hidden)


class MinimalDecoderLayer(nn.Module):
    def __init__(self, config, layer_idx: int):
        super().__init__()
        # norm_weights="paths": a split residual's norms weigh the dims of its paths alone.
        norm_paths = SplitPaths(config) if config.norm_weights == "paths" else None
        self.input_layernorm = Norm(config.hidden_size, config.norm_type, config.norm_eps, norm_paths)
        self.self_attn = (SplitAttention if config.token_dims else MinimalAttention)(config, layer_idx)
        # norm_sharing: the second norm is the first (no module of its own, so parameters() stays unique).
        self.post_attention_layernorm = (Norm(config.hidden_size, config.norm_type, config.norm_eps, norm_paths)
                                         if config.norm_sharing == "none" else None)
        self.mlp = MinimalMLP(config)
        self.paths = SplitPaths(config) if config.token_dims else None

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
        second_norm = self.input_layernorm if self.post_attention_layernorm is None else self.post_attention_layernorm
        if self.paths is not None and self.paths.kind != "all":
            hidden_states = hidden_states + self.paths.write(attn_out)
            mlp_out = self.mlp(self.paths.read(second_norm(hidden_states)), head)
            return hidden_states + self.paths.write(mlp_out), weights
        hidden_states = hidden_states + attn_out
        hidden_states = hidden_states + self.mlp(second_norm(hidden_states), head)
        return hidden_states, weights



class MinimalDecoderParts:
    """The decoder's modules and forward pass, mixed into an nn.Module: `MinimalDecoder` here, and the
    transformers `MinimalModel`, which adds the cache, the attention mask and the backend."""

    def build_decoder(self, config):
        self.embed_tokens = TokenEmbedding(config)
        self.embed_positions = (
            nn.Embedding(config.max_position_embeddings, config.hidden_size)
            if config.position_embedding == "learned" else None
        )
        self.rotary_emb = RotaryEmbedding(config) if config.position_embedding == "rope" else None
        self.spiral = SpiralPositions(config) if config.position_embedding == "spiral" else None
        # The split residual's head projection (hidden -> token_dims): the output head's first step,
        # and the value projection (and with tie_down_head the FFN down) of every layer.
        # It reads the dims of the split's paths (split_paths), all of them by default.
        self.paths = SplitPaths(config) if config.token_dims else None
        self.head_proj = Projection(self.paths.width, config.token_dims, 0, False) if config.token_dims else None
        self.layers = nn.ModuleList([MinimalDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        # norm_sharing="all": the final norm is the last layer's (applied in forward, not a second module).
        self.norm = (Norm(config.hidden_size, config.norm_type, config.norm_eps,
                          self.paths if config.norm_weights == "paths" else None)
                     if config.final_norm and config.norm_sharing != "all" else None)
        self.num_digit_tokens, self.has_final_norm = config.num_digit_tokens, config.final_norm

    def final_norm(self):
        if not self.has_final_norm:
            return None
        return self.layers[-1].input_layernorm if self.norm is None else self.norm

    def digit_columns(self, input_ids):
        """Abacus ids of a whole sequence: the spiral positions' columns (1 + column; 0: not a digit)."""
        return abacus_position_ids(input_ids, self.num_digit_tokens)

    def embed(self, input_ids, inputs_embeds=None, position_ids=None):
        """The token part of the residual, with the spiral positions (`position_ids`: digit columns) beside it."""
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        if self.spiral is not None:
            inputs_embeds = torch.cat([inputs_embeds, self.spiral(input_ids, position_ids, inputs_embeds.dtype)], dim=-1)
        return inputs_embeds

    def run_layers(self, hidden_states, position_ids, attention_mask=None, past_key_values=None, keep: int = 0,
                   attention=causal_attention, output_attentions=False, **kwargs):
        """Positions, every layer and the final norm: (hidden states, the layers' attention weights).
        `keep` > 0: the last layer computes outputs for the last `keep` positions only."""
        if self.embed_positions is not None:
            hidden_states = hidden_states + self.embed_positions(position_ids)
        rope = self.rotary_emb(hidden_states, position_ids) if self.rotary_emb is not None else None
        attentions = []
        for i, layer in enumerate(self.layers):
            queries = keep if i == len(self.layers) - 1 else 0
            hidden_states, weights = layer(hidden_states, rope, attention_mask, past_key_values, queries, self.head_proj,
                                           attention=attention, **kwargs)
            if output_attentions:
                attentions.append(weights)
        final_norm = self.final_norm()
        if final_norm is not None:
            hidden_states = final_norm(hidden_states)
        return hidden_states, attentions


class MinimalHeadParts:
    """The output head, mixed into an nn.Module that holds the decoder as `model`."""

    def build_head(self, config):
        # Tied heads read the embedding table directly (it may be computed, e.g. a circular arc); a split
        # residual's head always does, after its head projection.
        tied = config.tie_word_embeddings or config.token_dims
        self.lm_head = None if tied else nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.digit_logits = config.num_digit_tokens if config.digit_logits_only else 0

    def logits(self, hidden):
        if self.model.head_proj is not None:
            hidden = self.model.head_proj(self.model.paths.read(hidden))
        weight = self.model.embed_tokens.table() if self.lm_head is None else self.lm_head.weight
        if self.digit_logits:  # only digits are ever written: the other tokens are not scored
            return F.pad(F.linear(hidden, weight[:self.digit_logits]), (0, weight.shape[0] - self.digit_logits),
                         value=torch.finfo(hidden.dtype).min)
        return F.linear(hidden, weight)


class MinimalDecoder(MinimalDecoderParts, nn.Module):
    """The decoder on its own: token ids [batch, length] -> final hidden states, no cache, no padding."""

    def __init__(self, config):
        super().__init__()
        self.build_decoder(config)

    def forward(self, input_ids):
        if self.spiral is not None:
            position_ids = self.digit_columns(input_ids)
        else:
            position_ids = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        return self.run_layers(self.embed(input_ids, position_ids=position_ids), position_ids)[0]


class MinimalLM(MinimalHeadParts, nn.Module):
    """A causal decoder: token ids [batch, length] -> next-token logits [batch, length, vocab_size]."""

    def __init__(self, config):
        super().__init__()
        self.model = MinimalDecoder(config)
        self.build_head(config)

    def forward(self, input_ids):
        return self.logits(self.model(input_ids))
