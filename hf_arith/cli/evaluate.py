"""`hf-arith eval` (held-out score, length grid, loops curve, stress sets), `attention` and `summary`."""

from __future__ import annotations

import json
from pathlib import Path

from ..data.errors import CLIError
from ..data.formatting import quote
from ..records import write_atomic, write_json
from .common import (
    LOW_CONFIDENCE,
    MAX_SAMPLES,
    MAX_SAMPLES_PER_CELL,
    MODEL_HELP,
    PROG,
    describe_format,
    int_in,
    integer,
    item_range,
    length_list,
    length_range,
    load,
    loop_counts,
    pct,
    positive_int,
    seed,
    set_threads,
    take_negative_problems,
    writable_dir,
)

DEFAULT_SAMPLES = 2000
DEFAULT_SAMPLES_PER_CELL = {"grid": 100, "lengths": 20}  # a sparse grid's cells are few and its lengths long
PRINTED_CELLS = 64  # a sparse grid prints each cell's score up to this many cells


def add_parsers(sub, parents) -> None:
    common, source, runtime = parents["common"], parents["source"], parents["runtime"]
    p = sub.add_parser("eval", parents=[common, source, runtime],
                       help="held-out exact match, overall and per operand length; or the length grid (a range or "
                            "a list of lengths), loops curve and stress sets",
                       description="Without --grid, --lengths, --loops or --stress: the held-out evaluation. With them: "
                                   "only those, unless --heldout (or --json) asks for the held-out evaluation too.")
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    p.add_argument("--samples", type=int_in(1, MAX_SAMPLES), default=DEFAULT_SAMPLES, metavar="N",
                   help=f"held-out problems (also the --loops problems without --grid), at most {MAX_SAMPLES:,} "
                        f"(default: {DEFAULT_SAMPLES})")
    p.add_argument("--min-digits", type=integer, metavar="A", help="shortest operands (default: 1)")
    p.add_argument("--max-digits", type=integer, metavar="B",
                   help="longest operands (default: the longest the model was trained on where its checkpoint says, "
                        "else its operand width or the longest its context holds)")
    p.add_argument("--seed", type=seed, default=1234, metavar="S", help="sampling seed (default: 1234)")
    p.add_argument("--items", type=item_range, metavar="A:B",
                   help="sorting models: lists of A to B items (default: the sizes the model was trained on where "
                        "its checkpoint says, else 2 to 5, or the format's max_items if fewer; the rows of --grid)")
    p.add_argument("--views", type=positive_int, metavar="N",
                   help="held-out evaluation and grid: answer N views of each problem (a sort list relabelled) and "
                        "score the answer most of them give (default: the model's config.answer_views)")
    p.add_argument("--json", metavar="PATH", help="also write the held-out report as JSON")
    p.add_argument("--heldout", action="store_true",
                   help="with --grid, --loops or --stress: run the held-out evaluation too (without them it always runs)")
    p.add_argument("--grid", type=length_range, metavar="A:B",
                   help="length-generalization grid: every (len_a, len_b) with A <= len <= B digits, or for sorting "
                        "every (items, digits) with lists of --items numbers (default: every size the format writes) "
                        "of A to B digits (JSON + PNG)")
    p.add_argument("--lengths", type=length_list, metavar="L1,L2,...",
                   help="sparse length grid: every pair (len_a, len_b) of these operand lengths, or with --diagonal "
                        "only equal ones, e.g. 1,10,100,1000 or 100:1000:100 (A:B:STEP); for sorting, lists of "
                        "--items numbers of these lengths. Writes lengths.json (with the run's machine, command and "
                        "peak memory), lengths_problems.jsonl and lengths.png")
    p.add_argument("--diagonal", action="store_true",
                   help="with --lengths: only the cells whose two operands have the same length")
    p.add_argument("--samples-per-cell", type=int_in(1, MAX_SAMPLES_PER_CELL), metavar="N",
                   help=f"problems per grid cell, at most {MAX_SAMPLES_PER_CELL:,} (default: "
                        f"{DEFAULT_SAMPLES_PER_CELL['grid']} with --grid, {DEFAULT_SAMPLES_PER_CELL['lengths']} with "
                        "--lengths)")
    p.add_argument("--train-range", type=length_range, metavar="A:B",
                   help="operand lengths the model was trained on, outlined in the grid (default: from the checkpoint)")
    p.add_argument("--loops", type=loop_counts, metavar="1,2,4,...",
                   help="looped models: exact match for each number of recurrences (JSON + PNG)")
    p.add_argument("--stress", action="store_true",
                   help="commutativity, carry-chain, zero-operand and max-length stress sets (JSON)")
    p.add_argument("--output-dir", metavar="DIR",
                   help="where --grid/--loops/--stress write their files (default: runs/eval/<model name>)")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("attention", parents=[common, source, runtime],
                       help="attention maps of every layer and head for one problem (PNG)")
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    p.add_argument("problem", metavar="PROBLEM", help="a problem such as 101+1002")
    p.add_argument("--output", default="attention.png", metavar="PATH", help="the PNG to write (default: attention.png)")
    p.set_defaults(func=cmd_attention)
    take_negative_problems(p)

    p = sub.add_parser("summary", parents=[common, source, runtime],
                       help="parameters per module and multiply-adds per generated token")
    p.add_argument("model", metavar="MODEL", help=MODEL_HELP)
    p.add_argument("--problem", metavar="PROBLEM", help="problem to measure compute on (default: the longest one)")
    p.add_argument("--json", metavar="PATH", help="also write the summary as JSON")
    p.set_defaults(func=cmd_summary)


