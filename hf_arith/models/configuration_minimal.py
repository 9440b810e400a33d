"""Configuration for the minimal family: tiny decoder-only adders.

The tricks of the tiny-adder literature are flags here, not forks of the model. Shipped as Hub
remote code: imports only transformers and sibling files.
"""

import math

from .configuration_common import ArithConfig

_CHOICES = {
    "mlp_type": ("gated", "plain"),
    "norm_type": ("rmsnorm", "layernorm", "none"),
    "position_embedding": ("rope", "learned", "none", "spiral"),
    "digit_embedding": ("learned", "circular_arc"),
    "special_embedding": ("learned", "arc", "digit0"),
    "norm_sharing": ("none", "block", "all"),
    "hidden_act": ("relu", "gelu", "silu", "tanh"),
    "answer_start_position": ("learned", "spiral", "circle"),
    "split_paths": ("all", "tokens", "tokens_and_slope"),
    "query_positions": ("spiral", "circle"),
    "norm_weights": ("all", "paths"),
    "split_values": ("head", "tokens"),
}


class MinimalConfig(ArithConfig):
    r"""
    Args:
        vocab_size: tokens in the tokenizer (digits first, so ids `0..num_digit_tokens-1` are digits).
        hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
        intermediate_size: the usual shape knobs (`num_key_value_heads < num_attention_heads` is GQA).
        mlp_type: "gated" (SwiGLU-style, three matrices) or "plain" (up, act, down).
        norm_type: "rmsnorm", "layernorm" or "none"; `qk_norm` normalises queries and keys per
            head; `final_norm` adds a norm before the output head.
        share_qk_norm: queries and keys go through one norm (its scale is shared).
        norm_sharing: "none"; "block": each layer's two norms are one; "all": also the final norm is
            the last layer's norm (one norm in a one-layer model).
        position_embedding: "rope" (with `rope_theta`; a small theta such as 3 separates the ~35
            positions of a 10-digit sum), "learned" (counted parameters) or "none".
        tie_kv: keys and values share one projection (K = V).
        tie_qo: the output projection is the transpose of the query projection (O = Q^T).
        projection_rank: factorise every projection as two matrices of this rank (0 = full rank).
        digit_embedding: "learned" or "circular_arc": digit d embeds as r*(cos(a + d*s), sin(a + d*s))
            in the first two dimensions, three parameters for all digits.
        special_embedding: how the non-digit tokens ('+', '=', ...) embed with a circular arc:
            "learned" rows of their own, or "arc": they continue the arc after the digits (token id
            i at angle a + i*s), or "digit0": they all embed at digit 0's point (MicroAdder's '+' and
            '=' are token 0), so they add nothing to the token part; both cost no parameters.
        digit_logits_only: the head scores the digit tokens only; every other token gets the lowest
            logit, so it is never written. For formats whose answers are digits and nothing else
            (fixed width, no end token, no sign): the output need not push the delimiters down. No
            parameters.
        arc_init: the arc's starting (radius, start angle, angle step); None spreads the arc's
            tokens over most of a circle.
        token_dims: 0, or a split residual stream (MicroAdder's layout): tokens embed in the first
            `token_dims` dimensions and positions in the other three, side by side instead of added.
            Queries and keys then read the position part, values the token part; values, the FFN's
            input and the output all go through one head projection (hidden -> token_dims) whose
            weight is also the value projection, and the head scores that against the token table.
            The head is always the token table (`tie_word_embeddings` is not read). Needs
            `position_embedding="spiral"`, one attention head and a plain FFN.
        spiral: the fixed position of digit column c (its index within its number, from 0):
            (A cos(2 pi c / P), A sin(2 pi c / P), s c) for `[A, P, s]`; other tokens sit at the
            origin, except the answer-start token (`answer_start_token_id`), whose position is
            learned (three parameters; see `answer_start_position`). Fixed positions are not parameters.
        answer_start_position: where the answer-start token sits in a split residual: "learned" (three
            parameters) or "spiral": column -1 of the fixed spiral, one column before the first answer
            digit's operands, as every answer token sits one column before the digits it reads; or
            "circle": column -1's point on the circle, with a learned slope coordinate (one parameter).
        split_paths: the residual dims a split residual's head projection, attention output and FFN
            read and write: "all"; "tokens", the token part alone (each map token_dims wide), so the
            position part is read by queries and keys only and stays as embedded; "tokens_and_slope",
            the token part and the spiral's slope dimension (which starts as the digit's column, a
            bias that differs by column, and is written to as well).
        norm_weights: "all", or "paths": a split residual's RMSNorms learn weights for the dims of
            `split_paths` alone, the others keeping weight 1 (queries and keys alone read them, and
            their projection absorbs any scale: no loss of expressiveness, fewer parameters).
        split_values: a split residual's values: "head", the token part through the head projection
            (transposed), or "tokens", the token part itself, the output projection then reading
            token_dims (a rank-r output reads r x token_dims instead of r x the paths' width).
        o_proj_angle: the attention output of a split residual whose values are two token dims
            (`split_values="tokens"`, `token_dims=2`, `o_proj_rank=1`) reads them along a unit vector
            at one learned angle: a rank-1 map's scale lives in its second factor, so its first
            needs one parameter, not two.
        query_positions: what queries and keys of a split residual read: "spiral", all three position
            dims, or "circle", the spiral's circle alone (two).
        learn_spiral: the spiral's amplitude, phase, slope and offset are learned (four parameters,
            starting from `spiral` with phase and offset 0).
        answer_start_token_id: the `=` token's id (needed by the spiral positions).
        tie_qk_rotation: K = Q's projection, and Q is that projection turned by one learned angle in
            each plane of its dimensions (an odd last dimension is not turned): tied Q/K with a phase
            (one parameter instead of a K matrix).
        o_proj_rank: the attention output projection's own rank (0: `projection_rank`).
        tie_down_head: the FFN's down projection is the head projection's weight (needs
            `intermediate_size == token_dims`): the head projection then serves as value
            projection, FFN down and output head.
        tie_word_embeddings: the output head reuses the embedding table.
    """

    model_type = "hf_arith_minimal"
    keys_to_ignore_at_inference = ["past_key_values"]

    def __init__(
        self,
        vocab_size: int = 14,
        hidden_size: int = 4,
        num_hidden_layers: int = 1,
        num_attention_heads: int = 2,
        num_key_value_heads: int = 1,
        head_dim: int = 4,
        intermediate_size: int = 6,
        hidden_act: str = "silu",
        mlp_type: str = "gated",
        mlp_bias: bool = False,
        attention_bias: bool = False,
        norm_type: str = "rmsnorm",
        qk_norm: bool = True,
        final_norm: bool = True,
        norm_eps: float = 1e-6,
        position_embedding: str = "rope",
        rope_theta: float = 3.0,
        max_position_embeddings: int = 64,
        tie_kv: bool = False,
        tie_qo: bool = False,
        projection_rank: int = 0,
        digit_embedding: str = "learned",
        special_embedding: str = "learned",
        arc_init: list[float] | None = None,
        share_qk_norm: bool = False,
        norm_sharing: str = "none",
        num_digit_tokens: int = 10,
        digit_logits_only: bool = False,
        token_dims: int = 0,
        spiral: list[float] | None = None,
        learn_spiral: bool = False,
        answer_start_token_id: int | None = None,
        tie_qk_rotation: bool = False,
        o_proj_rank: int = 0,
        tie_down_head: bool = False,
        answer_start_position: str = "learned",
        split_paths: str = "all",
        query_positions: str = "spiral",
        norm_weights: str = "all",
        split_values: str = "head",
        o_proj_angle: bool = False,
        initializer_range: float = 0.02,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = head_dim
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.mlp_type = mlp_type
        self.mlp_bias = mlp_bias
        self.attention_bias = attention_bias
        self.norm_type = norm_type
        self.qk_norm = qk_norm
        self.final_norm = final_norm
        self.norm_eps = norm_eps
        self.position_embedding = position_embedding
        self.rope_theta = rope_theta
        self.max_position_embeddings = max_position_embeddings
        self.tie_kv = tie_kv
        self.tie_qo = tie_qo
        self.projection_rank = projection_rank
        self.digit_embedding = digit_embedding
        self.special_embedding = special_embedding
        self.arc_init = list(arc_init) if isinstance(arc_init, (list, tuple)) else arc_init
        self.share_qk_norm = share_qk_norm
        self.norm_sharing = norm_sharing
        self.num_digit_tokens = num_digit_tokens
        self.digit_logits_only = digit_logits_only
        self.token_dims = token_dims
        self.spiral = list(spiral) if isinstance(spiral, (list, tuple)) else ([3.5, 10.0, 0.15] if spiral is None else spiral)
        self.answer_start_token_id = answer_start_token_id
        self.learn_spiral = learn_spiral
        self.tie_qk_rotation = tie_qk_rotation
        self.o_proj_rank = o_proj_rank
        self.tie_down_head = tie_down_head
        self.answer_start_position = answer_start_position
        self.split_paths = split_paths
        self.query_positions = query_positions
        self.norm_weights = norm_weights
        self.split_values = split_values
        self.o_proj_angle = o_proj_angle
        self.initializer_range = initializer_range
        super().__init__(**kwargs)  # ArithConfig: token ids, tied head, then self._validate()

    @property
    def arc_tokens(self) -> int:
        """How many tokens (ids 0 .. arc_tokens - 1) embed on the circular arc: 0 without one."""
        if self.digit_embedding != "circular_arc":
            return 0
        return self.vocab_size if self.special_embedding == "arc" else self.num_digit_tokens

    def _validate(self):
        """Reject malformed configs with one line that names the field, before torch sees them."""
        self.check_integers(("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                             "num_key_value_heads", "head_dim", "intermediate_size", "max_position_embeddings"))
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"MinimalConfig.{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"MinimalConfig.num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )
        if self.position_embedding == "rope" and (self.head_dim % 2 or self.rope_theta <= 0):
            raise ValueError("MinimalConfig: rope needs an even head_dim and rope_theta > 0")
        if self.tie_kv and self.num_key_value_heads * self.head_dim < 1:
            raise ValueError("MinimalConfig.tie_kv needs key/value projections")
        if self.tie_qo and self.attention_bias:
            raise ValueError("MinimalConfig.tie_qo (O = Q^T) needs attention_bias=False")
        if not isinstance(self.projection_rank, int) or self.projection_rank < 0:
            raise ValueError(f"MinimalConfig.projection_rank must be >= 0, got {self.projection_rank!r}")
        if self.digit_embedding == "circular_arc":
            if self.hidden_size < 2:
                raise ValueError("MinimalConfig.digit_embedding='circular_arc' needs hidden_size >= 2")
            if not 2 <= self.num_digit_tokens <= self.vocab_size:
                raise ValueError("MinimalConfig.num_digit_tokens must be between 2 and vocab_size")
        elif self.special_embedding != "learned":
            raise ValueError(f"MinimalConfig.special_embedding={self.special_embedding!r} needs "
                             f"digit_embedding='circular_arc'")
        if self.arc_init is not None and (
            not isinstance(self.arc_init, list) or len(self.arc_init) != 3
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                       for v in self.arc_init)
        ):
            raise ValueError(f"MinimalConfig.arc_init must be three finite numbers (radius, start, step), "
                             f"got {self.arc_init!r}")
        for name in ("share_qk_norm", "qk_norm", "tie_kv", "tie_qo", "final_norm", "digit_logits_only",
                     "tie_qk_rotation", "tie_down_head", "learn_spiral", "o_proj_angle"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"MinimalConfig.{name} must be true or false, got {getattr(self, name)!r}")
        if self.share_qk_norm and not self.qk_norm:
            raise ValueError("MinimalConfig.share_qk_norm needs qk_norm=True")
        for name in ("token_dims", "o_proj_rank"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"MinimalConfig.{name} must be an integer >= 0, got {value!r}")
        if self.tie_qk_rotation and self.head_dim < 2:
            raise ValueError("MinimalConfig.tie_qk_rotation needs head_dim >= 2 (it turns pairs of dimensions)")
        self._validate_split()

    def _validate_split(self):
        """The split residual (`token_dims`) and its spiral positions come together, with the shape they need."""
        split, spiral = self.token_dims > 0, self.position_embedding == "spiral"
        if split != spiral:
            raise ValueError("MinimalConfig: token_dims > 0 and position_embedding='spiral' go together")
        if not split:  # these options exist only in the split layout: refused, not silently ignored
            for name in ("tie_down_head", "learn_spiral", "tie_qk_rotation", "o_proj_rank", "o_proj_angle"):
                if getattr(self, name):
                    raise ValueError(f"MinimalConfig.{name} needs the split residual (token_dims > 0)")
            for name, default in (("answer_start_position", "learned"), ("split_paths", "all"),
                                  ("query_positions", "spiral"), ("norm_weights", "all"),
                                  ("split_values", "head")):
                if getattr(self, name) != default:
                    raise ValueError(f"MinimalConfig.{name} needs the split residual (token_dims > 0)")
            return
        if self.hidden_size - self.token_dims != 3:
            raise ValueError(f"MinimalConfig: the spiral positions take 3 dimensions, so hidden_size must be "
                             f"token_dims + 3, got {self.hidden_size} and {self.token_dims}")
        if (self.num_attention_heads, self.num_key_value_heads, self.mlp_type) != (1, 1, "plain"):
            raise ValueError("MinimalConfig: token_dims > 0 needs one attention head, one key/value head and "
                             "mlp_type='plain'")
        if self.tie_kv or self.tie_qo or self.qk_norm or self.attention_bias or self.mlp_bias:
            raise ValueError("MinimalConfig: token_dims > 0 has no tie_kv, tie_qo, qk_norm or biases")
        if self.digit_embedding == "circular_arc" and self.token_dims < 2:
            raise ValueError("MinimalConfig.digit_embedding='circular_arc' needs token_dims >= 2")
        if self.norm_weights == "paths" and (self.norm_type != "rmsnorm" or self.split_paths == "all"):
            raise ValueError("MinimalConfig.norm_weights='paths' needs norm_type='rmsnorm' and split_paths other "
                             "than 'all'")
        if self.o_proj_angle and (self.split_values, self.token_dims, self.o_proj_rank) != ("tokens", 2, 1):
            raise ValueError("MinimalConfig.o_proj_angle needs split_values='tokens', token_dims=2 and o_proj_rank=1")
        if self.tie_down_head and self.intermediate_size != self.token_dims:
            raise ValueError(f"MinimalConfig.tie_down_head needs intermediate_size == token_dims ({self.token_dims}), "
                             f"got {self.intermediate_size}")
        if not (isinstance(self.answer_start_token_id, int) and 0 <= self.answer_start_token_id < self.vocab_size):
            raise ValueError(f"MinimalConfig: the spiral positions need answer_start_token_id (the '=' token), "
                             f"got {self.answer_start_token_id!r}")
        if (not isinstance(self.spiral, list) or len(self.spiral) != 3
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in self.spiral)
                or self.spiral[1] <= 0):
            raise ValueError(f"MinimalConfig.spiral must be [amplitude, period > 0, slope], got {self.spiral!r}")


__all__ = ["MinimalConfig"]
