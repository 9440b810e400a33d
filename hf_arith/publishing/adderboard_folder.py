"""An AdderBoard submission folder that a maintainer can accept as it is (`hf-arith adderboard MODEL --output DIR`).

`write_submission_folder(model, tokenizer, folder)` writes, for a minimal-family 10-digit adder:

- `submission_<N>p.py`: the single-file submission (`adderboard.write_submission`, checked against the model);
- `parameters.md` and `parameters.json`: every tensor of the file's `WEIGHTS` (learned, counted), every
  constant buffer of the model it builds and every fixed table it computes (not counted, and why), and
  the total. The total is the package's count (`model_summary.parameter_counts`, unique tensors after
  tying), checked against the file's own tensors: a disagreement is a ParameterCountError, one line;
- `verify.txt` and `verify.json`: `hf-arith verify` (the protocol: 10 edge cases and 10,000 pairs from
  `random.Random(seed)`) for seeds 2025, 0 and 1, as printed, and each seed's score;
- `train_command.txt`: the command that trains the model again, from the training record; with
  `training_summary.json` (and `notes.json`, and `training_log.json` where the run left a
  trainer_state.json) copied from the checkpoint, and `recipe.yaml` when no preset is the recorded recipe;
- `leaderboard_row.md` and `leaderboard_row.json`: the entry as a row of AdderBoard's README table;
- `README.md`: what the model is, its count, its scores and how to reproduce them.

The files are written in a hidden folder inside `folder` and moved into place once all are complete
(as `hf-arith data export` does): a refused or failed export leaves an earlier one as it was.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from pathlib import Path

from ..data.errors import HfArithError
from ..evaluation.model_summary import parameter_counts
from ..records import (
    NOTES_FILE,
    SUMMARY_FILE,
    make_writable_dir,
    read_notes,
    read_summary,
    training_stages,
    write_atomic,
    write_json,
)
from ..runtime.loading import checkpoint_folder, checkpoint_label

SEEDS = (2025, 0, 1)  # the protocol's own seed first: it decides whether the model qualifies
PARTIAL_DIR = ".hf_arith_adderboard_partial"
PARAMETERS_MD, PARAMETERS_JSON = "parameters.md", "parameters.json"
VERIFY_TXT, VERIFY_JSON = "verify.txt", "verify.json"
TRAIN_COMMAND, RECIPE_YAML, TRAINING_LOG = "train_command.txt", "recipe.yaml", "training_log.json"
ROW_MD, ROW_JSON = "leaderboard_row.md", "leaderboard_row.json"
README = "README.md"
# Every name an export may write (the submission file is submission_<N>p.py): --overwrite replaces these
# and leaves other files alone.
FOLDER_FILES = (README, PARAMETERS_MD, PARAMETERS_JSON, VERIFY_TXT, VERIFY_JSON, TRAIN_COMMAND, RECIPE_YAML,
                TRAINING_LOG, ROW_MD, ROW_JSON, SUMMARY_FILE, NOTES_FILE)
COUNTED = "learned, counted"
TIED = "tied, counted once"
NOT_COUNTED = "fixed, not counted"


class ParameterCountError(HfArithError):
    """The parameter table's count disagrees with the tensors the submission file holds."""


def submission_filename(params: int) -> str:
    """AdderBoard's naming: submission_<N>p.py."""
    return f"submission_{params}p.py"


# -- the folder ------------------------------------------------------------------------------------
def prepare_folder(folder: str | os.PathLike, overwrite: bool) -> Path:
    """Check `folder` before any work: not a file, empty (or `overwrite`), writable. Creates it; clears what a
    killed export left behind. One-line HfArithError otherwise."""
    out = Path(folder).expanduser()
    if out.exists() and not out.is_dir():
        raise HfArithError(f"{out}: exists and is not a folder")
    try:
        shutil.rmtree(out / PARTIAL_DIR, ignore_errors=True)
        if out.is_dir() and any(out.iterdir()) and not overwrite:
            raise HfArithError(f"{out}: is not empty; pass --overwrite (overwrite=True) to replace an export there")
        make_writable_dir(out)
    except OSError as err:
        raise HfArithError(f"{out}: cannot write there ({err.strerror or err})") from None
    return out


