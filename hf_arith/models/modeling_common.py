"""Model plumbing every family shares, defined once.

Each family's modeling file imports these with `from .modeling_common import ...`; save_pretrained
copies this file beside the family's own into a saved folder, so Hub remote code finds it there.
Imports only torch and transformers.
"""

from __future__ import annotations

import json
import os
import warnings
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers.cache_utils import Cache, DynamicCache
from transformers.dynamic_module_utils import get_relative_import_files
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
    model's own tokens. Under torch.compile the id check is skipped, as transformers skips its own
    data-dependent checks there: it reads tensor values, which splits the compiled graph in pieces,
    and compiled callers (the trainer) feed ids the tokenizer made."""
    if length + past_length > config.max_position_embeddings:
        raise ValueError(f"sequence of {length + past_length} tokens is longer than this model's context "
                         f"({config.max_position_embeddings} positions)")
    if (input_ids is not None and not past_length and input_ids.numel() and not torch.compiler.is_compiling()
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


# Gathering a decoding step's window keys costs a few small ops per layer: worth it once attention reads
# many keys in all (rows x keys). At 128 rows of 100-digit sums it made one-token decoding 1.54x faster
# (bench/results/decode_profile.md, one-token against one-token-all-keys); at one row, where a step is
# bound by its number of ops, the extra ones cost more than attending over every key.
GATHER_MIN_ROW_KEYS = 4096


def restricted_causal_mask(allowed: torch.Tensor, attention_mask, past_length: int, dtype, gather_keys: bool = False):
    """(mask, key_index): an additive mask [batch, 1, queries, keys] that also keeps each query to the keys
    `allowed` [batch, queries, keys] permits (a family's own restriction), on top of causality and padding.

    Additive floats suit both the eager and the sdpa attention. A row with nothing allowed (a
    padding query) gets equal, finite scores, as transformers' own masks give it.

    `key_index` is None, or with `gather_keys` (cached decoding, where a few new queries meet a long KV
    cache, from GATHER_MIN_ROW_KEYS on) the keys any query of a row may see [batch, n]; the mask then
    covers those keys only [batch, 1, queries, n]. Attention reads n keys a row instead of the whole
    sequence; the keys left out had weight zero, so the output is the same.
    """
    queries, keys = allowed.shape[-2:]
    position = torch.arange(keys, device=allowed.device)
    keep = allowed & (position[None, None, :] <= position[past_length:past_length + queries, None][None])
    if attention_mask is not None:
        if attention_mask.dim() != 2 or attention_mask.shape[-1] != keys:
            raise ValueError(f"attention_mask must be [batch, {keys}] (past and new tokens), got {tuple(attention_mask.shape)}")
        keep = keep & attention_mask[:, None, :].bool()
    key_index = None
    if gather_keys and keep.shape[0] * keys >= GATHER_MIN_ROW_KEYS:
        seen = keep.any(1)  # [batch, keys]
        n = max(int(seen.sum(1).max()), 1)
        if 2 * n <= keys:  # a gather costs a copy of n keys per layer: worth it when it halves the keys
            # Stable descending sort of the flags: each row's seen keys first, in sequence order.
            key_index = seen.to(torch.int32).argsort(dim=1, descending=True, stable=True)[:, :n]
            keep = keep.gather(2, key_index[:, None, :].expand(-1, queries, -1))
    mask = torch.zeros(keep.shape, dtype=dtype, device=allowed.device)
    return mask.masked_fill_(~keep, torch.finfo(dtype).min)[:, None], key_index


def gather_keys(key: torch.Tensor, value: torch.Tensor, key_index: torch.Tensor | None):
    """Keys and values [batch, heads, length, dim] at the positions `key_index` [batch, n] names (all for None)."""
    if key_index is None:
        return key, value
    # Advanced indexing copies whole head_dim rows: 1.5x faster than gather with an expanded index.
    rows = torch.arange(key.shape[0], device=key.device)[:, None]
    return key[rows, :, key_index].transpose(1, 2), value[rows, :, key_index].transpose(1, 2)


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


class _RowsByCode(torch.autograd.Function):
    """`table[codes]`, whose backward adds each gradient into its code's row with `index_add_`."""

    @staticmethod
    def forward(ctx, table, codes):
        ctx.save_for_backward(codes)
        ctx.rows = table.shape[0]
        return F.embedding(codes, table)

    @staticmethod
    def backward(ctx, grad):
        (codes,) = ctx.saved_tensors
        width = grad.shape[-1]
        summed = grad.new_zeros(ctx.rows, width).index_add_(0, codes.reshape(-1), grad.reshape(-1, width))
        return summed, None


def rows_by_code(table: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """`table[codes]` (as nn.Embedding), for a small table read at millions of places: one code for every
    (query, key) pair. nn.Embedding's backward sorts the indices first; adding each gradient into its row
    gives the same sums without the sort (with the blocks that see only their own token, 0.70 times the
    training time of a sort stage: bench/results/tasks-to-10-digits-runs.json, step_speed)."""
    return _RowsByCode.apply(table, codes)


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



# -- dtypes: the checkpoint's own record of which change its answers -----------------------------------------
DTYPE_CHECK_FILE = "dtype_check.json"  # beside the weights: each dtype's agreement with REFERENCE_DTYPE
REFERENCE_DTYPE = "float32"


class DtypeWarning(UserWarning):
    """A dtype that was never checked for this checkpoint: its answers may differ from float32."""


def dtype_verdict(record: dict | None, dtype: str) -> tuple[str, str] | None:
    """What loading a checkpoint in `dtype` (a name: 'bfloat16') calls for, by its DTYPE_CHECK_FILE
    `record` (None: it has none): None (fine), ("warn", why) for a dtype never checked, or
    ("refuse", why) for one that failed or changed any answer of the record's held-out problems. The
    one rule of hf_arith's `load` and of `from_pretrained` on every family (Hub remote code included)."""
    if dtype == REFERENCE_DTYPE:
        return None
    entries = (record or {}).get("dtypes")
    entry = entries.get(dtype) if isinstance(entries, dict) else None
    if not isinstance(entry, dict):
        return "warn", (f"{dtype} was never checked for this model (no {DTYPE_CHECK_FILE} entry), so its answers may "
                        f"differ from {REFERENCE_DTYPE}")
    if entry.get("error"):
        return "refuse", (f"{dtype} failed on this model's held-out set ({entry['error']}; {DTYPE_CHECK_FILE}); use "
                          f"{REFERENCE_DTYPE}")
    agreement = entry.get("agreement")
    if isinstance(agreement, (int, float)) and agreement >= 1:
        return None
    share = f"{100 * agreement:.2f} %" if isinstance(agreement, (int, float)) else "an unknown share"
    problems = (record.get("problems") or {}).get("n", "its")
    problems = f"{problems:,}" if isinstance(problems, int) else problems
    exact = entry.get("exact_match", 0)
    exact = f"{100 * exact:.2f} %" if isinstance(exact, (int, float)) else "?"
    fine = [name for name, e in entries.items() if name != dtype and isinstance(e, dict) and e.get("agreement") == 1]
    return "refuse", (f"refused dtype {dtype}: it changes this model's answers, agreeing with {REFERENCE_DTYPE} on "
                      f"{share} of {problems} held-out problems (exact match {exact}; {DTYPE_CHECK_FILE}); use "
                      f"{' or '.join(fine) or REFERENCE_DTYPE}")


def read_dtype_record(name_or_path, **hub_kwargs) -> dict | None:
    """A checkpoint's DTYPE_CHECK_FILE (a folder or a Hub repo id, as from_pretrained takes them), or None
    where it has none or the file cannot be read."""
    from transformers.utils import cached_file

    try:
        path = cached_file(str(name_or_path), DTYPE_CHECK_FILE, _raise_exceptions_for_missing_entries=False,
                           _raise_exceptions_for_connection_errors=False, **hub_kwargs)
    except (OSError, ValueError):
        return None
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


@contextmanager
def saved_config(config, **values):
    """`config` with `values` set for the time of a save (None: the attribute removed), then as it was."""
    missing = object()
    before = {key: config.__dict__.get(key, missing) for key in values}
    for key, value in values.items():
        if value is not None:
            setattr(config, key, value)
        elif before[key] is not missing:
            delattr(config, key)
    try:
        yield config
    finally:
        for key, value in before.items():
            if value is not missing:
                setattr(config, key, value)
            elif key in config.__dict__:
                delattr(config, key)


class ArithModelMixin:
    """What every family's PreTrainedModel adds to transformers' saving and loading, so that any save path
    (`save_pretrained`, `push_to_hub`, `Trainer.save_model`) writes a repo that works on its own, and loading
    in a dtype the checkpoint records as changing answers is refused (Hub remote code included).

    Put it before PreTrainedModel among the bases.
    """

    # The `arithmetic` pipeline saved beside every model: (config.custom_pipelines, the file of its code).
    # hf_arith.register() sets it; a class loaded as Hub remote code has none, and saves the pipeline its
    # repo named when that file sits beside its own (transformers' module cache of the repo).
    arith_pipeline: tuple[dict, str] | None = None

    def apply_generation_defaults(self) -> None:
        """Greedy decoding with room for the longest answer (config.max_answer_tokens), so plain
        `model.generate(**enc)` writes whole answers; nothing while the config records no budget."""
        budget = getattr(self.config, "max_answer_tokens", None)
        if not budget or not self.can_generate():
            return
        generation = self.generation_config
        generation.max_new_tokens = budget
        generation.do_sample = False
        generation.eos_token_id = self.config.eos_token_id
        generation.pad_token_id = self.config.pad_token_id
        generation._from_model_config = False  # on purpose: generate must not rebuild it from the model config

    def _pipeline_to_save(self) -> tuple[dict, Path] | None:
        if self.arith_pipeline is not None:
            pipelines, source = self.arith_pipeline
            return pipelines, Path(source)
        pipelines = getattr(self.config, "custom_pipelines", None)
        impls = [p.get("impl", "") for p in pipelines.values()] if isinstance(pipelines, dict) else []
        if len(impls) != 1 or "." not in impls[0]:
            return None
        source = Path(__file__).with_name(impls[0].rsplit(".", 1)[0] + ".py")
        return (pipelines, source) if source.is_file() else None

    def save_pretrained(self, save_directory, *args, push_to_hub: bool = False, **kwargs):
        """As transformers saves a model, plus what makes the folder work alone: the generation defaults
        (`apply_generation_defaults`), `use_cache` on (the Trainer turns it off), the base model in
        `auto_map` (for AutoModel), and the `arithmetic` pipeline's code, named in the saved config's
        `custom_pipelines` only (an in-memory config naming it would send `pipeline(model=model)` looking for
        remote code it does not have). Weights get the mode of the other files (not the 0600 of the
        temporary file transformers writes them through)."""
        if push_to_hub:  # save fully, then upload as push_to_hub does (it saves through this method)
            hub = {k: kwargs.pop(k) for k in ("repo_id", "commit_message", "create_pr", "private", "token") if k in kwargs}
            result = self.save_pretrained(save_directory, *args, **kwargs)
            self.push_to_hub(hub.pop("repo_id", os.path.basename(os.path.normpath(str(save_directory)))), **hub)
            return result
        self.apply_generation_defaults()
        pipeline = self._pipeline_to_save()
        auto_map = dict(getattr(self.config, "auto_map", None) or {})
        base = getattr(self, self.base_model_prefix, None) if self.base_model_prefix else None
        if base is not None and base is not self and getattr(type(base), "_auto_class", None) is not None:
            auto_map["AutoModel"] = f"{type(base).__module__.rsplit('.', 1)[-1]}.{type(base).__name__}"
        pipelines = pipeline[0] if pipeline is not None else None
        with saved_config(self.config, use_cache=True, auto_map=auto_map or None, custom_pipelines=pipelines):
            result = super().save_pretrained(save_directory, *args, **kwargs)
        if not kwargs.get("is_main_process", True) or not Path(save_directory, "config.json").is_file():
            return result  # another process of a distributed save writes the folder's files
        if pipeline is not None:
            for source in (pipeline[1], *get_relative_import_files(str(pipeline[1]))):
                Path(save_directory, Path(source).name).write_bytes(Path(source).read_bytes())
        mode = Path(save_directory, "config.json").stat().st_mode & 0o777
        for weights in Path(save_directory).glob("*.safetensors"):
            weights.chmod(mode)
        return result

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, ignore_dtype_check: bool = False, **kwargs):
        """As transformers loads a model; then a dtype the checkpoint's DTYPE_CHECK_FILE records as changing
        its answers is refused (ValueError), and one never checked warns (DtypeWarning), by `dtype_verdict`.
        `ignore_dtype_check=True` loads it anyway."""
        loaded = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded
        dtype = str(model.dtype).removeprefix("torch.")
        if ignore_dtype_check or dtype == REFERENCE_DTYPE:
            return loaded
        hub = {k: kwargs[k] for k in ("revision", "cache_dir", "token", "local_files_only", "subfolder") if k in kwargs}
        verdict = dtype_verdict(read_dtype_record(pretrained_model_name_or_path, **hub), dtype)
        if verdict is not None and verdict[0] == "refuse":
            raise ValueError(f"{pretrained_model_name_or_path}: {verdict[1]} (or pass ignore_dtype_check=True to "
                             "from_pretrained to load it anyway)")
        if verdict is not None:
            warnings.warn(f"{pretrained_model_name_or_path}: {verdict[1]}", DtypeWarning, stacklevel=2)
        return loaded


__all__ = ["CACHE_FIELD", "DTYPE_CHECK_FILE", "IGNORE_INDEX", "REFERENCE_DTYPE", "ArithModelMixin", "DtypeWarning",
           "causal_mask", "check_prompt", "dtype_verdict", "eager_attention_forward", "gather_keys",
           "kept_queries", "positions_from_mask", "read_dtype_record", "repeat_kv", "resolve_cache", "restricted_causal_mask",
           "saved_config"]