# -- eval -----------------------------------------------------------------------------------
def print_report(report: dict) -> None:
    counts = {int(k): v for k, v in (report.get("count_by_max_operand_length") or {}).items()}
    print(f"Held-out exact match: {pct(report['exact_match'])} of {report['n']} problems "
          f"(malformed answers: {pct(report['malformed'])})")
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
            row = f"  {int(digits):>18}   {pct(acc):>11}"
            if counts:
                row += f"   {counts.get(int(digits), 0):>8}"
            print(row)


def cmd_eval(args) -> int:
    from ..evaluation.grid import grid_axes
    from ..evaluation.held_out import evaluate_model
    from ..runtime.decoding import default_threads
    from ..runtime.limits import model_limits, problem_spec
    from ..runtime.loading import checkpoint_folder, checkpoint_label, weights_fingerprint

    if args.json:
        target = Path(args.json)
        if target.is_dir():
            raise CLIError(f"--json {args.json}: is a folder, not a file")
        if not target.parent.is_dir():
            raise CLIError(f"--json {args.json}: folder {str(target.parent)!r} does not exist")
    if args.grid and args.lengths:
        raise CLIError("--grid and --lengths: give one, a range of lengths or a list of them")
    if args.diagonal and not args.lengths:
        raise CLIError("--diagonal: only with --lengths (the cells whose two operands have the same length)")
    extras = args.grid or args.lengths or args.loops or args.stress
    heldout = not extras or args.heldout or bool(args.json)
    if args.views is not None and not (heldout or args.grid or args.lengths):
        raise CLIError("--views: the held-out evaluation and the grid vote over views, --loops and --stress answer "
                       "one; add --heldout")
    default_dir = str(Path("runs") / "eval" / (checkpoint_label(args.model) or "model"))
    out_dir = writable_dir(args.output_dir or default_dir, "--output-dir") if extras else None
    model, tokenizer = load(args)
    set_threads(args, default=default_threads(model))
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
    if args.grid or args.lengths:  # a sorting model's grid rows are --items, when given (else every list size it writes)
        grid_axes(fmt, limits, args.grid, args.lengths, args.items if fmt.task_rules.item_list else None, args.diagonal)
    if args.items:  # the held-out lists at their longest; a grid's lists were checked at their own lengths above
        limits.check_items(args.items, max_digits if heldout else 1)
    views = limits.check_views(args.views)
    # As with lengths, held-out lists default to the sizes the model was trained on, where known.
    items = args.items or (limits.training_items if fmt.task_rules.item_list else None)
    spec = problem_spec(fmt, min_digits, max_digits, items)
    report = None
    if heldout:
        report = evaluate_model(model, tokenizer, spec, n=args.samples, seed=args.seed, limits=limits, progress=True,
                                views=views)
        lists = f"lists of {spec.min_items}-{spec.max_items} items, " if fmt.task_rules.item_list else ""
        print(f"{args.model}: {describe_format(fmt)}; {lists}operands of {min_digits}-{max_digits} digits, "
              f"seed {args.seed}")
        print_report(report)
        print(f"({report['seconds']:.2f} s)")
    if args.json:
        # What the report was made on, so that `push --eval-json` can refuse it for another model.
        data = {"model": str(args.model), "task": fmt.task, "base": fmt.base, "min_digits": min_digits,
                "max_digits": max_digits, "seed": args.seed,
                **({"items": [spec.min_items, spec.max_items]} if fmt.task_rules.item_list else {}),
                "number_format_fingerprint": fmt.fingerprint(),
                "weights_fingerprint": weights_fingerprint(checkpoint_folder(model)), **report,
                "by_max_operand_length": {str(k): v for k, v in report.get("by_max_operand_length", {}).items()},
                **_eval_record(args, min_digits, max_digits)}
        write_json(args.json, data)
        print(f"Report written to {args.json}")
    if extras:
        _eval_extras(args, model, tokenizer, limits, report, max_digits, spec, out_dir)
    return 0