def _clear_old_export(out: Path) -> None:
    """Remove an earlier export's files (only once the new one is complete); other files stay."""
    for old in [*(out / name for name in FOLDER_FILES), *out.glob("submission_*p.py")]:
        if old.is_file():
            old.unlink()


# -- the parameter table ---------------------------------------------------------------------------
def _fixed_tables(config) -> list[dict]:
    """The fixed tables the submission computes from its config: no tensor in WEIGHTS, not counted."""
    c = config
    out = []
    if c.position_embedding == "spiral" and not c.learn_spiral:
        amplitude, period, slope = (float(v) for v in c.spiral)
        out.append({"name": "spiral positions", "shape": f"[tokens, {c.hidden_size - c.token_dims}]",
                    "why": f"fixed spiral (amplitude {amplitude:g}, period {period:g}, slope {slope:g}: config "
                           "constants) at each digit's column, computed in forward; fixed positional encodings "
                           "are not counted"})
    if c.digit_embedding == "circular_arc" and c.special_embedding == "digit0":
        out.append({"name": "delimiter embeddings", "shape": f"[{c.vocab_size - c.num_digit_tokens}, {c.token_dims or c.hidden_size}]",
                    "why": "every non-digit token embeds at digit 0's point on the arc: no rows of their own"})
    if c.digit_logits_only:
        out.append({"name": "digit-only logits mask", "shape": f"[{c.vocab_size}]",
                    "why": f"the head scores the {c.num_digit_tokens} digit tokens only; the other logits are a "
                           "constant (a fixed mask, not learned)"})
    return out


def _buffer_reason(name: str, config) -> str:
    if "rotary" in name:
        return (f"fixed rotary table (RoPE θ={config.rope_theta:g}), computed from the config when the model is "
                "built; fixed positional encodings are not counted")
    return "a constant buffer computed from the config when the model is built (not learned, not stored)"


def parameter_table(module, model) -> dict:
    """The parameter table of a submission module (its WEIGHTS and the model its build_model() returns) for
    `model`: each tensor (name, shape, elements, status, why), the fixed tables it computes, and the total.

    The total is the package's AdderBoard count (`parameter_counts(model)["unique"]`: unique tensors after
    tying). It must equal the elements of the file's WEIGHTS, the metadata's `params` and the unique
    parameters of the model the file builds; and WEIGHTS must name the model's parameters. Else
    ParameterCountError (one line): a table that disagrees with the file is never written."""
    total = parameter_counts(model)["unique"]
    weights = module.WEIGHTS
    built, metadata = module.build_model()
    in_file = sum(len(values) for _, values in weights.values())
    built_unique = sum({id(p): p.numel() for p in built.parameters()}.values())
    where = "the submission file"
    if in_file != total:
        raise ParameterCountError(f"AdderBoard export: the parameter table counts {total} but {where}'s WEIGHTS hold "
                                  f"{in_file} values; the table is not written")
    if metadata.get("params") != total or built_unique != total:
        raise ParameterCountError(f"AdderBoard export: the parameter table counts {total} but {where} says "
                                  f"{metadata.get('params')} and its model has {built_unique} unique parameters")
    names = {name for name, _ in model.named_parameters()}
    if set(weights) != names:
        raise ParameterCountError(f"AdderBoard export: {where}'s WEIGHTS name {sorted(set(weights) ^ names)} "
                                  "differently from the model's parameters")
    rows = []
    for name, (shape, values) in weights.items():
        numel = math.prod(shape)
        if numel != len(values):
            raise ParameterCountError(f"AdderBoard export: {where}'s {name} has shape {list(shape)} but {len(values)} "
                                      "values")
        rows.append({"name": name, "shape": list(shape), "numel": numel, "status": COUNTED,
                     "why": "a learned tensor in the file's WEIGHTS, counted once however many places read it"})
    first = {}
    for name, p in built.named_parameters(remove_duplicate=False):  # a tensor registered under two names
        if id(p) in first:
            rows.append({"name": name, "shape": list(p.shape), "numel": p.numel(), "status": TIED,
                         "why": f"the same tensor as {first[id(p)]} (tied): counted there, once"})
        first.setdefault(id(p), name)
    for name, buffer in built.named_buffers():
        rows.append({"name": name, "shape": list(buffer.shape), "numel": buffer.numel(), "status": NOT_COUNTED,
                     "why": _buffer_reason(name, model.config)})
    counted = sum(r["numel"] for r in rows if r["status"] == COUNTED)
    if counted != total:  # the rows above are the file's tensors: the same sum, kept as a guard on the table
        raise ParameterCountError(f"AdderBoard export: the parameter table's rows sum to {counted}, not {total}")
    return {"total": total, "tensors": rows, "fixed_tables": _fixed_tables(model.config),
            "counted_by": "hf_arith.evaluation.model_summary.parameter_counts(model)['unique']"}


