"""The Hub model card of a checkpoint and its figures.

Everything the card says comes from the model itself and the checkpoint folder's own files
(training_summary.json, eval_results.json, length_grid.json, config), rendered with the
package's hub_cards/model_card.md template, so an installed wheel writes the same card as a
source checkout.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..data.formatting import FormatError, NumberFormat
from ..data.problems import example_problem, reference_answer
from ..hub import HUB_CARDS_DIR
from ..models.configuration_common import LIMIT_FIELDS, MIN_TRANSFORMERS_VERSION
from ..records import LOOPS_FILE, NOTES_FILE, SUMMARY_FILE, read_notes, read_summary, training_stages

MODEL_CARD_TEMPLATE = "model_card.md"
# The files of a checkpoint (and of its upload folder) the card is built from or points to.
EVAL_FILE = "eval_results.json"
GRID_FILE = "length_grid.json"
HEATMAP_FILE = "images/length_heatmap.png"
GRID_SAMPLES = 20  # problems per cell of the card's grid: 2,000 for 10x10 operand lengths, a few seconds

# Config entries that say nothing about the architecture (bookkeeping, token ids, init, the recorded limits,
# which the card's Limitations section states).
_CONFIG_NOISE = {"architectures", "auto_map", "transformers_version", "dtype", "torch_dtype", "model_type",
                 "use_cache", "initializer_range", "bos_token_id", "eos_token_id", "pad_token_id",
                 "_name_or_path", "output_attentions", "output_hidden_states", "return_dict", "answer_views",
                 *LIMIT_FIELDS}
# model-index needs a dataset type: a Hub dataset id when the data was pushed, else this plain word (no fake id).
GENERATED_DATASET_TYPE = "synthetic"

# The papers and projects a model reproduces, cited on its card when it uses what they introduced.
CITATIONS = {
    "abacus": ("McLeish et al. 2024, abacus embeddings and looped transformers for arithmetic", """\
@article{mcleish2024transformers,
  title   = {Transformers Can Do Arithmetic with the Right Embeddings},
  author  = {McLeish, Sean and Bansal, Arpit and Stein, Alex and Jain, Neel and Kirchenbauer, John and
             Bartoldson, Brian R. and Kailkhura, Bhavya and Bhatele, Abhinav and Geiping, Jonas and
             Schwarzschild, Avi and Goldstein, Tom},
  journal = {arXiv preprint arXiv:2405.17399},
  year    = {2024}
}"""),
    "gpt2": ("Radford et al. 2019, GPT-2, whose blocks the abacus models use", """\
@techreport{radford2019language,
  title       = {Language Models are Unsupervised Multitask Learners},
  author      = {Radford, Alec and Wu, Jeffrey and Child, Rewon and Luan, David and Amodei, Dario and
                 Sutskever, Ilya},
  institution = {OpenAI},
  year        = {2019}
}"""),
    "multi_token": ("Gloeckle et al. 2024, multi-token prediction (the extra output heads)", """\
