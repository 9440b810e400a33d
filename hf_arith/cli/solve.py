"""`hf-arith solve` (answer problems) and `hf-arith models` (the bundled checkpoints and their formats)."""

from __future__ import annotations

import sys
import warnings

from ..data.formatting import SORT_LABELS, FormatError
from .common import (
    LOW_CONFIDENCE,
    MALFORMED,
    MODEL_HELP,
    PROG,
    describe_format,
    load,
    positive_int,
    probability,
    set_threads,
    take_negative_problems,
)

SHELL_NOTE = "quote a problem with '*' for the shell: hf-arith solve '12*34'"


def add_parsers(sub, parents) -> None:
    common, source, runtime = parents["common"], parents["source"], parents["runtime"]
    p = sub.add_parser("solve", parents=[common, source, runtime], help="answer problems such as 1234567890+9876543210",
                       description="Answer problems, each with the bundled model for its task and size unless "
                                   "--model names one. Each model takes its own problem syntax and operand "
                                   "lengths: `hf-arith models` shows them for every bundled model (e.g. A+B, A-B, "
                                   "A*B, or a:31,b:7,c:120 to sort); " + SHELL_NOTE + ".")
    p.add_argument("problems", nargs="+", metavar="PROBLEM", help="a problem in the model's syntax (see `hf-arith models`)")
    p.add_argument("--model", default=None, metavar="MODEL",
                   help=f"{MODEL_HELP} (default: for each problem, the bundled model for its task and size: the "
                        "task's default where it was trained or measured on such problems, else the bundled model "
                        "that was, reaching least far; for a problem no bundled model was, the one that accepts it "
                        "and that it passes by least; `hf-arith models` lists them)")
    p.add_argument("--tokens-per-step", type=positive_int, default=None, metavar="K",
                   help="answer tokens one forward pass may write, up to the model's num_future_tokens (default: "
                        "all of them); the extra heads draft and the first head verifies, so the answers are those "
                        "of 1 token per pass")
    p.add_argument("--raw-heads", action="store_true",
                   help="write the extra heads' tokens unverified: fewer passes, but not always the first head's answers")
    p.add_argument("--views", type=positive_int, default=None, metavar="N",
                   help="answer N views of each problem (a sort list relabelled) and give the answer most of them "
                        "give (default: the model's config.answer_views; 1: the problem as given only)")
    p.add_argument("--min-confidence", type=probability, default=LOW_CONFIDENCE, metavar="P",
                   help="mark answers with '?' when the model gave any of their tokens a lower probability "
                        f"(default {LOW_CONFIDENCE})")
    p.set_defaults(func=cmd_solve)
    take_negative_problems(p)

    p = sub.add_parser("models", parents=[common],
                       help="list the bundled checkpoints, with each one's problem syntax, an example and its ranges")
    p.set_defaults(func=cmd_models)


# -- what a model takes ---------------------------------------------------------------------
def problem_syntax(fmt) -> str:
    """How a problem for this number format is typed: two numbers joined by the task's operator, or for
    sorting labelled numbers."""
    if fmt.task_rules.item_list:
        return f"{SORT_LABELS[0]}:N,{SORT_LABELS[1]}:N,... (2 to {fmt.max_items} labelled numbers)"
    return f"A{fmt.task_rules.operator}B"


def measured_percent() -> str:
    """The exact match a length needs to count as measured ('99'; `limits.MEASURED_EXACT`)."""
    from ..runtime.limits import MEASURED_EXACT

    return f"{100 * MEASURED_EXACT:g}"


def measured_span(longest: int) -> str:
    """'1-8 digits', or '1 digit' for a range of one length."""
    return f"1-{longest:,} digits" if longest > 1 else "1 digit"


def accepted_ranges(limits) -> str:
    """The operand lengths a model takes (its hard limit), those where it was measured at >= 99 % exact match
    (its measured range, when its config records one) and those it was trained on, from its limits."""
    fmt = limits.fmt
    unit = "digits" if fmt.base == 10 else f"digits in base {fmt.base} (typed in decimal)"
    text = f"operands of 1-{limits.max_digits:,} {unit}"
    if limits.measured_max_digits:  # two numbers: what it accepts, and where it was measured to answer
        longest = limits.measured_max_digits
        text += f" (hard limit; measured >= {measured_percent()} % on {f'1-{longest:,}' if longest > 1 else '1'})"
    trained = limits.training_range
    if trained:
        text += f", trained on {trained[0]:,}-{trained[1]:,}"
    if fmt.task_rules.item_list and limits.training_items:
        text += f" in lists of {limits.training_items[0]}-{limits.training_items[1]}"
    return text


