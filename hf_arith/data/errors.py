"""The package's one error type for what a user did wrong.

`HfArithError` is raised for bad input: a malformed problem, recipe, checkpoint, path or option.
Every user-error class of the package derives from it (FormatError, CheckpointError, RecipeError,
WarmStartError, PublishError, SpaceError, ProtocolFailure, ParameterCountError, CLIError), and it is a
`ValueError`, so code that catches ValueError keeps working. The command line prints these as one line
`hf-arith: error: ...` with exit status 2; any other exception is a bug and keeps its traceback.

This module imports nothing, so that the command line can name it before torch is loaded, and so that
it travels as Hub remote code beside formatting.py (whose FormatError derives from HfArithError).
"""

from __future__ import annotations


class HfArithError(ValueError):
    """Something the user gave (a problem, a recipe, a checkpoint, a path, an option) is wrong; the
    message says what, in one line."""


class CLIError(HfArithError):
    """A user error found by the command line itself (bad option values, wrong kind of model)."""


def one_line(err: BaseException) -> str:
    """An exception's message on one line (used wherever a user error is printed)."""
    text = " ".join(str(err).split())
    return text or type(err).__name__
