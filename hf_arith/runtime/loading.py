"""Loading a trained checkpoint (a bundled name, a folder or a Hub repo id) with one-line errors.

`load_checkpoint` (public name: `hf_arith.load`) checks what it can before handing the folder to
the Auto classes, so that the usual mistakes (a wrong path, the run folder instead of its
`final/`, a malformed or uncached repo id, some other model's checkpoint, remote code that was
not trusted, a folder without the hf_arith tokenizer, a damaged file, a device that is not there,
a dtype that changes the model's answers) end in one line that says what is wrong, instead of a
download or a traceback from deep inside transformers.

A repo id (`ORG/NAME`, optionally at a `revision`) resolves with `huggingface_hub.snapshot_download`,
so the Hugging Face cache and HF_HUB_OFFLINE work as everywhere else: `config.json` and
`tokenizer_config.json` come first and are checked, and only an hf_arith model's other files follow.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import warnings
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

from ..bundled import (
    BUNDLED_DIR,
    DEFAULT_MODELS,
    bundled_model_for,
    bundled_models,
    bundled_path,
    nearest_bundled_model,
)
from ..data.errors import HfArithError, one_line
from ..data.formatting import FormatError, NumberFormat, get_task, task_of
from ..families import FAMILIES
from ..models.modeling_common import DTYPE_CHECK_FILE, DtypeWarning, dtype_verdict
from ..records import RecordError, read_summary
from .limits import FINGERPRINT_KEY, check_pair
from .saving import record_limits

# The dtypes a model may be loaded in; float32 (REFERENCE_DTYPE) is the reference every dtype check compares
# with. Which dtypes were checked against it on the checkpoint's held-out set: its DTYPE_CHECK_FILE
# (scripts/check_dtypes.py), read by the rule every family's from_pretrained also applies (`dtype_verdict`).
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# The files fetched (and checked) before the rest of a Hub repo is downloaded.
_METADATA_FILES = ["config.json", "tokenizer_config.json"]


class CheckpointError(HfArithError):
    """A checkpoint that cannot be loaded as an hf_arith model (or not on that device or in that
    dtype), with a one-line reason."""


def checkpoint_label(name_or_path: str | Path) -> str:
    """A short name for a bundled name or a checkpoint folder, for file names and titles ('runs/x/final' -> 'x')."""
    path = Path(str(name_or_path))
    return path.parent.name if path.name == "final" and path.parent.name else path.name


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


def _check_folder(path: Path, label: str, trust_remote_code: bool = False, where: str = "this folder") -> None:
    """The config and tokenizer checks of a checkpoint folder (or a repo's first two files)."""
    config_file = path / "config.json"
    if not config_file.is_file():
        inner = _subfolders_with_config(path) if where == "this folder" else []
        hint = f"; it has checkpoint subfolders: {', '.join(inner)}" if inner else ""
        raise CheckpointError(f"{label}: no config.json in {where}, so it is not a saved model{hint}")
    config = _read_json(config_file)
    model_type = config.get("model_type")
    if model_type not in known_model_types():
        auto_map = config.get("auto_map")
        remote = isinstance(auto_map, dict) and "AutoModelForCausalLM" in auto_map
        if not remote:
            raise CheckpointError(
                f"{label}: incompatible checkpoint: config.json has model_type {model_type!r}, "
                f"not an hf_arith model family ({', '.join(known_model_types())})"
            )
        if not trust_remote_code:
            raise CheckpointError(
                f"{label}: model_type {model_type!r} is not an hf_arith model family; it loads only with its own "
                "code (auto_map in config.json): pass --trust-remote-code (Python: trust_remote_code=True) "
                "if you trust that code"
            )
    tokenizer_file = path / "tokenizer_config.json"
    if not tokenizer_file.is_file():
        raise CheckpointError(f"{label}: incompatible checkpoint: no tokenizer_config.json (the hf_arith tokenizer is missing)")
    tokenizer_config = _read_json(tokenizer_file)
    if not isinstance(tokenizer_config.get("number_format"), dict):
        raise CheckpointError(
            f"{label}: incompatible checkpoint: tokenizer_config.json has no number_format, "
            "so it is not an hf_arith tokenizer"
        )
    try:
        fmt = NumberFormat.from_dict(tokenizer_config["number_format"])
    except (FormatError, TypeError) as err:
        raise CheckpointError(f"{label}: tokenizer_config.json has an invalid number_format: {one_line(err)}") from None
    # The fingerprints are written with the format; one that disagrees with it means a file edited since.
    for name, saved in ((tokenizer_file.name, tokenizer_config.get(FINGERPRINT_KEY)),
                        (config_file.name, config.get(FINGERPRINT_KEY))):
        if saved is not None and saved != fmt.fingerprint():
            raise CheckpointError(
                f"{label}: incompatible checkpoint: {name} has {FINGERPRINT_KEY} {saved!r}, but tokenizer_config.json's "
                f"number_format has fingerprint {fmt.fingerprint()!r}: the tokenizer does not write problems the way "
                "the model was trained to read them")


def _explicit_path(text: str) -> bool:
    """Text that can only mean a local path (absolute, ./ ../ ~, or with a backslash)."""
    return Path(text).is_absolute() or text.startswith((".", "~")) or "\\" in text


def _repo_id_problem(text: str) -> str | None:
    """What huggingface_hub's validate_repo_id finds wrong with `text` as a repo id (None: nothing)."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(text)
    except HFValidationError as err:
        return one_line(err).replace(" Use `repo_type` argument if needed.", "")
    return None


def check_repo_id(text: str) -> str:
    """A repo id as huggingface_hub's validate_repo_id accepts it, or a one-line CheckpointError."""
    problem = _repo_id_problem(text)
    if problem:
        raise CheckpointError(f"{text!r} is not a valid Hub repo id (ORG/NAME): {problem}")
    return text


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Connection failures of the HTTP clients huggingface_hub may use (they are not OSErrors)."""
    found = []
    for name in ("httpx2", "httpx"):
        with contextlib.suppress(ImportError, AttributeError):
            found.append(__import__(name).TransportError)
    return tuple(found)


def cached_revisions(repo_id: str) -> list[str]:
    """The branch names and commits of `repo_id` in the Hugging Face cache (empty: not cached)."""
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    storage = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type="model")
    refs = sorted(p.relative_to(storage / "refs").as_posix() for p in (storage / "refs").rglob("*") if p.is_file()) \
        if (storage / "refs").is_dir() else []
    snapshots = sorted(p.name for p in (storage / "snapshots").iterdir()) if (storage / "snapshots").is_dir() else []
    return refs + snapshots


def _snapshot(repo_id: str, revision: str | None, allow_patterns: list[str] | None = None) -> Path:
    """snapshot_download, with every failure as one line that says what to do."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        IncompleteSnapshotError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    at = f" at revision {revision!r}" if revision is not None else ""
    bars = not are_progress_bars_disabled()
    disable_progress_bars()
    try:
        return Path(snapshot_download(repo_id, revision=revision, allow_patterns=allow_patterns))
    except RevisionNotFoundError:
        raise CheckpointError(f"{repo_id}: the Hub repo has no revision {revision!r} (a branch, tag or commit)") from None
    except GatedRepoError:
        raise CheckpointError(f"{repo_id}: a gated repo; accept its conditions on the Hub and log in "
                              "(`hf auth login`) to download it") from None
    except RepositoryNotFoundError:
        raise CheckpointError(f"{repo_id}: no such model repo on the Hub (or it is private: log in with "
                              "`hf auth login`), and no checkpoint folder of that name") from None
    except IncompleteSnapshotError:
        raise CheckpointError(f"{repo_id}{at}: the cached snapshot is incomplete and the Hub cannot be reached; "
                              "download it again with network access") from None
    except LocalEntryNotFoundError as err:
        if isinstance(err.__cause__, OfflineModeIsEnabled):
            cached = cached_revisions(repo_id)
            if not cached:
                raise CheckpointError(f"{repo_id}: not in the Hugging Face cache, and HF_HUB_OFFLINE is set, so it "
                                      "cannot be downloaded (download it once online, or give a checkpoint folder)") from None
            raise CheckpointError(f"{repo_id}: revision {revision or 'main'!r} is not in the Hugging Face cache "
                                  f"(cached: {', '.join(cached[:5])}), and HF_HUB_OFFLINE is set, so it "
                                  "cannot be downloaded") from None
        cause = err.__cause__ or err
        raise CheckpointError(f"{repo_id}{at}: cannot reach the Hub and it is not in the Hugging Face cache "
                              f"({one_line(cause)})") from None
    except HfHubHTTPError as err:
        raise CheckpointError(f"{repo_id}{at}: the Hub refused the download: {one_line(err)}") from None
    except (*_transport_errors(), OSError) as err:
        raise CheckpointError(f"{repo_id}{at}: cannot download it ({one_line(err)})") from None
    finally:
        if bars:
            enable_progress_bars()


def _resolve_repo(repo_id: str, revision: str | None, trust_remote_code: bool) -> Path:
    """The snapshot folder of a Hub model repo: its config and tokenizer config first (checked
    like a folder's), then, for an hf_arith model, the rest of the same commit."""
    from huggingface_hub.file_download import REGEX_COMMIT_HASH

    problem = _repo_id_problem(repo_id)
    if problem:
        raise CheckpointError(f"no checkpoint folder {repo_id!r}, and not a valid Hub repo id (ORG/NAME): {problem}")
    first = _snapshot(repo_id, revision, allow_patterns=_METADATA_FILES)
    _check_folder(first, repo_id, trust_remote_code, where="the repo")
    commit = first.name if REGEX_COMMIT_HASH.fullmatch(first.name) else revision
    return _snapshot(repo_id, commit)


def resolve_checkpoint(name_or_path: str | Path, revision: str | None = None, trust_remote_code: bool = False) -> Path:
    """The folder of a bundled model name, a checkpoint path or a Hub repo id (`ORG/NAME`, at
    `revision`: a branch, tag or commit; default main), after checking its config files.

    A bundled name comes first, then an existing folder, then a repo id (downloaded into, or read
    from, the Hugging Face cache; offline with HF_HUB_OFFLINE=1). A model_type that is not an
    hf_arith family is refused unless its config carries remote code and `trust_remote_code` is set.
    """
    text = str(name_or_path)
    if not text.strip():
        raise CheckpointError("empty model name; give a bundled model name, a checkpoint folder or a Hub repo id (ORG/NAME)")
    if revision is not None and not str(revision).strip():
        raise CheckpointError("empty revision; give a branch, tag or commit of the Hub repo")
    path = Path(text).expanduser()
    bundled = text in bundled_models() and not (path / "config.json").is_file()
    if bundled:
        path = Path(bundled_path(text))
    if not path.exists():
        if "/" in text and not _explicit_path(text):
            return _resolve_repo(text, None if revision is None else str(revision), trust_remote_code)
        bundled = ", ".join(bundled_models()) or "none"
        raise CheckpointError(f"no checkpoint folder {text!r}, no bundled model of that name (bundled models: {bundled}), "
                              "and not a Hub repo id (ORG/NAME)")
    if revision is not None:
        raise CheckpointError(f"{text}: a revision applies only to Hub repo ids (ORG/NAME), not to a "
                              f"{'bundled model' if bundled else 'local folder'}")
    if not path.is_dir():
        raise CheckpointError(f"{text}: not a folder; a checkpoint is a folder holding config.json and the weights")
    _check_folder(path, text, trust_remote_code)
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


def _keys(keys) -> str:
    names = sorted(k if isinstance(k, str) else str(k[0]) for k in keys)
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


# -- device and dtype -----------------------------------------------------------------------------
def check_device(device: str | torch.device | None) -> torch.device | None:
    """`cpu`, `cuda`, `cuda:N` or `mps` as a torch.device, if this machine has it; else one line."""
    if device is None:
        return None
    text = str(device).strip()
    try:
        dev = torch.device(text)
    except (RuntimeError, ValueError, TypeError):
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda", "mps"):
        raise CheckpointError(f"device {text!r} is not one of cpu, cuda, cuda:N, mps")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            build = "" if torch.version.cuda else f" (torch {torch.__version__} is built without CUDA)"
            raise CheckpointError(f"device {text!r}: no CUDA GPU is available here{build}; use --device cpu")
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise CheckpointError(f"device {text!r}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise CheckpointError(f"device {text!r}: Apple's Metal (MPS) backend is not available here; use --device cpu")
    return dev


def check_dtype(dtype: str | torch.dtype | None) -> str | None:
    """The name of a supported dtype (float32, bfloat16, float16), or one line naming the problem."""
    if dtype is None:
        return None
    for name, value in DTYPES.items():
        if dtype == value or (isinstance(dtype, str) and dtype.strip() == name):
            return name
    raise CheckpointError(f"dtype {str(dtype)!r} is not supported; use one of {', '.join(DTYPES)}")


def read_dtype_check(folder: str | Path) -> dict | None:
    """The checkpoint's dtype_check.json (written by scripts/check_dtypes.py), or None without one."""
    path = Path(folder) / DTYPE_CHECK_FILE
    if not path.is_file():
        return None
    record = _read_json(path)
    if not isinstance(record.get("dtypes"), dict):
        raise CheckpointError(f"{path}: corrupt file, no \"dtypes\" map")
    return record


def check_dtype_for(folder: Path, dtype: str | None, label: str) -> None:
    """Refuse a dtype that the checkpoint's own dtype check found to change answers (one line, naming
    the dtype and its agreement with float32); warn (DtypeWarning) for a dtype that was never checked.
    The rule is `dtype_verdict`, the one the models' from_pretrained applies (as Hub remote code too)."""
    if dtype is None:
        return
    verdict = dtype_verdict(read_dtype_check(folder), dtype)
    if verdict is None:
        return
    if verdict[0] == "warn":
        warnings.warn(f"{label}: {verdict[1]}", DtypeWarning, stacklevel=3)
        return
    raise CheckpointError(f"{label}: {verdict[1]}")


def check_config_sizes(path: Path, label: str) -> None:
    """The values of config.json that size the model, checked before any weight is allocated, each a one-line
    CheckpointError naming the value and its limit: the context and abacus range (at most MAX_CONTEXT),
    every tensor the config makes against the tensor of that name in the weights (a config edited to a
    bigger table would allocate it, then find it mismatched), and the whole model against the memory here."""
    from transformers import AutoConfig

    from .hardware import memory_bytes
    from .limits import MAX_CONTEXT

    data = _read_json(path / "config.json")
    for key in ("max_position_embeddings", "abacus_max_digits"):
        value = data.get(key)
        if isinstance(value, int) and value > MAX_CONTEXT:
            raise CheckpointError(f"{label}: config.json's {key} is {value:,}, beyond the {MAX_CONTEXT:,} hf_arith "
                                  "works with (and not what its weights hold)")
    if data.get("model_type") not in known_model_types():
        return  # another family's own code sizes its model
    try:
        with _quiet_transformers(), torch.device("meta"):
            model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(path)))
    except Exception:  # noqa: BLE001 - a config the loader itself will refuse, with its own message
        return
    shapes = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    try:
        from safetensors import safe_open

        for file in sorted(path.glob("*.safetensors")):
            with safe_open(str(file), framework="pt") as f:
                for name in f.keys():
                    saved = tuple(f.get_slice(name).get_shape())
                    if name in shapes and shapes[name] != saved:
                        raise CheckpointError(
                            f"{label}: config.json does not match the weights: it makes {name} of shape "
                            f"{shapes[name]}, but {file.name} holds {saved}; the config was edited or belongs to "
                            "another checkpoint")
    except CheckpointError:
        raise
    except Exception:  # noqa: BLE001 - a damaged file: the loader reports it
        pass
    need, have = sum(t.numel() for t in model.parameters()) * 4, memory_bytes()
    if have and need > have:
        raise CheckpointError(f"{label}: config.json makes a model of {need / 2**30:,.1f} GiB of float32 weights, more "
                              f"than the {have / 2**30:,.1f} GiB of memory here")


