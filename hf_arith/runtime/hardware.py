"""A record of the machine a run used (for training summaries, model cards and benchmarks)."""

from __future__ import annotations

import os
import platform


def available_cpu_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


THREADS_PER_CORE = 4  # the most torch CPU threads a run may ask for, per core of the machine


def max_threads() -> int:
    """The most torch CPU threads a run may set (--threads, optim.threads): THREADS_PER_CORE per core.
    Many more only time-share the cores; 100,000 made the process start threads until it crashed."""
    return THREADS_PER_CORE * (os.cpu_count() or 1)


def memory_bytes() -> int | None:
    """Memory a run's weights and optimizer state may use: the GPU's when there is one, else the machine's."""
    import torch  # here, not at the top: the CLI reads its arguments before torch loads

    if torch.cuda.is_available():
        try:
            return torch.cuda.get_device_properties(0).total_memory
        except (AssertionError, RuntimeError):  # a CUDA build it cannot query
            return None
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def machine_info() -> dict:
    import torch
    import transformers

    return {
        "processor": platform.processor(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
