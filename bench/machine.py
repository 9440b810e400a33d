"""What every benchmark records beside its figures: the machine, the libraries and how busy it was."""

from __future__ import annotations

import os
import platform
import shlex
import sys
import time

import torch
import transformers


def machine_info(load_before: float | None = None) -> dict:
    info = {
        "processor": platform.processor(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "load_average_1m_after": round(os.getloadavg()[0], 2),
    }
    if load_before is not None:  # the machine may be shared: record how busy it was
        info["load_average_1m_before"] = round(load_before, 2)
    return info


def command_line(argv: list[str] | None = None) -> str:
    args = [sys.argv[0], *(argv if argv is not None else sys.argv[1:])]
    return "python " + " ".join(shlex.quote(a) for a in args)


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