# transformers' from_pretrained is not thread-safe here: two threads loading tied checkpoints at
# once each reported the tied lm_head.weight as missing. Loads from threads (a Space's events) queue.
_LOAD_LOCK = threading.Lock()


def load_checkpoint(name_or_path: str | Path, revision: str | None = None, trust_remote_code: bool = False,
                    device: str | torch.device | None = None, dtype: str | torch.dtype | None = None):
    """(model, tokenizer) from a bundled model name (see `bundled_models`), a checkpoint folder or
    a Hub repo id (`ORG/NAME` at `revision`), on `device` (default: CPU) in `dtype` (default: as saved).

    The model is in eval mode; `model.name_or_path` is the folder it was loaded from. Raises
    CheckpointError (a ValueError with a one-line message), before any download or loading, for a
    device that is not there, an unsupported dtype, a malformed or uncached repo id, a missing
    folder, a folder that is not a saved model, another library's or family's checkpoint, remote
    code without `trust_remote_code`, and a dtype the checkpoint's dtype_check.json records as
    changing answers; after reading, for a tokenizer that is not an hf_arith tokenizer and
    damaged files. A dtype that was never checked loads with a DtypeWarning.
    """
    target = check_device(device)
    dtype_name = check_dtype(dtype)
    path = resolve_checkpoint(name_or_path, revision=revision, trust_remote_code=trust_remote_code)
    label = str(name_or_path)
    check_dtype_for(path, dtype_name, label)
    check_config_sizes(path, label)
    try:  # the trained range, read by every warning beyond it: a corrupt record is refused, not skipped
        read_summary(path)
    except RecordError as err:
        raise CheckpointError(f"{label}: {one_line(err)}") from None
    # hf_arith's own families always use the installed, registered classes: transformers prefers them
    # for the model, but with trust_remote_code it would take the tokenizer from the saved copy.
    own = _read_json(path / "config.json").get("model_type") in known_model_types()
    remote = {"trust_remote_code": True} if trust_remote_code and not own else {}
    # Damaged files surface as JSON/OS/value errors from transformers, SafetensorError from the
    # safetensors reader, and plain Exception from the tokenizers library (its Rust errors).
    try:
        from safetensors import SafetensorError
    except ImportError:  # older safetensors
        SafetensorError = OSError  # noqa: N806
    with _LOAD_LOCK, _quiet_transformers():
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(path), **remote)
        except (OSError, ValueError, TypeError, KeyError) as err:
            raise CheckpointError(f"{label}: cannot load the tokenizer (corrupt or incompatible files): {one_line(err)}") from None
        except Exception as err:
            if type(err) is not Exception and not type(err).__module__.startswith("tokenizers"):
                raise  # a bug, not a damaged file
            raise CheckpointError(f"{label}: cannot load the tokenizer (corrupt tokenizer.json?): {one_line(err)}") from None
        if not hasattr(tokenizer, "arith_format"):
            raise CheckpointError(f"{label}: incompatible checkpoint: {type(tokenizer).__name__} is not an hf_arith tokenizer")
        if dtype_name is not None:
            remote["dtype"] = DTYPES[dtype_name]
        if own:  # checked above (check_dtype_for), by the rule the model's from_pretrained would apply again
            remote["ignore_dtype_check"] = True
        try:
            model, info = AutoModelForCausalLM.from_pretrained(
                str(path), output_loading_info=True, ignore_mismatched_sizes=True, **remote
            )
        except (OSError, ValueError, TypeError, KeyError, RuntimeError, SafetensorError) as err:
            raise CheckpointError(f"{label}: cannot load the model (corrupt or incompatible files): {one_line(err)}") from None
    problems = [(kind, info.get(kind) or ()) for kind in ("missing_keys", "mismatched_keys", "unexpected_keys")]
    for kind, keys in problems:
        if keys:
            what = kind.replace("_keys", "")
            raise CheckpointError(f"{label}: corrupt or incompatible weights: {what} tensors {_keys(keys)}")
    try:  # the folder as a whole: a tokenizer that writes problems as the model was trained to read them
        check_pair(model.config, tokenizer)
    except FormatError as err:
        raise CheckpointError(f"{label}: incompatible checkpoint: {one_line(err)}") from None
    if own:  # the model itself knows what it takes, so any later save of it writes its limits and defaults
        record_limits(model, tokenizer)
    if target is not None:
        model.to(target)
    model.eval()
    return model, tokenizer


