"""A single-file AdderBoard submission (github.com/anadim/AdderBoard) for a minimal-family model.

`write_submission(model, tokenizer, path)` writes one Python file that needs only torch: a small
re-implementation of the minimal family's forward pass, generated from the model's config (only
the code paths its options use), its unique weight tensors inlined with exact float32 values, the
tokenizer's number format for `a+b`, and plain greedy decoding. The file defines what AdderBoard's
`verify.py` calls: `build_model() -> (model, metadata)` and `add(model, a, b) -> int`.

Before the file is written, its source is run here: its weights must equal the model's bit for
bit and its answers to the protocol's edge cases must equal `hf_arith.solve`'s.
"""

from __future__ import annotations

import inspect
import re
import string
import types
from pathlib import Path

import numpy as np
import torch

from .errors import HfArithError
from .evaluation import TINY_ADDER_EDGE_CASES, TINY_ADDER_MAX, is_tiny_adder_format
from .formatting import EOS_TOKEN, PAD_TOKEN, PROMPT_END, FormatError, get_task
from .loading import checkpoint_label
from .models import MinimalConfig
from .records import write_atomic

MODEL_TYPE = MinimalConfig.model_type
# The MinimalConfig options the exported forward pass implements, and the values it takes.
SUPPORTED = {
    "vocab_size": None, "hidden_size": None, "num_hidden_layers": None, "num_attention_heads": None,
    "num_key_value_heads": None, "head_dim": None, "intermediate_size": None, "max_position_embeddings": None,
    "norm_eps": None, "rope_theta": None, "num_digit_tokens": None, "projection_rank": None,
    "initializer_range": None, "arc_init": None,  # training only
    "token_dims": None, "spiral": None, "answer_start_token_id": None, "o_proj_rank": None,
    "tie_qk_rotation": (False, True), "tie_down_head": (False, True), "learn_spiral": (False, True),
    "hidden_act": ("relu", "gelu", "silu", "tanh"),
    "mlp_type": ("gated", "plain"),
    "norm_type": ("rmsnorm", "layernorm", "none"),
    "position_embedding": ("rope", "learned", "none", "spiral"),
    "digit_embedding": ("learned", "circular_arc"),
    "special_embedding": ("learned", "arc", "digit0"),
    "norm_sharing": ("none", "block", "all"), "share_qk_norm": (False, True),
    "mlp_bias": (False, True), "attention_bias": (False, True), "qk_norm": (False, True),
    "final_norm": (False, True), "tie_kv": (False, True), "tie_qo": (False, True),
    "tie_word_embeddings": (False, True), "digit_logits_only": (False, True),
}
ACTIVATIONS = {"relu": "F.relu", "gelu": "F.gelu", "silu": "F.silu", "tanh": "torch.tanh"}
VERIFY_HINT = "python verify.py {path}"
PASS_ACCURACY = 0.99  # AdderBoard's qualifying accuracy on its protocol


class ProtocolFailure(HfArithError):
    """The model scores below PASS_ACCURACY on the protocol, so its submission would not qualify."""


def _refuse(message: str) -> HfArithError:
    return HfArithError(f"AdderBoard export: {message}")


def check_exportable(model, tokenizer) -> None:
    """Refuse, with one line, a model this export cannot write exactly: another family, an option
    the exported forward pass does not implement, weights that are not float32, or a number format
    that is not addition of two operands of up to 10 decimal digits (the protocol's range)."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type != MODEL_TYPE or type(model).__name__ != "MinimalForCausalLM":
        raise _refuse(f"only the minimal family ({MODEL_TYPE!r}, MinimalForCausalLM) can be exported; this model is "
                      f"{type(model).__name__} ({model_type!r})")
    defaults = {name: p.default for name, p in inspect.signature(MinimalConfig.__init__).parameters.items()
                if p.default is not inspect.Parameter.empty}
    for name, default in defaults.items():  # an option added to the family after this exporter
        if name not in SUPPORTED and getattr(config, name, default) != default:
            raise _refuse(f"config option {name}={getattr(config, name)!r} is not supported")
    for name, allowed in SUPPORTED.items():
        if allowed is not None and getattr(config, name) not in allowed:
            raise _refuse(f"config option {name}={getattr(config, name)!r} is not supported (supported: {allowed})")
    dtypes = {p.dtype for p in model.parameters()}
    if dtypes != {torch.float32}:
        raise _refuse(f"the weights must be float32, got {', '.join(sorted(str(d) for d in dtypes))} "
                      "(load the checkpoint without --dtype)")
    fmt = getattr(tokenizer, "arith_format", None)
    if fmt is None:
        raise _refuse("the tokenizer has no number format (an hf_arith ArithTokenizer is needed)")
    if not is_tiny_adder_format(fmt) or 0 < fmt.answer_width < 11:
        raise FormatError(f"AdderBoard export: the protocol adds two operands of up to 10 decimal digits; "
                          f"this model does {fmt.task_rules.title} in base {fmt.base}"
                          + (f" with {fmt.operand_width}-digit operands" if fmt.operand_width else "")
                          + (f" and {fmt.answer_width}-digit answers" if fmt.answer_width else ""))
    vocab = fmt.vocab()
    if tokenizer.convert_tokens_to_ids(vocab) != list(range(len(vocab))):
        raise _refuse("the tokenizer's token ids are not its number format's vocabulary in order")
    if config.vocab_size < len(vocab):
        raise _refuse(f"vocab_size {config.vocab_size} is smaller than the tokenizer's {len(vocab)} tokens")
    if config.digit_embedding == "circular_arc" and config.num_digit_tokens != fmt.base:
        raise _refuse(f"num_digit_tokens {config.num_digit_tokens} with a base-{fmt.base} format is not supported")
    longest = _prompt_length(fmt, TINY_ADDER_MAX, TINY_ADDER_MAX) + _answer_budget(fmt, TINY_ADDER_MAX, TINY_ADDER_MAX)
    if longest > config.max_position_embeddings:
        raise FormatError(f"AdderBoard export: 10-digit problems need {longest} positions, more than this model's "
                          f"context of {config.max_position_embeddings}")


# -- the number format, as the exported file applies it (mirrors hf_arith.formatting for a+b) -----
def _prompt_length(fmt, a: int, b: int) -> int:
    width = fmt.operand_width
    return max(len(str(a)), width) + 1 + max(len(str(b)), width) + 1


def _answer_budget(fmt, a: int, b: int) -> int:
    """The tokenizer's answer budget (`NumberFormat.max_answer_tokens`) for one a+b problem."""
    return max(max(len(str(a)), len(str(b))) + 1, fmt.answer_width) + (1 if fmt.end_token else 0)


