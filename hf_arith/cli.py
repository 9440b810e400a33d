"""`hf-arith`: train, evaluate, verify and use small arithmetic transformers from the command line.

    hf-arith train                       # train the minimal-add10 preset from scratch on CPU
    hf-arith train my.yaml --set optim.steps=2000 --output-dir runs/x [--resume]
    hf-arith eval runs/x/final --samples 2000 [--min-digits 1 --max-digits 10] [--json report.json]
    hf-arith verify minimal-add10        # the tiny-adder protocol (10-digit addition models)
    hf-arith solve 1234567890+9876543210 [--model NAME_OR_PATH]
    hf-arith models                      # bundled checkpoints
    hf-arith data export OUT_DIR --task add --train-size 100000

Every user error (a bad problem, recipe, checkpoint or path, or a bad option) ends with one
line `hf-arith: error: <message>` on stderr and exit status 2. Anything else is a bug and keeps
its traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from pathlib import Path

import torch
from transformers.utils import logging as hf_logging

from .bundled import bundled_models, bundled_path
from .evaluation import evaluate_model, verify_tiny_adder
from .formatting import TASK_NAMES, FormatError
from .loading import CheckpointError, load_checkpoint, one_line
from .problems import ProblemSpec
from .solving import solve
from .streaming import worst_case_length
from .train_config import RecipeError, list_presets

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
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


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


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def describe_format(fmt) -> str:
    text = f"{TASK_NAMES.get(fmt.task, fmt.task)}, base {fmt.base}"
    if fmt.operand_width:
        text += f", {fmt.operand_width}-digit operands"
    return text


def _context(model) -> int | None:
    return getattr(model.config, "max_position_embeddings", None)


def _spec(fmt, min_digits: int, max_digits: int) -> ProblemSpec:
    items = {"min_items": 2, "max_items": min(5, fmt.max_items)} if fmt.task == "sort" else {}
    return ProblemSpec(task=fmt.task, base=fmt.base, min_digits=min_digits, max_digits=max_digits, **items)


def default_max_digits(model, fmt) -> int:
    """The longest operands the model can take: its fixed width, else what fits its context."""
    if fmt.operand_width:
        return fmt.operand_width
    context = _context(model)
    if not context:
        return 10
    best = 0
    for digits in range(1, context + 1):
        if worst_case_length(_spec(fmt, 1, digits), fmt) > context:
            break
        best = digits
    if best == 0:
        raise CLIError(f"this model's context of {context} positions is too short for any problem")
    return best


def check_digit_range(model, fmt, min_digits: int, max_digits: int) -> None:
    if not 1 <= min_digits <= max_digits:
        raise CLIError(f"need 1 <= --min-digits <= --max-digits, got {min_digits} and {max_digits}")
    if fmt.operand_width and max_digits > fmt.operand_width:
        raise CLIError(
            f"--max-digits {max_digits}: this model writes operands in a fixed width of {fmt.operand_width} digits"
        )
    context = _context(model)
    need = worst_case_length(_spec(fmt, min_digits, max_digits), fmt)
    if context and need > context:
        raise CLIError(
            f"--max-digits {max_digits}: such problems need {need} positions, more than this model's context of {context}"
        )


# -- train ----------------------------------------------------------------------------------
def cmd_train(args) -> int:
    from transformers.trainer_utils import get_last_checkpoint

    from .train_config import load_recipe
    from .training import check_recipe, train

    overrides = list(args.set or [])
    if args.threads is not None:
        overrides.append(f"optim.threads={args.threads}")
    recipe = load_recipe(args.recipe or DEFAULT_PRESET, overrides)
    fmt = check_recipe(recipe)  # every recipe mistake is reported now, not after training
    output_dir = args.output_dir or recipe.output_dir
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise CLIError(f"--output-dir {output_dir}: exists and is not a folder")
    if args.resume:
        last = get_last_checkpoint(str(out)) if out.is_dir() else None
        if last is None:
            raise CLIError(f"--resume: no checkpoint-* folder in {output_dir} to resume from (train without --resume first)")
        print(f"Resuming from {last}")
    else:
        try:
            out.mkdir(parents=True, exist_ok=True)  # a bad output path fails now, not after training
        except OSError as err:
            raise CLIError(f"--output-dir {output_dir}: cannot create it ({err.strerror or err})") from None
    d, o = recipe.data, recipe.optim
    print(f"Training {recipe.name}: {recipe.family} family, {describe_format(fmt)}, {d.min_digits}-{d.max_digits} "
          f"digits, {o.steps} steps of {o.batch_size} on {'GPU' if torch.cuda.is_available() else 'CPU'}; "
          f"output in {output_dir}", flush=True)
    try:
        summary = train(recipe, output_dir=output_dir, resume=args.resume)
    except KeyboardInterrupt:
        print(f"{PROG}: training interrupted; --resume continues from the last checkpoint-* in {output_dir}",
              file=sys.stderr)
        raise
    print()
    loss = summary.get("train_loss")
    seconds = summary.get("train_seconds")
    print(f"Trained {summary.get('steps')} steps"
          + (f" in {float(seconds):.1f} s" if seconds is not None else "")
          + (f", mean training loss {loss:.4f}" if isinstance(loss, (int, float)) else "")
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
    _set_threads(args, default=1)
    model, tokenizer = load_checkpoint(args.model)
    fmt = tokenizer.arith_format
    min_digits = 1 if args.min_digits is None else args.min_digits
    max_digits = default_max_digits(model, fmt) if args.max_digits is None else args.max_digits
    check_digit_range(model, fmt, min_digits, max_digits)
    spec = _spec(fmt, min_digits, max_digits)
    report = evaluate_model(model, tokenizer, spec, n=args.samples, seed=args.seed)
    print(f"{args.model}: {describe_format(fmt)}; operands of {min_digits}-{max_digits} digits, seed {args.seed}")
    _print_report(report)
    print(f"({report['seconds']:.2f} s)")
    if args.json:
        data = {"model": str(args.model), "task": fmt.task, "base": fmt.base, "min_digits": min_digits,
                "max_digits": max_digits, "seed": args.seed, **report,
                "by_max_operand_length": {str(k): v for k, v in report.get("by_max_operand_length", {}).items()}}
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n")
        print(f"Report written to {args.json}")
    return 0


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
    model, tokenizer = load_checkpoint(args.model)
    _print_verify(verify_tiny_adder(model, tokenizer, seed=args.seed), name=args.model)
    return 0


# -- solve ----------------------------------------------------------------------------------
def cmd_solve(args) -> int:
    _set_threads(args, default=1)
    model, tokenizer = load_checkpoint(args.model)
    answers = solve(model, tokenizer, list(args.problems))
    for problem, answer in zip(args.problems, answers, strict=True):
        shown = problem.strip().replace(" ", "")
        print(f"{shown} = {MALFORMED if answer is None else answer}")
    return 0


# -- models ---------------------------------------------------------------------------------
def cmd_models(args) -> int:
    _set_threads(args, default=1)
    names = bundled_models()
    if not names:
        print("No bundled models in this installation.")
        return 0
    rows = []
    for name in names:
        try:
            model, tokenizer = load_checkpoint(name)
            rows.append((name, describe_format(tokenizer.arith_format), str(model.num_parameters()), bundled_path(name)))
        except CheckpointError as err:
            rows.append((name, f"unreadable: {one_line(err)}", "-", bundled_path(name)))
    header = ("name", "task", "unique params", "path")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    for r in [header, *rows]:
        print(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]}")
    return 0


# -- data export ----------------------------------------------------------------------------
def cmd_data_export(args) -> int:
    try:
        from .export import export_parquet
    except ImportError as err:
        raise CLIError(f"data export is not available in this installation ({one_line(err)})") from None
    options = {k: getattr(args, k) for k in ("task", "train_size", "test_size", "seed", "min_digits", "max_digits", "base")}
    options = {k: v for k, v in options.items() if v is not None}  # unset: export_parquet's own defaults
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


# -- the parser -----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    # --threads is accepted before or after the subcommand (SUPPRESS keeps the top-level value).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--threads", type=_positive_int, default=argparse.SUPPRESS, metavar="N",
                        help="torch CPU threads (also accepted before the command)")
    parser = _Parser(prog=PROG, description="Train, evaluate and use small transformers that do exact arithmetic.")
    parser.add_argument("--threads", type=_positive_int, default=None, metavar="N",
                        help="torch CPU threads (default: 1 for eval/verify/solve, the recipe's optim.threads for train)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("train", parents=[common], help="train a model from a recipe (default: the minimal-add10 preset)",
                       description=f"Train from a preset ({', '.join(list_presets())}) or a YAML recipe file.")
    p.add_argument("recipe", nargs="?", default=DEFAULT_PRESET, metavar="RECIPE",
                   help=f"preset name or YAML file (default: {DEFAULT_PRESET})")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a recipe value (YAML syntax), e.g. --set optim.steps=2000; repeatable")
    p.add_argument("--output-dir", metavar="DIR", help="where checkpoints go (default: the recipe's output_dir)")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint-* in the output folder")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("eval", parents=[common], help="held-out exact match, overall and per operand length")
    p.add_argument("model", metavar="MODEL", help="bundled model name or checkpoint folder")
    p.add_argument("--samples", type=_positive_int, default=2000, metavar="N", help="held-out problems (default: 2000)")
    p.add_argument("--min-digits", type=_int, metavar="A", help="shortest operands (default: 1)")
    p.add_argument("--max-digits", type=_int, metavar="B",
                   help="longest operands (default: the model's operand width, or the longest its context holds)")
    p.add_argument("--seed", type=_int, default=1234, metavar="S", help="sampling seed (default: 1234)")
    p.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("verify", parents=[common], help="the tiny-adder protocol (10-digit addition models)")
    p.add_argument("model", metavar="MODEL", help="bundled model name or checkpoint folder")
    p.add_argument("--seed", type=_int, default=2025, metavar="S", help="random pairs seed (default: 2025)")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("solve", parents=[common], help="answer problems such as 1234567890+9876543210")
    p.add_argument("problems", nargs="+", metavar="PROBLEM")
    p.add_argument("--model", default=DEFAULT_MODEL, metavar="NAME_OR_PATH",
                   help=f"bundled model name or checkpoint folder (default: {DEFAULT_MODEL})")
    p.set_defaults(func=cmd_solve)
    # '-5+3' is a (negative) problem, not an unknown option: the parser then reports it properly.
    if hasattr(p, "_negative_number_matcher"):
        p._negative_number_matcher = re.compile(r"^-\d")

    p = sub.add_parser("models", parents=[common], help="list the bundled checkpoints")
    p.set_defaults(func=cmd_models)

    data = sub.add_parser("data", parents=[common], help="datasets of problems")
    data_sub = data.add_subparsers(dest="data_command", metavar="DATA_COMMAND", required=True)
    p = data_sub.add_parser("export", parents=[common], help="write train/test Parquet files")
    p.add_argument("out_dir", metavar="OUT_DIR")
    p.add_argument("--task", help="add, sub, mul or sort (default: add)")
    p.add_argument("--train-size", type=_positive_int, metavar="N")
    p.add_argument("--test-size", type=_positive_int, metavar="N")
    p.add_argument("--seed", type=_int, metavar="S")
    p.add_argument("--min-digits", type=_int, metavar="A")
    p.add_argument("--max-digits", type=_int, metavar="B")
    p.add_argument("--base", type=_int, metavar="B")
    p.add_argument("--overwrite", action="store_true", help="replace an existing export")
    p.set_defaults(func=cmd_data_export)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, or 2 after a one-line user error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        with _no_library_progress_bars():
            return args.func(args) or 0
    except USER_ERRORS as err:
        sys.stdout.flush()
        print(f"{PROG}: error: {one_line(err)}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
