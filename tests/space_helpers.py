"""Running the playground for the Space tests: the source app in this process (hf_arith there), or a
built Space folder's app.py in a subprocess where `import hf_arith` fails, offline, from a
pre-filled Hugging Face cache."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

from remote_code import BLOCK_HF_ARITH

SPACE = Path(__file__).resolve().parent.parent / "spaces" / "arith-playground"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
START_SECONDS = 300  # a fresh Python importing gradio, transformers and torch, then loading every model


def load_app():
    """The source app.py as a module (once per test session)."""
    if "arith_space_app" in sys.modules:
        return sys.modules["arith_space_app"]
    spec = importlib.util.spec_from_file_location("arith_space_app", SPACE / "app.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["arith_space_app"] = module
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cache_repo(hf_home: Path, repo_id: str, folder: Path, commit: str = COMMIT) -> Path:
    """Put `folder` into the Hugging Face cache as `repo_id` (refs/main -> commit), as a download lays it out."""
    storage = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = storage / "snapshots" / commit
    shutil.copytree(folder, snapshot)
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    (storage / "refs" / "main").write_text(commit)
    return snapshot


def published_cache(root: Path, repos: dict[str, str]) -> Path:
    """An HF_HOME holding `hf-arith push`'s exact Hub folder of each bundled model, under its repo id
    ({repo_id: bundled name}); returns the HF_HOME."""
    import hf_arith
    from hf_arith.publishing.hub_folder import build_model_folder
    from hf_arith.publishing.model_card import GRID_FILE

    hf_home = root / "hf_home"
    for repo_id, name in repos.items():
        # The model's own grid when it ships one; else none (the card shows the per-length accuracy).
        ships_grid = (Path(hf_arith.bundled_path(name)) / GRID_FILE).is_file()
        folder = build_model_folder(name, root / "pub" / name, repo_id=repo_id, grid_samples=20 if ships_grid else 0)
        cache_repo(hf_home, repo_id, folder)
    return hf_home


class BuiltSpace:
    """A built Space folder's app.py serving on localhost in a process where hf_arith cannot be imported."""

    def __init__(self, folder: Path, hf_home: Path, log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        script = BLOCK_HF_ARITH + textwrap.dedent("""
            import runpy, sys
            sys.path.insert(0, ".")
            runpy.run_path("app.py", run_name="__main__")
        """)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(hf_home), "GRADIO_SERVER_PORT": str(self.port),
               "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_DISABLE_TELEMETRY": "1"}
        env.pop(MODELS_ENV, None)
        self.log = log
        self._log_file = log.open("w")
        self.proc = subprocess.Popen([sys.executable, "-c", script], cwd=folder, env=env,
                                     stdout=self._log_file, stderr=subprocess.STDOUT, text=True)

    def wait(self) -> BuiltSpace:
        deadline = time.monotonic() + START_SECONDS
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"the built app exited ({self.proc.returncode}): {self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url, timeout=5) as page:
                    if page.status == 200:
                        return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the built app did not start: {self.log.read_text()[-3000:]}")
            time.sleep(1)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self._log_file.close()


MODELS_ENV = "HF_ARITH_SPACE_MODELS"
