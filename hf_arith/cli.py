"""`hf-arith`: train, evaluate, verify and use small arithmetic transformers from the command line.

    hf-arith train                       # train the minimal-add10 preset from scratch on CPU
    hf-arith train my.yaml --set optim.steps=2000 --output-dir runs/x [--resume]
    hf-arith eval runs/x/final --samples 2000 [--min-digits 1 --max-digits 10] [--json report.json]
    hf-arith eval MODEL --grid 1:30 [--samples-per-cell 100] [--loops 1,2,4,8] [--stress] [--output-dir DIR]
    hf-arith verify minimal-add10        # the tiny-adder protocol (10-digit addition models)
    hf-arith attention MODEL 101+1002 [--output attention.png]
    hf-arith summary MODEL [--json summary.json]
    hf-arith adderboard minimal-add10 --output submission.py   # a single-file AdderBoard submission
    hf-arith solve 1234567890+9876543210 [--model NAME_OR_PATH_OR_REPO_ID]
    hf-arith solve 1+2 --model ORG/NAME [--revision REV] [--device cuda] [--dtype float16]
    hf-arith models                      # bundled checkpoints
    hf-arith data export OUT_DIR --task add --train-size 100000
    hf-arith data push --repo-id ORG/NAME --task add   # export, then upload as a Hub dataset
    hf-arith push minimal-add10 --repo-id ORG/NAME [--eval-json report.json] [--output-dir DIR]
    hf-arith space build DIR --model ORG/NAME [--model ORG/NAME ...]   # a Space folder that deploys as is
    hf-arith --version

MODEL is a bundled name, a checkpoint folder or a Hub repo id (ORG/NAME, read from the Hugging Face
cache when it is there; HF_HUB_OFFLINE=1 works from the cache alone).

Every user error (a bad problem, recipe, checkpoint or path, or a bad option) ends with one
line `hf-arith: error: <message>` on stderr and exit status 2. Anything else is a bug and keeps
its traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import warnings
from pathlib import Path

import torch
from transformers.utils import logging as hf_logging

from . import __version__
from .bundled import bundled_models, bundled_path, catalogue_entry
from .decoding import default_threads
from .evaluation import evaluate_model, heldout_problems, loops_curve, verify_tiny_adder
from .formatting import TASK_NAMES, FormatError, parse_problems, quote
from .grid import length_grid, parse_length_range
from .hardware import THREADS_PER_CORE, max_threads
from .limits import BeyondTrainingWarning, model_limits, problem_spec
from .loading import (
    DTYPES,
    CheckpointError,
    DtypeWarning,
    check_device,
    checkpoint_folder,
    checkpoint_label,
    load_checkpoint,
    one_line,
    weights_fingerprint,
)
from .solving import LOW_CONFIDENCE, solve
from .stress import stress_test
from .train_config import MAX_EVAL_SAMPLES, RecipeError, list_presets

PROG = "hf-arith"
DEFAULT_MODEL = "minimal-add10"
DEFAULT_PRESET = "minimal-add10"
MALFORMED = "<malformed>"


class CLIError(ValueError):
    """A user error found by the command line itself (bad option values, wrong kind of model)."""


# Errors that are the user's: printed as one line, exit status 2. FormatError, RecipeError and
# CheckpointError are ValueErrors; FileNotFoundError and other OSErrors come from paths.
USER_ERRORS = (CLIError, FormatError, RecipeError, CheckpointError, ValueError, OSError)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (like every other user error), not usage + error."""

    def error(self, message):
        raise CLIError(f"{message} (see '{self.prog} --help')")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {quote(text)}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {quote(text)}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {quote(text)}") from None


def _int_in(low: int, high: int, why: str = ""):
    """An argparse type: an integer from `low` to `high` (argparse names the option in its message)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer from {low:,} to {high:,}{why}, got {quote(text)}")
        return value
    return parse


def _probability(text: str) -> float:
    """An argparse type: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {quote(text)}")
    return value


# Bounds of the numeric options (each checked as the option is parsed): seeds as numpy and torch take
# them; sample counts that finish in reasonable memory (every problem of a run is held at once).
MAX_SEED = 2**32 - 1
MAX_SAMPLES = MAX_EVAL_SAMPLES
MAX_SAMPLES_PER_CELL = 10_000
_seed = _int_in(0, MAX_SEED)
_threads = _int_in(1, max_threads(), f" ({THREADS_PER_CORE} per CPU core of this machine)")


@contextlib.contextmanager
def _no_library_progress_bars():
    """Hide transformers' loading/saving bars; the Trainer's training bar is separate and stays."""
    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def _set_threads(args, default: int | None) -> None:
    threads = args.threads if args.threads is not None else default
    if threads is not None:
        torch.set_num_threads(threads)


def _device(text: str) -> str:
    """--device: cpu, cuda, cuda:N or mps, and only one this machine has (checked before any loading)."""
    try:
        check_device(text)
    except CheckpointError as err:
        raise argparse.ArgumentTypeError(one_line(err)) from None
    return text