def _parameters_markdown(table: dict, filename: str, tricks: list[str], savings: list[dict]) -> str:
    lines = [f"# Parameters of {filename}", "",
             f"**{table['total']} unique parameters**, counted as AdderBoard counts them: every learned scalar, "
             "each tensor once however many places use it (tied weights count once); fixed positional tables "
             "and constant buffers are not counted. The total is the package's count "
             f"(`{table['counted_by']}`, unique tensors after tying, as `model.num_parameters()`), checked against "
             "the file's own `WEIGHTS` when it was written.", "",
             "| tensor | shape | elements | status | why |", "|---|---|---:|---|---|"]
    for r in table["tensors"]:
        lines.append(f"| `{r['name']}` | {tuple(r['shape'])} | {r['numel']} | {r['status']} | {r['why']} |")
    lines += ["", f"**Total counted: {table['total']}** (the rows marked \"{COUNTED}\").", ""]
    if table["fixed_tables"]:
        lines += ["Fixed tables the file computes from its config (no tensor in `WEIGHTS`, not counted):", "",
                  "| table | shape | why |", "|---|---|---|"]
        lines += [f"| {r['name']} | {r['shape']} | {r['why']} |" for r in table["fixed_tables"]]
        lines.append("")
    if tricks:
        lines += ["How the model shares and fixes what it can (the file's `metadata['tricks']`):", ""]
        lines += [f"- {t}" for t in tricks] + [""]
    if savings:
        lines += ["What each trick saves (the same model with that one trick undone has this many more parameters):",
                  "", "| trick | parameters saved |", "|---|---:|"]
        lines += [f"| {s['trick']} | {s['saving']} |" for s in savings] + [""]
    return "\n".join(lines)


# -- verify ----------------------------------------------------------------------------------------
def verify_seeds(model, tokenizer, seeds=SEEDS) -> list[dict]:
    """`verify_tiny_adder` (what `hf-arith verify` runs) for each seed."""
    from ..evaluation.held_out import verify_tiny_adder

    return [verify_tiny_adder(model, tokenizer, seed=seed) for seed in seeds]


