"""`hf-arith`: train, evaluate, verify and use small arithmetic transformers from the command line.

    hf-arith train                       # train the minimal-add10 preset from scratch on CPU
    hf-arith train my.yaml --set optim.steps=2000 --output-dir runs/x [--resume]
    hf-arith eval runs/x/final --samples 2000 [--min-digits 1 --max-digits 10] [--json report.json]
    hf-arith eval MODEL --grid 1:30 [--heldout] [--samples-per-cell 100] [--loops 1,2,4,8] [--stress] [--output-dir DIR]
    hf-arith verify minimal-add10        # the tiny-adder protocol (10-digit addition models)
    hf-arith attention MODEL 101+1002 [--output attention.png]
    hf-arith summary MODEL [--json summary.json]
    hf-arith adderboard minimal-add10 --output submission.py   # a single-file AdderBoard submission
    hf-arith adderboard minimal-add10 --output DIR             # the submission folder around it
    hf-arith solve 1234567890+9876543210 [--model NAME_OR_PATH_OR_REPO_ID]
    hf-arith solve 1+2 --model ORG/NAME [--revision REV] [--device cuda] [--dtype float16]
    hf-arith models                      # bundled checkpoints, each with its problem format
    hf-arith data export OUT_DIR --task add --train-size 100000
    hf-arith data push --repo-id ORG/NAME --task add   # export, then upload as a Hub dataset
    hf-arith push minimal-add10 --repo-id ORG/NAME [--eval-json report.json] [--output-dir DIR]
    hf-arith space build DIR --model ORG/NAME [--model ORG/NAME ...]   # a Space folder that deploys as is
    hf-arith --version

MODEL is a bundled name, a checkpoint folder or a Hub repo id (ORG/NAME, read from the Hugging Face
cache when it is there; HF_HUB_OFFLINE=1 works from the cache alone).

Every user error (hf_arith.data.errors.HfArithError: a bad problem, recipe, checkpoint or option; or an
OSError on a path the user named) ends with one line `hf-arith: error: <message>` on stderr and exit
status 2. Anything else is a bug and keeps its traceback (exit status 1).

One module per command group (train, evaluate, verify, solve, data, publish), each adding its
subcommands to the parser and importing torch and transformers only inside its handlers, so that
`--help` and `--version` answer without loading them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from .. import __version__
from ..data.errors import HfArithError, one_line
from . import data, evaluate, publish, solve, train, verify
from .common import PROG, Parser, parent_parsers, threads

# The command groups, one module each; each adds its subcommands to the parser.
GROUPS = (train, evaluate, verify, solve, data, publish)
COMMAND_ORDER = ("train", "eval", "verify", "adderboard", "solve", "attention", "summary", "models", "data", "push",
                 "space")


def build_parser() -> Parser:
    parents = parent_parsers()
    parser = Parser(prog=PROG, description="Train, evaluate and use small transformers that do exact arithmetic.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--threads", type=threads, default=None, metavar="N",
                        help="torch CPU threads (default: the recipe's optim.threads for train, and for every earlier "
                             "stage it trains; for eval, 1 for tiny models and every core for wider ones; 1 for the "
                             "other commands)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in GROUPS:
        group.add_parsers(sub, parents)
    # --help lists the commands in the order of a user's path, not of the modules.
    order = {name: i for i, name in enumerate(COMMAND_ORDER)}
    sub._choices_actions.sort(key=lambda action: order.get(action.dest, len(order)))
    commands = sorted(sub.choices.items(), key=lambda item: order.get(item[0], len(order)))
    sub.choices.clear()
    sub.choices.update(commands)
    return parser


def command_paths(parser: Parser | None = None) -> list[tuple[str, ...]]:
    """Every command and subcommand as the words that name it: ('train',), ..., ('data', 'export')."""
    def walk(node, prefix):
        paths = []
        for action in node._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    paths.append((*prefix, name))
                    paths += walk(child, (*prefix, name))
        return paths
    return walk(parser or build_parser(), ())


MAX_ERROR_CHARS = 700  # an error line is cut to this length (messages quote problems cut to 40 characters already)


def _capped(message: str) -> str:
    if len(message) <= MAX_ERROR_CHARS:
        return message
    keep = MAX_ERROR_CHARS - 40  # room for the note on what was cut
    return f"{message[:keep]}... ({len(message) - keep:,} more characters)"


def _user_error(err: BaseException) -> bool:
    """Whether an exception is the user's doing: the package's error type, or an OSError on a path the
    user named (it carries the file name: no such file, permission denied, disk full). Anything else
    is a bug, shown with its traceback."""
    return isinstance(err, HfArithError) or (isinstance(err, OSError) and err.filename is not None)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, or 2 after a one-line user error). A bug
    raises (the console script then shows its traceback and exits with status 1)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        import hf_arith

        from .common import no_library_progress_bars

        hf_arith.register()  # the Auto classes know the families before a command loads a model
        with no_library_progress_bars():
            return args.func(args) or 0
    except BrokenPipeError:  # whoever read the output stopped (`| head`): not an error of the command
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141  # 128 + SIGPIPE, as a shell reports it
    except (HfArithError, OSError) as err:
        if not _user_error(err):
            raise
        sys.stdout.flush()
        print(f"{PROG}: error: {_capped(one_line(err))}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