def format_description(fmt) -> str:
    def number(width: int, reverse: bool) -> str:
        text = f"zero-padded to {width} digits" if width else "its digits"
        return text + (", least significant first" if reverse else ", most significant first")

    end = ", then <eos>" if fmt.end_token else ""
    return (f"prompt: a and b each {number(fmt.operand_width, fmt.reverse_operands)}, as 'a+b='; "
            f"answer: {number(fmt.answer_width, fmt.reverse_answer)}{end}; one token per character")


# -- metadata ------------------------------------------------------------------------------------
def architecture(config) -> str:
    """One line in the leaderboard's style, e.g. '1L decoder, d=4, 2h/1kv, hd=4, ff=6, RoPE θ=3, SwiGLU'."""
    c = config
    parts = [f"{c.num_hidden_layers}L decoder", f"d={c.hidden_size}",
             f"{c.num_attention_heads}h/{c.num_key_value_heads}kv", f"hd={c.head_dim}", f"ff={c.intermediate_size}"]
    if c.position_embedding == "rope":
        parts.append(f"RoPE θ={c.rope_theta:g}")
    elif c.position_embedding == "learned":
        parts.append("learned positions")
    elif c.position_embedding == "spiral":
        parts.append(f"split residual ({c.token_dims} token + {c.hidden_size - c.token_dims} position dims), "
                     + ("learned" if c.learn_spiral else "fixed") + " spiral positions per digit column")
    else:
        parts.append("no positions")
    act = {"silu": "SwiGLU", "gelu": "GeGLU", "relu": "ReGLU", "tanh": "tanh-gated"}[c.hidden_act]
    parts.append(act if c.mlp_type == "gated" else f"{c.hidden_act} MLP")
    norm = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm", "none": "no norms"}[c.norm_type]
    if c.norm_type != "none":
        extras = [e for e, on in (("QK norm", c.qk_norm), ("final norm", c.final_norm)) if on]
        if c.norm_sharing != "none":
            extras.append("one norm per layer" if c.norm_sharing == "block" else "all norms shared")
        norm += f" ({', '.join(extras)})" if extras else ""
    parts.append(norm)
    parts.append(f"vocab {c.vocab_size}")
    return ", ".join(parts)


def tricks(config, fmt) -> list[str]:
    """Each tying and parametrisation option in use, and the format choices."""
    c = config
    out = []
    if c.digit_embedding == "circular_arc":
        if c.special_embedding == "arc":
            out.append(f"circular arc token embedding (3 params for all {c.vocab_size} tokens: digits and delimiters)")
        elif c.special_embedding == "digit0":
            out.append(f"circular arc digit embedding (3 params for {c.num_digit_tokens} digits); every delimiter "
                       "embeds as digit 0 (0 params)")
        else:
            out.append(f"circular arc digit embedding (3 params for {c.num_digit_tokens} digits)")
    if c.token_dims:
        out.append(f"split residual: tokens in {c.token_dims} dims, positions in {c.hidden_size - c.token_dims}; "
                   "queries and keys read positions, values read tokens")
        if c.learn_spiral:
            out.append("spiral positions shared by digit i of a, b and the sum (4 params: amplitude, phase, "
                       "slope, offset; a learned point for '=')")
        else:
            out.append("fixed spiral positions shared by digit i of a, b and the sum (zero params; "
                       "a learned point for '=')")
        out.append("one head projection: value projection, output head"
                   + (" and FFN down projection" if c.tie_down_head else ""))
    elif c.tie_word_embeddings:
        out.append("tied embeddings (output head = embedding table)")
    if c.digit_logits_only:
        out.append("the head scores digits only (a fixed mask, zero params)")
    if c.tie_kv:
        out.append("tied K=V")
    if c.tie_qo:
        out.append("tied O=Q^T")
    if c.tie_qk_rotation:
        out.append("tied K=Q, queries turned by one learned angle")
    if c.o_proj_rank:
        out.append(f"rank-{c.o_proj_rank} attention output")
    if c.projection_rank:
        out.append(f"rank-{c.projection_rank} factorized projections")
    if c.num_key_value_heads < c.num_attention_heads:
        out.append("grouped-query attention")
    if c.position_embedding == "rope":
        out.append(f"RoPE θ={c.rope_theta:g} (zero params)")
    if c.qk_norm and c.norm_type != "none":
        out.append("one QK norm shared by queries and keys" if c.share_qk_norm else "QK norm")
    if c.norm_type != "none" and c.norm_sharing == "block":
        out.append("one RMSNorm per layer (before attention and before the MLP)")
    elif c.norm_type != "none" and c.norm_sharing == "all":
        out.append("one shared norm (block norms and final norm)")
    if not c.mlp_bias and not c.attention_bias:
        out.append("no biases")
    reversed_ = [what for what, on in (("operands", fmt.reverse_operands), ("answer", fmt.reverse_answer)) if on]
    if reversed_:
        out.append(f"reversed {' and '.join(reversed_)} (least significant digit first)")
    if fmt.operand_width or fmt.answer_width:
        out.append("fixed-width zero-padded numbers")
    return out