def _eval_record(args, min_digits: int, max_digits: int) -> dict:
    """What the held-out report needs to be reproduced and compared (`_run_record`)."""
    options = ["--samples", str(args.samples), "--min-digits", str(min_digits), "--max-digits", str(max_digits),
               "--seed", str(args.seed), "--json", str(args.json)]
    if getattr(args, "items", None):
        options += ["--items", f"{args.items[0]}:{args.items[1]}"]
    if getattr(args, "views", None):
        options += ["--views", str(args.views)]
    return _run_record(args, options)


def _run_record(args, options: list[str]) -> dict:
    """What a result needs to be reproduced and compared: the command that remakes it (`options`, every
    one that sets its numbers spelled out, then where the model came from and what it ran on), the
    machine, the library versions and the date."""
    import shlex
    import time

    from ..records import library_versions
    from ..runtime.hardware import machine_info

    command = [PROG, "eval", str(args.model), *options]
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
def _eval_extras(args, model, tokenizer, limits, report, max_digits, spec, out_dir: Path) -> None:
    """--grid or --lengths, --loops and --stress: JSON and PNG files in out_dir, plus summary.json for the
    model card (with the held-out scores when they were measured)."""
    from ..data.problems import held_out_problems
    from ..evaluation.held_out import loops_curve
    from ..evaluation.plots import plot_loops, save_figure  # matplotlib only when pictures are drawn
    from ..evaluation.stress import stress_test

    fmt = tokenizer.arith_format
    train = args.train_range or limits.training_range
    summary = {"model": str(args.model), "task": fmt.task, "base": fmt.base, "unique_params": model.num_parameters(),
               "train_range": list(train) if train else None}
    if report is not None:
        summary["heldout"] = {k: report[k] for k in ("exact_match", "per_digit_accuracy", "malformed", "n")}
    written = []
    grid_set = None
    if args.grid or args.lengths:
        name = "grid" if args.grid else "lengths"
        result, grid_set, files = _run_grid(args, model, tokenizer, limits, train, out_dir, report is not None)
        written += files
        summary[name] = {"lengths": result["lengths"], **({"items": result["items"]} if "items" in result else {}),
                         **result["summary"]}
    if args.loops:
        if grid_set is None:
            held = held_out_problems(spec, args.samples, args.seed)
            grid_set = (held.to_text(), held.answer_text(), None)
        curve = loops_curve(model, tokenizer, grid_set[0], grid_set[1], args.loops, inside=grid_set[2],
                            limits=limits)
        curve["problems"] = (f"the {' '.join(_grid_options(args, out_dir)[:2])} problems" if args.grid or args.lengths
                             else "held-out sample")
        written += [write_json(out_dir / "loops.json", curve), save_figure(plot_loops(curve), out_dir / "loops.png")]
        summary["loops"] = curve
        print("recurrences   exact match")
        for n, acc in zip(curve["loops"], curve["exact_match"]):
            print(f"  {n:>9}   {pct(acc):>11}")
    if args.stress:
        stress = stress_test(model, tokenizer, max_digits, seed=args.seed, limits=limits)
        written.append(write_json(out_dir / "stress.json", stress))
        summary["stress"] = {name: r["exact_match"] for name, r in stress.items()}
        if "commutativity" in stress:
            summary["stress"]["commutativity_agreement"] = stress["commutativity"]["agreement"]
        print(f"stress set            exact match   problems   wrong at >= {100 * LOW_CONFIDENCE:g} % confidence")
        for name, r in stress.items():
            extra = f"   (a+b = b+a: {pct(r['agreement'])})" if "agreement" in r else ""
            print(f"  {name:<20}{pct(r['exact_match']):>11}   {r['n']:>8}   {r['silent_wrong']:>8}{extra}")
    written.append(write_json(out_dir / "summary.json", summary))
    print(f"Wrote {', '.join(p.name for p in written)} to {out_dir}")