def measured_cell(limits) -> str:
    """`hf-arith models`' measured column: the lengths (for sorting, in the trained list sizes) measured at
    >= 99 % exact match; '-' where the config records none."""
    if not limits.measured_max_digits:
        return "-"
    digits = measured_span(limits.measured_max_digits)
    items = limits.training_items if limits.fmt.task_rules.item_list else None
    return f"{items[0]}-{items[1]} numbers of {digits}" if items else digits


def format_help(limits) -> str:
    """One line on what a model takes: syntax, an example and the accepted ranges."""
    from ..data.problems import example_problem

    trained = limits.training_range
    example = example_problem(limits.fmt, min(trained[1] if trained else 3, limits.max_digits))
    return f"{problem_syntax(limits.fmt)}, e.g. {example}; {accepted_ranges(limits)}"


# -- solve ----------------------------------------------------------------------------------
def cmd_solve(args) -> int:
    import argparse

    from ..bundled import DEFAULT_MODELS, bundled_models
    from ..runtime.loading import bundled_route

    set_threads(args, default=1)
    named = [p for p in args.problems if p.strip() in bundled_models()]
    if named:  # `hf-arith solve MODEL PROBLEM`: the model goes after --model
        raise FormatError(f"{named[0].strip()!r} is a bundled model, not a problem: name it with --model, "
                          f"e.g. hf-arith solve PROBLEM --model {named[0].strip()}")
    if args.model is not None:
        print("\n".join(answer_lines(args, list(args.problems))))
        return 0
    # No model named: each problem goes to the bundled model for its task and size, answers in input order.
    routes = [bundled_route(p) for p in args.problems]
    lines: list[str | None] = [None] * len(routes)
    for name in dict.fromkeys(r[0] for r in routes):
        chosen = [i for i, r in enumerate(routes) if r[0] == name]
        answered = answer_lines(argparse.Namespace(**{**vars(args), "model": name}), [args.problems[i] for i in chosen],
                                routed=True)
        for i, line in zip(chosen, answered, strict=True):
            lines[i] = line
        beyond = sum(not routes[i][1] for i in chosen)
        if beyond:  # no bundled model holds them: said, whichever model it is
            print(f"{PROG}: answered by {name}, the bundled model they pass by least, though none holds them: "
                  f"{beyond} problem(s)", file=sys.stderr)
        if len(chosen) > beyond and name not in DEFAULT_MODELS.values():  # said where a problem left its task's default
            print(f"{PROG}: answered by {name}, which holds them: {len(chosen) - beyond} problem(s)", file=sys.stderr)
    print("\n".join(lines))
    return 0


def answer_lines(args, problems: list[str], routed: bool = False) -> list[str]:
    """The printed answer of each problem by args.model ('PROBLEM = ANSWER', with its notes). `routed`: the
    model was chosen as the closest bundled fit for these problems, so a note names no other."""
    from ..data.formatting import parse_problems
    from ..runtime.limits import BeyondTrainingWarning, model_limits
    from ..runtime.loading import checkpoint_folder
    from ..runtime.solving import solve

    model, tokenizer = load(args)
    limits = model_limits(model, tokenizer, checkpoint_folder(model))
    try:
        parsed = parse_problems(problems, tokenizer.arith_format)
    except FormatError as err:  # a problem in another syntax: show the model's own
        # Problems in the model's syntax refused for their size: name a bundled model that holds them all.
        sizes = [s for s in (problem_size(tokenizer.arith_format, p) for p in problems) if s]
        other = other_model_note(model, tokenizer.arith_format, max(s[0] for s in sizes),
                                 max(s[1] for s in sizes)) if sizes else ""
        raise FormatError(f"{err}{other}; this model takes {format_help(limits)} ('hf-arith models' lists every "
                          "bundled model's format)") from None
    with warnings.catch_warnings():  # solve's warning, said here per problem instead
        warnings.simplefilter("ignore", BeyondTrainingWarning)
        answers = solve(model, tokenizer, problems, tokens_per_step=args.tokens_per_step,
                        return_confidence=True, confirm=not args.raw_heads, views=args.views)
    # Operand lengths in the model's base, leading zeros not counted.
    beyond = limits.beyond_training_notes(parsed)
    lines = []
    for i, (problem, (answer, confidence), flagged) in enumerate(zip(problems, answers, beyond, strict=True)):
        shown = problem.strip().replace(" ", "")
        # A number longer than any the model was trained on is answered, but flagged: beyond its
        # training lengths the model's own length grid, not this answer, says how far to trust it.
        # Where another bundled model holds the problem, the note names it.
        lengths = parsed.lengths[i]
        other = "" if routed else other_model_note(model, tokenizer.arith_format, int(lengths.max()),
                                                   int((lengths > 0).sum()))
        notes = [flagged + other] if flagged else []
        # An unsure token is where a wrong answer usually shows: the lowest token probability is marked.
        if answer is not None and confidence < args.min_confidence:
            notes.append(f"low confidence: {100 * confidence:.1f} %, below {100 * args.min_confidence:g} %")
        mark = " ?" if answer is not None and confidence < args.min_confidence else ""
        note = f"  ({'; '.join(notes)})" if notes else ""
        lines.append(f"{shown} = {MALFORMED if answer is None else answer}{mark}{note}")
    return lines