# -- training --------------------------------------------------------------------------------------
def _same_recipe(preset: str, recorded: dict, summary: dict) -> bool:
    """Whether the preset trains exactly the recorded recipe (its run name and output folder aside; for a
    preset of several stages, the folder each stage starts from too): values missing from an older record
    are the recipe's defaults."""
    from ..training.recipe import load_recipe, recipe_from_dict

    try:
        mine = load_recipe(preset)
        theirs = dataclasses.asdict(recipe_from_dict(recorded))
    except HfArithError:
        return False
    stages = len(getattr(mine, "stages", ()) or ()) - 1
    if stages != len(summary.get("earlier_stages") or []):
        return False
    ignored = {"name", "output_dir"} | ({"init_from"} if stages else set())
    mine = dataclasses.asdict(mine)
    return {k: v for k, v in mine.items() if k not in ignored} == {k: v for k, v in theirs.items() if k not in ignored}


def training_command(model_name: str, summary: dict | None, notes: dict | None) -> dict:
    """The command that trains the model again, read from its training record: {command, how, recipe_yaml}.

    A preset whose recipe is the recorded one: `hf-arith train PRESET`. A recorded recipe no preset matches:
    `hf-arith train recipe.yaml`, with the recorded recipe as recipe_yaml (its last stage only, when the
    run started from an earlier one). No recorded recipe: the bundled model's preset (`reproduce_command`),
    else no command."""
    from ..training.recipe import list_presets
    from .model_card import reproduce_command

    recorded = (summary or {}).get("recipe")
    if isinstance(recorded, dict):
        presets = set(list_presets())
        candidates = [model_name, checkpoint_label(model_name), recorded.get("name"), (summary or {}).get("name")]
        for preset in dict.fromkeys(c for c in candidates if isinstance(c, str) and c in presets):
            if _same_recipe(preset, recorded, summary):
                return {"command": f"hf-arith train {preset}", "recipe_yaml": None,
                        "how": f"The preset `{preset}` is the recipe the run recorded in {SUMMARY_FILE} (its run "
                               "name and output folder aside)."}
        import yaml

        stages = (summary or {}).get("earlier_stages") or []
        how = (f"No preset is the recipe the run recorded in {SUMMARY_FILE}; {RECIPE_YAML} is that recipe, "
               "unchanged")
        if stages or recorded.get("init_from"):
            how += (f"; it is the last stage only and starts from `{recorded.get('init_from')}` (the earlier stages: "
                    f"{', '.join(str(s.get('name')) for s in stages) or 'not recorded'})")
        return {"command": f"hf-arith train {RECIPE_YAML}", "how": how + ".",
                "recipe_yaml": yaml.safe_dump(recorded, sort_keys=False)}
    command = reproduce_command(model_name, summary)
    if command:
        return {"command": command, "recipe_yaml": None,
                "how": f"This is the bundled model's preset of the same name; its {SUMMARY_FILE} records no recipe"
                       + (f", and the run itself was made with `{notes['command']}` ({NOTES_FILE})."
                          if isinstance((notes or {}).get("command"), str) else ".")}
    return {"command": None, "recipe_yaml": None,
            "how": f"The checkpoint records no recipe (no {SUMMARY_FILE} with one) and is no bundled preset: "
                   "no command can be given."}


def training_log(source: Path | None, summary: dict | None) -> dict | None:
    """The run's logged history (loss, learning rate, ... every logging step), from the trainer_state.json the
    checkpoint folder has, or, for a run's `final/`, from the newest checkpoint-* beside it; None without one."""
    if source is None:
        return None
    candidates = [source / "trainer_state.json"]
    if source.name == "final":
        from ..training.run import checkpoints

        candidates += [c / "trainer_state.json" for c in checkpoints(source.parent)]
    for path in candidates:
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(state, dict) and isinstance(state.get("log_history"), list):
            return {"source": str(path.relative_to(source.parent) if source.name == "final" else path.name),
                    "global_step": state.get("global_step"), "steps": (summary or {}).get("steps"),
                    "log_history": state["log_history"]}
    return None


# -- the README ------------------------------------------------------------------------------------
def _score(report: dict) -> str:
    return f"{report['correct']:,} / {report['total']:,} ({100 * report['accuracy']:.2f} %)"


