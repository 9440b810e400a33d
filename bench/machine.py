"""What every benchmark records beside its figures: the machine, the libraries, how busy it was, the command.

Every result file under bench/results/ is written by `write_results`:

    load_before = load_average()                     # before measuring: the machine may be shared
    ...                                              # measure
    write_results(RESULTS / "x.json", {"rows": rows}, what="what the figures are",
                  load_before=load_before, title="X", table=["| ... |", ...])

It writes the JSON (what, the record's entries, machine, command, date) and, given a title, a
Markdown file beside it with the same header and the table (`markdown_table` makes one).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

from hf_arith.runtime.hardware import machine_info as hardware_info

RESULTS = Path(__file__).parent / "results"


def load_average() -> float:
    """The 1-minute load average now (record it before measuring, as `load_before`)."""
    return os.getloadavg()[0]


def machine_info(load_before: float | None = None) -> dict:
    """The machine, torch / transformers versions, torch threads and the load average (before and after)."""
    info = hardware_info()
    info["load_average_1m_after"] = info.pop("load_average_1m")
    if load_before is not None:  # the machine may be shared: record how busy it was
        info["load_average_1m_before"] = round(load_before, 2)
    return info


def command_line() -> str:
    """The exact command line of this process: the interpreter, its options, then sys.argv."""
    return shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def markdown_table(header: list[str], align: str, rows) -> list[str]:
    """The lines of a Markdown table; `align` has one letter per column, l(eft) or r(ight)."""
    def line(cells) -> str:
        return "| " + " | ".join(str(c) for c in cells) + " |"

    return [line(header), line("---:" if a == "r" else "---" for a in align), *(line(row) for row in rows)]


def write_results(out, record: dict, *, what: str, load_before: float | None = None, title: str | None = None,
                  table: list[str] | None = None, note: str | None = None) -> dict:
    """Write `record` as `out` (JSON) with what was measured (and a `note` on the conditions, when given),
    the machine, the command line and the date.

    With a `title`, also `out` with .md: a heading, what, machine, command, then the `table` lines.
    Returns the JSON's content.
    """
    if note:
        what += f". Note: {note}"
    result = {"what": what, **record, "machine": machine_info(load_before), "command": command_line(),
              "date": utc_now()}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    written = [out]
    if title is not None:
        lines = [f"# {title} ({result['date']})", "", what, "", f"Machine: {result['machine']}", "",
                 f"Command: `{result['command']}`", "", *(table or [])]
        written.append(out.with_suffix(".md"))
        written[-1].write_text("\n".join(lines) + "\n")
    print(f"wrote {' and '.join(str(p) for p in written)}")
    return result
