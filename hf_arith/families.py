"""Model families by name: the one place a new family is added for training and the CLI."""

from __future__ import annotations

from .models.minimal import MinimalConfig, MinimalForCausalLM

FAMILIES = {
    "minimal": (MinimalConfig, MinimalForCausalLM),
}


def family_classes(name: str):
    if name not in FAMILIES:
        raise ValueError(f"unknown model family {name!r}; known families: {', '.join(FAMILIES)}")
    return FAMILIES[name]