def _samples_per_cell(args) -> int:
    return args.samples_per_cell or DEFAULT_SAMPLES_PER_CELL["grid" if args.grid else "lengths"]


def _grid_options(args, out_dir: Path) -> list[str]:
    """The options that set a --grid or --lengths run's numbers, as its record's command spells them."""
    if args.grid:
        options = ["--grid", f"{args.grid[0]}:{args.grid[1]}"]
    else:
        options = ["--lengths", ",".join(map(str, args.lengths)), *(["--diagonal"] if args.diagonal else [])]
    options += ["--samples-per-cell", str(_samples_per_cell(args)), "--seed", str(args.seed)]
    for option, value in (("--items", args.items), ("--train-range", args.train_range)):
        if value:
            options += [option, f"{value[0]}:{value[1]}"]
    if args.views:
        options += ["--views", str(args.views)]
    return options + ["--output-dir", str(out_dir)]


def _run_grid(args, model, tokenizer, limits, train, out_dir: Path, heldout: bool):
    """--grid or --lengths: NAME.json (the result with its machine, command and the process's peak
    memory), NAME_problems.jsonl and NAME.png in out_dir, NAME being grid or lengths. Returns the
    result, its problems for --loops (texts, answers, inside the trained range) and the files."""
    from ..evaluation.grid import length_grid
    from ..evaluation.plots import plot_grid, save_figure
    from ..records import peak_memory

    name = "grid" if args.grid else "lengths"
    sort = tokenizer.arith_format.task_rules.item_list
    result = length_grid(model, tokenizer, args.grid, _samples_per_cell(args), seed=args.seed, train_range=train,
                         progress=True, keep_problems=True, items=args.items if sort else None,
                         train_items=limits.training_items, limits=limits, length_list=args.lengths,
                         diagonal=args.diagonal, views=args.views)
    problems = result.pop("problems")
    grid_set = ([p["problem"] for p in problems], [p["answer"] for p in problems],
                [_in_training_range(p, train, result.get("train_items")) for p in problems])
    # The held-out evaluation ran in this process first, so the peak memory covers it too.
    options = _grid_options(args, out_dir) + (["--heldout", "--samples", str(args.samples)] if heldout else [])
    result.update(model=str(args.model), **_run_record(args, options), **peak_memory())
    files = [write_json(out_dir / f"{name}.json", result)]
    write_atomic(out_dir / f"{name}_problems.jsonl", "".join(json.dumps(p) + "\n" for p in problems))
    files += [out_dir / f"{name}_problems.jsonl", save_figure(plot_grid(result), out_dir / f"{name}.png")]
    _print_grid(result)
    return result, grid_set, files