def _load(args):
    """(model, tokenizer) of args.model with the command's --revision, --trust-remote-code, --device
    and --dtype; a dtype that was never checked for this model is named in one warning line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DtypeWarning)
        model, tokenizer = load_checkpoint(args.model, revision=args.revision, trust_remote_code=args.trust_remote_code,
                                           device=getattr(args, "device", None), dtype=getattr(args, "dtype", None))
    for w in caught:
        if issubclass(w.category, DtypeWarning):
            print(f"{PROG}: warning: {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return model, tokenizer


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def describe_format(fmt) -> str:
    text = f"{TASK_NAMES.get(fmt.task, fmt.task)}, base {fmt.base}"
    if fmt.operand_width:
        text += f", {fmt.operand_width}-digit operands"
    return text


# -- train ----------------------------------------------------------------------------------
def cmd_train(args) -> int:
    from .train_config import load_recipe, preset_catalogue
    from .training import is_main_process, prepare_run, run_training, world_size

    if args.list:  # the catalogue of presets: each one's line, training time and stages
        for row in preset_catalogue():
            stages = f"; stages: {' -> '.join(row['stages'])}" if row["stages"] else ""
            print(f"{row['name']}  ({TASK_NAMES.get(row['task'], row['task'])}, {row['family']} family)\n"
                  f"  {row['about']}\n  training: {row['train_time']}{stages}")
        return 0

    overrides = list(args.set or [])
    if args.threads is not None:
        overrides.append(f"optim.threads={args.threads}")
    recipe = load_recipe(args.recipe or DEFAULT_PRESET, overrides)
    output_dir = args.output_dir or recipe.output_dir
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise CLIError(f"--output-dir {output_dir}: exists and is not a folder")
    # Every recipe and launch mistake (and a --resume with nothing to resume) is reported now, not after training.
    run = prepare_run(recipe, output_dir, resume=args.resume, overwrite=args.overwrite)
    fmt = run.fmt
    main_process = is_main_process()  # under torchrun / accelerate launch, rank 0 does the talking
    if run.checkpoint is not None:
        if main_process:
            print(f"Resuming from {run.checkpoint}")
    else:
        try:
            out.mkdir(parents=True, exist_ok=True)  # a bad output path fails now, not after training
        except OSError as err:
            raise CLIError(f"--output-dir {output_dir}: cannot create it ({err.strerror or err})") from None
    d, o = recipe.data, recipe.optim
    world = world_size()
    where = "GPU" if torch.cuda.is_available() else "CPU"
    if main_process:
        print(f"Training {recipe.name}: {recipe.family} family, {describe_format(fmt)}, {d.min_digits}-{d.max_digits} "
              f"digits, {o.steps} steps of {o.batch_size} on "
              f"{f'{world} processes ({where})' if world > 1 else where}; output in {output_dir}", flush=True)
    try:
        summary = run_training(run)
    except KeyboardInterrupt:
        print(f"{PROG}: training interrupted; --resume continues from the last checkpoint-* in {output_dir}",
              file=sys.stderr)
        raise
    if not main_process:
        return 0
    print()
    loss = summary.get("train_loss")
    seconds = summary.get("train_seconds")
    # The mean loss covers the whole run, or (resumed from a checkpoint without a loss record) the steps
    # this session ran; then it says which.
    covered = summary.get("train_loss_steps")
    partial = f" over steps {covered[0]}-{covered[1]} only" if covered and covered[0] > 1 else ""
    screen = summary.get("screen")
    if screen:
        tried = screen["candidates"]
        print(f"Screened {len(tried)} init{'s' if len(tried) > 1 else ''} for {screen['screen_steps']} steps each in "
              f"{screen['screen_seconds']:.1f} s; continued seed {screen['chosen_seed']} (losses: "
              + ", ".join(f"{c['seed']}: {c['loss']:.4f}" if c["loss"] is not None else f"{c['seed']}: none"
                          for c in tried) + ")")
    print(f"Trained {summary.get('steps')} steps"
          + (f" in {float(seconds):.1f} s" if seconds is not None else "")
          + (f", mean training loss {loss:.4f}{partial}" if isinstance(loss, (int, float)) else "")
          + f"; {summary['unique_params']} unique parameters")
    if "heldout" in summary:
        print()
        _print_report(summary["heldout"])
    verify = summary.get("verify")
    if verify:
        print()
        _print_verify(verify, name=recipe.name)
    print()
    print(f"Checkpoint saved to {summary['output']}")
    return 0


# -- eval -----------------------------------------------------------------------------------
def _print_report(report: dict) -> None:
    counts = {int(k): v for k, v in (report.get("count_by_max_operand_length") or {}).items()}
    print(f"Held-out exact match: {_pct(report['exact_match'])} of {report['n']} problems "
          f"(malformed answers: {_pct(report['malformed'])})")
    if "silent_wrong" in report:
        threshold = f"{100 * report['confidence_threshold']:g} %"
        print(f"Wrong answers: {report['wrong']}, of which {report['silent_wrong']} at confidence {threshold} or more "
              f"(not flagged); answers below {threshold}: {report['below_threshold']}")
        for case in report["silent_wrong_examples"]:
            print(f"  {quote(case['problem'])} = {case['got']} (expected {case['expected']}, "
                  f"confidence {100 * case['confidence']:.1f} %)")
    by_length = report.get("by_max_operand_length") or {}
    if by_length:
        header = "  max operand digits   exact match" + ("   problems" if counts else "")
        print(header)
        for digits, acc in sorted(by_length.items(), key=lambda kv: int(kv[0])):
            row = f"  {int(digits):>18}   {_pct(acc):>11}"
            if counts:
                row += f"   {counts.get(int(digits), 0):>8}"
            print(row)


def cmd_eval(args) -> int:
    if args.json:
        target = Path(args.json)
        if target.is_dir():
            raise CLIError(f"--json {args.json}: is a folder, not a file")
        if not target.parent.is_dir():
            raise CLIError(f"--json {args.json}: folder {str(target.parent)!r} does not exist")
    extras = args.grid or args.loops or args.stress
    out_dir = _writable_dir(args.output_dir or _default_eval_dir(args.model), "--output-dir") if extras else None
    model, tokenizer = _load(args)
    _set_threads(args, default=default_threads(model))
    fmt = tokenizer.arith_format
    limits = model_limits(model, tokenizer, checkpoint_folder(model))
    min_digits = 1 if args.min_digits is None else args.min_digits
    # By default the held-out score is inside the lengths the model was trained on: beyond them is what
    # --max-digits and --grid measure on purpose.
    trained = limits.training_range
    default_max = min(trained[1], limits.max_digits) if trained else limits.max_digits
    max_digits = max(default_max, min_digits) if args.max_digits is None else args.max_digits
    # Every option is checked against the model's limits before any of the (long) runs starts.
    limits.check_digit_range(min_digits, max_digits, names=("--min-digits", "--max-digits"))
    if args.loops:
        limits.check_loops(args.loops, what="--loops")
    if args.grid:  # a sorting model's grid rows are --items, when given (else every list size it writes)
        limits.check_grid(args.grid, args.items if fmt.task == "sort" else None)
    if args.items:
        limits.check_items(args.items, max_digits)
    spec = problem_spec(fmt, min_digits, max_digits, args.items)
    report = evaluate_model(model, tokenizer, spec, n=args.samples, seed=args.seed)
    lists = f"lists of {spec.min_items}-{spec.max_items} items, " if fmt.task == "sort" else ""
    print(f"{args.model}: {describe_format(fmt)}; {lists}operands of {min_digits}-{max_digits} digits, seed {args.seed}")
    _print_report(report)
    print(f"({report['seconds']:.2f} s)")
    if args.json:
        # What the report was made on, so that `push --eval-json` can refuse it for another model.
        data = {"model": str(args.model), "task": fmt.task, "base": fmt.base, "min_digits": min_digits,
                "max_digits": max_digits, "seed": args.seed,
                **({"items": [spec.min_items, spec.max_items]} if fmt.task == "sort" else {}),
                "number_format_fingerprint": fmt.fingerprint(),
                "weights_fingerprint": weights_fingerprint(checkpoint_folder(model)), **report,
                "by_max_operand_length": {str(k): v for k, v in report.get("by_max_operand_length", {}).items()},
                **_eval_record(args, min_digits, max_digits)}
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")
        print(f"Report written to {args.json}")
    if extras:
        _eval_extras(args, model, tokenizer, limits, report, max_digits, spec, out_dir)
    return 0


def _eval_record(args, min_digits: int, max_digits: int) -> dict:
    """What a report needs to be reproduced and compared: the command that remakes it (every option
    that sets its numbers spelled out), the machine, the library versions and the date."""
    import shlex
    import time

    from .hardware import library_versions, machine_info

    command = [PROG, "eval", str(args.model), "--samples", str(args.samples), "--min-digits", str(min_digits),
               "--max-digits", str(max_digits), "--seed", str(args.seed), "--json", str(args.json)]
    if getattr(args, "items", None):
        command += ["--items", f"{args.items[0]}:{args.items[1]}"]
    if args.threads is not None:
        command += ["--threads", str(args.threads)]
    for option in ("revision", "device", "dtype"):  # where the model came from and what it ran in
        if getattr(args, option, None) is not None:
            command += [f"--{option}", str(getattr(args, option))]
    if getattr(args, "trust_remote_code", False):
        command.append("--trust-remote-code")
    return {"command": shlex.join(command), "machine": machine_info(), "versions": library_versions(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


# -- eval: grid, loops, stress sets ---------------------------------------------------------
def _length_range(text: str) -> tuple[int, int]:
    try:
        return parse_length_range(text, "")
    except FormatError as err:
        raise argparse.ArgumentTypeError(one_line(err).lstrip()) from None


def _item_range(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", text)
    if m is None or not int(m.group(1)) <= int(m.group(2)):
        raise argparse.ArgumentTypeError(f"expected A:B with A <= B items, e.g. 6:8, got {text[:40]!r}")
    return int(m.group(1)), int(m.group(2))


def _loop_counts(text: str) -> list[int]:
    counts = [part.strip() for part in text.split(",")]
    if not all(c.isdigit() and int(c) >= 1 for c in counts):
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas (e.g. 1,2,4,8), got {text!r}")
    return [int(c) for c in counts]


def _default_eval_dir(model: str) -> str:
    return str(Path("runs") / "eval" / (checkpoint_label(model) or "model"))


def _writable_dir(text: str, option: str) -> Path:
    """Create the folder and prove it takes a file now, not after minutes of evaluation."""
    path = Path(text)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".hf-arith-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise CLIError(f"{option} {text}: cannot write there ({err.strerror or err})") from None
    return path


def _write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def _eval_extras(args, model, tokenizer, limits, report, max_digits, spec, out_dir: Path) -> None:
    """--grid, --loops and --stress: JSON and PNG files in out_dir, plus summary.json for the model card."""
    from .plots import plot_grid, plot_loops, save_figure  # matplotlib only when pictures are drawn

    fmt = tokenizer.arith_format
    train = args.train_range or limits.training_range
    summary = {"model": str(args.model), "task": fmt.task, "base": fmt.base, "unique_params": model.num_parameters(),
               "train_range": list(train) if train else None,
               "heldout": {k: report[k] for k in ("exact_match", "per_digit_accuracy", "malformed", "n")}}
    written = []
    grid_set = None
    if args.grid:
        sort = fmt.task == "sort"
        result = length_grid(model, tokenizer, args.grid, args.samples_per_cell, seed=args.seed, train_range=train,
                             progress=sys.stderr.isatty(), keep_problems=True, items=args.items if sort else None,
                             train_items=limits.training_items)
        problems = result.pop("problems")
        grid_set = ([p["problem"] for p in problems], [p["answer"] for p in problems],
                    [_in_training_range(p, train, result.get("train_items")) for p in problems])
        result["model"] = str(args.model)
        written.append(_write_json(out_dir / "grid.json", result))
        with (out_dir / "grid_problems.jsonl").open("w") as f:
            f.writelines(json.dumps(p) + "\n" for p in problems)
        written += [out_dir / "grid_problems.jsonl", save_figure(plot_grid(result), out_dir / "grid.png")]
        summary["grid"] = {"lengths": result["lengths"], **({"items": result["items"]} if "items" in result else {}),
                           **result["summary"]}
        _print_grid(result)
    if args.loops:
        if grid_set is None:
            texts, answers, _ = heldout_problems(spec, args.samples, args.seed)
            grid_set = (texts, answers, None)
        curve = loops_curve(model, tokenizer, grid_set[0], grid_set[1], args.loops, inside=grid_set[2])
        curve["problems"] = f"the --grid {args.grid[0]}:{args.grid[1]} problems" if args.grid else "held-out sample"
        written += [_write_json(out_dir / "loops.json", curve), save_figure(plot_loops(curve), out_dir / "loops.png")]
        summary["loops"] = curve
        print("recurrences   exact match")
        for n, acc in zip(curve["loops"], curve["exact_match"]):
            print(f"  {n:>9}   {_pct(acc):>11}")
    if args.stress:
        stress = stress_test(model, tokenizer, max_digits, seed=args.seed)
        written.append(_write_json(out_dir / "stress.json", stress))
        summary["stress"] = {name: r["exact_match"] for name, r in stress.items()}
        if "commutativity" in stress:
            summary["stress"]["commutativity_agreement"] = stress["commutativity"]["agreement"]
        print(f"stress set            exact match   problems   wrong at >= {100 * LOW_CONFIDENCE:g} % confidence")
        for name, r in stress.items():
            extra = f"   (a+b = b+a: {_pct(r['agreement'])})" if "agreement" in r else ""
            print(f"  {name:<20}{_pct(r['exact_match']):>11}   {r['n']:>8}   {r['silent_wrong']:>8}{extra}")
    written.append(_write_json(out_dir / "summary.json", summary))
    print(f"Wrote {', '.join(p.name for p in written)} to {out_dir}")


def _in_training_range(problem: dict, train, train_items=None) -> bool:
    """Whether a grid problem lies in the trained range: both operand lengths, or for a sorting
    list its size (in `train_items`) and its numbers' digits."""
    if "items" in problem:
        return (train is not None and train_items is not None and train_items[0] <= problem["items"] <= train_items[1]
                and train[0] <= problem["digits"] <= train[1])
    return train is not None and all(train[0] <= problem[k] <= train[1] for k in ("len_a", "len_b"))


