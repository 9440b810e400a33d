"""What every benchmark records beside its figures: the machine, the libraries and how busy it was."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

from hf_arith.hardware import machine_info as hardware_info


def machine_info(load_before: float | None = None) -> dict:
    info = hardware_info()
    info["load_average_1m_after"] = info.pop("load_average_1m")
    if load_before is not None:  # the machine may be shared: record how busy it was
        info["load_average_1m_before"] = round(load_before, 2)
    return info


def command_line(argv: list[str] | None = None) -> str:
    args = [sys.argv[0], *(argv if argv is not None else sys.argv[1:])]
    return "python " + " ".join(shlex.quote(a) for a in args)


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def write_results(out, what: str, rows: list, argv: list[str] | None, title: str, table: list[str],
                  load_before: float | None = None, **extra) -> dict:
    """Write a benchmark's rows as `out` (JSON) and `out` with .md (a heading, what, machine, command, table).

    Every result file carries what was measured, on which machine and by which command.
    """
    result = {"what": what, "rows": rows, **extra, "machine": machine_info(load_before),
              "command": command_line(argv), "date": utc_now()}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# {title} ({result['date']})", "", what, "", f"Machine: {result['machine']}", "",
             f"Command: `{result['command']}`", "", *table]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out} and {out.with_suffix('.md')}")
    return result
