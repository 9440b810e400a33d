"""Small text helpers for messages: a share as a percentage (an exception on one line is
`errors.one_line`, which travels with the remote code)."""

from __future__ import annotations


def pct(x: float, spaced: bool = True) -> str:
    """A share as a percentage with two decimals: '99.50 %' (spaced=False: '99.50%')."""
    return f"{100 * x:.2f}{' ' if spaced else ''}%"