# -- the weights ---------------------------------------------------------------------------------
def _float_text(value: np.float32) -> str:
    """The shortest decimal that reads back (Python float, then float32) as exactly this float32."""
    text = str(value)  # numpy's shortest round-trip repr of a float32
    if np.float32(float(text)).tobytes() == value.tobytes():
        return text
    return repr(float(value))  # the exact double of the float32: always reads back exactly


def _weights_source(params: dict[str, torch.Tensor]) -> str:
    lines = ["WEIGHTS = {"]
    for name, tensor in params.items():
        values = tensor.detach().cpu().contiguous()
        if not bool(torch.isfinite(values).all()):
            raise _refuse(f"{name} holds NaN or infinite values")
        flat = [_float_text(v) for v in values.numpy().reshape(-1)]
        per_line = values.shape[-1] if values.dim() > 1 and values.shape[-1] <= 12 else 8
        lines.append(f"    {name!r}: ({tuple(values.shape)!r}, [")
        for start in range(0, len(flat), per_line):
            lines.append("        " + ", ".join(flat[start:start + per_line]) + ",")
        lines.append("    ]),")
    lines.append("}")
    return "\n".join(lines)


# -- the generated file --------------------------------------------------------------------------
# Lines that start with `?feature ` are kept only where the model uses that feature, `?!feature `
# only where it does not; $names are filled in by string.Template.
TEMPLATE = '''\
"""$title: an AdderBoard submission (github.com/anadim/AdderBoard), $params unique parameters.

Written by `hf-arith adderboard` (hf_arith $version) from the checkpoint $source. Needs only torch:

    python verify.py $filename

Architecture: $architecture.

The model is a torch.nn.Module whose forward maps token ids [batch, length] to logits
[batch, length, vocabulary]. `add` writes the problem in the model's number format ($format_short),
then decodes greedily: one forward pass per new token, each fed back, until the end token or the
format's answer budget. WEIGHTS, at the end of the file, holds the checkpoint's unique tensors with
their exact float32 values; fixed tables (rotary angles) are computed, not stored.
"""

import torch
import torch.nn.functional as F
from torch import nn

# -- the model's shape and options (from its config.json) ---------------------------------------
VOCAB_SIZE = $vocab_size
HIDDEN = $hidden_size
LAYERS = $num_hidden_layers
HEADS = $num_attention_heads
KV_HEADS = $num_key_value_heads
HEAD_DIM = $head_dim
FFN = $intermediate_size
CONTEXT = $max_position_embeddings
?norm NORM_EPS = $norm_eps
?rope ROPE_THETA = $rope_theta
?arc ARC_TOKENS = $arc_tokens  # the tokens that embed on the arc (ids 0 .. ARC_TOKENS - 1)
?lowrank RANK = $projection_rank
?split TOKEN_DIMS = $token_dims  # the residual is [token part (TOKEN_DIMS) | position part (3)]
?split SPIRAL = $spiral  # digit column c sits at (A cos(2 pi c / P), A sin(2 pi c / P), s c) for [A, P, s]
EMBED = $embed_dim  # the token table's width

# -- the tokenizer's number format: one token per character -------------------------------------
VOCAB = $vocab
DIGITS = $digits
OPERAND_WIDTH = $operand_width  # operands are zero-padded to this many digits (0: not padded)
ANSWER_WIDTH = $answer_width  # answers are written with at least this many digits
REVERSE_OPERANDS = $reverse_operands  # True: least significant digit first
REVERSE_ANSWER = $reverse_answer
END_TOKEN = $end_token  # True: the answer ends with <eos>
PLUS, EQUALS, EOS_TEXT, PAD_TEXT = $operator, $prompt_end, $eos, $pad
EOS = VOCAB.index(EOS_TEXT)
?split ANSWER_START = VOCAB.index(EQUALS)

METADATA = $metadata


class Projection(nn.Module):
?!lowrank     """A linear map."""
?lowrank     """A linear map; below full rank it is stored as two factors of rank `rank` (x -> up(down(x)))."""

?bias     def __init__(self, n_in, n_out, bias=False$rank_arg):
?!bias     def __init__(self, n_in, n_out$rank_arg):
        super().__init__()
?lowrank         self.low_rank = 0 < rank < min(n_in, n_out)
?lowrank         if self.low_rank:
?lowrank             self.down = nn.Parameter(torch.zeros(rank, n_in))
?lowrank             self.up = nn.Parameter(torch.zeros(n_out, rank))
?lowrank         else:
?lowrank             self.weight = nn.Parameter(torch.zeros(n_out, n_in))
?!lowrank         self.weight = nn.Parameter(torch.zeros(n_out, n_in))
?bias         self.bias = nn.Parameter(torch.zeros(n_out)) if bias else None
?!bias         self.bias = None

    def forward(self, x):
?lowrank         if self.low_rank:
?lowrank             return F.linear(F.linear(x, self.down), self.up, self.bias)
        return F.linear(x, self.weight, self.bias)
?tie_qo
?tie_qo     def transposed(self, x):
?tie_qo         """The transposed map (O = Q^T reuses the query projection)."""
?tie_qo?lowrank         if self.low_rank:
?tie_qo?lowrank             return F.linear(F.linear(x, self.up.t()), self.down.t())
?tie_qo         return F.linear(x, self.weight.t())


?norm class Norm(nn.Module):
?rmsnorm     """RMSNorm with a learned scale."""
?layernorm     """LayerNorm with a learned scale and shift."""
?norm
?norm     def __init__(self, dim):
?norm         super().__init__()
?norm         self.weight = nn.Parameter(torch.ones(dim))
?layernorm         self.bias = nn.Parameter(torch.zeros(dim))
?norm
?norm     def forward(self, x):
?rmsnorm         return self.weight * F.rms_norm(x, x.shape[-1:], eps=NORM_EPS)
?layernorm         return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, NORM_EPS)


class TokenEmbedding(nn.Module):
?!arc     """The token table."""
?arc?rows     """The token table. Digit d embeds as radius * (cos(start + d * step), sin(start + d * step), 0, ...):
?arc?rows     three parameters for all the digits; the other tokens have rows of their own, after the digits."""
?arc?!rows?!zero     """The token table. Token i embeds as radius * (cos(start + i * step), sin(start + i * step), 0, ...):
?arc?!rows?!zero     three parameters for every token, digits and delimiters alike."""
?arc?zero     """The token table. Digit d embeds as radius * (cos(start + d * step), sin(start + d * step), 0, ...):
?arc?zero     three parameters for all the digits; every other token embeds as digit 0."""

    def __init__(self):
        super().__init__()
?!arc         self.weight = nn.Parameter(torch.zeros(VOCAB_SIZE, EMBED))
?arc?rows         self.weight = nn.Parameter(torch.zeros(VOCAB_SIZE - ARC_TOKENS, EMBED))
?arc         self.arc_params = nn.Parameter(torch.zeros(3))  # radius, start angle, angle step

    def table(self):
?!arc         return self.weight
?arc         radius, start, step = self.arc_params
?arc         angles = start + step * torch.arange(ARC_TOKENS, dtype=start.dtype)
?arc         points = torch.stack([radius * angles.cos(), radius * angles.sin()], dim=-1)
?arc?rows         return torch.cat([F.pad(points, (0, EMBED - 2)), self.weight], dim=0)
?arc?zero         points = torch.cat([points, points[:1].expand(VOCAB_SIZE - ARC_TOKENS, -1)], dim=0)
?arc?!rows         return F.pad(points, (0, EMBED - 2))


?rope def rotary_tables():
?rope     """cos and sin of every position's rotation angles: fixed, not parameters."""
?rope     inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float) / HEAD_DIM))
?rope     freqs = torch.arange(CONTEXT, dtype=torch.float)[:, None] * inv_freq
?rope     angles = torch.cat((freqs, freqs), dim=-1)
?rope     return angles.cos(), angles.sin()
?rope
?rope
?rope def rotate(x, cos, sin):
?rope     """RoPE: rotate [batch, heads, length, HEAD_DIM] by each position's angles."""
?rope     x1, x2 = x.chunk(2, dim=-1)
?rope     return x * cos + torch.cat((-x2, x1), dim=-1) * sin


?split def digit_columns(input_ids):
?split     """1 + each digit's index within its number (least significant first here); 0 for other tokens."""
?split     is_digit = input_ids < len(DIGITS)
?split     index = torch.arange(input_ids.shape[-1]).expand_as(input_ids)
?split     last_break = torch.where(is_digit, torch.full_like(index, -1), index).cummax(dim=-1).values
?split     return torch.where(is_digit, index - last_break, torch.zeros_like(index))
?split
?split
?split class SpiralPositions(nn.Module):
?split     """The position part: fixed points on a spiral per digit column (not parameters), the origin for
?split     '+', and a learned point for '='."""
?split
?split     def __init__(self):
?split         super().__init__()
?split         self.answer_start = nn.Parameter(torch.zeros(3))
?split?learn_spiral         self.shape = nn.Parameter(torch.zeros(4))  # learned amplitude, phase, slope, offset
?split
?split     def forward(self, input_ids):
?split         columns = digit_columns(input_ids)
?split?!learn_spiral         amplitude, period, slope = SPIRAL
?split?learn_spiral         period = SPIRAL[1]
?split?learn_spiral         amplitude, phase, slope, offset = self.shape
?split         column = (columns - 1).float()
?split?!learn_spiral         angle = column * (2 * torch.pi / period)
?split?!learn_spiral         points = torch.stack([amplitude * angle.cos(), amplitude * angle.sin(), slope * column], dim=-1)
?split?learn_spiral         angle = column * (2 * torch.pi / period) + phase
?split?learn_spiral         points = torch.stack([amplitude * angle.cos(), amplitude * angle.sin(), slope * column + offset], -1)
?split         points = points * (columns > 0)[..., None]
?split         return torch.where((input_ids == ANSWER_START)[..., None], self.answer_start, points)
?split
?split
?split def rotate_pairs(x, angle):
?split     """Turn each pair of dimensions (0, 1), (2, 3), ... of x by `angle`; an odd last one stays."""
?split     even = x.shape[-1] - x.shape[-1] % 2
?split     pairs = x[..., :even].unflatten(-1, (-1, 2))
?split     first, second = pairs[..., 0], pairs[..., 1]
?split     turned = torch.stack([first * angle.cos() - second * angle.sin(),
?split                           first * angle.sin() + second * angle.cos()], dim=-1).flatten(-2)
?split     return torch.cat([turned, x[..., even:]], dim=-1)
?split
?split
?split class Attention(nn.Module):
?split     """One head: queries and keys read the position part, values the token part through the head
?split     projection (passed in as `head`, [TOKEN_DIMS, HIDDEN])."""
?split
?split     def __init__(self):
?split         super().__init__()
?split         self.q_proj = Projection(HIDDEN - TOKEN_DIMS, HEAD_DIM)
?split?!qk_rotation         self.k_proj = Projection(HIDDEN - TOKEN_DIMS, HEAD_DIM)
?split?qk_rotation         self.q_rotation = nn.Parameter(torch.zeros(()))  # K = Q's projection; Q is turned
?split?lowrank         self.o_proj = Projection(HIDDEN, HIDDEN, rank=$o_rank)
?split?!lowrank         self.o_proj = Projection(HIDDEN, HIDDEN)
?split
?split     def forward(self, x, head):
?split         batch, length, _ = x.shape
?split         tokens, positions = x[..., :TOKEN_DIMS], x[..., TOKEN_DIMS:]
?split?qk_rotation         q = rotate_pairs(self.q_proj(positions), self.q_rotation)
?split?qk_rotation         k = self.q_proj(positions)
?split?!qk_rotation         q, k = self.q_proj(positions), self.k_proj(positions)
?split         v = F.linear(tokens, head.t())
?split         out = F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None], is_causal=True,
?split                                              scale=HEAD_DIM**-0.5)
?split         return self.o_proj(out[:, 0])
?split
?split
?!split class Attention(nn.Module):
?!split     def __init__(self):
?!split         super().__init__()
?!split         self.q_proj = Projection(HIDDEN, HEADS * HEAD_DIM$attention_bias)
?!split         self.k_proj = Projection(HIDDEN, KV_HEADS * HEAD_DIM$attention_bias)
?!split?!tie_kv         self.v_proj = Projection(HIDDEN, KV_HEADS * HEAD_DIM$attention_bias)
?!split?!tie_qo         self.o_proj = Projection(HEADS * HEAD_DIM, HIDDEN$attention_bias)
?!split?qk_norm         self.q_norm = Norm(HEAD_DIM)
?!split?qk_norm?!share_qk         self.k_norm = Norm(HEAD_DIM)

?!split     def forward(self, x, rope):
?!split         batch, length, _ = x.shape
?!split         q = self.q_proj(x).view(batch, length, HEADS, HEAD_DIM)
?!split         k = self.k_proj(x).view(batch, length, KV_HEADS, HEAD_DIM)
?!split?tie_kv         v = k  # K = V: one projection for both (taken before the key's norm and rotation)
?!split?!tie_kv         v = self.v_proj(x).view(batch, length, KV_HEADS, HEAD_DIM)
?!split?qk_norm?!share_qk         q, k = self.q_norm(q), self.k_norm(k)
?!split?qk_norm?share_qk         q, k = self.q_norm(q), self.q_norm(k)  # one norm for queries and keys
?!split         q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
?!split?rope         q, k = rotate(q, *rope), rotate(k, *rope)
?!split?gqa         k, v = k.repeat_interleave(HEADS // KV_HEADS, dim=1), v.repeat_interleave(HEADS // KV_HEADS, dim=1)
?!split         out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=HEAD_DIM**-0.5)
?!split         out = out.transpose(1, 2).reshape(batch, length, HEADS * HEAD_DIM)
?!split?tie_qo         return self.q_proj.transposed(out)  # O = Q^T
?!split?!tie_qo         return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
?gated         self.gate_proj = Projection(HIDDEN, FFN$mlp_bias)
        self.up_proj = Projection(HIDDEN, FFN$mlp_bias)
?!tie_down         self.down_proj = Projection(FFN, HIDDEN$mlp_bias)

?!tie_down     def forward(self, x):
?tie_down     def forward(self, x, head):
?gated         hidden = $act(self.gate_proj(x)) * self.up_proj(x)
?!gated         hidden = $act(self.up_proj(x))
?tie_down         return F.linear(hidden, head.t())  # the down projection is the head projection
?!tie_down         return self.down_proj(hidden)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
?norm         self.input_layernorm = Norm(HIDDEN)
        self.self_attn = Attention()
?norm?!block_shared         self.post_attention_layernorm = Norm(HIDDEN)
        self.mlp = MLP()

    def forward(self, hidden, rope, head=None):
?split         context = head  # split attention reads values through the head projection
?!split         context = rope
?tie_down         mlp_args = (head,)  # the FFN's down projection is the head projection
?!tie_down         mlp_args = ()
?norm         hidden = hidden + self.self_attn(self.input_layernorm(hidden), context)
?norm?!block_shared         return hidden + self.mlp(self.post_attention_layernorm(hidden), *mlp_args)
?norm?block_shared         return hidden + self.mlp(self.input_layernorm(hidden), *mlp_args)  # one norm per layer
?!norm         hidden = hidden + self.self_attn(hidden, context)
?!norm         return hidden + self.mlp(hidden, *mlp_args)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = TokenEmbedding()
?learned         self.embed_positions = nn.Embedding(CONTEXT, HIDDEN)
?split         self.spiral = SpiralPositions()
?split         self.head_proj = Projection(HIDDEN, TOKEN_DIMS$full_rank)  # values, FFN down and the head's first step
        self.layers = nn.ModuleList([Layer() for _ in range(LAYERS)])
?final?!all_shared         self.norm = Norm(HIDDEN)
?rope         cos, sin = rotary_tables()
?rope         self.register_buffer("cos", cos, persistent=False)
?rope         self.register_buffer("sin", sin, persistent=False)

    def forward(self, input_ids):
        length = input_ids.shape[1]
        if length > CONTEXT:
            raise ValueError(f"{length} tokens do not fit the context of {CONTEXT} positions")
        hidden = F.embedding(input_ids, self.embed_tokens.table())
?learned         hidden = hidden + self.embed_positions(torch.arange(length, device=input_ids.device))
?split         hidden = torch.cat([hidden, self.spiral(input_ids)], dim=-1)  # [tokens | positions]
?rope         rope = self.cos[:length], self.sin[:length]
?!rope         rope = None
?split         head = self.head_proj.weight
?!split         head = None
        for layer in self.layers:
            hidden = layer(hidden, rope, head)
?final?!all_shared         hidden = self.norm(hidden)
?final?all_shared         hidden = self.layers[-1].input_layernorm(hidden)  # the final norm is the last layer's
        return hidden


class Adder(nn.Module):
    """A causal decoder: token ids [batch, length] -> next-token logits [batch, length, VOCAB_SIZE]."""

    def __init__(self):
        super().__init__()
        self.model = Decoder()
?!tied         self.lm_head = nn.Linear(HIDDEN, VOCAB_SIZE, bias=False)

    def forward(self, input_ids):
        hidden = self.model(input_ids)
?split         hidden = self.model.head_proj(hidden)  # hidden -> the token dims the table lives in
?tied         weight = self.model.embed_tokens.table()  # the output head reads the embedding table
?!tied         weight = self.lm_head.weight
?!digits_only         return F.linear(hidden, weight)
?digits_only         # Only digits are ever written: the other tokens get the lowest logit.
?digits_only         logits = F.linear(hidden, weight[:len(DIGITS)])
?digits_only         return F.pad(logits, (0, VOCAB_SIZE - len(DIGITS)), value=torch.finfo(logits.dtype).min)


def build_model():
    # One torch thread: an addition is a few tiny matrix products, which more threads only slow down.
    torch.set_num_threads(1)
    model = Adder()
    state = {name: torch.tensor(values, dtype=torch.float32).reshape(shape)
             for name, (shape, values) in WEIGHTS.items()}
    model.load_state_dict(state, strict=True)
    return model.eval(), dict(METADATA)


# -- the number format and greedy decoding --------------------------------------------------------
def operand(n):
    """One operand as the model reads it."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"operands must be non-negative integers, got {n!r}")
    text = str(n)
    if OPERAND_WIDTH:
        if len(text) > OPERAND_WIDTH:
            raise ValueError(f"{n} has more than the {OPERAND_WIDTH} digits this model reads")
        text = text.zfill(OPERAND_WIDTH)
    return text[::-1] if REVERSE_OPERANDS else text


def prompt(a, b):
    """The token ids of the prompt 'a+b=' in the model's format."""
    return [VOCAB.index(char) for char in operand(a) + PLUS + operand(b) + EQUALS]


def answer_budget(a, b):
    """New tokens the tokenizer allows an answer (its max_new_tokens): one digit more than the
    longer operand, at least ANSWER_WIDTH, plus the end token."""
    return max(max(len(str(a)), len(str(b))) + 1, ANSWER_WIDTH) + (1 if END_TOKEN else 0)


@torch.inference_mode()
def generate(model, ids, max_new_tokens):
    """Greedy decoding, as for any causal LM: the argmax token is appended and fed back; stops at <eos>."""
    sequence = torch.tensor([ids])
    new = []
    for _ in range(max_new_tokens):
        token = int(model(sequence)[0, -1].argmax())
        new.append(token)
        if token == EOS:
            break
        sequence = torch.cat([sequence, torch.tensor([[token]])], dim=1)
    return new


def read_answer(tokens):
    """The generated tokens as an integer: the tokens before the first <eos> or <pad>."""
    chars, ended = [], False
    for token in tokens:
        text = VOCAB[token] if token < len(VOCAB) else "?"
        if text in (EOS_TEXT, PAD_TEXT):
            ended = text == EOS_TEXT
            break
        chars.append(text)
    answer = "".join(chars)
    if (END_TOKEN and not ended) or not answer or any(char not in DIGITS for char in answer):
        written = " ".join(VOCAB[token] if token < len(VOCAB) else "?" for token in tokens)
        raise ValueError(f"the model wrote no well-formed answer: {written}")
    return int(answer[::-1] if REVERSE_ANSWER else answer)


def add(model, a, b):
    ids = prompt(a, b)
    budget = answer_budget(a, b)
    if len(ids) + budget > CONTEXT:
        raise ValueError(f"{a}+{b} needs {len(ids) + budget} positions, more than the context of {CONTEXT}")
    return read_answer(generate(model, ids, budget))
'''