def _print_grid(result: dict) -> None:
    s = result["summary"]
    lo, hi = result["lengths"]
    cells = (f"Grid of lists of {result['items'][0]}-{result['items'][1]} numbers x {lo}-{hi} digits each"
             if result.get("items") else f"Length grid {lo}-{hi} x {lo}-{hi} digits")
    print(f"{cells}, {result['samples_per_cell']} problems per cell: "
          f"{_pct(s['exact_match'])} exact match, {_pct(s['per_digit_accuracy'])} of digits, "
          f"mean answer perplexity {s['mean_perplexity']:.3f} ({s['seconds']:.1f} s)")
    for key, label in (("in_training_range_exact_match", "inside the training range"),
                       ("beyond_training_range_exact_match", "beyond the training range")):
        if s.get(key) is not None:
            print(f"  {label}: {_pct(s[key])}")


# -- verify ---------------------------------------------------------------------------------
def _print_verify(result: dict, name: str) -> None:
    print(f"Tiny-adder verify of {name} (seed {result['seed']}):")
    print(f"  accuracy          {_pct(result['accuracy'])}")
    print(f"  correct           {result['correct']} / {result['total']}")
    print(f"  edge cases        {result['edge_cases_correct']} / 10")
    print(f"  unique params     {result['unique_params']}")
    print(f"  additions/s       {result['additions_per_second']:,.0f}")


