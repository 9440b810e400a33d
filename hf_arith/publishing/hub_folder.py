"""Publishing a checkpoint on the Hugging Face Hub: check the request, build the upload folder, upload it.

    hf-arith push MODEL --repo-id ORG/NAME [--eval-json REPORT] [--output-dir DIR]

`build_model_folder` writes everything that will be uploaded into one folder, so what users get
can be checked (and loaded) before anything leaves the machine:

    README.md                    model card (hf_arith.publishing.model_card) with model-index results
    config.json, generation_config.json, model.safetensors
    configuration_*.py, modeling_*.py, tokenization_arith.py, formatting.py, errors.py   (remote code)
    tokenizer.json, tokenizer_config.json
    eval_results.json            the `hf-arith eval --json` report behind the card's numbers
    training_summary.json        the training run's record (when the checkpoint has one)
    dtype_check.json             the dtypes checked against float32 (when the checkpoint has one)
    images/length_heatmap.png    the length-generalization grid (hf_arith.publishing.model_card.card_figure),
                                 or a given picture
    length_grid.json             the grid's numbers (when there is a grid; sorting has none)
    loops.json, images/loops.png a looped model's exact match at each loop count (when it has them)

`upload_folder` sends such a folder as is. Every user mistake (a malformed repo id, a folder that
is not a model, missing or mismatched eval results, no token, HF_HUB_OFFLINE) is a one-line
PublishError or CheckpointError raised before any network call. `check_request` makes the checks
of a request once; the builder and the upload trust what it returns.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..bundled import bundled_models, bundled_path
from ..data.errors import one_line
from ..hub import PublishError, check_repo_id, hub_token, send_folder, upload_folder
from ..records import LOOPS_FILE, LOOPS_PICTURE, read_loops, write_json
from ..runtime.limits import measured_max_digits, model_limits
from ..runtime.loading import (
    DTYPE_CHECK_FILE,
    CheckpointError,
    _quiet_transformers,
    load_checkpoint,
    read_dtype_check,
    resolve_checkpoint,
    weights_fingerprint,
)
from ..runtime.saving import save_checkpoint
from .model_card import (
    EVAL_FILE,
    GRID_FILE,
    GRID_SAMPLES,
    HEATMAP_FILE,
    NOTES_FILE,
    SUMMARY_FILE,
    card_figure,
    load_grid,
    model_card,
    read_notes,
    read_summary,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_GRID_SAMPLES = 10_000  # problems per cell of the card's length grid (every cell's problems are held at once)

# What an `hf-arith eval --json` report must hold for the card (key -> accepted types).
EVAL_KEYS = {"task": str, "base": int, "min_digits": int, "max_digits": int, "seed": int, "n": int,
             "exact_match": (int, float), "malformed": (int, float), "by_max_operand_length": dict}


# -- checks made before anything is built or sent -------------------------------------------------
def load_eval_results(path: str | os.PathLike) -> dict:
    """A report written by `hf-arith eval --json`, checked field by field."""
    path = Path(path)
    if not path.is_file():
        raise PublishError(f"eval results {str(path)!r}: no such file (write one with `hf-arith eval MODEL --json FILE`)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PublishError(f"eval results {str(path)!r}: not valid JSON ({one_line(err)})") from None
    if not isinstance(data, dict):
        raise PublishError(f"eval results {str(path)!r}: expected a JSON object from `hf-arith eval --json`")
    missing = [k for k in EVAL_KEYS if k not in data]
    if missing:
        raise PublishError(f"eval results {str(path)!r}: not an `hf-arith eval --json` report (missing {', '.join(missing)})")
    for key, types in EVAL_KEYS.items():
        if not isinstance(data[key], types) or isinstance(data[key], bool):
            raise PublishError(f"eval results {str(path)!r}: {key} has the wrong type ({type(data[key]).__name__})")
    rates = [data["exact_match"], data["malformed"], *data["by_max_operand_length"].values()]
    if data["n"] < 1 or not all(isinstance(r, (int, float)) and 0 <= r <= 1 for r in rates):
        raise PublishError(f"eval results {str(path)!r}: n must be positive and every accuracy between 0 and 1")
    if not all(str(k).isdigit() for k in data["by_max_operand_length"]):
        raise PublishError(f"eval results {str(path)!r}: by_max_operand_length keys must be operand lengths")
    return data


def find_eval_results(folder: Path, eval_json: str | os.PathLike | None, label: str) -> tuple[dict, Path]:
    """The explicit report, else the checkpoint's own eval_results.json; no numbers, no card."""
    path = Path(eval_json) if eval_json is not None else folder / EVAL_FILE
    if eval_json is None and not path.is_file():
        raise PublishError(f"{label}: no eval results for the model card; run `hf-arith eval {label} --json "
                           f"eval.json` and pass --eval-json eval.json")
    return load_eval_results(path), path


def _local_checkpoint(name) -> Path | None:
    """The folder a report's `model` names on this machine (a bundled name or a checkpoint folder), if any;
    never a download."""
    if not isinstance(name, str) or not name.strip():
        return None
    path = Path(name).expanduser()
    if (path / "config.json").is_file():
        return path
    if name in bundled_models():
        return Path(bundled_path(name))
    return None


