"""What every benchmark records beside its figures: the machine, the libraries and how busy it was."""

from __future__ import annotations

import shlex
import sys
import time

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