def cmd_verify(args) -> int:
    _set_threads(args, default=1)
    model, tokenizer = _load(args)
    _print_verify(verify_tiny_adder(model, tokenizer, seed=args.seed), name=args.model)
    return 0


# -- adderboard -----------------------------------------------------------------------------
def cmd_adderboard(args) -> int:
    from .adderboard import VERIFY_HINT, write_submission

    target = Path(args.output)
    if target.is_dir():
        raise CLIError(f"--output {args.output}: is a folder, not a file")
    if target.exists() and not args.overwrite:
        raise CLIError(f"--output {args.output}: exists; pass --overwrite to replace it")
    _writable_dir(str(target.parent), "--output")  # before the model is loaded and checked
    _set_threads(args, default=1)
    model, tokenizer = _load(args)
    try:
        path = write_submission(model, tokenizer, target, name=args.name, author=args.author, overwrite=True,
                                force=args.force)
    except OSError as err:
        raise CLIError(f"--output {args.output}: cannot write it ({err.strerror or err})") from None
    print(f"Wrote the AdderBoard submission for {args.model} to {path} ({path.stat().st_size:,} bytes): "
          f"{model.num_parameters()} unique parameters")
    print(f"Check it with AdderBoard's verify.py (needs only torch): {VERIFY_HINT.format(path=path)}")
    return 0


