"""What every command group shares: the parser class, option types, model loading and printing.

Imports only the standard library and hf_arith's light modules at start-up (errors, hardware,
formatting, train_config); torch, transformers and the modules that need them are imported inside
the functions that use them, so that `hf-arith --help` answers without loading them.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import warnings
from pathlib import Path

from ..data.errors import CLIError, one_line
from ..data.formatting import FormatError, quote
from ..records import make_writable_dir
from ..runtime.hardware import THREADS_PER_CORE, max_threads
from ..text import pct as text_pct
from ..training.recipe import MAX_EVAL_SAMPLES

PROG = "hf-arith"
DEFAULT_PRESET = "minimal-add10"
MALFORMED = "<malformed>"
MODEL_HELP = "bundled model name, checkpoint folder or Hub repo id (ORG/NAME)"
# The names of hf_arith.runtime.loading.DTYPES and the value of hf_arith.runtime.solving.LOW_CONFIDENCE, here so that the
# parser needs no torch (tests/test_cli_errors.py checks that they agree).
DTYPE_NAMES = ("float32", "bfloat16", "float16")
LOW_CONFIDENCE = 0.9


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (like every other user error), not usage + error."""

    def error(self, message):
        raise CLIError(f"{message} (see '{self.prog} --help')")


def take_negative_problems(parser: argparse.ArgumentParser) -> None:
    """'-5+3' is a (negative) problem, not an unknown option: the parser then reports it properly."""
    if hasattr(parser, "_negative_number_matcher"):
        parser._negative_number_matcher = re.compile(r"^-\d")


# -- option types (each checked as the option is parsed) -------------------------------------
def ascii_int(text: str) -> int:
    """int(text) for ASCII decimal digits only: int() also reads other scripts' digits ('٣' is 3)."""
    if not re.fullmatch(r"\s*[+-]?[0-9]+\s*", text):
        raise ValueError(text)
    return int(text)


def positive_int(text: str) -> int:
    try:
        value = ascii_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {quote(text)}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {quote(text)}")
    return value


def integer(text: str) -> int:
    try:
        return ascii_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {quote(text)}") from None


def int_in(low, high, why: str = ""):
    """An argparse type: an integer from `low` to `high` (argparse names the option in its message);
    `high` may be a function, called when the option is parsed."""
    def parse(text: str) -> int:
        top = high() if callable(high) else high
        try:
            value = ascii_int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= top:
            raise argparse.ArgumentTypeError(f"expected an integer from {low:,} to {top:,}{why}, got {quote(text)}")
        return value
    return parse


def probability(text: str) -> float:
    """An argparse type: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {quote(text)}")
    return value


# Bounds of the numeric options: seeds as numpy and torch take them; sample counts that finish in
# reasonable memory (every problem of a run is held at once).
MAX_SEED = 2**32 - 1
MAX_SAMPLES = MAX_EVAL_SAMPLES
MAX_SAMPLES_PER_CELL = 10_000
seed = int_in(0, MAX_SEED)
threads = int_in(1, max_threads, f" ({THREADS_PER_CORE} per CPU core of this machine)")


def device(text: str) -> str:
    """--device: cpu, cuda, cuda:N or mps, and only one this machine has (checked before any loading)."""
    from ..runtime.loading import CheckpointError, check_device

    try:
        check_device(text)
    except CheckpointError as err:
        raise argparse.ArgumentTypeError(one_line(err)) from None
    return text


def length_range(text: str) -> tuple[int, int]:
    from ..evaluation.grid import parse_length_range

    try:
        return parse_length_range(text, "")
    except FormatError as err:
        raise argparse.ArgumentTypeError(one_line(err).lstrip()) from None


def length_list(text: str) -> list[int]:
    from ..evaluation.grid import parse_length_list

    try:
        return parse_length_list(text, "")
    except FormatError as err:
        raise argparse.ArgumentTypeError(one_line(err).lstrip()) from None


def item_range(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", text)
    if m is None or not int(m.group(1)) <= int(m.group(2)):
        raise argparse.ArgumentTypeError(f"expected A:B with A <= B items, e.g. 6:8, got {text[:40]!r}")
    return int(m.group(1)), int(m.group(2))


def loop_counts(text: str) -> list[int]:
    counts = [part.strip() for part in text.split(",")]
    if not all(c.isdigit() and int(c) >= 1 for c in counts):
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas (e.g. 1,2,4,8), got {text!r}")
    return [int(c) for c in counts]


# -- shared option groups ----------------------------------------------------------------------
def parent_parsers() -> dict[str, argparse.ArgumentParser]:
    """The option groups subcommands share: `common` (--threads, also accepted before the command; SUPPRESS
    keeps the top-level value), `source` (where a model comes from) and `runtime` (what it runs on)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--threads", type=threads, default=argparse.SUPPRESS, metavar="N",
                        help="torch CPU threads (also accepted before the command)")
    source = argparse.ArgumentParser(add_help=False)
    source.add_argument("--revision", metavar="REV",
                        help="branch, tag or commit of a Hub repo id MODEL (default: main)")
    source.add_argument("--trust-remote-code", action="store_true",
                        help="run the model's own code (auto_map) when its model_type is not an hf_arith family")
    runtime = argparse.ArgumentParser(add_help=False)
    runtime.add_argument("--device", type=device, metavar="DEVICE", help="cpu (default), cuda, cuda:N or mps")
    runtime.add_argument("--dtype", choices=list(DTYPE_NAMES), metavar="DTYPE",
                         help=f"{', '.join(DTYPE_NAMES)} (default: as saved); one that changes this model's answers "
                              "(its dtype_check.json) is refused, one never checked is named in a warning")
    return {"common": common, "source": source, "runtime": runtime}


# -- running a model -----------------------------------------------------------------------------
@contextlib.contextmanager
def no_library_progress_bars():
    """Hide transformers' loading/saving bars ("Loading weights" included); the Trainer's training bar
    is separate and stays."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def set_threads(args, default: int | None) -> None:
    import torch

    chosen = args.threads if args.threads is not None else default
    if chosen is not None:
        torch.set_num_threads(chosen)


def load(args):
    """(model, tokenizer) of args.model with the command's --revision, --trust-remote-code, --device
    and --dtype; a dtype that was never checked for this model is named in one warning line."""
    from ..runtime import loading

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", loading.DtypeWarning)
        model, tokenizer = loading.load_checkpoint(args.model, revision=args.revision,
                                                   trust_remote_code=args.trust_remote_code,
                                                   device=getattr(args, "device", None),
                                                   dtype=getattr(args, "dtype", None))
    for w in caught:
        if issubclass(w.category, loading.DtypeWarning):
            print(f"{PROG}: warning: {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return model, tokenizer


# -- printing and files --------------------------------------------------------------------------
def pct(x: float) -> str:
    return text_pct(x, spaced=False)


def describe_format(fmt) -> str:
    text = f"{fmt.task_rules.title}, base {fmt.base}"
    if fmt.operand_width:
        text += f", {fmt.operand_width}-digit operands"
    return text


def writable_dir(text: str, option: str) -> Path:
    """Create the folder and prove it takes a file now, not after minutes of evaluation."""
    try:
        return make_writable_dir(text)
    except OSError as err:
        raise CLIError(f"{option} {text}: cannot write there ({err.strerror or err})") from None


