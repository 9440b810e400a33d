"""Test isolation from the network and from the user's Hugging Face caches.

The environment is set here, at import time, because huggingface_hub and datasets read it
once when they are imported; the autouse fixture then gives every test its own cache folders
(environment and the already-imported libraries' settings), restored afterwards.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

_SESSION_HOME = Path(tempfile.mkdtemp(prefix="hf_arith_tests_"))
atexit.register(shutil.rmtree, _SESSION_HOME, ignore_errors=True)

_OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
os.environ.update(_OFFLINE)
os.environ["HF_HOME"] = str(_SESSION_HOME / "hf_home")
os.environ["HF_DATASETS_CACHE"] = str(_SESSION_HOME / "hf_home" / "datasets")
os.environ.pop("HF_TOKEN", None)
os.environ.pop("HUGGING_FACE_HUB_TOKEN", None)
# One torch CPU thread in the tests and their subprocesses, unless the environment names a count: the
# test workloads are small batches of small models, and on a 2-core machine with anything else running,
# two threads made them many times slower (bench/results/threads.md).
_TORCH_THREADS = int(os.environ.setdefault("OMP_NUM_THREADS", "1"))


def pytest_xdist_auto_num_workers(config):
    """Workers for `-n auto` (pyproject's addopts): one a usable core, at most 4. Each worker holds its own
    torch and models, and past four the longest test files, not the cores, set the wall time."""
    from hf_arith.runtime.hardware import available_cpu_cores  # here: after the environment above is set

    return max(1, min(4, available_cpu_cores()))


@pytest.fixture(autouse=True)
def hf_offline_tmp_home(tmp_path_factory, monkeypatch):
    """HF_HUB_OFFLINE=1 and HF_HOME / HF_DATASETS_CACHE in a fresh temporary folder for each test."""
    home = tmp_path_factory.mktemp("hf_home")
    cache = home / "datasets"
    for key, value in _OFFLINE.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache))
    if "huggingface_hub" in sys.modules:
        from huggingface_hub import constants

        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
        monkeypatch.setattr(constants, "HF_HOME", str(home))
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    if "datasets" in sys.modules:
        from datasets import config

        monkeypatch.setattr(config, "HF_HUB_OFFLINE", True)
        monkeypatch.setattr(config, "HF_DATASETS_OFFLINE", True)
        monkeypatch.setattr(config, "HF_CACHE_HOME", str(home))
        monkeypatch.setattr(config, "HF_DATASETS_CACHE", cache)
        monkeypatch.setattr(config, "DOWNLOADED_DATASETS_PATH", cache / "downloads")
        monkeypatch.setattr(config, "EXTRACTED_DATASETS_PATH", cache / "downloads" / "extracted")
    yield home


@pytest.fixture(autouse=True)
def torch_threads():
    """Each test starts at the suite's thread count, whatever a command run by the test before it set."""
    if "torch" in sys.modules and sys.modules["torch"].get_num_threads() != _TORCH_THREADS:
        sys.modules["torch"].set_num_threads(_TORCH_THREADS)


def tiny_checkpoint(tmp_path_factory, name: str, overrides: list[str]):
    """A few-step checkpoint of the minimal-add10 preset (shared by the test modules of a session)."""
    root = tmp_path_factory.getbasetemp() / f"tiny-{name}"
    final = root / "final"
    if not (final / "config.json").is_file():
        base = ["optim.steps=5", "optim.compile=false", "eval.samples=20", "eval.verify=false", "optim.save_steps=1000"]
        from hf_arith.training.recipe import load_recipe
        from hf_arith.training.run import train

        train(load_recipe("minimal-add10", [*base, *overrides, f"output_dir={root}"]))
    return final


@pytest.fixture(scope="session")
def add10(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory, "add10", [])
