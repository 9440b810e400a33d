"""Writing a publishable checkpoint folder: safetensors weights, config, tokenizer and remote code."""

from __future__ import annotations

from pathlib import Path

from transformers import PreTrainedModel


def save_checkpoint(model: PreTrainedModel, tokenizer, folder: str | Path) -> Path:
    """Save `model` and `tokenizer` so that the folder loads with or without hf_arith installed.

    Beyond save_pretrained: the config's auto_map also names the family's base model for
    AutoModel (save_pretrained lists only the saved class), and generation caching is switched
    back on (the Trainer turns `use_cache` off while training).
    """
    folder = Path(folder)
    base = getattr(model, "base_model_prefix", "")
    base_cls = type(getattr(model, base)) if base and hasattr(model, base) else None
    if base_cls is not None and base_cls is not type(model):
        auto_map = dict(getattr(model.config, "auto_map", None) or {})
        auto_map["AutoModel"] = f"{base_cls.__module__.rsplit('.', 1)[-1]}.{base_cls.__name__}"
        model.config.auto_map = auto_map
    model.config.use_cache = True
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