_MARKER = re.compile(r"^((?:\?!?[a-z_]+)+)(?: |$)")


def _select_lines(template: str, features: dict[str, bool]) -> str:
    """Keep each `?feature` line where every feature it names is on (`?!feature`: off)."""
    out = []
    for line in template.splitlines():
        match = _MARKER.match(line)
        if match:
            conditions = re.findall(r"\?(!?)([a-z_]+)", match.group(1))
            if not all(features[name] != bool(negated) for negated, name in conditions):
                continue
            line = line[match.end():]
        out.append(line)
    text = "\n".join(out) + "\n"
    return re.sub(r"\n{4,}", "\n\n\n", text)  # a whole class or function left out leaves extra blank lines


def _features(config) -> dict[str, bool]:
    c = config
    norm = c.norm_type != "none"
    return {
        "norm": norm, "rmsnorm": c.norm_type == "rmsnorm", "layernorm": c.norm_type == "layernorm",
        "qk_norm": norm and c.qk_norm, "final": norm and c.final_norm,
        "rope": c.position_embedding == "rope", "learned": c.position_embedding == "learned",
        "arc": c.digit_embedding == "circular_arc", "lowrank": c.projection_rank > 0 or c.o_proj_rank > 0,
        "split": c.token_dims > 0, "qk_rotation": c.tie_qk_rotation, "tie_down": c.tie_down_head,
        "learn_spiral": c.learn_spiral,
        "bias": c.attention_bias or c.mlp_bias, "tie_kv": c.tie_kv, "tie_qo": c.tie_qo,
        "gqa": c.num_key_value_heads < c.num_attention_heads, "gated": c.mlp_type == "gated",
        "tied": c.tie_word_embeddings or c.token_dims > 0,
        "rows": c.arc_tokens < c.vocab_size and c.special_embedding != "digit0",  # off the arc, rows of their own
        "zero": c.special_embedding == "digit0",  # off the arc, at digit 0's point
        "share_qk": c.share_qk_norm, "block_shared": norm and c.norm_sharing != "none",
        "all_shared": norm and c.norm_sharing == "all", "digits_only": c.digit_logits_only,
    }


