"""`hf-arith verify` (the tiny-adder protocol) and `hf-arith adderboard` (a single-file submission, or a
submission folder around it)."""

from __future__ import annotations

from pathlib import Path

from ..data.errors import CLIError
from .common import MODEL_HELP, load, seed, set_threads, writable_dir


def add_parsers(sub, parents) -> None:
    common, source, runtime = parents["common"], parents["source"], parents["runtime"]
    p = sub.add_parser("verify", parents=[common, source, runtime], help="the tiny-adder protocol (10-digit addition models)")
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    p.add_argument("--seed", type=seed, default=2025, metavar="S", help="random pairs seed (default: 2025)")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("adderboard", parents=[common, source],
                       help="write an AdderBoard submission (a single torch-only file, or a folder around it) for a "
                            "minimal-family model",
                       description="Write one Python file for AdderBoard's verify.py (github.com/anadim/AdderBoard): "
                                   "the model's forward pass in plain torch, its unique weights, its number format and "
                                   "greedy decoding, with build_model() and add(model, a, b). It is checked against "
                                   "the model before it is written. With a folder for --output (a path that does not "
                                   "end in .py, or --folder), write the submission folder: that file, its parameter "
                                   "table, the protocol's scores for seeds 2025, 0 and 1, the training command and "
                                   "record, the leaderboard row and a README.")
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    p.add_argument("--output", required=True, metavar="FILE|DIR",
                   help="the submission file to write (a .py file), or the submission folder (any other path)")
    p.add_argument("--folder", action="store_true", help="--output is the submission folder, whatever its name")
    p.add_argument("--overwrite", action="store_true",
                   help="replace FILE if it exists; write into a non-empty DIR, replacing an earlier export's files")
    p.add_argument("--name", metavar="TEXT", help="the entry's name (default: hf_arith <checkpoint name>)")
    p.add_argument("--author", metavar="TEXT", help="the entry's author (default: unknown)")
    p.add_argument("--force", action="store_true",
                   help="write the file even if the model scores below 99 %% on the protocol (seed 2025)")
    p.set_defaults(func=cmd_adderboard)


def print_verify(result: dict, name: str) -> None:
    from ..evaluation.held_out import verify_text

    print(verify_text(result, name))


def cmd_verify(args) -> int:
    from ..evaluation.held_out import verify_tiny_adder

    set_threads(args, default=1)
    model, tokenizer = load(args)
    print_verify(verify_tiny_adder(model, tokenizer, seed=args.seed), name=args.model)
    return 0


def cmd_adderboard(args) -> int:
    from ..publishing.adderboard import VERIFY_HINT, write_submission

    target = Path(args.output)
    if args.folder or not args.output.endswith(".py"):
        return adderboard_folder(args)
    if target.is_dir():
        raise CLIError(f"--output {args.output}: is a folder, not a file (pass --folder to write a submission "
                       "folder there)")
    if target.exists() and not args.overwrite:
        raise CLIError(f"--output {args.output}: exists; pass --overwrite to replace it")
    writable_dir(str(target.parent), "--output")  # before the model is loaded and checked
    set_threads(args, default=1)
    model, tokenizer = load(args)
    try:
        path = write_submission(model, tokenizer, target, name=args.name, author=args.author, overwrite=True,
                                force=args.force)
    except OSError as err:
        raise CLIError(f"--output {args.output}: cannot write it ({err.strerror or err})") from None
    print(f"Wrote the AdderBoard submission for {args.model} to {path} ({path.stat().st_size:,} bytes): "
          f"{model.num_parameters()} unique parameters")
    print(f"Check it with AdderBoard's verify.py (needs only torch): {VERIFY_HINT.format(path=path)}")
    return 0


def adderboard_folder(args) -> int:
    """`--output DIR`: the submission folder (hf_arith.publishing.adderboard_folder)."""
    from ..publishing.adderboard import VERIFY_HINT
    from ..publishing.adderboard_folder import write_submission_folder

    target = Path(args.output)
    if target.exists() and not target.is_dir():
        raise CLIError(f"--output {args.output}: is a file, not a folder (a submission file's name ends in .py)")
    if target.is_dir() and any(target.iterdir()) and not args.overwrite:  # before the model is loaded and checked
        raise CLIError(f"--output {args.output}: is not empty; pass --overwrite to replace an export there")
    set_threads(args, default=1)
    model, tokenizer = load(args)
    try:
        result = write_submission_folder(model, tokenizer, target, model_name=args.model, name=args.name,
                                         author=args.author, overwrite=args.overwrite, force=args.force)
    except OSError as err:
        raise CLIError(f"--output {args.output}: cannot write there ({err.strerror or err})") from None
    folder = result["folder"]
    scores = ", ".join(f"seed {r['seed']} {r['correct']:,} / {r['total']:,}" for r in result["reports"])
    print(f"Wrote the AdderBoard submission folder for {args.model} to {folder}: {result['params']} unique "
          f"parameters; protocol {scores}")
    for name in result["files"]:
        print(f"  {name}  ({(folder / name).stat().st_size:,} bytes)")
    print(f"Check it with AdderBoard's verify.py (needs only torch): "
          f"{VERIFY_HINT.format(path=folder / result['filename'])}")
    return 0