def other_model_note(model, fmt, digits: int, items: int) -> str:
    """'; bundled abacus-gpt2-sort-10 holds it: --model abacus-gpt2-sort-10' for a problem (its longest
    operand's `digits`, its operand count `items`, which only a list task weighs) that another bundled model holds
    (`loading.other_bundled_model`); '' where none does."""
    from ..runtime.loading import other_bundled_model

    other = other_bundled_model(model, fmt, digits, items)
    return f"; bundled {other} holds it: --model {other}" if other else ""


def problem_size(fmt, problem: str) -> tuple[int, int] | None:
    """(its longest operand's digits in the model's base, its number of operands) of a problem written in the
    model's syntax, however long (a list task's list, however many items); None for a problem in another syntax."""
    import dataclasses

    import numpy as np

    task = fmt.task_rules
    any_size = dataclasses.replace(fmt, max_items=len(SORT_LABELS)) if task.item_list else fmt
    try:
        operands = task.parse(problem.strip(), any_size)
    except FormatError:
        return None
    if fmt.base == 10:  # parsed operands are decimal, without leading zeros
        digits = max(len(v) for v in operands)
    elif max(len(v) for v in operands) <= 1000:  # typed in decimal: count them in the model's base
        digits = max(len(np.base_repr(int(v), fmt.base)) for v in operands)
    else:
        return None
    return digits, len(operands)


# -- models ---------------------------------------------------------------------------------
def cmd_models(args) -> int:
    from ..bundled import bundled_models, bundled_path, catalogue_entry
    from ..data.errors import one_line
    from ..families import family_of
    from ..runtime.limits import model_limits
    from ..runtime.loading import CheckpointError, load_checkpoint

    set_threads(args, default=1)
    names = bundled_models()
    if not names:
        print("No bundled models in this installation.")
        return 0
    rows, uses, formats = [], [""], []
    for name in names:
        entry = catalogue_entry(name)
        uses.append(f"  use it for: {entry['use_for']}")
        try:
            model, tokenizer = load_checkpoint(name)
        except CheckpointError as err:
            rows.append((name, f"unreadable: {one_line(err)}", "-", "-", "-", "-", "-", bundled_path(name)))
            continue
        limits = model_limits(model, tokenizer, bundled_path(name))
        rows.append((name, describe_format(tokenizer.arith_format), family_of(model), f"{model.num_parameters():,}",
                     entry["trained"], measured_cell(limits), f"1-{limits.max_digits:,} digits", bundled_path(name)))
        formats.append((name, format_help(limits)))
    header = ("name", "task", "family", "unique params", "trained", f"measured >= {measured_percent()} %",
              "accepts (hard limit)", "path")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(7)]
    for r, use in zip([header, *rows], uses):
        print("  ".join(f"{v:>{w}}" if i == 3 else f"{v:<{w}}" for i, (v, w) in enumerate(zip(r, widths))) + f"  {r[7]}")
        if use:
            print(use)
    if formats:
        print()
        print(f"Problem formats ({SHELL_NOTE}):")
        for name, text in formats:
            print(f"  {name:<{widths[0]}}  {text}")
    return 0