def load(name_or_path_or_repo_id: str | Path, revision: str | None = None, trust_remote_code: bool = False,
         device: str | torch.device | None = None, dtype: str | torch.dtype | None = None):
    """(model, tokenizer), ready for `hf_arith.solve`: from a bundled model name, a checkpoint folder
    or a Hub repo id (`ORG/NAME`, at `revision`; read from the Hugging Face cache when cached, offline
    with HF_HUB_OFFLINE=1).

    trust_remote_code: needed only for a model whose model_type is not an hf_arith family but whose
    config carries its own code (auto_map); hf_arith's own families always use the installed classes.
    device: cpu, cuda, cuda:N or mps (default: cpu). dtype: float32, bfloat16 or float16 (default:
    as saved); one the checkpoint's dtype_check.json records as changing answers is refused.
    Every bad input is a CheckpointError (ValueError) with a one-line message (see `load_checkpoint`).
    """
    return load_checkpoint(name_or_path_or_repo_id, revision=revision, trust_remote_code=trust_remote_code,
                           device=device, dtype=dtype)


def weights_fingerprint(folder: str | Path | None) -> str | None:
    """A short hash of a checkpoint's weights as saved (every tensor of its *.safetensors files: name,
    dtype, shape and bytes), the same however the folder was loaded or re-saved; None without such files.
    `hf-arith eval --json` records it, so `push` can refuse another model's report."""
    if folder is None:
        return None
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    from safetensors import safe_open

    digest = hashlib.sha256()
    for path in files:
        with safe_open(str(path), framework="pt") as f:
            for name in sorted(f.keys()):
                tensor = f.get_tensor(name).contiguous()
                digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
                digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]