MAX_NAME_CHARS = 200  # the submission's name and author, written into its source and metadata


def submission_source(model, tokenizer, *, name: str | None = None, author: str | None = None,
                      filename: str = "submission.py") -> tuple[str, dict]:
    """The submission file's text and its metadata (checks the model first: `check_exportable`)."""
    from . import __version__

    check_exportable(model, tokenizer)
    config, fmt = model.config, tokenizer.arith_format
    params = dict(model.named_parameters())  # unique tensors: a tied one is registered once
    unique = sum(p.numel() for p in params.values())
    if unique != model.num_parameters():
        raise RuntimeError(f"exported {unique} parameters but the model counts {model.num_parameters()}")
    for option, text in (("name", name), ("author", author)):
        if text is not None and (not isinstance(text, str) or not text.strip() or not text.isprintable()
                                 or len(text) > MAX_NAME_CHARS):
            shown = repr(text)[:60] if isinstance(text, str) else type(text).__name__
            raise HfArithError(f"{option} must be printable text of 1 to {MAX_NAME_CHARS} characters (no control "
                             f"characters such as NUL or newlines), got {shown}")
    checkpoint = checkpoint_label(getattr(model, "name_or_path", "") or "model")
    title = name or f"hf_arith {checkpoint}"
    metadata = {
        "name": title, "author": author or "unknown", "params": unique,
        "architecture": architecture(config), "tricks": tricks(config, fmt),
        "format": format_description(fmt), "source": f"hf_arith {__version__}, checkpoint {checkpoint}",
    }
    vocab = fmt.vocab()
    digits = "".join(vocab[:fmt.base])
    values = {
        "title": title.replace("\\", "/").replace('"""', "'''"), "params": unique, "version": __version__,
        "source": checkpoint, "filename": filename, "architecture": metadata["architecture"],
        "format_short": "reversed digits" if fmt.reverse_operands else "digits most significant first",
        "vocab_size": config.vocab_size, "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_hidden_layers, "num_attention_heads": config.num_attention_heads,
        "num_key_value_heads": config.num_key_value_heads, "head_dim": config.head_dim,
        "intermediate_size": config.intermediate_size, "max_position_embeddings": config.max_position_embeddings,
        "norm_eps": repr(config.norm_eps), "rope_theta": repr(config.rope_theta),
        "arc_tokens": config.arc_tokens,
        "projection_rank": config.projection_rank, "o_rank": config.o_proj_rank or config.projection_rank,
        "rank_arg": ", rank=RANK" if config.projection_rank or config.o_proj_rank else "",
        "full_rank": ", rank=0" if config.projection_rank or config.o_proj_rank else "",
        "token_dims": config.token_dims, "spiral": repr([float(v) for v in config.spiral]),
        "embed_dim": config.token_dims or config.hidden_size,
        "vocab": repr(vocab), "digits": repr(digits), "operand_width": fmt.operand_width,
        "answer_width": fmt.answer_width, "reverse_operands": fmt.reverse_operands,
        "reverse_answer": fmt.reverse_answer, "end_token": fmt.end_token,
        "eos": repr(EOS_TOKEN), "pad": repr(PAD_TOKEN),
        "operator": repr(get_task("add").operator), "prompt_end": repr(PROMPT_END),
        "metadata": _metadata_source(metadata),
        "attention_bias": ", bias=True" if config.attention_bias else "",
        "mlp_bias": ", bias=True" if config.mlp_bias else "",
        "act": ACTIVATIONS[config.hidden_act],
    }
    text = string.Template(_select_lines(TEMPLATE, _features(config))).substitute(values)
    weights = ("# -- the weights: every unique parameter tensor as (shape, row-major float32 values) ---------------\n"
               + _weights_source(params))
    return text + "\n\n" + weights + "\n", metadata


