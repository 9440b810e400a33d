"""Publishing a checkpoint on the Hugging Face Hub: build the exact upload folder, then upload it.

    hf-arith push MODEL --repo-id ORG/NAME [--eval-json REPORT] [--output-dir DIR]

`build_model_folder` writes everything that will be uploaded into one folder, so what users get
can be checked (and loaded) before anything leaves the machine:

    README.md                    model card (hub_cards/model_card.md) with model-index results
    config.json, generation_config.json, model.safetensors
    configuration_*.py, modeling_*.py, tokenization_arith.py, formatting.py   (remote code)
    tokenizer.json, tokenizer_config.json
    eval_results.json            the `hf-arith eval --json` report behind the card's numbers
    training_summary.json        the training run's record (when the checkpoint has one)
    images/length_heatmap.png    the length-generalization grid (exact match per pair of operand
                                 lengths, hf_arith.grid): the checkpoint's own length_grid.json
                                 when it ships one, else drawn now; or a given picture
    length_grid.json             the grid's numbers (when there is a grid; sorting has none)

`upload_folder` then sends that folder as is. Every user mistake (a malformed repo id, a folder
that is not a model, missing or mismatched eval results, no token, HF_HUB_OFFLINE) is a one-line
PublishError or CheckpointError raised before any network call.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from .formatting import SORT_LABELS, TASK_NAMES, FormatError, NumberFormat, parse_problem
from .loading import CheckpointError, _quiet_transformers, load_checkpoint, one_line, resolve_checkpoint
from .saving import save_checkpoint

HUB_CARDS_DIR = Path(__file__).parent / "hub_cards"  # a link to the top-level hub_cards/, shipped as package data
MODEL_CARD_TEMPLATE = "model_card.md"
EVAL_FILE = "eval_results.json"
SUMMARY_FILE = "training_summary.json"
HEATMAP_FILE = "images/length_heatmap.png"
GRID_FILE = "length_grid.json"
GRID_SAMPLES = 20  # problems per (len_a, len_b) cell of the card's grid: 2,000 for 10x10, a few seconds
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# What an `hf-arith eval --json` report must hold for the card (key -> accepted types).
EVAL_KEYS = {"task": str, "base": int, "min_digits": int, "max_digits": int, "seed": int, "n": int,
             "exact_match": (int, float), "malformed": (int, float), "by_max_operand_length": dict}
# Config entries that say nothing about the architecture (bookkeeping, token ids, init).
_CONFIG_NOISE = {"architectures", "auto_map", "transformers_version", "dtype", "torch_dtype", "model_type",
                 "use_cache", "initializer_range", "bos_token_id", "eos_token_id", "pad_token_id",
                 "_name_or_path", "output_attentions", "output_hidden_states", "return_dict"}


class PublishError(ValueError):
    """A publishing request that cannot go ahead, with a one-line reason."""


def template_path(name: str = MODEL_CARD_TEMPLATE) -> Path:
    path = HUB_CARDS_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"card template {name!r} is not in {HUB_CARDS_DIR}; the installation is incomplete")
    return path


# -- checks made before anything is built or sent -------------------------------------------------
def check_repo_id(repo_id: str | None) -> str:
    """`ORG/NAME` as the Hub accepts it, or a one-line PublishError."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    text = (repo_id or "").strip()
    if text.count("/") != 1 or not all(text.split("/")):
        raise PublishError(f"repo id {repo_id!r} is malformed: expected ORG/NAME (a user or organization, "
                           "a slash, a repository name)")
    try:
        validate_repo_id(text)
    except HFValidationError as err:
        raise PublishError(f"repo id {repo_id!r} is malformed: {one_line(err)}") from None
    return text


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


def check_eval_matches(report: dict, fmt: NumberFormat, source: Path) -> None:
    if report["task"] != fmt.task or report["base"] != fmt.base:
        raise PublishError(f"eval results {str(source)!r} are for {report['task']} in base {report['base']}, "
                           f"but this model does {fmt.task} in base {fmt.base}")


