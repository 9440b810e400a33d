"""A single-file AdderBoard submission (github.com/anadim/AdderBoard) for a minimal-family model.

`write_submission(model, tokenizer, path)` writes one Python file that needs only torch: the
minimal family's forward pass as the model runs it (the source of `hf_arith/models/minimal_core.py`,
copied verbatim), the model's config values, its unique weight tensors inlined with exact float32
values, the tokenizer's number format for `a+b`, and plain greedy decoding. The file defines what AdderBoard's
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

from ..data.errors import HfArithError
from ..data.formatting import EOS_TOKEN, PAD_TOKEN, PROMPT_END, FormatError, get_task
from ..evaluation.held_out import TINY_ADDER_EDGE_CASES, TINY_ADDER_MAX, is_tiny_adder_format
from ..models import MinimalConfig, minimal_core
from ..models.abacus_positions import abacus_position_ids
from ..records import write_atomic
from ..runtime.loading import checkpoint_label

MODEL_TYPE = MinimalConfig.model_type
VERIFY_HINT = "python verify.py {path}"
PASS_ACCURACY = 0.99  # AdderBoard's qualifying accuracy on its protocol


class ProtocolFailure(HfArithError):
    """The model scores below PASS_ACCURACY on the protocol, so its submission would not qualify."""


def _refuse(message: str) -> HfArithError:
    return HfArithError(f"AdderBoard export: {message}")


def check_exportable(model, tokenizer) -> None:
    """Refuse, with one line, a model this export cannot write exactly: another family, weights that
    are not float32, or a number format that is not addition of two operands of up to 10 decimal
    digits (the protocol's range). Every option of the family exports: the file runs its own code."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type != MODEL_TYPE or type(model).__name__ != "MinimalForCausalLM":
        raise _refuse(f"only the minimal family ({MODEL_TYPE!r}, MinimalForCausalLM) can be exported; this model is "
                      f"{type(model).__name__} ({model_type!r})")
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


# -- the number format, as the exported file applies it (mirrors hf_arith.data.formatting for a+b) -----
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
        start = {"learned": "a learned point for '='", "spiral": "'=' at the spiral's column -1, zero params",
                 "circle": "'=' at column -1 of the circle with a learned slope coordinate, 1 param"}[
                     c.answer_start_position]
        if c.learn_spiral:
            out.append("spiral positions shared by digit i of a, b and the sum (4 params: amplitude, phase, "
                       f"slope, offset; {start})")
        else:
            out.append(f"fixed spiral positions shared by digit i of a, b and the sum (zero params; {start})")
        roles = [*(["value projection"] if c.split_values == "head" else []), "output head"]
        out.append(f"one head projection: {', '.join(roles)}" + (" and FFN down projection" if c.tie_down_head else ""))
        if c.split_paths != "all":
            read = "the token dims" + (" and the spiral's slope dim" if c.split_paths == "tokens_and_slope" else "")
            out.append(f"the head, the attention output and the FFN read and write {read} only")
        if c.query_positions == "circle":
            out.append("queries and keys read the spiral's circle only")
        if c.norm_weights == "paths":
            out.append("norm weights for those dims only (the rest are read by queries and keys, whose "
                       "projection absorbs their scale)")
        if c.split_values == "tokens":
            out.append("values are the token dims themselves; the attention output reads them")
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
        out.append(f"rank-{c.o_proj_rank} attention output" + (" reading along one learned angle" if c.o_proj_angle else ""))
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
# The minimal family's forward pass is minimal_core.py's source, copied in as $core; $names are
# filled in by string.Template.
TEMPLATE = '''\
"""$title: an AdderBoard submission (github.com/anadim/AdderBoard), $params unique parameters.

Written by `hf-arith adderboard` (hf_arith $version) from the checkpoint $source. Needs only torch:

    python verify.py $filename

Architecture: $architecture.

The model is the minimal family's own forward pass: the source of hf_arith/models/minimal_core.py,
which the transformers model runs too, copied unchanged below (with `abacus_position_ids` from
abacus_positions.py in place of its import). `MinimalLM` maps token ids [batch, length] to logits
[batch, length, vocabulary]. `add` writes the problem in the model's number format ($format_short),
then decodes greedily: one forward pass per new token, each fed back, until the end token or the
format's answer budget. WEIGHTS, at the end of the file, holds the checkpoint's unique tensors with
their exact float32 values; fixed tables (rotary angles, spiral points) are computed, not stored.
"""

import types

# -- hf_arith/models/minimal_core.py ---------------------------------------------------------------
$core

# -- the model's options (from its config.json) ---------------------------------------------------
CONFIG = $config

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
CONTEXT = CONFIG["max_position_embeddings"]

METADATA = $metadata


def build_model():
    # One torch thread: an addition is a few tiny matrix products, which more threads only slow down.
    torch.set_num_threads(1)
    model = MinimalLM(types.SimpleNamespace(**CONFIG))
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



MAX_NAME_CHARS = 200  # the submission's name and author, written into its source and metadata


def submission_source(model, tokenizer, *, name: str | None = None, author: str | None = None,
                      filename: str = "submission.py") -> tuple[str, dict]:
    """The submission file's text and its metadata (checks the model first: `check_exportable`)."""
    from .. import __version__

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
        "core": core_source(), "config": _config_source(config),
        "vocab": repr(vocab), "digits": repr(digits), "operand_width": fmt.operand_width,
        "answer_width": fmt.answer_width, "reverse_operands": fmt.reverse_operands,
        "reverse_answer": fmt.reverse_answer, "end_token": fmt.end_token,
        "eos": repr(EOS_TOKEN), "pad": repr(PAD_TOKEN),
        "operator": repr(get_task("add").operator), "prompt_end": repr(PROMPT_END),
        "metadata": _metadata_source(metadata),
    }
    text = string.Template(TEMPLATE).substitute(values)
    weights = ("# -- the weights: every unique parameter tensor as (shape, row-major float32 values) ---------------\n"
               + _weights_source(params))
    return text + "\n\n" + weights + "\n", metadata


def core_source() -> str:
    """minimal_core.py's source, its one sibling import replaced by the source of what it imports."""
    text = Path(minimal_core.__file__).read_text(encoding="utf-8")
    imported = "from .abacus_positions import abacus_position_ids\n"
    if text.count(imported) != 1 or re.search(r"^from \.(?!abacus_positions import abacus_position_ids$)", text, re.M):
        raise RuntimeError("minimal_core.py imports siblings other than abacus_positions.abacus_position_ids")
    return text.replace(imported, inspect.getsource(abacus_position_ids)).rstrip("\n")


def _config_source(config) -> str:
    """The config values minimal_core reads: MinimalConfig's options, the tied head and `arc_tokens`."""
    names = [name for name, p in inspect.signature(MinimalConfig.__init__).parameters.items()
             if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and name != "self"]
    values = {name: getattr(config, name) for name in [*names, "tie_word_embeddings", "arc_tokens"]}
    return "{\n" + "".join(f"    {name!r}: {value!r},\n" for name, value in values.items()) + "}"


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
    from ..runtime.solving import solve

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


def check_protocol(model, tokenizer, report: dict | None = None) -> dict:
    """Run the protocol (seed 2025) on the model; ProtocolFailure, one line, below PASS_ACCURACY.
    `report`: the model's seed-2025 `verify_tiny_adder` result, when it was run already."""
    from ..evaluation.held_out import verify_tiny_adder

    if report is None or report.get("seed") != 2025:
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