def check_eval_matches(report: dict, model, tokenizer, folder: Path, source: Path, label: str) -> None:
    """The report (read from `source`) must be of the checkpoint being pushed (`folder`, named `label`):
    the same task and base; the same number format and weights where the report records their
    fingerprints (`hf-arith eval --json` does); for an older report without them, a `model` that does
    not name a checkpoint here with other weights; and operand lengths the model can take."""
    fmt = tokenizer.arith_format
    where = f"eval results {str(source)!r}"
    if report["task"] != fmt.task or report["base"] != fmt.base:
        raise PublishError(f"{where} are for {report['task']} in base {report['base']}, "
                           f"but this model does {fmt.task} in base {fmt.base}")
    again = f"evaluate {label} itself (`hf-arith eval {label} --json FILE`)"
    saved = report.get("number_format_fingerprint")
    if saved is not None and saved != fmt.fingerprint():
        raise PublishError(f"{where} were made with another number format (fingerprint {saved!r}; {label} has "
                           f"{fmt.fingerprint()!r}); {again}")
    weights = report.get("weights_fingerprint")
    if weights is not None:
        own = weights_fingerprint(folder)
        if own is not None and weights != own:
            raise PublishError(f"{where} are for other weights ({report.get('model')!r}, weights fingerprint {weights!r}; "
                               f"{label} has {own!r}); {again}")
    else:
        other = _local_checkpoint(report.get("model"))  # a copy of the same weights elsewhere is the same model
        if (other is not None and other.resolve() != folder.resolve()
                and weights_fingerprint(other) != weights_fingerprint(folder)):
            raise PublishError(f"{where} are for model {report.get('model')!r}, not {label}; {again}")
    longest = model_limits(model, tokenizer).max_digits
    if report["max_digits"] > longest:
        raise PublishError(f"{where} cover operands of up to {report['max_digits']} digits, but {label} takes at most "
                           f"{longest}: they are another model's; {again}")


def _check_png(path: Path) -> Path:
    try:
        with open(path, "rb") as f:
            ok = f.read(8) == PNG_MAGIC
    except OSError as err:
        raise PublishError(f"heatmap {str(path)!r}: cannot read it ({err.strerror or err})") from None
    if not ok:
        raise PublishError(f"heatmap {str(path)!r}: not a PNG image")
    return path