def _metadata_source(metadata: dict) -> str:
    lines = ["{"]
    for key, value in metadata.items():
        if isinstance(value, list):
            lines.append(f"    {key!r}: [")
            lines += [f"        {item!r}," for item in value]
            lines.append("    ],")
        else:
            lines.append(f"    {key!r}: {value!r},")
    return "\n".join(lines + ["}"])


def load_submission(source: str, module_name: str = "adderboard_submission") -> types.ModuleType:
    """Run a submission's source as a module (as verify.py imports the file)."""
    module = types.ModuleType(module_name)
    module.__file__ = f"<{module_name}>"
    exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102 - our own generated code
    return module


def check_submission(module, model, tokenizer, problems=TINY_ADDER_EDGE_CASES) -> None:
    """The exported model must hold the model's weights bit for bit and give `solve`'s answers
    (where `solve` finds no well-formed answer, `add` must raise). A mismatch is a bug: RuntimeError."""
    from .solving import solve

    exported, _ = module.build_model()
    mine = dict(exported.named_parameters())
    theirs = dict(model.named_parameters())
    if mine.keys() != theirs.keys():
        raise RuntimeError(f"exported parameters {sorted(mine)} differ from the model's {sorted(theirs)}")
    for key, p in theirs.items():
        if not torch.equal(mine[key].detach().view(torch.int32), p.detach().cpu().view(torch.int32)):
            raise RuntimeError(f"exported {key} differs from the model's")
    # One problem per batch: solve gives a batch the answer budget of its longest problem, and a
    # model that has not ended a shorter answer within its own budget could still end it there.
    answers = solve(model, tokenizer, [f"{a}+{b}" for a, b in problems], batch_size=1, warn_beyond_training=False)
    for (a, b), expected in zip(problems, answers, strict=True):
        try:
            got = str(module.add(exported, a, b))
        except ValueError:
            got = None
        if got != expected:
            raise RuntimeError(f"the exported model answers {a}+{b} with {got}, the model with {expected}")