def _stage_fact(stage: dict) -> str:
    """One training stage as the README names it: its steps and seconds, where recorded."""
    steps, seconds = stage.get("steps"), stage.get("train_seconds")
    parts = ([f"{steps:,} steps"] if isinstance(steps, int) else []) \
        + ([f"{seconds:,.0f} s"] if isinstance(seconds, (int, float)) else [])
    return " in ".join(parts) or "not recorded"


def _readme(*, title, label, model_name, filename, metadata, table, reports, entry, row_table, training,
            summary, log, copied, verify_commands) -> str:
    from .leaderboard import TRAINED_TABLE_SOURCE

    lines = [f"# {title}: an AdderBoard submission, {table['total']} unique parameters", "",
             f"The checkpoint `{label}`, trained with hf_arith, exported for "
             "[AdderBoard](https://github.com/anadim/AdderBoard) (two 10-digit numbers, trained-weights table).", "",
             f"- **Architecture**: {metadata['architecture']}.",
             f"- **Number format**: {metadata.get('format', '')}.",
             f"- **Parameters**: **{table['total']}** unique ([{PARAMETERS_MD}]({PARAMETERS_MD}), "
             f"[{PARAMETERS_JSON}]({PARAMETERS_JSON})): every learned tensor in the file's `WEIGHTS`, once; "
             "fixed tables are computed, not counted.",
             "- **Protocol** (10 edge cases + 10,000 pairs from `random.Random(seed)`; 99 % qualifies): "
             + "; ".join(f"seed {r['seed']}: {_score(r)}" for r in reports)
             + f" ([{VERIFY_TXT}]({VERIFY_TXT}), [{VERIFY_JSON}]({VERIFY_JSON})).",
             "", "## Files", "",
             f"- [`{filename}`]({filename}): the submission (needs only torch): `build_model()` and `add(model, a, b)`.",
             f"- [`{PARAMETERS_MD}`]({PARAMETERS_MD}) / [`{PARAMETERS_JSON}`]({PARAMETERS_JSON}): every tensor, "
             "counted or fixed and why, and the total.",
             f"- [`{VERIFY_TXT}`]({VERIFY_TXT}) / [`{VERIFY_JSON}`]({VERIFY_JSON}): `hf-arith verify` for seeds "
             f"{', '.join(str(r['seed']) for r in reports)}, as printed, and the scores.",
             f"- [`{ROW_MD}`]({ROW_MD}) / [`{ROW_JSON}`]({ROW_JSON}): the leaderboard row.",
             f"- [`{TRAIN_COMMAND}`]({TRAIN_COMMAND}): the training command."]
    lines += [f"- [`{name}`]({name}): {what}" for name, what in copied]
    lines += ["", "## Leaderboard row", "", row_table, ""]
    if entry.get("rank"):
        lines.append(f"The rank is the place on a snapshot of the trained table ({TRAINED_TABLE_SOURCE}, "
                     f"{entry['entries']} entries); a later table may hold smaller entries, and the maintainer "
                     "places it on the live one.")
    else:
        lines.append("This model is below the 99 % an entry needs on seed 2025: it does not qualify (written with "
                     "--force).")
    lines += ["", "## Reproduce", "",
              "Check the submission with AdderBoard's own script (in a checkout of AdderBoard; needs only torch):", "",
              "```bash", f"python verify.py {filename}", "```", "",
              "The scores above are `hf-arith verify` on the checkpoint (the same problems as AdderBoard's "
              "`verify.py`, answered in batches). Before the file was written its weights were checked to equal "
              "the checkpoint's bit for bit and its answers to the protocol's edge cases to equal the checkpoint's.",
              "", "```bash", *verify_commands, "```", "", "Train it again:", ""]
    if training["command"]:
        lines += ["```bash", training["command"], "```", "", training["how"]]
    else:
        lines.append(training["how"])
    lines.append("")
    facts = []
    if summary:
        # A warm-started checkpoint's own steps and seconds are its last stage only: name every stage, so
        # the time a maintainer reads is the whole chain's.
        stages = [*training_stages(summary, None), summary]
        if len(stages) > 1:
            facts.append(f"{len(stages)} stages, " + ", then ".join(_stage_fact(s) for s in stages))
            seconds = [s.get("train_seconds") for s in stages]
            if all(isinstance(t, (int, float)) for t in seconds):
                facts.append(f"{sum(seconds):,.0f} s of training in all")
        else:
            if isinstance(summary.get("steps"), int):
                facts.append(f"{summary['steps']:,} steps")
            if isinstance(summary.get("train_seconds"), (int, float)):
                facts.append(f"{summary['train_seconds']:,.0f} s of training")
        if isinstance(summary.get("train_loss"), (int, float)):
            facts.append(("the last stage's " if len(stages) > 1 else "")
                         + f"mean training loss {summary['train_loss']:.4f}")
        held = summary.get("heldout") or {}
        if isinstance(held.get("exact_match"), (int, float)):
            facts.append(f"held-out exact match {100 * held['exact_match']:.2f} % of {held.get('n')}")
        verify = summary.get("verify") or {}
        if isinstance(verify.get("correct"), int) and isinstance(verify.get("total"), int):
            facts.append(f"verify {verify['correct']:,} / {verify['total']:,} (seed {verify.get('seed')})")
        lines.append(f"{SUMMARY_FILE}, copied here, is what the run recorded"
                     + (f": {', '.join(facts)}." if facts else "."))
    if log:
        lines.append(f"The training log ({TRAINING_LOG}) is the run's logged history, from `{log['source']}` "
                     f"(step {log['global_step']}).")
    elif summary:
        lines.append("The checkpoint folder has no training log (no trainer_state.json): the summary is the whole "
                     "record of the run.")
    else:
        lines.append(f"The checkpoint folder has no training record ({SUMMARY_FILE}) and no training log.")
    return "\n".join(lines) + "\n"