def _in_training_range(problem: dict, train, train_items=None) -> bool:
    """Whether a grid problem lies in the trained range: both operand lengths, or for a sorting
    list its size (in `train_items`) and its numbers' digits."""
    if "items" in problem:
        return (train is not None and train_items is not None and train_items[0] <= problem["items"] <= train_items[1]
                and train[0] <= problem["digits"] <= train[1])
    return train is not None and all(train[0] <= problem[k] <= train[1] for k in ("len_a", "len_b"))


def _print_grid(result: dict) -> None:
    s = result["summary"]
    lengths = (", ".join(map(str, result["lengths"])) if result.get("sparse")
               else f"{result['lengths'][0]}-{result['lengths'][1]}")
    if result.get("items"):
        cells = f"Grid of lists of {result['items'][0]}-{result['items'][1]} numbers x {lengths} digits each"
    elif result.get("sparse"):
        cells = f"Length grid at {lengths} digits ({'equal lengths only' if result['diagonal'] else 'every pair'})"
    else:
        cells = f"Length grid {lengths} x {lengths} digits"
    if result.get("views", 1) > 1:
        cells += f", each answer the vote of {result['views']} views"
    print(f"{cells}, {result['samples_per_cell']} problems per cell: "
          f"{pct(s['exact_match'])} exact match, {pct(s['per_digit_accuracy'])} of digits, "
          f"mean answer perplexity {s['mean_perplexity']:.3f} ({s['seconds']:.1f} s)")
    if result.get("sparse") and len(result["cells"]) <= PRINTED_CELLS:
        names = result["axes"]
        for cell in result["cells"]:
            print(f"  {cell[names[0]]:>6} x {cell[names[1]]:<6} {pct(cell['exact_match']):>8} of {cell['n']}")
    for key, label in (("in_training_range_exact_match", "inside the training range"),
                       ("beyond_training_range_exact_match", "beyond the training range")):
        if s.get(key) is not None:
            print(f"  {label}: {pct(s[key])}")
    if result.get("peak_resident_memory_mib") is not None:
        print(f"  peak resident memory of this process: {result['peak_resident_memory_mib']:,.0f} MiB")


# -- attention and summary ------------------------------------------------------------------
def cmd_attention(args) -> int:
    from ..evaluation.attention_maps import attention_maps, map_labels, plot_attention
    from ..evaluation.plots import save_figure
    from ..runtime.limits import model_limits

    target = Path(args.output)
    writable_dir(str(target.parent), "--output")
    set_threads(args, default=1)
    model, tokenizer = load(args)
    model_limits(model, tokenizer).check_problems([args.problem])
    tokens, maps = attention_maps(model, tokenizer, args.problem)
    save_figure(plot_attention(tokens, maps, map_labels(model, len(maps))), target)
    print(f"{args.problem.strip()} in the model's format: {' '.join(tokens)}")
    layers = getattr(model.config, "num_hidden_layers", None) or len(maps)
    passes = f" in {len(maps) // layers} passes" if len(maps) > layers else ""
    print(f"Attention maps ({layers} layer(s){passes} x {maps[0].shape[0]} head(s)) written to {target}")
    return 0


def cmd_summary(args) -> int:
    from ..evaluation.model_summary import format_summary, model_summary
    from ..runtime.limits import model_limits

    if args.json and not Path(args.json).parent.is_dir():
        raise CLIError(f"--json {args.json}: folder {str(Path(args.json).parent)!r} does not exist")
    set_threads(args, default=1)
    model, tokenizer = load(args)
    fmt = tokenizer.arith_format
    limits = model_limits(model, tokenizer)
    problem = args.problem or limits.longest_problem()
    limits.check_problems([problem])
    summary = model_summary(model, tokenizer, problem)
    print(f"{args.model}: {type(model).__name__}, {describe_format(fmt)}")
    print(format_summary(summary))
    if args.json:
        write_json(args.json, summary)
        print(f"Summary written to {args.json}")
    return 0