def _empty_out_dir(out_dir: str | os.PathLike, source: Path) -> Path:
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise PublishError(f"output folder {str(out)!r} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        raise PublishError(f"output folder {str(out)!r} is not empty; give a new or empty folder")
    if out.resolve() == source.resolve():
        raise PublishError("the output folder cannot be the checkpoint itself")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PublishError(f"output folder {str(out)!r}: cannot create it ({err.strerror or err})") from None
    return out


@dataclass(frozen=True)
class PushRequest:
    """A checked publishing request: what `check_request` returns and the builder trusts."""

    label: str  # the model as the user named it (a bundled name or a folder), for messages and the card
    source: Path  # the checkpoint folder
    repo_id: str
    model: object
    tokenizer: object
    report: dict
    heatmap: Path | None
    license: str
    dataset_id: str | None
    grid_samples: int


def check_request(model: str | os.PathLike, repo_id: str, *, eval_json: str | os.PathLike | None = None,
                  heatmap: str | os.PathLike | None = None, license: str = "apache-2.0",
                  dataset_id: str | None = None, grid_samples: int = GRID_SAMPLES, revision: str | None = None,
                  trust_remote_code: bool = False) -> PushRequest:
    """Every check of a push request that needs no output folder and no token, each made once.

    Loads the checkpoint (the eval report must be for its task and base), so the builder needs
    nothing more than the request.
    """
    repo_id = check_repo_id(repo_id)
    if isinstance(grid_samples, bool) or not isinstance(grid_samples, int) or not 0 <= grid_samples <= MAX_GRID_SAMPLES:
        raise PublishError(f"grid samples must be a whole number >= 0 and at most {MAX_GRID_SAMPLES:,} problems per "
                           f"cell (0: no grid), got {grid_samples!r}")
    if dataset_id is not None:
        dataset_id = check_repo_id(dataset_id)
    # CheckpointError when it is not an hf_arith model; a Hub repo id resolves to its cached snapshot.
    source = resolve_checkpoint(model, revision=revision, trust_remote_code=trust_remote_code)
    report, report_path = find_eval_results(source, eval_json, str(model))
    if heatmap is not None:
        heatmap = _check_png(Path(heatmap))
    model_obj, tokenizer = load_checkpoint(model, revision=revision, trust_remote_code=trust_remote_code)
    check_eval_matches(report, model_obj, tokenizer, source, report_path, str(model))
    return PushRequest(label=str(model), source=source, repo_id=repo_id, model=model_obj, tokenizer=tokenizer,
                       report=report, heatmap=heatmap, license=license, dataset_id=dataset_id,
                       grid_samples=grid_samples)


# -- building and uploading -------------------------------------------------------------------------
def _build_folder(request: PushRequest, out_dir: str | os.PathLike) -> Path:
    """Write the upload folder of a checked request into `out_dir` (new or empty)."""
    out = _empty_out_dir(out_dir, request.source)
    model, tokenizer, report = request.model, request.tokenizer, request.report
    if request.heatmap is not None:
        figure, grid = None, load_grid(request.source / GRID_FILE, tokenizer.arith_format)
    else:
        figure, grid = card_figure(model, tokenizer, report, request.source, label=request.label,
                                   repo_id=request.repo_id, grid_samples=request.grid_samples)
    # Where it was measured to answer, beside what it accepts (save_checkpoint records the hard limit).
    model.config.measured_max_digits = measured_max_digits(report, grid)
    with _quiet_transformers():  # no "Writing model shards" bar for a few-KB file
        save_checkpoint(model, tokenizer, out)  # safetensors + config + tokenizer + self-contained code
    write_json(out / EVAL_FILE, report)
    summary, notes = read_summary(request.source), read_notes(request.source)
    if summary is not None:
        shutil.copyfile(request.source / SUMMARY_FILE, out / SUMMARY_FILE)
    if notes is not None:
        shutil.copyfile(request.source / NOTES_FILE, out / NOTES_FILE)
    loops, loops_picture = read_loops(request.source), None
    if loops is not None:  # a looped model's accuracy-vs-loops curve, with its plot when it has one
        shutil.copyfile(request.source / LOOPS_FILE, out / LOOPS_FILE)
        if (request.source / LOOPS_PICTURE).is_file():
            (out / LOOPS_PICTURE).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(request.source / LOOPS_PICTURE, out / LOOPS_PICTURE)
            loops_picture = LOOPS_PICTURE
    dtype_check = read_dtype_check(request.source)
    if dtype_check is not None:  # travels with the model: loading the repo refuses the same dtypes
        shutil.copyfile(request.source / DTYPE_CHECK_FILE, out / DTYPE_CHECK_FILE)
    picture = out / HEATMAP_FILE
    picture.parent.mkdir(parents=True, exist_ok=True)
    if figure is None:
        shutil.copyfile(request.heatmap, picture)
    else:
        if grid is not None:
            write_json(out / GRID_FILE, grid)
        figure.savefig(picture, dpi=100)
    card = model_card(model, tokenizer, report, repo_id=request.repo_id, summary=summary, license=request.license,
                      dataset_id=request.dataset_id, heatmap=HEATMAP_FILE, grid=grid,
                      code_files=sorted(p.name for p in out.glob("*.py")), dtype_check=dtype_check,
                      notes=notes, loops=loops, loops_picture=loops_picture, label=request.label,
                      source=request.source)
    card.save(out / "README.md")
    return out


def build_model_folder(model: str | os.PathLike, out_dir: str | os.PathLike, *, repo_id: str,
                       eval_json: str | os.PathLike | None = None, heatmap: str | os.PathLike | None = None,
                       license: str = "apache-2.0", dataset_id: str | None = None,
                       grid_samples: int = GRID_SAMPLES) -> Path:
    """Check the request, then write the exact folder `push` uploads for `model` (a bundled name or
    checkpoint folder) into `out_dir`.

    eval_json: an `hf-arith eval --json` report; default: the checkpoint's own eval_results.json.
    heatmap: a PNG to show instead of the length grid. The grid is the checkpoint's own
    length_grid.json when it ships one, else drawn now with grid_samples problems per cell
    (0: no grid, draw only the report's per-length accuracy).
    """
    request = check_request(model, repo_id, eval_json=eval_json, heatmap=heatmap, license=license,
                            dataset_id=dataset_id, grid_samples=grid_samples)
    return _build_folder(request, out_dir)


def push_model(model: str | os.PathLike, repo_id: str, *, output_dir: str | os.PathLike | None = None,
               upload: bool = True, private: bool = False, **build_kwargs) -> tuple[Path | None, str | None]:
    """Build the folder (in `output_dir`, else a temporary one) and upload it unless `upload=False`.

    build_kwargs: `check_request`'s options (eval_json, heatmap, license, dataset_id, grid_samples,
    revision, trust_remote_code).
    Returns (the kept folder or None, the repo URL or None). The request, then the credentials,
    are checked before the build; nothing touches the network before the upload itself.
    """
    request = check_request(model, repo_id, **build_kwargs)
    token = hub_token() if upload else None  # before the build: a missing token fails in a second
    if output_dir is not None:
        folder = _build_folder(request, output_dir)
        url = send_folder(folder, request.repo_id, token, private=private) if upload else None
        return folder, url
    if not upload:
        raise PublishError("nothing to do: give an output folder, or upload")
    with tempfile.TemporaryDirectory(prefix="hf_arith_push_") as tmp:
        folder = _build_folder(request, Path(tmp) / "upload")
        return None, send_folder(folder, request.repo_id, token, private=private)


__all__ = [
    "CheckpointError", "PublishError", "PushRequest", "build_model_folder", "send_folder", "check_eval_matches", "check_repo_id",
    "check_request", "find_eval_results", "hub_token", "load_eval_results", "push_model", "upload_folder",
]
