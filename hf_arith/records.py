"""The records a checkpoint folder keeps beside its weights.

`training_summary.json` is written by the training run and only by it. `notes.json` holds what
was learned about the run afterwards (for example the stages behind a run older than the
`earlier_stages` record, or the machine from the run's benchmark record): derived notes live
beside the summary, never inside it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

SUMMARY_FILE = "training_summary.json"
NOTES_FILE = "notes.json"
LOOPS_FILE = "loops.json"  # a looped model's accuracy-vs-recurrences curve (`hf-arith eval --loops`)
LOOPS_PICTURE = "images/loops.png"


def _read(folder: str | os.PathLike, name: str) -> dict | None:
    try:
        data = json.loads((Path(folder) / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_summary(folder: str | os.PathLike) -> dict | None:
    """The checkpoint's training_summary.json, or None when it has none (or an unreadable one)."""
    return _read(folder, SUMMARY_FILE)


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


def training_stages(summary: dict | None, notes: dict | None) -> list[dict]:
    """The runs behind a warm-started checkpoint, oldest first: as its training run recorded them,
    else as its notes reconstruct them."""
    for record in (summary, notes):
        stages = (record or {}).get("earlier_stages")
        if stages:
            return [s for s in stages if isinstance(s, dict)]
    return []


__all__ = ["NOTES_FILE", "SUMMARY_FILE", "read_notes", "read_summary", "training_stages"]