def check_protocol(model, tokenizer) -> dict:
    """Run the protocol (seed 2025) on the model; ProtocolFailure, one line, below PASS_ACCURACY."""
    from .evaluation import verify_tiny_adder

    report = verify_tiny_adder(model, tokenizer)
    if report["accuracy"] < PASS_ACCURACY:
        raise ProtocolFailure(
            f"AdderBoard export: the model gets {report['correct']:,} of {report['total']:,} protocol problems right "
            f"({100 * report['accuracy']:.2f} %), below the {100 * PASS_ACCURACY:.0f} % a submission needs; "
            f"export it anyway with --force (force=True from Python)")
    return report


def write_submission(model, tokenizer, path, *, name: str | None = None, author: str | None = None,
                     overwrite: bool = False, force: bool = False) -> Path:
    """Write the AdderBoard submission file for a minimal-family model; returns its path.

    One-line ValueErrors refuse a model the file cannot reproduce exactly (`check_exportable`) and,
    unless `force`, a model that fails the protocol (`check_protocol`: ProtocolFailure).
    The source is run and checked against the model (`check_submission`) before anything is written;
    an existing file is replaced only with `overwrite=True` (else FileExistsError).
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path}: exists (pass overwrite=True to replace it)")
    source, _ = submission_source(model, tokenizer, name=name, author=author, filename=path.name)
    if not force:
        check_protocol(model, tokenizer)
    was_training = model.training
    model.eval()
    try:
        check_submission(load_submission(source), model, tokenizer)
    finally:
        model.train(was_training)
    return write_atomic(path, source)


__all__ = ["PASS_ACCURACY", "VERIFY_HINT", "ProtocolFailure", "architecture", "check_exportable", "check_protocol",
           "check_submission", "load_submission",
           "submission_source", "tricks", "write_submission"]
