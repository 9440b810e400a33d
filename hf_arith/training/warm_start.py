"""Warm starts: begin training from a trained checkpoint's weights (`init_from` in a recipe).

The usual use is adding capacity to a model that already works, such as extra multi-token
heads on a trained trunk: tensors the checkpoint has are copied in, tensors it lacks keep
their fresh initialisation. A table the model declares growable (the abacus and segment tables) may be longer
than the checkpoint's, so a model can learn digit indices beyond its checkpoint's range. A
checkpoint of another family or number format, or one whose tensors have other shapes, is
refused in one line before any training.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from ..data.formatting import NumberFormat
from ..models import MinimalConfig
from ..models.minimal_narrowing import NarrowingError, is_narrowing, narrow_state
from ..records import read_notes, read_summary, stage_items, training_stages
from ..runtime.loading import CheckpointError, _keys, _read_json, resolve_checkpoint
from .recipe import RecipeError


class WarmStartError(RecipeError):
    """A checkpoint that cannot initialise this model, with a one-line reason."""


def _as_format(data) -> NumberFormat | None:
    try:
        return NumberFormat.from_dict(data)
    except (ValueError, TypeError):
        return None


def warm_start(model: torch.nn.Module, name_or_path: str, number_format: dict) -> list[str]:
    """Copy the weights of a bundled model or checkpoint folder into `model`; returns the names
    of the tensors that kept their fresh init: those the checkpoint does not have, and grown
    tables (fresh in their new rows; they train under optim.freeze_init too)."""
    try:
        folder = resolve_checkpoint(name_or_path)
    except CheckpointError as err:
        raise WarmStartError(f"init_from: {err}") from None
    config = _read_json(folder / "config.json")
    if config.get("model_type") != model.config.model_type:
        raise WarmStartError(f"init_from: {name_or_path} is a {config.get('model_type')!r} checkpoint, but this "
                             f"recipe trains {model.config.model_type!r}")
    saved_format = _read_json(folder / "tokenizer_config.json").get("number_format")
    if _as_format(saved_format) != _as_format(number_format):  # fields a format saved before them lack take their defaults
        raise WarmStartError(f"init_from: {name_or_path} was trained on another number format ({saved_format}); "
                             f"this recipe uses {number_format}")
    weights_file = folder / "model.safetensors"
    if not weights_file.is_file():
        raise WarmStartError(f"init_from: {name_or_path} has no model.safetensors")
    saved = load_file(str(weights_file))
    saved = _narrowed(saved, config, model, name_or_path)
    own = model.state_dict()
    unexpected = set(saved) - set(own)
    if unexpected:
        raise WarmStartError(f"init_from: {name_or_path} holds tensors this model lacks ({_keys(unexpected)}); "
                             f"its shape differs from the recipe's model")
    grown = _grown_tables(model, saved, own)
    mismatched = [k for k, v in saved.items() if tuple(v.shape) != tuple(own[k].shape) and k not in grown]
    if mismatched:
        k = mismatched[0]
        raise WarmStartError(f"init_from: {name_or_path} has {k} of shape {tuple(saved[k].shape)}, the recipe's model "
                             f"{tuple(own[k].shape)} ({len(mismatched)} tensor(s) differ)")
    for name in grown:  # the trained rows go first; the rest are new, drawn at the trained rows' scale
        table, rows = own[name].clone(), saved[name]
        table[len(rows):] = torch.randn_like(table[len(rows):]) * rows.float().std().to(table.dtype)
        table[:len(rows)] = rows
        saved[name] = table
    model.load_state_dict(saved, strict=False)
    model.tie_weights()  # a tied head is stored once, under the embedding's name
    tied = set(getattr(model, "_tied_weights_keys", None) or {}) if model.config.tie_word_embeddings else set()
    fresh = sorted(set(own) - set(saved) - tied)
    if fresh and hasattr(model, "init_missing_from_loaded"):  # a family may seed new parts from trained ones
        model.init_missing_from_loaded(fresh)
    return sorted(fresh + grown)


def _narrowed(saved: dict, config: dict, model: torch.nn.Module, name_or_path: str) -> dict:
    """A wider split-residual adder's weights mapped onto this narrower layout (structured pruning,
    `models.minimal_narrowing`); any other checkpoint as it is."""
    if config.get("model_type") != "hf_arith_minimal" or not getattr(model.config, "token_dims", 0):
        return saved
    try:
        old = MinimalConfig(**{k: v for k, v in config.items() if k != "model_type"})
        if not is_narrowing(old, model.config):
            return saved
        narrowed = narrow_state(saved, old, model.config)
    except (NarrowingError, ValueError, TypeError) as err:
        raise WarmStartError(f"init_from: {name_or_path} cannot start this layout: {err}") from None
    print(f"Narrowing {name_or_path} ({sum(v.numel() for v in saved.values())} unique parameters) to this "
          f"layout ({sum(v.numel() for v in narrowed.values())})")
    return narrowed


def _grown_tables(model: torch.nn.Module, saved: dict, own: dict) -> list[str]:
    """Tables the model declares growable (`_warm_start_growable_tables`, such as the abacus table,
    one row per digit index) that are longer here than in the checkpoint, with the same row width."""
    names = getattr(model, "_warm_start_growable_tables", ())
    return [k for k in names if k in saved and k in own and saved[k].dim() == 2 and own[k].dim() == 2
            and saved[k].shape[1] == own[k].shape[1] and saved[k].shape[0] < own[k].shape[0]]


def freeze_all_but(model: torch.nn.Module, trainable: list[str]) -> None:
    """Only the named parameters train (the Trainer's optimizer skips the rest)."""
    keep = set(trainable)
    for name, param in model.named_parameters():
        param.requires_grad_(name in keep)


def describe_warm_start(name_or_path: str | Path, fresh: list[str]) -> str:
    if not fresh:
        return f"Initialised every weight from {name_or_path}"
    return (f"Initialised from {name_or_path}; {len(fresh)} tensor(s) start fresh, wholly or in the rows it lacks "
            f"({_keys(fresh)})")


__all__ = ["WarmStartError", "describe_warm_start", "freeze_all_but", "warm_start"]


def earlier_stages(name_or_path: str) -> list[dict]:
    """The training runs behind a warm start's checkpoint, oldest first: name, steps, seconds, machine.

    A model trained in stages took the time of all of them; its card adds them up from this list,
    which each stage copies from its checkpoint's training_summary.json and extends.
    """
    try:
        folder = resolve_checkpoint(name_or_path)
    except (CheckpointError, OSError, ValueError):
        return []
    summary = read_summary(folder)
    if not summary:
        return []
    stage = {key: summary.get(key) for key in ("name", "steps", "train_seconds", "machine")}
    items = stage_items(summary)
    if items is not None:  # the list sizes it drew: the chain's trained range is their union
        stage["train_items"] = list(items)
    if summary.get("mined"):  # hard-example mining took time before the stage's first step
        stage["mined"] = summary["mined"]
    return [*training_stages(summary, read_notes(folder)), stage]
