"""`hf-arith verify` (the tiny-adder protocol) and `hf-arith adderboard` (a single-file submission)."""

from __future__ import annotations

from pathlib import Path

from ..data.errors import CLIError
from .common import MODEL_HELP, load, pct, seed, set_threads, writable_dir


def add_parsers(sub, parents) -> None:
    common, source, runtime = parents["common"], parents["source"], parents["runtime"]
    p = sub.add_parser("verify", parents=[common, source, runtime], help="the tiny-adder protocol (10-digit addition models)")
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    p.add_argument("--seed", type=seed, default=2025, metavar="S", help="random pairs seed (default: 2025)")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("adderboard", parents=[common, source],
                       help="write a single-file AdderBoard submission (torch only) for a minimal-family model",
                       description="Write one Python file for AdderBoard's verify.py (github.com/anadim/AdderBoard): "
                                   "the model's forward pass in plain torch, its unique weights, its number format and "
                                   "greedy decoding, with build_model() and add(model, a, b). It is checked against "
                                   "the model before it is written.")
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    p.add_argument("--output", required=True, metavar="FILE", help="the submission file to write (a .py file)")
    p.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")
    p.add_argument("--name", metavar="TEXT", help="the entry's name (default: hf_arith <checkpoint name>)")
    p.add_argument("--author", metavar="TEXT", help="the entry's author (default: unknown)")
    p.add_argument("--force", action="store_true",
                   help="write the file even if the model scores below 99 %% on the protocol (seed 2025)")
    p.set_defaults(func=cmd_adderboard)


def print_verify(result: dict, name: str) -> None:
    print(f"Tiny-adder verify of {name} (seed {result['seed']}):")
    print(f"  accuracy          {pct(result['accuracy'])}")
    print(f"  correct           {result['correct']} / {result['total']}")
    print(f"  edge cases        {result['edge_cases_correct']} / 10")
    print(f"  unique params     {result['unique_params']}")
    print(f"  additions/s       {result['additions_per_second']:,.0f}")


def cmd_verify(args) -> int:
    from ..evaluation.held_out import verify_tiny_adder

    set_threads(args, default=1)
    model, tokenizer = load(args)
    print_verify(verify_tiny_adder(model, tokenizer, seed=args.seed), name=args.model)
    return 0


def cmd_adderboard(args) -> int:
    from ..publishing.adderboard import VERIFY_HINT, write_submission

    target = Path(args.output)
    if target.is_dir():
        raise CLIError(f"--output {args.output}: is a folder, not a file")
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
