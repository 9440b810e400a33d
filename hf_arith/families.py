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
