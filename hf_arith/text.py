"""Small text helpers for messages: an exception on one line, a share as a percentage."""

from __future__ import annotations


def one_line(err: BaseException) -> str:
    """An exception's message on one line (used wherever a user error is printed)."""
    text = " ".join(str(err).split())
    return text or type(err).__name__


def pct(x: float, spaced: bool = True) -> str:
    """A share as a percentage with two decimals: '99.50 %' (spaced=False: '99.50%')."""
    return f"{100 * x:.2f}{' ' if spaced else ''}%"
