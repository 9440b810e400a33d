"""`hf-arith data export` and `hf-arith data push`: datasets of problems."""

from __future__ import annotations

from pathlib import Path

from ..data.errors import CLIError, one_line
from .common import integer, positive_int, seed

# The problem options of `data export` and `data push`: (flag, type, metavar, help).
PROBLEM_OPTIONS = (
    ("--task", str, None, "add, sub, mul or sort (default: add)"),
    ("--train-size", positive_int, "N", "train problems"),
    ("--test-size", positive_int, "N", "test problems"),
    ("--seed", seed, "S", "sampling seed"),
    ("--min-digits", integer, "A", "shortest operands (default: the task's)"),
    ("--max-digits", integer, "B", "longest operands (default: the task's)"),
    ("--base", integer, "B", "number base the operands are drawn in (default: 10)"),
)


def add_parsers(sub, parents) -> None:
    common = parents["common"]
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


def _add_problem_options(parser) -> None:
    for flag, kind, metavar, text in PROBLEM_OPTIONS:
        parser.add_argument(flag, type=kind, metavar=metavar, help=text)


def _problem_options(args) -> dict:
    """The problem options given on the command line (unset ones: the exporter's own defaults)."""
    names = (flag[2:].replace("-", "_") for flag, *_ in PROBLEM_OPTIONS)
    return {k: v for k in names if (v := getattr(args, k)) is not None}


def _task(options: dict, exporter) -> str:
    """The task the problems are of: --task, else export_parquet's own default."""
    import inspect

    param = inspect.signature(exporter).parameters.get("task")
    default = param.default if param is not None and param.default is not param.empty else "the exporter's default"
    return options.get("task") or default


def cmd_data_export(args) -> int:
    try:
        from ..data.dataset_export import export_parquet
    except ImportError as err:
        raise CLIError(f"data export is not available in this installation ({one_line(err)})") from None
    options = _problem_options(args)
    result = export_parquet(args.out_dir, overwrite=args.overwrite, **options)
    out = Path(args.out_dir)
    files = sorted(p for p in out.rglob("*") if p.is_file()) if out.is_dir() else []
    print(f"Exported {_task(options, export_parquet)} problems to {out}: {len(files)} files")
    for path in files:
        print(f"  {path.relative_to(out)}  ({path.stat().st_size:,} bytes)")
    if isinstance(result, dict):
        for key, value in result.items():
            if isinstance(value, (str, int, float, bool)):
                print(f"  {key}: {value}")
    return 0


def cmd_data_push(args) -> int:
    from ..data.dataset_export import export_parquet, push_dataset

    options = _problem_options(args)
    _, url = push_dataset(args.repo_id, output_dir=args.output_dir, private=args.private, **options)
    print(f"Pushed {_task(options, export_parquet)} problems to {url}")
    return 0