# -- the whole folder ------------------------------------------------------------------------------
def write_submission_folder(model, tokenizer, folder: str | os.PathLike, *, model_name: str | None = None,
                            name: str | None = None, author: str | None = None, overwrite: bool = False,
                            force: bool = False, seeds=SEEDS) -> dict:
    """Write the submission folder (see the module's docstring); returns {folder, files, params, reports, training}.

    model_name: the model as the user named it (a bundled name, a folder), for the commands in the README and
    for finding its preset. Refused with one line, before anything is written: a model the file cannot
    reproduce (`check_exportable`), a model below 99 % on seed 2025 unless `force` (ProtocolFailure), a
    folder that is not empty unless `overwrite`, and a parameter table that disagrees with the file's
    tensors (ParameterCountError)."""
    from .. import __version__
    from ..evaluation.held_out import verify_text
    from .adderboard import PASS_ACCURACY, check_exportable, check_protocol, load_submission, write_submission
    from .leaderboard import README_COLUMNS, leaderboard_entry, readme_row, readme_table

    check_exportable(model, tokenizer)
    source = checkpoint_folder(model)
    model_name = model_name or str(getattr(model, "name_or_path", "") or "model")
    label = checkpoint_label(getattr(model, "name_or_path", "") or model_name)
    existed = Path(folder).expanduser().exists()
    out = prepare_folder(folder, overwrite)
    partial = out / PARTIAL_DIR
    try:
        seeds = (2025, *(s for s in seeds if s != 2025))
        reports = verify_seeds(model, tokenizer, seeds)
        if not force:
            check_protocol(model, tokenizer, report=reports[0])
        params = parameter_counts(model)["unique"]
        filename = submission_filename(params)
        partial.mkdir()
        path = write_submission(model, tokenizer, partial / filename, name=name, author=author, force=True)
        module = load_submission(path.read_text(encoding="utf-8"), "adderboard_folder_submission")
        table = parameter_table(module, model)
        metadata = module.METADATA
        entry = leaderboard_entry(model, tokenizer, report=reports[0])
        if entry["params"] != table["total"]:
            raise ParameterCountError(f"AdderBoard export: the leaderboard row counts {entry['params']} parameters, "
                                      f"the parameter table {table['total']}")
        row = readme_row(entry, metadata, f"[{filename}]({filename})", built_with=f"hf_arith {__version__}")
        summary = read_summary(source) if source else None
        notes = read_notes(source) if source else None
        training = training_command(model_name, summary, notes)
        log = training_log(source, summary)

        files = {}  # name -> text (or a JSON object), each written atomically
        files[PARAMETERS_JSON] = {"file": filename, **table, "tricks": metadata.get("tricks", []),
                                  "savings": entry["savings"]}
        files[PARAMETERS_MD] = _parameters_markdown(table, filename, metadata.get("tricks", []), entry["savings"])
        verify_commands = [f"hf-arith verify {model_name} --seed {r['seed']}" for r in reports]
        files[VERIFY_TXT] = "\n\n".join(f"$ {command}\n{verify_text(r, model_name)}"
                                        for command, r in zip(verify_commands, reports, strict=True)) + "\n"
        files[VERIFY_JSON] = {
            "protocol": "10 edge cases + 10,000 pairs from random.Random(seed) (AdderBoard's verify.py); 99 % qualifies",
            "model": label, "file": filename, "qualifies": reports[0]["accuracy"] >= PASS_ACCURACY,
            "seeds": [{"command": c, **r} for c, r in zip(verify_commands, reports, strict=True)]}
        files[TRAIN_COMMAND] = (training["command"] or f"# {training['how']}") + "\n"
        if training["recipe_yaml"]:
            files[RECIPE_YAML] = training["recipe_yaml"]
        copied = []
        if summary is not None:
            files[SUMMARY_FILE] = summary
            copied.append((SUMMARY_FILE, "the training record, as the run wrote it"))
        if notes is not None:
            files[NOTES_FILE] = notes
            copied.append((NOTES_FILE, "notes about the run written after it"))
        if log is not None:
            files[TRAINING_LOG] = log
            copied.append((TRAINING_LOG, f"the run's logged history (from {log['source']})"))
        if training["recipe_yaml"]:
            copied.append((RECIPE_YAML, "the recorded recipe, which the training command trains"))
        row_md = readme_table([row])
        files[ROW_MD] = (f"{row_md}\n\nColumns as in the trained-weights table of AdderBoard's README; Rank is the "
                         f"place on a snapshot of that table ({entry['source']}).\n")
        files[ROW_JSON] = {"row": row, "columns": list(README_COLUMNS), "file": filename, **entry}
        title = metadata.get("name") or label
        files[README] = _readme(title=title, label=label, model_name=model_name, filename=filename,
                                metadata=metadata, table=table, reports=reports, entry=entry, row_table=row_md,
                                training=training, summary=summary, log=log, copied=copied,
                                verify_commands=verify_commands)
        for file_name, content in files.items():
            if isinstance(content, str):
                write_atomic(partial / file_name, content)
            else:
                write_json(partial / file_name, content)
        if overwrite:
            _clear_old_export(out)
        written = [filename, *files]
        for file_name in written:
            os.replace(partial / file_name, out / file_name)
    except BaseException:
        if not existed:
            shutil.rmtree(out, ignore_errors=True)  # created here: nothing is left behind
        raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return {"folder": out, "files": sorted(written), "params": params, "reports": reports, "training": training,
            "filename": filename}


__all__ = ["FOLDER_FILES", "ParameterCountError", "SEEDS", "parameter_table", "prepare_folder", "submission_filename",
           "training_command", "training_log", "verify_seeds", "write_submission_folder"]