# -- attention and summary ------------------------------------------------------------------
def cmd_attention(args) -> int:
    from .attention_maps import attention_maps, map_labels, plot_attention
    from .plots import save_figure

    target = Path(args.output)
    _writable_dir(str(target.parent), "--output")
    _set_threads(args, default=1)
    model, tokenizer = _load(args)
    model_limits(model, tokenizer).check_problems([args.problem])
    tokens, maps = attention_maps(model, tokenizer, args.problem)
    save_figure(plot_attention(tokens, maps, map_labels(model, len(maps))), target)
    print(f"{args.problem.strip()} in the model's format: {' '.join(tokens)}")
    layers = getattr(model.config, "num_hidden_layers", None) or len(maps)
    passes = f" in {len(maps) // layers} passes" if len(maps) > layers else ""
    print(f"Attention maps ({layers} layer(s){passes} x {maps[0].shape[0]} head(s)) written to {target}")
    return 0


def cmd_summary(args) -> int:
    from .model_summary import format_summary, model_summary

    if args.json and not Path(args.json).parent.is_dir():
        raise CLIError(f"--json {args.json}: folder {str(Path(args.json).parent)!r} does not exist")
    _set_threads(args, default=1)
    model, tokenizer = _load(args)
    fmt = tokenizer.arith_format
    limits = model_limits(model, tokenizer)
    problem = args.problem or limits.longest_problem()
    limits.check_problems([problem])
    summary = model_summary(model, tokenizer, problem)
    print(f"{args.model}: {type(model).__name__}, {describe_format(fmt)}")
    print(format_summary(summary))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
        print(f"Summary written to {args.json}")
    return 0


# -- solve ----------------------------------------------------------------------------------
def cmd_solve(args) -> int:
    _set_threads(args, default=1)
    model, tokenizer = _load(args)
    with warnings.catch_warnings():  # solve's warning, said here per problem instead
        warnings.simplefilter("ignore", BeyondTrainingWarning)
        answers = solve(model, tokenizer, list(args.problems), tokens_per_step=args.tokens_per_step,
                        return_confidence=True)
    limits = model_limits(model, tokenizer, checkpoint_folder(model))
    # Operand lengths in the model's base, leading zeros not counted (solve has parsed these problems).
    beyond = limits.beyond_training(parse_problems(list(args.problems), tokenizer.arith_format))
    for problem, (answer, confidence), flagged in zip(args.problems, answers, beyond, strict=True):
        shown = problem.strip().replace(" ", "")
        # A number longer than any the model was trained on is answered, but flagged: beyond its
        # training lengths the model's own length grid, not this answer, says how far to trust it.
        notes = [f"operands beyond the {limits.training_range[1]} digits this model was trained on"] if flagged else []
        # An unsure token is where a wrong answer usually shows: the lowest token probability is marked.
        if answer is not None and confidence < args.min_confidence:
            notes.append(f"low confidence: {100 * confidence:.1f} %, below {100 * args.min_confidence:g} %")
        mark = " ?" if answer is not None and confidence < args.min_confidence else ""
        note = f"  ({'; '.join(notes)})" if notes else ""
        print(f"{shown} = {MALFORMED if answer is None else answer}{mark}{note}")
    return 0


# -- models ---------------------------------------------------------------------------------
def cmd_models(args) -> int:
    from .families import family_of

    _set_threads(args, default=1)
    names = bundled_models()
    if not names:
        print("No bundled models in this installation.")
        return 0
    rows, uses = [], [""]
    for name in names:
        entry = catalogue_entry(name)
        try:
            model, tokenizer = load_checkpoint(name)
            rows.append((name, describe_format(tokenizer.arith_format), family_of(model),
                         str(model.num_parameters()), entry["trained"], entry["measured"], bundled_path(name)))
        except CheckpointError as err:
            rows.append((name, f"unreadable: {one_line(err)}", "-", "-", "-", "-", bundled_path(name)))
        uses.append(f"  use it for: {entry['use_for']}")
    header = ("name", "task", "family", "unique params", "trained", "measured", "path")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(6)]
    for r, use in zip([header, *rows], uses):
        print("  ".join(f"{v:>{w}}" if i == 3 else f"{v:<{w}}" for i, (v, w) in enumerate(zip(r, widths))) + f"  {r[6]}")
        if use:
            print(use)
    return 0


