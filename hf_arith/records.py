"""The records a checkpoint folder keeps beside its weights.

`training_summary.json` is written by the training run and only by it. `notes.json` holds what
was learned about the run afterwards (for example the stages behind a run older than the
`earlier_stages` record, or the machine from the run's benchmark record): derived notes live
beside the summary, never inside it.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

from .data.errors import HfArithError

SUMMARY_FILE = "training_summary.json"
NOTES_FILE = "notes.json"
LOOPS_FILE = "loops.json"  # a looped model's accuracy-vs-recurrences curve (`hf-arith eval --loops`)
LOOPS_PICTURE = "images/loops.png"


def write_atomic(path: str | os.PathLike, text: str, mode: int = 0o644) -> Path:
    """Write `text` to `path` so that readers see the old file or the whole new one, never a part:
    a temporary file beside it, flushed to disk, then renamed over it (`os.replace`). Two writers:
    the last rename wins, whole. Every result file the package writes goes through here."""
    path = Path(path)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(err, OSError) and err.filename is None:
            err.filename = str(path)  # the file it could not write, named in the one-line message
        raise
    return path


def make_writable_dir(path: str | os.PathLike) -> Path:
    """Create the folder and prove it takes a file now, not after minutes of work (an OSError if not)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    probe = path / ".hf-arith-write-test"
    probe.write_text("")
    probe.unlink()
    return path


def write_json(path: str | os.PathLike, data, indent: int | None = 2) -> Path:
    """`data` as JSON (one trailing newline) at `path`, written atomically (`write_atomic`)."""
    return write_atomic(path, json.dumps(data, indent=indent) + "\n")


class RecordError(HfArithError):
    """A record file that is there but cannot be read as one (a one-line message naming the file)."""


def _read(folder: str | os.PathLike, name: str) -> dict | None:
    try:
        data = json.loads((Path(folder) / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _int_pair(value, low: int) -> bool:
    return (isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                               for v in value) and low <= value[0] <= value[1])


def read_summary(folder: str | os.PathLike) -> dict | None:
    """The checkpoint's training_summary.json, or None when it has none. A summary that is there but
    unreadable, not a JSON object, or with a trained range (`train_digits`, the recipe's item counts)
    that is not a pair of lengths is a RecordError naming the file: the warnings beyond the trained
    range depend on it, so it is never skipped silently."""
    path = Path(folder) / SUMMARY_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise RecordError(f"{path}: corrupt file, not UTF-8 text") from None
    except ValueError as err:
        raise RecordError(f"{path}: corrupt file, not valid JSON ({' '.join(str(err).split())})") from None
    except OSError as err:
        raise RecordError(f"{path}: cannot read it ({err.strerror or err})") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path}: corrupt file, expected a JSON object, got {type(data).__name__}")
    if "train_digits" in data and not _int_pair(data["train_digits"], 1):
        raise RecordError(f"{path}: corrupt file, train_digits must be [min, max] with 1 <= min <= max, "
                          f"got {str(data['train_digits'])[:40]}")
    items = ((data.get("recipe") or {}).get("data") or {}) if isinstance(data.get("recipe"), dict) else {}
    if isinstance(items, dict) and ("min_items" in items or "max_items" in items) \
            and not _int_pair([items.get("min_items"), items.get("max_items")], 2):
        raise RecordError(f"{path}: corrupt file, recipe.data min_items and max_items must be item counts with "
                          f"2 <= min_items <= max_items, got {items.get('min_items')!r} and {items.get('max_items')!r}")
    stages = data.get("earlier_stages")
    for stage in stages if isinstance(stages, list) else []:
        if isinstance(stage, dict) and "train_items" in stage and not _int_pair(stage["train_items"], 2):
            raise RecordError(f"{path}: corrupt file, an earlier stage's train_items must be [min, max] item counts "
                              f"with 2 <= min <= max, got {str(stage['train_items'])[:40]}")
    return data


def read_notes(folder: str | os.PathLike) -> dict | None:
    """The checkpoint's notes.json (derived notes about its run), or None."""
    return _read(folder, NOTES_FILE)


def read_loops(folder: str | os.PathLike) -> dict | None:
    """The checkpoint's loops.json, or None when it has none or one without a loop count per exact match."""
    data = _read(folder, LOOPS_FILE)
    if not data or not isinstance(data.get("loops"), list) or not isinstance(data.get("exact_match"), list) \
            or len(data["loops"]) != len(data["exact_match"]):
        return None
    return data


def stage_items(summary: dict | None) -> tuple[int, int] | None:
    """The list sizes one training stage drew (sorting): its recipe's data.min_items and max_items."""
    recipe = (summary or {}).get("recipe")
    data = recipe.get("data") if isinstance(recipe, dict) else None
    low, high = (data.get("min_items"), data.get("max_items")) if isinstance(data, dict) else (None, None)
    return (low, high) if isinstance(low, int) and isinstance(high, int) else None


def chain_items(summary: dict | None) -> tuple[int, int] | None:
    """The list sizes a checkpoint was trained on over all its stages: the union of its own stage's and
    those its earlier stages recorded (`train_items`). A last stage on five-item lists after stages on
    2-5 items leaves a model trained on 2-5, not on 5 alone."""
    ranges = [list(r) for r in (stage_items(summary), *(s.get("train_items") for s in training_stages(summary, None)))
              if r is not None]
    return (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else None


def training_stages(summary: dict | None, notes: dict | None) -> list[dict]:
    """The runs behind a warm-started checkpoint, oldest first: as its training run recorded them,
    else as its notes reconstruct them."""
    for record in (summary, notes):
        stages = (record or {}).get("earlier_stages")
        if stages:
            return [s for s in stages if isinstance(s, dict)]
    return []


def peak_memory() -> dict:
    """The process's peak resident memory so far, as a result records it: getrusage's ru_maxrss (KiB on
    Linux, bytes on macOS), the peak of the whole process from its start (Python, torch, the model and
    every batch), not of one step; None where the platform has no getrusage."""
    try:
        import resource
    except ImportError:  # Windows
        return {"peak_resident_memory_mib": None}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    mib = peak / 2**20 if sys.platform == "darwin" else peak / 2**10
    return {"peak_resident_memory_mib": round(mib, 1),
            "peak_resident_memory": "the whole process's peak resident set (getrusage ru_maxrss) from its start "
                                    "to the end of the run, model loading included"}


def library_versions() -> dict:
    """The versions of the libraries a result depends on (hf_arith's own included)."""
    import numpy
    import tokenizers
    import torch
    import transformers

    from . import __version__

    return {"hf_arith": __version__, "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
            "numpy": numpy.__version__}


__all__ = ["NOTES_FILE", "library_versions", "peak_memory", "SUMMARY_FILE", "RecordError", "chain_items", "read_notes", "read_summary", "stage_items",
           "training_stages", "write_atomic",
           "write_json"]