def checkpoint_folder(model) -> Path | None:
    """The folder a model loaded by `load_checkpoint` came from (a repo id's snapshot folder)."""
    folder = Path(getattr(model, "name_or_path", "") or "")
    return folder if str(folder) and folder.is_dir() else None


def bundled_model_for_problem(problem: str) -> str:
    """The bundled model that answers a typed problem when none is named (`hf-arith solve` without
    --model): `bundled_route(problem)`'s model."""
    return bundled_route(problem)[0]


def bundled_route(problem: str) -> tuple[str, bool]:
    """(the bundled model for a typed problem, whether it holds it): the task its syntax reads
    (`formatting.task_of`), then `bundled.bundled_model_for` its longest operand and item count (True),
    else, for a problem beyond every bundled model's reach, `bundled.nearest_bundled_model` (False; it
    answers the problem flagged, or refuses it naming the largest limits there are). A problem no task
    reads, or of a task no bundled model does, is one FormatError."""
    task, operands = task_of(problem)
    items = len(operands) if get_task(task).item_list else None
    digits = max(len(v) for v in operands)
    held = bundled_model_for(task, 10, digits, items)
    name = held or nearest_bundled_model(task, 10, digits, items) or DEFAULT_MODELS.get(task)
    if name is None:
        raise FormatError(f"{problem.strip()!r} is {get_task(task).title}, which no bundled model does: name a model")
    if name not in bundled_models():
        raise FormatError(f"{problem.strip()!r}: its bundled model {name!r} is not installed: name a model")
    return name, held is not None


def other_bundled_model(model, fmt: NumberFormat, digits: int, items: int | None) -> str | None:
    """The bundled model, other than `model` itself, that holds problems whose longest operand has `digits`
    digits and (for a list task) `items` items (`bundled.bundled_model_for`): what `solve`'s warning and the
    CLI's notes name for problems beyond `model`'s trained range; None where no bundled model holds them."""
    folder = checkpoint_folder(model)
    itself = folder.name if folder and folder.resolve() == (BUNDLED_DIR / folder.name).resolve() else ""
    return bundled_model_for(fmt.task, fmt.base, digits, items if fmt.task_rules.item_list else None, exclude=itself)


__all__ = [
    "DTYPES", "DTYPE_CHECK_FILE", "CheckpointError", "DtypeWarning", "check_device", "check_dtype", "check_dtype_for",
    "bundled_route", "check_repo_id", "checkpoint_folder", "known_model_types", "load", "load_checkpoint", "other_bundled_model",
    "read_dtype_check", "resolve_checkpoint", "weights_fingerprint",
]