def hub_token() -> str:
    """The token to upload with; one-line errors for offline mode and for no token at all."""
    from huggingface_hub import constants, get_token

    flag = os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}
    if constants.HF_HUB_OFFLINE or flag:
        raise PublishError("HF_HUB_OFFLINE is set, so nothing can be uploaded; unset it to push, "
                           "or give --output-dir DIR to build the folder only")
    token = get_token()
    if not token:
        raise PublishError("no Hugging Face token: set HF_TOKEN or run `hf auth login` with a write token, "
                           "or give --output-dir DIR to build the folder only")
    return token


# -- what the card says -----------------------------------------------------------------------------
def example_problem(fmt: NumberFormat, max_digits: int) -> str:
    """A problem with the longest operands the model was evaluated on, for the card and the Space."""
    n, base = max(1, max_digits), fmt.base
    if base == 10:
        a, b = int(("1234567890" * 10)[:n]), int(("9876543210" * 10)[:n])
    else:  # two n-digit numbers in the model's base, written in decimal as users type them
        low, high = base ** (n - 1) if n > 1 else 0, base**n - 1
        a, b = low + (high - low) // 3, max(low, high - high // 7)
    if fmt.task == "sort":
        values = [b, a, (a + b) // 2][: min(3, fmt.max_items)]
        return ",".join(f"{label}:{v}" for label, v in zip("abc", values))
    op = {"add": "+", "sub": "-", "mul": "*"}[fmt.task]
    return f"{b}{op}{a}" if fmt.task == "sub" else f"{a}{op}{b}"


def reference_answer(problem: str, fmt: NumberFormat) -> str:
    """The exact answer as hf_arith's data labels it (to check a model's answer, never to make one)."""
    values = [int(v) for v in parse_problem(problem, fmt)]
    if fmt.task == "sort":  # labels in ascending order of value; ties keep label order, as the data does
        return "".join(SORT_LABELS[i] for i in sorted(range(len(values)), key=values.__getitem__))
    a, b = values
    return str({"add": a + b, "sub": a - b, "mul": a * b}[fmt.task])


def card_example(model, tokenizer, report: dict) -> tuple[str, str | None]:
    """(problem, the model's answer) for the card's snippet: the longest evaluated length among
    those with the best accuracy in the report, at which the model gets the example right (the
    snippet's printed answer is then a correct one); the longest length if it gets none right."""
    from .solving import solve

    fmt = tokenizer.arith_format
    rows = sorted(length_rows(report), key=lambda r: (-r["accuracy"], -r["digits"]))
    lengths = [r["digits"] for r in rows] or [report["max_digits"]]
    for digits in lengths[:5]:
        example = example_problem(fmt, digits)
        answer = solve(model, tokenizer, [example])[0]
        if answer == reference_answer(example, fmt):
            return example, answer
    example = example_problem(fmt, report["max_digits"])
    return example, solve(model, tokenizer, [example])[0]


def usage_snippet(repo_id: str, example: str, max_new_tokens: int, answer: str | None) -> str:
    """Python that loads the published model with transformers alone (no hf_arith) and solves `example`."""
    return "\n".join([
        "from transformers import AutoModelForCausalLM, AutoTokenizer",
        "",
        f'repo = "{repo_id}"',
        "model = AutoModelForCausalLM.from_pretrained(repo, trust_remote_code=True).eval()",
        "tok = AutoTokenizer.from_pretrained(repo, trust_remote_code=True)",
        "",
        f'enc = tok(["{example}"], padding=True, return_tensors="pt")',
        f"out = model.generate(**enc, max_new_tokens={max_new_tokens}, do_sample=False)",
        f"print(tok.decode_answers(out[:, enc.input_ids.shape[1]:]))  # {[answer]!r}",
    ])


def config_rows(config) -> list[tuple[str, object]]:
    """The family's own settings (plus weight tying), not the generic PreTrainedConfig fields."""
    from transformers import PreTrainedConfig

    generic = set(PreTrainedConfig().to_dict()) - {"tie_word_embeddings"}
    return [(k, v) for k, v in sorted(config.to_dict().items())
            if k not in _CONFIG_NOISE and k not in generic and not k.startswith("_")
            and isinstance(v, (int, float, str, bool))]


def length_rows(report: dict) -> list[dict]:
    counts = report.get("count_by_max_operand_length") or {}
    return [{"digits": int(k), "accuracy": float(v), "count": counts.get(k, counts.get(int(k), ""))}
            for k, v in sorted(report["by_max_operand_length"].items(), key=lambda kv: int(kv[0]))]


def length_heatmap(report: dict, title: str | None = None):
    """Exact match per longest-operand length as a one-row heatmap (a matplotlib Figure).

    Built with `Figure` directly, not pyplot: no global state, safe in the Space's worker threads.
    """
    from matplotlib.figure import Figure

    rows = length_rows(report)
    values = [[r["accuracy"] for r in rows]]
    fig = Figure(figsize=(max(4.0, 0.55 * len(rows) + 2.0), 2.0), layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(values, cmap="RdYlGn", vmin=0.0, vmax=1.0, aspect="auto")
    for i, r in enumerate(rows):
        pct = 100 * r["accuracy"]
        ax.text(i, 0, f"{pct:.0f}" if pct in (0, 100) else f"{pct:.1f}", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(rows)), labels=[str(r["digits"]) for r in rows])
    ax.set_yticks([])
    ax.set_xlabel("longest operand (digits)")
    ax.set_title(title or f"exact match (%) by operand length, {report['n']} held-out problems", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.05, pad=0.02)
    return fig


def load_grid(path: str | os.PathLike, fmt: NumberFormat | None = None) -> dict | None:
    """A `length_grid` result saved as JSON (a checkpoint's length_grid.json), or None when the
    file is missing, unreadable, not such a result, or (given `fmt`) for another task or base."""
    try:
        grid = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = (isinstance(grid, dict) and isinstance(grid.get("matrices"), dict)
          and isinstance(grid["matrices"].get("exact_match"), list) and isinstance(grid.get("summary"), dict)
          and isinstance(grid.get("lengths"), list) and len(grid["lengths"]) == 2
          and isinstance(grid.get("samples_per_cell"), int))
    if ok and fmt is not None:
        ok = grid.get("task", fmt.task) == fmt.task and grid.get("base", fmt.base) == fmt.base
    return grid if ok else None


def length_grid_figure(model, tokenizer, max_digits: int, source: Path | None = None,
                       samples_per_cell: int = GRID_SAMPLES):
    """(figure, result) of hf_arith.grid's length grid over 1..max_digits, or None without that
    module or when the model has no grid (sorting) or cannot take those lengths."""
    try:
        from .grid import length_grid, training_range
        from .plots import plot_grid
    except ImportError:
        return None
    try:
        result = length_grid(model, tokenizer, (1, max_digits), samples_per_cell=samples_per_cell,
                             train_range=training_range(tokenizer.arith_format, source))
    except FormatError:
        return None
    return plot_grid(result), result


def shipped_grid_figure(source: Path, fmt: NumberFormat, label: str):
    """(figure, result) of the checkpoint's own length_grid.json (a grid run made with it), or None."""
    grid = load_grid(source / GRID_FILE, fmt)
    if grid is None:
        return None
    try:
        from .plots import plot_grid
    except ImportError:
        return None
    grid = {**grid, "model": label}  # not the local path it was computed from
    return plot_grid(grid), grid


def _bench_record(summary: dict) -> dict:
    """bench/results/<name>.json of a source checkout, when it records this very training run."""
    path = Path(__file__).resolve().parent.parent / "bench" / "results" / f"{summary.get('name')}.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    same_run = isinstance(record, dict) and record.get("output") and record.get("output") == summary.get("output")
    return record if same_run else {}


def _hardware(machine: dict) -> str:
    device = "CUDA GPU" if machine.get("cuda") else f"{machine.get('cpu_count', '?')}-core {machine.get('machine', '')} CPU"
    threads = f", {machine['threads']} torch thread(s)" if machine.get("threads") else ""
    return f"{device}{threads}, torch {machine.get('torch', '?')}".replace("  ", " ")


def training_details(summary: dict | None) -> dict | None:
    """Rows (recipe, steps, time, hardware, loss) and the recipe YAML for the card's Training section."""
    if not summary:
        return None
    import yaml

    from .train_config import PRESETS_DIR

    record = _bench_record(summary)
    name = summary.get("name")
    rows = [("recipe", f"`{name}`")] if name else []
    if summary.get("steps") is not None:
        rows.append(("steps", f"{summary['steps']:,}" if isinstance(summary["steps"], int) else summary["steps"]))
    seconds = summary.get("train_seconds")
    if isinstance(seconds, (int, float)):
        rows.append(("training time", f"{seconds:.0f} s ({seconds / 60:.1f} min)"))
    recorded = summary.get("recipe")
    start = recorded.get("init_from") if isinstance(recorded, dict) else None
    stages = [s for s in summary.get("earlier_stages") or [] if isinstance(s, dict)]
    if stages:  # trained in stages: each one, then the time of them all
        for number, stage in enumerate(stages, 1):
            took = stage.get("train_seconds")
            took = f"{took:.0f} s" if isinstance(took, (int, float)) else "time not recorded"
            rows.append((f"stage {number} of {len(stages) + 1}", f"`{stage.get('name')}`, {stage.get('steps')} steps, {took}"))
        times = [s.get("train_seconds") for s in stages] + [seconds]
        if all(isinstance(t, (int, float)) for t in times):
            total = sum(times)
            rows.append(("training time, all stages", f"{total:.0f} s ({total / 60:.1f} min)"))
    elif start:  # a warm start from a checkpoint without a training record
        rows.append(("initialised from", f"`{start}` (a trained checkpoint; its own training time is not included above)"))
    machine = summary.get("machine") or record.get("machine")
    rows.append(("hardware", _hardware(machine) if isinstance(machine, dict) else "not recorded"))
    if isinstance(summary.get("train_loss"), (int, float)):
        rows.append(("mean training loss", f"{summary['train_loss']:.4f}"))
    if record.get("command"):
        rows.append(("command", f"`{record['command']}`"))
    verify = summary.get("verify")
    if isinstance(verify, dict) and "accuracy" in verify:
        rows.append(("tiny-adder verify", f"{100 * verify['accuracy']:.2f} % of {verify.get('total')} (seed {verify.get('seed')})"))
    recipe, source = None, None
    if isinstance(summary.get("recipe"), dict):
        recipe, source = yaml.safe_dump(summary["recipe"], sort_keys=False).strip(), "as recorded by the training run"
    elif name and (PRESETS_DIR / f"{name}.yaml").is_file():
        recipe = (PRESETS_DIR / f"{name}.yaml").read_text(encoding="utf-8").strip()
        overrides = record.get("overrides")
        source = (f"the `{name}` preset, overrides: {', '.join(overrides) if overrides else 'none'}"
                  if overrides is not None else f"the `{name}` preset as shipped; overrides, if any, are not recorded")
    return {"rows": rows, "recipe": recipe, "recipe_source": source}


def model_card(model, tokenizer, report: dict, *, repo_id: str, summary: dict | None = None,
               license: str = "apache-2.0", dataset_id: str | None = None, heatmap: str = HEATMAP_FILE,
               eval_command: str | None = None, grid: dict | None = None, code_files: list[str] | None = None):
    """The Hub model card (huggingface_hub.ModelCard) rendered from hub_cards/model_card.md.

    code_files: the remote-code files the card lists (default: the model's and config's modules,
    the tokenizer and the number format; build_model_folder passes the .py files it wrote).
    """
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    from . import __version__
    from .solving import answer_budget

    fmt = tokenizer.arith_format
    task_name = TASK_NAMES[fmt.task]
    example, answer = card_example(model, tokenizer, report)
    common = dict(
        task_type="text-generation", task_name=f"integer {task_name}",
        dataset_type=dataset_id or "hf_arith/synthetic",
        dataset_name=f"hf_arith held-out {task_name}, {report['min_digits']}-{report['max_digits']} digits, base {fmt.base}",
        dataset_config=fmt.task, dataset_split="test",
        dataset_args={"min_digits": report["min_digits"], "max_digits": report["max_digits"], "base": fmt.base,
                      "seed": report["seed"], "n": report["n"]},
    )
    results = [EvalResult(metric_type="exact_match", metric_name="exact match", metric_value=float(report["exact_match"]), **common)]
    results += [EvalResult(metric_type="exact_match", metric_name=f"exact match, longest operand {r['digits']} digits",
                           metric_config=f"max_operand_length={r['digits']}", metric_value=r["accuracy"], **common)
                for r in length_rows(report)]
    model_name = repo_id.split("/")[-1]
    data = ModelCardData(
        model_name=model_name, license=license, library_name="transformers", pipeline_tag="text-generation",
        tags=["custom_code", "arithmetic", "hf_arith", fmt.task, model.config.model_type],
        datasets=[dataset_id] if dataset_id else None, metrics=["exact_match"], eval_results=results,
    )
    code_files = sorted(code_files or {f"{type(c).__module__.rsplit('.', 1)[-1]}.py" for c in (model, model.config)}
                        | {"tokenization_arith.py", "formatting.py"})
    return ModelCard.from_template(
        data, template_path=str(template_path()),
        model_name=model_name, version=__version__, task_name=task_name, fmt=fmt, report=report,
        unique_params=model.num_parameters(), architecture=type(model).__name__,
        model_type=model.config.model_type, config_rows=config_rows(model.config),
        vocab_size=len(tokenizer), vocab=" ".join(f"`{t}`" for t in fmt.vocab()),
        example=example, example_prompt=tokenizer.format_problem(example), example_answer=answer,
        snippet=usage_snippet(repo_id, example, answer_budget(tokenizer, [example]), answer),
        length_rows=length_rows(report), heatmap=heatmap, training=training_details(summary),
        eval_command=eval_command or (f"hf-arith eval {report.get('model', 'MODEL')} --samples {report['n']} "
                                      f"--min-digits {report['min_digits']} --max-digits {report['max_digits']} "
                                      f"--seed {report['seed']} --json {EVAL_FILE}"),
        code_files=code_files, grid=grid, grid_file=GRID_FILE,
        recurrences=getattr(model.config, "num_recurrences", None),
        future_tokens=getattr(model.config, "num_future_tokens", 1),
    )


# -- building and uploading -------------------------------------------------------------------------
def _read_summary(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


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


def check_inputs(model, eval_json=None, heatmap=None, dataset_id=None, grid_samples=GRID_SAMPLES) -> tuple[Path, dict, Path]:
    """The cheap checks of a push request: (checkpoint folder, eval report, report path)."""
    if grid_samples is not None and (isinstance(grid_samples, bool) or not isinstance(grid_samples, int)
                                     or grid_samples < 0):
        raise PublishError(f"grid samples must be a whole number >= 0 (0: no grid), got {grid_samples!r}")
    if dataset_id is not None:
        check_repo_id(dataset_id)
    source = resolve_checkpoint(model)  # CheckpointError when it is not an hf_arith model
    report, report_path = find_eval_results(source, eval_json, str(model))
    if heatmap is not None:
        _check_png(Path(heatmap))
    return source, report, report_path


def build_model_folder(model: str | os.PathLike, out_dir: str | os.PathLike, *, repo_id: str,
                       eval_json: str | os.PathLike | None = None, heatmap: str | os.PathLike | None = None,
                       license: str = "apache-2.0", dataset_id: str | None = None,
                       grid_samples: int = GRID_SAMPLES) -> Path:
    """Write the exact folder `push` uploads for `model` (a bundled name or checkpoint folder).

    eval_json: an `hf-arith eval --json` report; default: the checkpoint's own eval_results.json.
    heatmap: a PNG to show instead of the length grid. The grid is the checkpoint's own
    length_grid.json when it ships one, else drawn now with grid_samples problems per cell
    (0: no grid, draw only the report's per-length accuracy).
    """
    repo_id = check_repo_id(repo_id)
    source, report, report_path = check_inputs(model, eval_json, heatmap, dataset_id, grid_samples)
    model_obj, tokenizer = load_checkpoint(model)
    check_eval_matches(report, tokenizer.arith_format, report_path)
    out = _empty_out_dir(out_dir, source)

    with _quiet_transformers():  # no "Writing model shards" bar for a few-KB file
        save_checkpoint(model_obj, tokenizer, out)  # safetensors + config + tokenizer + self-contained code
    (out / EVAL_FILE).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    summary = _read_summary(source)
    if summary is not None:
        shutil.copyfile(source / SUMMARY_FILE, out / SUMMARY_FILE)
    picture = out / HEATMAP_FILE
    picture.parent.mkdir(parents=True, exist_ok=True)
    grid = None
    if heatmap is not None:
        shutil.copyfile(heatmap, picture)
    else:
        drawn = shipped_grid_figure(source, tokenizer.arith_format, str(model)) if grid_samples else None
        if drawn is None and grid_samples:
            drawn = length_grid_figure(model_obj, tokenizer, report["max_digits"], source, grid_samples)
        if drawn is not None:
            figure, grid = drawn
            (out / GRID_FILE).write_text(json.dumps(grid, indent=2) + "\n", encoding="utf-8")
        else:  # no grid module (or grid_samples=0): the report's per-length accuracy
            figure = length_heatmap(report, title=f"{repo_id}: exact match (%) by operand length")
        figure.savefig(picture, dpi=100)
    card = model_card(model_obj, tokenizer, report, repo_id=repo_id, summary=summary, license=license,
                      dataset_id=dataset_id, heatmap=HEATMAP_FILE, grid=grid,
                      code_files=sorted(p.name for p in out.glob("*.py")))
    card.save(out / "README.md")
    return out


def upload_folder(folder: str | os.PathLike, repo_id: str, *, repo_type: str = "model", token: str | None = None,
                  private: bool = False, commit_message: str | None = None, endpoint: str | None = None) -> str:
    """Create the repo if needed and upload every file of `folder`; returns the repo URL."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    repo_id = check_repo_id(repo_id)
    token = token or hub_token()
    api = HfApi(token=token, endpoint=endpoint)
    where = endpoint or constants.ENDPOINT
    transport = _transport_errors()
    try:
        url = api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True)
        api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type=repo_type,
                          commit_message=commit_message or "Upload with hf-arith")
    except OfflineModeIsEnabled:
        raise PublishError("HF_HUB_OFFLINE is set, so nothing can be uploaded; unset it to push") from None
    except HfHubHTTPError as err:
        status = getattr(getattr(err, "response", None), "status_code", None)
        if status == 401:
            raise PublishError(f"the Hub rejected the token (401): log in again with `hf auth login` ({where})") from None
        if status == 403:
            raise PublishError(f"this token may not write to {repo_id} (403): use a write token for that namespace") from None
        raise PublishError(f"the Hub refused the upload to {repo_id}: {one_line(err)}") from None
    except (*transport, OSError) as err:
        raise PublishError(f"no network: cannot reach {where} ({one_line(err)})") from None
    return str(url)


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Connection failures of the HTTP clients huggingface_hub may use (they are not OSErrors)."""
    found = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(__import__(name).TransportError)
        except (ImportError, AttributeError):
            pass
    return tuple(found)


def push_model(model: str | os.PathLike, repo_id: str, *, output_dir: str | os.PathLike | None = None,
               upload: bool = True, private: bool = False, **build_kwargs) -> tuple[Path | None, str | None]:
    """Build the folder (in `output_dir`, else a temporary one) and upload it unless `upload=False`.

    Returns (the kept folder or None, the repo URL or None). The inputs, then the credentials,
    are checked before the build; nothing touches the network before the upload itself.
    """
    repo_id = check_repo_id(repo_id)
    check_inputs(model, **{k: build_kwargs.get(k) for k in ("eval_json", "heatmap", "dataset_id")},
                 grid_samples=build_kwargs.get("grid_samples", GRID_SAMPLES))
    token = hub_token() if upload else None  # before the build: a missing token fails in a second
    if output_dir is not None:
        folder = build_model_folder(model, output_dir, repo_id=repo_id, **build_kwargs)
        url = upload_folder(folder, repo_id, token=token, private=private) if upload else None
        return folder, url
    if not upload:
        raise PublishError("nothing to do: give an output folder, or upload")
    with tempfile.TemporaryDirectory(prefix="hf_arith_push_") as tmp:
        folder = build_model_folder(model, Path(tmp) / "upload", repo_id=repo_id, **build_kwargs)
        return None, upload_folder(folder, repo_id, token=token, private=private)


__all__ = [
    "CheckpointError", "PublishError", "build_model_folder", "check_inputs", "check_repo_id", "example_problem", "hub_token",
    "length_heatmap", "load_eval_results", "load_grid", "model_card", "reference_answer", "push_model", "training_details", "upload_folder",
    "usage_snippet",
]