@article{gloeckle2024better,
  title   = {Better \\& Faster Large Language Models via Multi-token Prediction},
  author  = {Gloeckle, Fabian and Youbi Idrissi, Badr and Rozi{\\`e}re, Baptiste and Lopez-Paz, David and
             Synnaeve, Gabriel},
  journal = {arXiv preprint arXiv:2404.19737},
  year    = {2024}
}"""),
    "rope": ("Su et al. 2021, rotary position embeddings", """\
@article{su2021roformer,
  title   = {RoFormer: Enhanced Transformer with Rotary Position Embedding},
  author  = {Su, Jianlin and Lu, Yu and Pan, Shengfeng and Murtadha, Ahmed and Wen, Bo and Liu, Yunfeng},
  journal = {arXiv preprint arXiv:2104.09864},
  year    = {2021}
}"""),
    "adderboard": ("AdderBoard, the tiny-adder protocol and table this model is scored on", """\
@misc{adderboard,
  title        = {AdderBoard},
  howpublished = {\\url{https://github.com/anadim/AdderBoard}}
}"""),
    "microadder": ("MicroAdder, the split-residual tiny adder this model's layout follows", """\
@misc{microadder,
  title        = {MicroAdder},
  howpublished = {\\url{https://github.com/evindor/MicroAdder}}
}"""),
    "grokfast": ("Lee et al. 2024, Grokfast, the gradient filter this model was trained with", """\
@article{lee2024grokfast,
  title   = {Grokfast: Accelerated Grokking by Amplifying Slow Gradients},
  author  = {Lee, Jaerin and Kang, Bong Gyun and Kim, Kihoon and Lee, Kyoung Mu},
  journal = {arXiv preprint arXiv:2405.20233},
  year    = {2024}
}"""),
}


def template_path(name: str = MODEL_CARD_TEMPLATE) -> Path:
    path = HUB_CARDS_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"card template {name!r} is not in {HUB_CARDS_DIR}; the installation is incomplete")
    return path


# -- what the card says -----------------------------------------------------------------------------
def card_example(model, tokenizer, report: dict) -> tuple[str, str | None]:
    """(problem, the model's answer) for the card's snippet: the longest evaluated length among
    those with the best accuracy in the report, at which the model gets the example right (the
    snippet's printed answer is then a correct one); the longest length if it gets none right."""
    from ..runtime.solving import solve

    fmt = tokenizer.arith_format
    rows = sorted(length_rows(report), key=lambda r: (-r["accuracy"], -r["digits"]))
    lengths = [r["digits"] for r in rows] or [report["max_digits"]]
    for digits in lengths[:5]:
        example = example_problem(fmt, digits)
        answer = solve(model, tokenizer, [example], warn_beyond_training=False)[0]
        if answer == reference_answer(example, fmt):
            return example, answer
    example = example_problem(fmt, report["max_digits"])
    return example, solve(model, tokenizer, [example], warn_beyond_training=False)[0]


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


def pipeline_snippet(repo_id: str, example: str, answer: str | None) -> str:
    """Python that answers `example` with the `arithmetic` pipeline shipped in the published repo."""
    return "\n".join([
        "from transformers import pipeline",
        "",
        f'solver = pipeline("arithmetic", model="{repo_id}", trust_remote_code=True)',
        f'print(solver("{example}"))  # {dict(problem=example, answer=answer)!r}',
    ])


def config_rows(config) -> list[tuple[str, object]]:
    """The family's own settings (plus weight tying), not the generic PreTrainedConfig fields."""
    from transformers import PreTrainedConfig

    generic = set(PreTrainedConfig().to_dict()) - {"tie_word_embeddings"}
    return [(k, v) for k, v in sorted(config.to_dict().items())
            if k not in _CONFIG_NOISE and k not in generic and not k.startswith("_")
            and isinstance(v, (int, float, str, bool))]


def _thousands(value):
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value


def length_rows(report: dict) -> list[dict]:
    counts = report.get("count_by_max_operand_length") or {}
    return [{"digits": int(k), "accuracy": float(v), "count": _thousands(counts.get(k, counts.get(int(k), "")))}
            for k, v in sorted(report["by_max_operand_length"].items(), key=lambda kv: int(kv[0]))]


def loops_rows(curve: dict | None, trained: int | None, picture: str | None = None) -> dict | None:
    """The card's loops table from a loops.json curve: each loop count with its exact match, the
    trained count marked, and the plot's path in the folder (None: no plot); None without a curve."""
    if not curve:
        return None
    rows = [{"loops": n, "exact_match": f"{100 * acc:.2f} %", "trained": n == trained}
            for n, acc in zip(curve["loops"], curve["exact_match"])]
    return {"rows": rows, "problems": curve.get("problems"), "n": curve.get("n"), "picture": picture}


def dtype_rows(record: dict | None) -> dict | None:
    """The card's dtype table from a checkpoint's dtype_check.json (`hf_arith.runtime.loading.read_dtype_check`):
    per dtype its exact match, its agreement with float32 and whether loading accepts it; None without one."""
    from ..runtime.loading import DTYPE_CHECK_FILE

    if not record:
        return None
    rows = []
    for name, entry in record["dtypes"].items():
        if not isinstance(entry, dict):
            continue
        if entry.get("error"):
            rows.append({"dtype": name, "exact_match": "-", "agreement": "-", "verdict": f"refused: {entry['error']}"})
            continue
        agreement, exact = entry.get("agreement"), entry.get("exact_match")
        ok = agreement == 1
        rows.append({"dtype": name, "exact_match": "-" if exact is None else f"{100 * exact:.2f} %",
                     "agreement": "-" if agreement is None else f"{100 * agreement:.2f} %",
                     "verdict": "reference" if name == record.get("reference") else ("accepted" if ok else "refused")})
    problems = record.get("problems") or {}
    return {"file": DTYPE_CHECK_FILE, "n": problems.get("n", "?"), "rows": rows,
            "refused": [r["dtype"] for r in rows if r["verdict"].startswith("refused")],
            "device": "the CPU" if record.get("device", "cpu") == "cpu" else f"device {record['device']}"}


def _hardware(machine: dict) -> str:
    device = "CUDA GPU" if machine.get("cuda") else f"{machine.get('cpu_count', '?')}-core {machine.get('machine', '')} CPU"
    threads = f", {plural(machine['threads'], 'torch thread')}" if isinstance(machine.get("threads"), int) else ""
    return f"{device}{threads}, torch {machine.get('torch', '?')}".replace("  ", " ")


def training_device(machine) -> str | None:
    """Where a run trained, in a few words: its GPU's name, or the CPU (None: not recorded)."""
    if not isinstance(machine, dict):
        return None
    return machine["cuda"] if machine.get("cuda") else "the CPU"


def recorded_warm_start(summary: dict | None) -> dict | None:
    """The warm start a training summary records (`init_from`: name, kind "hub", "bundled" or "folder",
    and for the Hub its repo_id), or None for a model trained from scratch or an older summary."""
    source = (summary or {}).get("init_from")
    return source if isinstance(source, dict) and source.get("name") and source.get("kind") else None


def base_model(summary: dict | None) -> str | None:
    """The card's `base_model`: the Hub repo a warm-started model began from (None for a local or
    bundled starting checkpoint, which the card's text names instead)."""
    source = recorded_warm_start(summary)
    return source.get("repo_id") if source and source["kind"] == "hub" else None


def _describe_source(source: dict) -> str:
    name = source["name"]
    if source["kind"] == "hub" and source.get("repo_id"):
        return f"[`{source['repo_id']}`](https://huggingface.co/{source['repo_id']}) on the Hub (`base_model`)"
    if source["kind"] == "bundled":
        return f"`{name}`, a checkpoint bundled with hf_arith (`hf-arith models`)"
    return f"`{name}`, a local checkpoint folder (not on the Hub)"


def training_details(summary: dict | None, notes: dict | None = None) -> dict | None:
    """Rows (recipe, steps, time, hardware, loss) and the recipe YAML for the card's Training
    section, all from the checkpoint's training summary: what it does not record, the card does
    not claim (no hardware: "not recorded"; no recipe: no recipe block). `notes` (the folder's
    notes.json) fills in the stages and hardware of a run that predates those records, labelled so."""
    if not summary:
        return None
    import yaml

    name = summary.get("name")
    rows = [("run name", f"`{name}`")] if name else []  # the run's own name: a command reproduces it, or none
    if summary.get("steps") is not None:
        rows.append(("steps", f"{summary['steps']:,}" if isinstance(summary["steps"], int) else summary["steps"]))
    seconds = summary.get("train_seconds")
    if isinstance(seconds, (int, float)):
        rows.append(("training time", f"{seconds:,.0f} s ({seconds / 60:,.1f} min)"))
    mined = summary.get("mined")
    if isinstance(mined, dict) and isinstance(mined.get("kinds"), dict):  # data.mine_problems (hf_arith.training.mining)
        kinds = [k for k in mined["kinds"].values() if isinstance(k, dict)]
        took = f", {mined['seconds']:,.0f} s" if isinstance(mined.get("seconds"), (int, float)) else ""
        rows.append(("hard-example mining", f"the starting model answered {sum(k.get('drawn', 0) for k in kinds):,} "
                     f"training problems, {sum(k.get('wrong', 0) for k in kinds):,} wrong; the "
                     f"{mined.get('pool', 0):,} wrong or below confidence {mined.get('threshold')} were "
                     f"a pool for a share of the examples{took}"))
    recorded = summary.get("recipe")
    start = recorded.get("init_from") if isinstance(recorded, dict) else None
    stages = training_stages(summary, notes)
    source = recorded_warm_start(summary)
    if source:  # where the weights came from, as the training run recorded it
        rows.append(("initialised from", _describe_source(source)
                     + ("" if stages else "; its own training time is not included above")))
    if stages:  # trained in stages: each one, then the time of them all
        final_device = training_device(summary.get("machine"))
        devices = [training_device(stage.get("machine")) for stage in stages] + [final_device]
        mixed = len({d for d in devices if d}) > 1
        for number, (stage, device) in enumerate(zip(stages, devices), 1):
            took = stage.get("train_seconds")
            took = f"{took:,.0f} s" if isinstance(took, (int, float)) else "time not recorded"
            where = f" on {device}" if mixed and device else ""
            rows.append((f"stage {number} of {len(stages) + 1}", f"`{stage.get('name')}`, {_thousands(stage.get('steps'))} steps, {took}{where}"))
        if mixed and final_device:
            rows.append((f"stage {len(stages) + 1} of {len(stages) + 1}", f"this run, on {final_device}"))
        times = [s.get("train_seconds") for s in stages] + [seconds]
        if all(isinstance(t, (int, float)) for t in times):
            # Seconds on a GPU and on a CPU do not add up to one figure: then one total per machine.
            totals: dict[str, float] = {}
            for device, took in zip(devices, times):
                key = (device or "a machine not recorded") if mixed else ""
                totals[key] = totals.get(key, 0.0) + took
            rows.append(("training time, all stages", " + ".join(
                f"{total:,.0f} s ({total / 60:,.1f} min)" + (f" on {device}" if device else "") for device, total in totals.items())))
    elif start and not source:  # a warm start from a checkpoint without a training record
        rows.append(("initialised from", f"`{start}` (a trained checkpoint; its own training time is not included above)"))
    machine = summary.get("machine")
    noted = (notes or {}).get("machine")
    if isinstance(machine, dict):
        rows.append(("hardware", _hardware(machine)))
    elif isinstance(noted, dict):
        rows.append(("hardware", f"{_hardware(noted)} (from the run's benchmark record, {NOTES_FILE})"))
    else:
        rows.append(("hardware", "not recorded"))
    if isinstance(summary.get("train_loss"), (int, float)):
        rows.append(("mean training loss", f"{summary['train_loss']:.4f}"))
    verify = summary.get("verify")
    if isinstance(verify, dict) and "accuracy" in verify:
        rows.append(("tiny-adder verify", f"{100 * verify['accuracy']:.2f} % of {verify.get('total')} (seed {verify.get('seed')})"))
    recipe = yaml.safe_dump(recorded, sort_keys=False).strip() if isinstance(recorded, dict) else None
    return {"rows": rows, "recipe": recipe, "recipe_source": "as recorded by the training run" if recipe else None}


def plural(count: int, word: str) -> str:
    """'1 digit', '2 digits', '10,000 problems': a count with thousands separators and its noun."""
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def cited_works(model, summary: dict | None = None) -> list[dict]:
    """The CITATIONS entries the card cites for this model: what its family and settings reproduce
    (abacus positions, GPT-2 blocks, looped blocks, extra output heads, rotary positions, the tiny-adder
    protocol and layout) and what its recorded training used (Grokfast)."""
    config = model.config
    keys = []
    if hasattr(config, "abacus_max_digits"):  # the abacus family and the looped family built on it
        keys += ["abacus", "gpt2"]
    if int(getattr(config, "num_future_tokens", 1) or 1) > 1:
        keys.append("multi_token")
    if getattr(config, "position_embedding", None) == "rope":
        keys.append("rope")
    if getattr(config, "model_type", "") == "hf_arith_minimal":
        keys.append("adderboard")
        if getattr(config, "token_dims", 0):
            keys.append("microadder")
    optim = ((summary or {}).get("recipe") or {}).get("optim") if isinstance((summary or {}).get("recipe"), dict) else None
    if isinstance(optim, dict) and (optim.get("grokfast_lambda") or 0) > 0:
        keys.append("grokfast")
    return [{"what": CITATIONS[k][0], "bibtex": CITATIONS[k][1]} for k in keys]


# Problems the card answers with a multi-token model's unverified heads, to state that mode's error rate:
# held-out problems drawn as the report's (its lengths and seed), and problems whose operands are the
# longest measured.
UNVERIFIED_SAMPLES = 2000
UNVERIFIED_LONG_SAMPLES = 200


def unverified_heads(model, tokenizer, report: dict, grid: dict | None = None) -> list[dict] | None:
    """For a multi-token model: how its extra heads' own tokens (`solve(..., confirm=False)`, the opt-in fast
    mode) score beside the verified default on the same problems: UNVERIFIED_SAMPLES held-out problems of
    the report's lengths and seed (a smaller draw than the report's, so both modes are scored here), and
    UNVERIFIED_LONG_SAMPLES with both operands of the longest measured length (when beyond the report's). One row each: digits, n, and each mode's exact match, wrong and
    silent wrong answers. None for a model with one head."""
    if int(getattr(model.config, "num_future_tokens", 1) or 1) < 2:
        return None
    from ..evaluation.held_out import evaluate_model
    from ..runtime.limits import measured_max_digits, problem_spec

    fmt = tokenizer.arith_format
    sets = [(report["min_digits"], report["max_digits"], min(UNVERIFIED_SAMPLES, int(report["n"])))]
    longest = measured_max_digits(report, grid)
    if longest and longest > report["max_digits"]:
        sets.append((longest, longest, UNVERIFIED_LONG_SAMPLES))
    rows = []
    for low, high, n in sets:
        row = {"digits": f"{low}-{high}" if low < high else str(low), "n": n}
        for mode, confirm in (("verified", True), ("unverified", False)):
            scores = evaluate_model(model, tokenizer, problem_spec(fmt, low, high), n=n, seed=report["seed"],
                                    confirm=confirm)
            row.update({f"{mode}_{key}": scores[key] for key in ("exact_match", "wrong", "silent_wrong")})
        rows.append(row)
    return rows


def reproduce_command(label: str | None, summary: dict | None) -> str | None:
    """The one command that trains this model again from scratch: `hf-arith train PRESET` for a bundled model
    whose preset of the same name trains it (every stage); else None (the card then names the recorded run and
    its warm start instead of a command that would not reproduce it)."""
    from ..bundled import bundled_models
    from ..training.recipe import list_presets

    if label in bundled_models() and label in list_presets():
        return f"hf-arith train {label}"
    return None


def limitation_facts(model, tokenizer, report: dict, grid: dict | None, source: Path | None = None) -> dict:
    """The two numbers of the card's Limitations section and what goes with them: the hard limit (the longest
    operands the model accepts, `ModelLimits.max_digits`, and why) and the measured range (`measured_max_digits`
    of the report and the grid), the first length beyond it with its exact match (None: not measured), the
    trained range and, for sorting, the trained list sizes; and the views of each problem it answers."""
    from ..runtime.limits import measured_accuracy, measured_max_digits, model_limits

    limits = model_limits(model, tokenizer, source)
    measured = measured_max_digits(report, grid)
    accuracy = measured_accuracy(report, grid)
    beyond = (measured or 0) + 1
    why = [f"a context of {limits.context:,} tokens"] if limits.context else []
    if limits.abacus_max_digits:
        why.append(f"an abacus table of {limits.abacus_max_digits:,} digit places")
    if tokenizer.arith_format.operand_width:
        why = [f"operands zero-padded to {tokenizer.arith_format.operand_width} digits"]
    return {"hard": limits.max_digits, "hard_why": " and ".join(why) or "its format", "measured": measured,
            "beyond": beyond, "beyond_accuracy": accuracy.get(beyond), "trained": limits.training_range,
            "trained_items": limits.training_items, "grid": grid is not None, "views": limits.answer_views,
            "views_note": tokenizer.arith_format.task_rules.views_note}


# -- figures ----------------------------------------------------------------------------------------
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
          and not grid.get("sparse")  # a sparse grid's lengths are a list, not the range a card's table reads
          and isinstance(grid.get("samples_per_cell"), int))
    if ok and fmt is not None:
        ok = grid.get("task", fmt.task) == fmt.task and grid.get("base", fmt.base) == fmt.base
    return grid if ok else None


def length_grid_figure(model, tokenizer, max_digits: int, source: Path | None = None,
                       samples_per_cell: int = GRID_SAMPLES):
    """(figure, result) of hf_arith.evaluation.grid's length grid over 1..max_digits (for sorting, by list size
    too), or None without that module or when the model cannot take those lengths."""
    try:
        from ..evaluation.grid import length_grid
        from ..evaluation.plots import plot_grid
        from ..runtime.limits import training_items, training_range
    except ImportError:
        return None
    fmt = tokenizer.arith_format
    try:
        result = length_grid(model, tokenizer, (1, max_digits), samples_per_cell=samples_per_cell, progress=True,
                             train_range=training_range(fmt, source), train_items=training_items(fmt, source))
    except FormatError:
        return None
    return plot_grid(result), result


def shipped_grid_figure(source: Path, fmt: NumberFormat, label: str):
    """(figure, result) of the checkpoint's own length_grid.json (a grid run made with it), or None."""
    grid = load_grid(source / GRID_FILE, fmt)
    if grid is None:
        return None
    try:
        from ..evaluation.plots import plot_grid
    except ImportError:
        return None
    grid = {**grid, "model": label}  # not the local path it was computed from
    return plot_grid(grid), grid


def card_figure(model, tokenizer, report: dict, source: Path, *, label: str, repo_id: str,
                grid_samples: int = GRID_SAMPLES):
    """(figure, grid or None) for the card: the checkpoint's own length grid, else one drawn now with
    grid_samples problems per cell; with no grid (grid_samples=0, or lengths the model cannot take) the report's
    per-length accuracy, and None for the grid."""
    if grid_samples:
        drawn = shipped_grid_figure(source, tokenizer.arith_format, label)
        if drawn is None:
            drawn = length_grid_figure(model, tokenizer, report["max_digits"], source, grid_samples)
        if drawn is not None:
            return drawn
    return length_heatmap(report, title=f"{repo_id}: exact match (%) by operand length"), None


# -- the card -------------------------------------------------------------------------------------
def model_card(model, tokenizer, report: dict, *, repo_id: str, summary: dict | None = None,
               license: str = "apache-2.0", dataset_id: str | None = None, heatmap: str = HEATMAP_FILE,
               eval_command: str | None = None, grid: dict | None = None, code_files: list[str] | None = None,
               dtype_check: dict | None = None, notes: dict | None = None, loops: dict | None = None,
               loops_picture: str | None = None, label: str | None = None, source: Path | None = None):
    """The Hub model card (huggingface_hub.ModelCard) rendered from hub_cards/model_card.md.

    label: the model as the publisher named it (a bundled name gets its preset as the command that
    reproduces it, `reproduce_command`); source: its checkpoint folder (its trained range).
    summary: the checkpoint's training_summary.json (`read_summary`); None: "no training record".
    notes: its notes.json (`read_notes`), derived notes about the run.
    code_files: the remote-code files the card lists (default: the model's and config's modules,
    the tokenizer and the number format; the publisher passes the .py files it wrote).
    dtype_check: the checkpoint's dtype_check.json (`hf_arith.runtime.loading.read_dtype_check`), for the
    table of checked dtypes; None: the card says only float32 was checked.
    loops: a looped model's loops.json (`records.read_loops`), for the accuracy-vs-loops table;
    loops_picture: its plot's path in the folder, if the folder has one.
    """
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    from .. import __version__
    from ..runtime.limits import answer_budget
    from .leaderboard import leaderboard_entry

    fmt = tokenizer.arith_format
    task_name = fmt.task_rules.title
    example, answer = card_example(model, tokenizer, report)
    common = dict(
        task_type="text-generation", task_name=f"integer {task_name}",
        dataset_type=dataset_id or GENERATED_DATASET_TYPE,
        dataset_name=f"hf_arith held-out {task_name}, {report['min_digits']}-{report['max_digits']} digits, base {fmt.base}",
        dataset_config=fmt.task, dataset_split="test",
        dataset_args={"min_digits": report["min_digits"], "max_digits": report["max_digits"], "base": fmt.base,
                      "seed": report["seed"], "n": report["n"]},
    )
    results = [EvalResult(metric_type="exact_match", metric_name="exact match", metric_value=float(report["exact_match"]), **common)]
    results += [EvalResult(metric_type="exact_match", metric_name=f"exact match, longest operand {plural(r['digits'], 'digit')}",
                           metric_config=f"max_operand_length={r['digits']}", metric_value=r["accuracy"], **common)
                for r in length_rows(report)]
    model_name = repo_id.split("/")[-1]
    data = ModelCardData(
        model_name=model_name, license=license, library_name="transformers", pipeline_tag="text-generation",
        base_model=base_model(summary),  # a warm start from a Hub repo; other starts are named in the text
        tags=["custom_code", "arithmetic", "hf_arith", fmt.task, model.config.model_type],
        datasets=[dataset_id] if dataset_id else None, metrics=["exact_match"], eval_results=results,
    )
    code_files = sorted(code_files or {f"{type(c).__module__.rsplit('.', 1)[-1]}.py" for c in (model, model.config)}
                        | {"tokenization_arith.py", "formatting.py", "pipeline_arithmetic.py"})
    return ModelCard.from_template(
        data, template_path=str(template_path()),
        model_name=model_name, version=__version__, task_name=task_name, fmt=fmt, report=report,
        unique_params=f"{model.num_parameters():,}", architecture=type(model).__name__,
        min_transformers=".".join(map(str, MIN_TRANSFORMERS_VERSION)),
        limits=limitation_facts(model, tokenizer, report, grid, source), citations=cited_works(model, summary),
        reproduce=reproduce_command(label, summary), plural=plural,
        model_type=model.config.model_type, config_rows=config_rows(model.config),
        vocab_size=len(tokenizer), vocab=" ".join(f"`{t}`" for t in fmt.vocab()),
        example=example, example_prompt=tokenizer.format_problem(example), example_answer=answer,
        snippet=usage_snippet(repo_id, example, answer_budget(tokenizer, [example]), answer),
        pipeline_snippet=pipeline_snippet(repo_id, example, answer),
        length_rows=length_rows(report), heatmap=heatmap, training=training_details(summary, notes),
        eval_command=eval_command or (f"hf-arith eval {report.get('model', 'MODEL')} --samples {report['n']} "
                                      f"--min-digits {report['min_digits']} --max-digits {report['max_digits']} "
                                      f"--seed {report['seed']} --json {EVAL_FILE}"),
        code_files=code_files, grid=grid, grid_file=GRID_FILE, dtypes=dtype_rows(dtype_check),
        recurrences=getattr(model.config, "num_recurrences", None),
        loops=loops_rows(loops, getattr(model.config, "num_recurrences", None), loops_picture), loops_file=LOOPS_FILE,
        future_tokens=getattr(model.config, "num_future_tokens", 1),
        unverified=unverified_heads(model, tokenizer, report, grid),
        leaderboard=leaderboard_entry(model, tokenizer),
    )


__all__ = [
    "CITATIONS", "GENERATED_DATASET_TYPE", "cited_works", "limitation_facts", "plural", "reproduce_command",
    "EVAL_FILE", "GRID_FILE", "UNVERIFIED_LONG_SAMPLES", "UNVERIFIED_SAMPLES", "GRID_SAMPLES", "HEATMAP_FILE", "NOTES_FILE", "SUMMARY_FILE", "read_notes", "base_model", "card_example", "card_figure",
    "config_rows", "dtype_rows", "length_grid_figure", "length_heatmap", "length_rows", "load_grid", "loops_rows", "model_card",
    "pipeline_snippet", "read_summary", "shipped_grid_figure", "unverified_heads", "template_path", "training_details", "usage_snippet",
    "recorded_warm_start", "training_device",
]