# -- data export ----------------------------------------------------------------------------
# The problem options of `data export` and `data push`: (flag, type, metavar, help).
PROBLEM_OPTIONS = (
    ("--task", str, None, "add, sub, mul or sort (default: add)"),
    ("--train-size", _positive_int, "N", "train problems"),
    ("--test-size", _positive_int, "N", "test problems"),
    ("--seed", _seed, "S", "sampling seed"),
    ("--min-digits", _int, "A", "shortest operands (default: the task's)"),
    ("--max-digits", _int, "B", "longest operands (default: the task's)"),
    ("--base", _int, "B", "number base the operands are drawn in (default: 10)"),
)


def _add_problem_options(parser: argparse.ArgumentParser) -> None:
    for flag, kind, metavar, text in PROBLEM_OPTIONS:
        parser.add_argument(flag, type=kind, metavar=metavar, help=text)


def _problem_options(args) -> dict:
    """The problem options given on the command line (unset ones: the exporter's own defaults)."""
    names = (flag[2:].replace("-", "_") for flag, *_ in PROBLEM_OPTIONS)
    return {k: v for k in names if (v := getattr(args, k)) is not None}


def cmd_data_export(args) -> int:
    try:
        from .export import export_parquet
    except ImportError as err:
        raise CLIError(f"data export is not available in this installation ({one_line(err)})") from None
    options = _problem_options(args)
    result = export_parquet(args.out_dir, overwrite=args.overwrite, **options)
    out = Path(args.out_dir)
    files = sorted(p for p in out.rglob("*") if p.is_file()) if out.is_dir() else []
    print(f"Exported {options.get('task', 'the default task')} problems to {out}: {len(files)} files")
    for path in files:
        print(f"  {path.relative_to(out)}  ({path.stat().st_size:,} bytes)")
    if isinstance(result, dict):
        for key, value in result.items():
            if isinstance(value, (str, int, float, bool)):
                print(f"  {key}: {value}")
    return 0


# -- push / data push (Hub publishing) ------------------------------------------------------
def cmd_push(args) -> int:
    from .publishing import push_model

    folder, url = push_model(args.model, args.repo_id, output_dir=args.output_dir, upload=args.output_dir is None,
                             revision=args.revision, trust_remote_code=args.trust_remote_code,
                             private=args.private, eval_json=args.eval_json, heatmap=args.heatmap,
                             dataset_id=args.dataset_id, grid_samples=args.grid_samples)
    if folder is not None:
        files = sorted(p for p in folder.rglob("*") if p.is_file())
        print(f"Built the upload folder for {args.repo_id} in {folder}: {len(files)} files")
        for path in files:
            print(f"  {path.relative_to(folder)}  ({path.stat().st_size:,} bytes)")
    if url:
        print(f"Pushed {args.model} to {url}")
    return 0


def cmd_space_build(args) -> int:
    from .space_build import build_space

    folder = build_space(args.out_dir, args.model, title=args.title)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    print(f"Built the Space folder for {', '.join(dict.fromkeys(args.model))} in {folder}: {len(files)} files")
    for path in files:
        print(f"  {path.relative_to(folder)}  ({path.stat().st_size:,} bytes)")
    print(f"Upload it with: hf upload ORG/SPACE_NAME {folder} . --repo-type space")
    return 0


def cmd_data_push(args) -> int:
    from .export import push_dataset

    options = _problem_options(args)
    _, url = push_dataset(args.repo_id, output_dir=args.output_dir, private=args.private, **options)
    print(f"Pushed {options.get('task', 'add')} problems to {url}")
    return 0


# -- the parser -----------------------------------------------------------------------------
def _take_negative_problems(parser: argparse.ArgumentParser) -> None:
    """'-5+3' is a (negative) problem, not an unknown option: the parser then reports it properly."""
    if hasattr(parser, "_negative_number_matcher"):
        parser._negative_number_matcher = re.compile(r"^-\d")


