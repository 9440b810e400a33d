"""Model families by name: the one place a new family is added for training and the CLI."""

from __future__ import annotations

from .models import (
    AbacusGPT2Config,
    AbacusGPT2ForCausalLM,
    LoopedConfig,
    LoopedForCausalLM,
    MinimalConfig,
    MinimalForCausalLM,
)

FAMILIES = {
    "minimal": (MinimalConfig, MinimalForCausalLM),
    "abacus_gpt2": (AbacusGPT2Config, AbacusGPT2ForCausalLM),
    "looped": (LoopedConfig, LoopedForCausalLM),
}


def family_classes(name: str):
    if name not in FAMILIES:
        raise ValueError(f"unknown model family {name!r}; known families: {', '.join(FAMILIES)}")
    return FAMILIES[name]


def family_of(model) -> str:
    """The family name of a model (its config's class), '-' for one of no family here."""
    return next((name for name, (config_cls, _) in FAMILIES.items() if isinstance(model.config, config_cls)), "-")
