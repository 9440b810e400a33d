"""Writing a publishable checkpoint folder: safetensors weights, config, tokenizer and remote code."""

from __future__ import annotations

from pathlib import Path

from transformers import PreTrainedModel

from .limits import FINGERPRINT_KEY, model_limits


def record_limits(model: PreTrainedModel, tokenizer) -> None:
    """Write into the model's config what it takes with this tokenizer (refused when the tokenizer does not
    belong to the model: `check_pair`): the number format's fingerprint, its hard limit
    (`max_operand_digits`) and the longest answer's tokens (`max_answer_tokens`); then the generation
    defaults that follow (`ArithModelMixin.apply_generation_defaults`: greedy, `max_new_tokens` for the longest
    answer, so plain `model.generate(**enc)` writes whole answers). From then on any save of the model
    (`save_pretrained`, `push_to_hub`, `Trainer.save_model`) writes them without the tokenizer."""
    limits = model_limits(model, tokenizer)
    config = model.config
    setattr(config, FINGERPRINT_KEY, tokenizer.arith_format.fingerprint())
    config.max_operand_digits = limits.max_digits
    config.max_answer_tokens = limits.max_answer_tokens
    model.apply_generation_defaults()


def save_checkpoint(model: PreTrainedModel, tokenizer, folder: str | Path) -> Path:
    """Save `model` and `tokenizer` so that the folder loads with or without hf_arith installed.

    `record_limits` first (the fingerprint of the tokenizer's number format, also in tokenizer_config.json,
    so a mismatched tokenizer is refused at load; the hard limit and the generation defaults); then the
    model's own save_pretrained, which any save path goes through (`ArithModelMixin.save_pretrained`: the
    `arithmetic` pipeline's code named in the saved `config.custom_pipelines`, so
    `transformers.pipeline("arithmetic", model=folder, trust_remote_code=True)` works without hf_arith;
    generation caching back on; AutoModel in auto_map); the tokenizer's `model_max_length` becomes the
    longest sequence the model takes (`ModelLimits.max_sequence_tokens`).
    """
    folder = Path(folder)
    record_limits(model, tokenizer)
    model.save_pretrained(folder)
    # Every prompt the model takes (and its answer) fits in model_max_length: `tok(problem, truncation=True)`
    # never cuts one. (The tokenizer was built with the training data's longest example.)
    tokenizer.model_max_length = model_limits(model, tokenizer).max_sequence_tokens
    tokenizer.save_pretrained(folder)
    return folder