def build_parser() -> argparse.ArgumentParser:
    # --threads is accepted before or after the subcommand (SUPPRESS keeps the top-level value).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--threads", type=_threads, default=argparse.SUPPRESS, metavar="N",
                        help="torch CPU threads (also accepted before the command)")
    # Where a model comes from (every command that names one) and what it runs on (those that run it).
    source = argparse.ArgumentParser(add_help=False)
    source.add_argument("--revision", metavar="REV",
                        help="branch, tag or commit of a Hub repo id MODEL (default: main)")
    source.add_argument("--trust-remote-code", action="store_true",
                        help="run the model's own code (auto_map) when its model_type is not an hf_arith family")
    runtime = argparse.ArgumentParser(add_help=False)
    runtime.add_argument("--device", type=_device, metavar="DEVICE", help="cpu (default), cuda, cuda:N or mps")
    runtime.add_argument("--dtype", choices=list(DTYPES), metavar="DTYPE",
                         help=f"{', '.join(DTYPES)} (default: as saved); one that changes this model's answers "
                              "(its dtype_check.json) is refused, one never checked is named in a warning")
    model_help = "bundled model name, checkpoint folder or Hub repo id (ORG/NAME)"
    parser = _Parser(prog=PROG, description="Train, evaluate and use small transformers that do exact arithmetic.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--threads", type=_threads, default=None, metavar="N",
                        help="torch CPU threads (default: the recipe's optim.threads for train, and for every earlier stage it "
                             "trains; for eval, 1 for tiny "
                             "models and every core for wider ones; 1 for the other commands)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("train", parents=[common], help="train a model from a recipe (default: the minimal-add10 preset)",
                       description=f"Train from a preset ({', '.join(list_presets())}) or a YAML recipe file.")
    p.add_argument("recipe", nargs="?", default=DEFAULT_PRESET, metavar="RECIPE",
                   help=f"preset name or YAML file (default: {DEFAULT_PRESET})")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a recipe value (YAML syntax), e.g. --set optim.steps=2000; repeatable")
    p.add_argument("--output-dir", metavar="DIR", help="where checkpoints go (default: the recipe's output_dir)")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint-* in the output folder")
    p.add_argument("--overwrite", action="store_true",
                   help="train into a non-empty output folder, deleting its checkpoint-* folders and final/ first")
    p.add_argument("--list", action="store_true", help="list the presets: what each trains, its training time, stages")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("eval", parents=[common, source, runtime], help="held-out exact match, overall and per operand length")
    p.add_argument("model", metavar="MODEL", help=model_help)
    p.add_argument("--samples", type=_int_in(1, MAX_SAMPLES), default=2000, metavar="N",
                   help=f"held-out problems, at most {MAX_SAMPLES:,} (default: 2000)")
    p.add_argument("--min-digits", type=_int, metavar="A", help="shortest operands (default: 1)")
    p.add_argument("--max-digits", type=_int, metavar="B",
                   help="longest operands (default: the longest the model was trained on where its checkpoint says, "
                        "else its operand width or the longest its context holds)")
    p.add_argument("--seed", type=_seed, default=1234, metavar="S", help="sampling seed (default: 1234)")
    p.add_argument("--items", type=_item_range, metavar="A:B",
                   help="sorting models: lists of A to B items (default: 2 to 5, or the format's max_items if fewer; "
                        "the rows of --grid)")
    p.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    p.add_argument("--grid", type=_length_range, metavar="A:B",
                   help="length-generalization grid: every (len_a, len_b) with A <= len <= B digits, or for sorting "
                        "every (items, digits) with lists of --items numbers (default: every size the format writes) "
                        "of A to B digits (JSON + PNG)")
    p.add_argument("--samples-per-cell", type=_int_in(1, MAX_SAMPLES_PER_CELL), default=100, metavar="N",
                   help=f"problems per grid cell, at most {MAX_SAMPLES_PER_CELL:,} (default: 100)")
    p.add_argument("--train-range", type=_length_range, metavar="A:B",
                   help="operand lengths the model was trained on, outlined in the grid (default: from the checkpoint)")
    p.add_argument("--loops", type=_loop_counts, metavar="1,2,4,...",
                   help="looped models: exact match for each number of recurrences (JSON + PNG)")
    p.add_argument("--stress", action="store_true",
                   help="commutativity, carry-chain, zero-operand and max-length stress sets (JSON)")
    p.add_argument("--output-dir", metavar="DIR",
                   help="where --grid/--loops/--stress write their files (default: runs/eval/<model name>)")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("verify", parents=[common, source, runtime], help="the tiny-adder protocol (10-digit addition models)")
    p.add_argument("model", metavar="MODEL", help=model_help)
    p.add_argument("--seed", type=_seed, default=2025, metavar="S", help="random pairs seed (default: 2025)")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("adderboard", parents=[common, source],
                       help="write a single-file AdderBoard submission (torch only) for a minimal-family model",
                       description="Write one Python file for AdderBoard's verify.py (github.com/anadim/AdderBoard): "
                                   "the model's forward pass in plain torch, its unique weights, its number format and "
                                   "greedy decoding, with build_model() and add(model, a, b). It is checked against "
                                   "the model before it is written.")
    p.add_argument("model", metavar="MODEL", help=model_help)
    p.add_argument("--output", required=True, metavar="FILE", help="the submission file to write (a .py file)")
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    p.add_argument("--name", metavar="TEXT", help="the entry's name (default: hf_arith <checkpoint name>)")
    p.add_argument("--author", metavar="TEXT", help="the entry's author (default: unknown)")
    p.add_argument("--force", action="store_true",
                   help="write the file even if the model scores below 99 %% on the protocol (seed 2025)")
    p.set_defaults(func=cmd_adderboard)

    p = sub.add_parser("solve", parents=[common, source, runtime], help="answer problems such as 1234567890+9876543210")
    p.add_argument("problems", nargs="+", metavar="PROBLEM")
    p.add_argument("--model", default=DEFAULT_MODEL, metavar="MODEL", help=f"{model_help} (default: {DEFAULT_MODEL})")
    p.add_argument("--tokens-per-step", type=_positive_int, default=1, metavar="K",
                   help="answer tokens per forward pass, up to the model's num_future_tokens (default 1); the "
                        "first head confirms the others' tokens in one more pass, so the answers are those of 1")
    p.add_argument("--min-confidence", type=_probability, default=LOW_CONFIDENCE, metavar="P",
                   help="mark answers with '?' when the model gave any of their tokens a lower probability "
                        f"(default {LOW_CONFIDENCE})")
    p.set_defaults(func=cmd_solve)
    _take_negative_problems(p)

    p = sub.add_parser("attention", parents=[common, source, runtime],
                       help="attention maps of every layer and head for one problem (PNG)")
    p.add_argument("model", metavar="MODEL", help=model_help)
    p.add_argument("problem", metavar="PROBLEM", help="a problem such as 101+1002")
    p.add_argument("--output", default="attention.png", metavar="PATH", help="the PNG to write (default: attention.png)")
    p.set_defaults(func=cmd_attention)
    _take_negative_problems(p)

    p = sub.add_parser("summary", parents=[common, source, runtime],
                       help="parameters per module and multiply-adds per generated token")
    p.add_argument("model", metavar="MODEL", help=model_help)
    p.add_argument("--problem", metavar="PROBLEM", help="problem to measure compute on (default: the longest one)")
    p.add_argument("--json", metavar="PATH", help="also write the summary as JSON")
    p.set_defaults(func=cmd_summary)

    p = sub.add_parser("models", parents=[common], help="list the bundled checkpoints")
    p.set_defaults(func=cmd_models)

    data = sub.add_parser("data", parents=[common], help="datasets of problems")
    data_sub = data.add_subparsers(dest="data_command", metavar="DATA_COMMAND", required=True)
    p = data_sub.add_parser("export", parents=[common], help="write train/test Parquet files")
    p.add_argument("out_dir", metavar="OUT_DIR")
    _add_problem_options(p)
    p.add_argument("--overwrite", action="store_true", help="replace an existing export")
    p.set_defaults(func=cmd_data_export)
    p = data_sub.add_parser("push", parents=[common], help="export problems and upload them as a Hub dataset")
    p.add_argument("--repo-id", required=True, metavar="ORG/NAME", help="the Hub dataset repository")
    p.add_argument("--output-dir", metavar="DIR", help="keep the uploaded folder here (default: a temporary one)")
    p.add_argument("--private", action="store_true", help="create the repository as private")
    _add_problem_options(p)
    p.set_defaults(func=cmd_data_push)

    p = sub.add_parser("push", parents=[common, source], help="publish a model on the Hub (model card, remote code, weights)",
                       description="Build the exact folder that is uploaded (weights, config, tokenizer, remote code, "
                                   "model card, pictures), then upload it; --output-dir only builds it.")
    p.add_argument("model", metavar="MODEL", help=model_help)
    p.add_argument("--repo-id", required=True, metavar="ORG/NAME", help="the Hub model repository")
    p.add_argument("--eval-json", metavar="PATH",
                   help="report of `hf-arith eval MODEL --json PATH` (default: the checkpoint's eval_results.json)")
    p.add_argument("--output-dir", metavar="DIR", help="build the folder here and do not upload")
    p.add_argument("--heatmap", metavar="PNG", help="picture to use instead of the per-length heatmap drawn from the report")
    p.add_argument("--grid-samples", type=_int, default=20, metavar="N",
                   help="problems per cell of the card's length grid (default: 20; 0: per-length accuracy only)")
    p.add_argument("--dataset-id", metavar="ORG/NAME", help="Hub dataset the model was evaluated on, for the card")
    p.add_argument("--private", action="store_true", help="create the repository as private")
    p.set_defaults(func=cmd_push)

    space = sub.add_parser("space", parents=[common], help="Hugging Face Spaces (the Gradio playground)")
    space_sub = space.add_subparsers(dest="space_command", metavar="SPACE_COMMAND", required=True)
    p = space_sub.add_parser("build", parents=[common], help="write a Space folder that runs the playground on Hub models",
                             description="Write app.py, requirements.txt (pinned to the installed versions) and a "
                                         "README.md Space card into DIR; the app loads each model by repo id through "
                                         "its remote code, without hf_arith. Nothing is downloaded or uploaded.")
    p.add_argument("out_dir", metavar="DIR", help="the folder to write (new or empty)")
    p.add_argument("--model", action="append", required=True, metavar="ORG/NAME",
                   help="a Hub repo id of an hf_arith model (published with `hf-arith push`); repeat for more")
    p.add_argument("--title", metavar="TEXT", help="the Space's title (default: hf_arith playground)")
    p.set_defaults(func=cmd_space_build)
    return parser


MAX_ERROR_CHARS = 600  # an error line longer than this is cut (messages quote problems cut to 40 characters already)


def _capped(message: str) -> str:
    if len(message) <= MAX_ERROR_CHARS:
        return message
    return f"{message[:MAX_ERROR_CHARS]}... ({len(message) - MAX_ERROR_CHARS:,} more characters)"


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, or 2 after a one-line user error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        with _no_library_progress_bars():
            return args.func(args) or 0
    except BrokenPipeError:  # whoever read the output stopped (`| head`): not an error of the command
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141  # 128 + SIGPIPE, as a shell reports it
    except USER_ERRORS as err:
        sys.stdout.flush()
        print(f"{PROG}: error: {_capped(one_line(err))}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
