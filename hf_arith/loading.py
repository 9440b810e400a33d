"""Loading a trained checkpoint (a bundled name or a folder) with one-line errors.

`load_checkpoint` checks what it can before handing the folder to the Auto classes, so that the
usual mistakes (a wrong path, the run folder instead of its `final/`, some other model's
checkpoint, a folder without the hf_arith tokenizer, a damaged file) end in one line that says
what is wrong, instead of a Hub lookup or a traceback from deep inside transformers.
"""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from .bundled import bundled_models, bundled_path
from .families import FAMILIES


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded as an hf_arith model, with a one-line reason."""


def known_model_types() -> list[str]:
    return sorted(config_cls.model_type for config_cls, _ in FAMILIES.values())


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise CheckpointError(f"{path}: corrupt file, not UTF-8 text") from None
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{path}: corrupt file, not valid JSON ({err.msg} at line {err.lineno})") from None
    except OSError as err:
        raise CheckpointError(f"{path}: cannot read it ({err.strerror or err})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: corrupt file, expected a JSON object, got {type(data).__name__}")
    return data


def _subfolders_with_config(path: Path) -> list[str]:
    try:
        return sorted(p.name for p in path.iterdir() if (p / "config.json").is_file())
    except OSError:
        return []


def resolve_checkpoint(name_or_path: str | Path) -> Path:
    """The folder of a bundled model name or a checkpoint path, after checking its config files."""
    text = str(name_or_path)
    if not text.strip():
        raise CheckpointError("empty model name; give a bundled model name or a checkpoint folder")
    path = Path(text).expanduser()
    if text in bundled_models() and not (path / "config.json").is_file():
        path = Path(bundled_path(text))
    if not path.exists():
        bundled = ", ".join(bundled_models()) or "none"
        raise CheckpointError(f"no checkpoint folder {text!r} and no bundled model of that name (bundled models: {bundled})")
    if not path.is_dir():
        raise CheckpointError(f"{text}: not a folder; a checkpoint is a folder holding config.json and the weights")
    config_file = path / "config.json"
    if not config_file.is_file():
        inner = _subfolders_with_config(path)
        hint = f"; it has checkpoint subfolders: {', '.join(inner)}" if inner else ""
        raise CheckpointError(f"{text}: no config.json in this folder, so it is not a saved model{hint}")
    config = _read_json(config_file)
    model_type = config.get("model_type")
    if model_type not in known_model_types():
        raise CheckpointError(
            f"{text}: incompatible checkpoint: config.json has model_type {model_type!r}, "
            f"not an hf_arith model family ({', '.join(known_model_types())})"
        )
    tokenizer_file = path / "tokenizer_config.json"
    if not tokenizer_file.is_file():
        raise CheckpointError(f"{text}: incompatible checkpoint: no tokenizer_config.json (the hf_arith tokenizer is missing)")
    tokenizer_config = _read_json(tokenizer_file)
    if not isinstance(tokenizer_config.get("number_format"), dict):
        raise CheckpointError(
            f"{text}: incompatible checkpoint: tokenizer_config.json has no number_format, "
            "so it is not an hf_arith tokenizer"
        )
    return path


@contextlib.contextmanager
def _quiet_transformers():
    """No progress bars and no warning reports while loading: problems become CheckpointErrors."""
    bars = hf_logging.is_progress_bar_enabled()
    verbosity = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def one_line(err: BaseException) -> str:
    """An exception's message on one line (used wherever a user error is printed)."""
    text = " ".join(str(err).split())
    return text or type(err).__name__


def _keys(keys) -> str:
    names = sorted(k if isinstance(k, str) else str(k[0]) for k in keys)
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


# transformers' from_pretrained is not thread-safe here: two threads loading tied checkpoints at
# once each reported the tied lm_head.weight as missing. Loads from threads (a Space's events) queue.
_LOAD_LOCK = threading.Lock()


def load_checkpoint(name_or_path: str | Path):
    """(model, tokenizer) from a bundled model name (see `bundled_models`) or a checkpoint folder.

    The model is in eval mode. Raises CheckpointError (a ValueError with a one-line message) for
    a missing folder, a folder that is not a saved model, another library's or family's
    checkpoint, a tokenizer that is not an hf_arith tokenizer, and damaged files.
    """
    path = resolve_checkpoint(name_or_path)
    label = str(name_or_path)
    # Damaged files surface as JSON/OS/value errors from transformers, SafetensorError from the
    # safetensors reader, and plain Exception from the tokenizers library (its Rust errors).
    try:
        from safetensors import SafetensorError
    except ImportError:  # older safetensors
        SafetensorError = OSError  # noqa: N806
    with _LOAD_LOCK, _quiet_transformers():
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(path))
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise CheckpointError(f"{label}: cannot load the tokenizer (corrupt or incompatible files): {one_line(err)}") from None
        except Exception as err:
            if type(err) is not Exception and not type(err).__module__.startswith("tokenizers"):
                raise  # a bug, not a damaged file
            raise CheckpointError(f"{label}: cannot load the tokenizer (corrupt tokenizer.json?): {one_line(err)}") from None
        if not hasattr(tokenizer, "arith_format"):
            raise CheckpointError(f"{label}: incompatible checkpoint: {type(tokenizer).__name__} is not an hf_arith tokenizer")
        try:
            model, info = AutoModelForCausalLM.from_pretrained(
                str(path), output_loading_info=True, ignore_mismatched_sizes=True
            )
        except (OSError, ValueError, TypeError, KeyError, RuntimeError, SafetensorError) as err:
            raise CheckpointError(f"{label}: cannot load the model (corrupt or incompatible files): {one_line(err)}") from None
    problems = [(kind, info.get(kind) or ()) for kind in ("missing_keys", "mismatched_keys", "unexpected_keys")]
    for kind, keys in problems:
        if keys:
            what = kind.replace("_keys", "")
            raise CheckpointError(f"{label}: corrupt or incompatible weights: {what} tensors {_keys(keys)}")
    vocab = getattr(model.config, "vocab_size", None)
    if vocab is not None and len(tokenizer) > vocab:
        raise CheckpointError(
            f"{label}: the tokenizer has {len(tokenizer)} tokens but the model only {vocab}; they do not belong together"
        )
    model.eval()
    return model, tokenizer


__all__ = ["CheckpointError", "known_model_types", "load_checkpoint", "one_line", "resolve_checkpoint"]
