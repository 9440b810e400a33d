"""Checkpoints that ship inside the package (small safetensors folders)."""

from __future__ import annotations

from pathlib import Path

BUNDLED_DIR = Path(__file__).parent / "bundled"


def bundled_models() -> list[str]:
    return sorted(p.name for p in BUNDLED_DIR.iterdir() if (p / "config.json").is_file()) if BUNDLED_DIR.is_dir() else []


def bundled_path(name: str) -> str:
    """Folder of a bundled checkpoint, loadable with `from_pretrained`."""
    path = BUNDLED_DIR / name
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"no bundled model named {name!r}; bundled models: {', '.join(bundled_models()) or 'none'}")
    return str(path)
