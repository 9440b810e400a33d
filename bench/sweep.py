"""Reliability sweep: many held-out problems inside each model's trained range, every wrong answer listed.

Usage: python bench/sweep.py [MODEL ...] [--random N] [--hard N] [--seed S] [--threads T] [--device D]
                             [--digits A:B] [--items A:B]

Sets per model, all from the test split (problems training never draws) and inside the operand
lengths (and, for sorting, the list sizes) the checkpoint was trained on, or inside the smaller box
--digits and --items name (a model trained on a larger box checked where an older model was):
- random: `held_out_problems` with operand lengths uniform in the trained range;
- repeated digits: operands written with one or two distinct digits, and (addition,
  subtraction) carry chains: every column of a span carries or borrows (`problems.sample` with
  kind "repeated" and "chains"), where random sampling almost never goes; for sorting, tie-heavy
  lists (repeated values) and near-tie lists (values differing in one digit), kinds "tie_heavy"
  and "near_ties" of the sort task.
Each answer comes from `solve(..., return_confidence=True)`, at one token per forward pass and, for a
multi-token model, again at all its heads (`tokens_per_step`); a wrong answer is listed with its
confidence, and counted as silent when that confidence is at or above `LOW_CONFIDENCE` (the CLI
marks answers below it). Default sizes: 1,000,000 random problems for minimal-add10 and 200,000
for every other model, plus 20,000 of each hard kind (issue 20's targets). Results:
bench/results/sweep_<model>.json (a smaller box than the trained range: sweep_<model>-<box>.json, for
example sweep_abacus-gpt2-mul-10-1to5digits.json), and bench/results/sweep.md: a table of every such file
there, each row dated (the command of each row is in its own file).
"""

from __future__ import annotations

import json

import torch
from common import hard_heldout, run_set, script_parser
from machine import RESULTS, load_average, markdown_table, write_results

from hf_arith.cli.common import item_range, length_range
from hf_arith.data.formatting import get_task
from hf_arith.data.problems import held_out_problems
from hf_arith.runtime.limits import max_tokens_per_step, model_limits, problem_spec
from hf_arith.runtime.loading import checkpoint_folder, checkpoint_label, load_checkpoint
from hf_arith.runtime.solving import LOW_CONFIDENCE

# record key -> problems.sample kind; each set is swept for the tasks whose hard_kinds have it.
HARD_SETS = {"repeated_digits": "repeated", "carry_chains": "chains", "tie_heavy": "tie_heavy", "near_ties": "near_ties"}
SET_NAMES = {"random": "random", "repeated_digits": "repeated digits", "carry_chains": "carry chains",
             "tie_heavy": "tie-heavy lists", "near_ties": "near-tie lists"}


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("models", nargs="*", default=["minimal-add10", "abacus-gpt2-add",
                                                       "abacus-gpt2-add-window-10-k2", "looped-add-window"])
    parser.add_argument("--random", type=int, default=None, help="random problems (default 1,000,000 for "
                        "minimal-add10, 200,000 otherwise)")
    parser.add_argument("--hard", type=int, default=20_000, help="problems of each hard kind (default 20,000)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default=None, help="where the models run, e.g. cuda (default: CPU)")
    parser.add_argument("--digits", type=length_range, default=None,
                        help="operand lengths A:B (default: the trained range)")
    parser.add_argument("--items", type=item_range, default=None,
                        help="sorting: list sizes A:B (default: the sizes the model was trained on)")
    parser.add_argument("--table-only", action="store_true", help="only rebuild sweep.md from the sweep_*.json files")
    args = parser.parse_args(argv)
    if args.table_only:
        write_table()
        return {"records": []}
    torch.set_num_threads(args.threads)

    records = []
    for name in args.models:
        model, tok = load_checkpoint(name, device=args.device)
        limits = model_limits(model, tok, checkpoint_folder(model))
        trained = limits.training_range or (1, limits.max_digits)
        low, high = args.digits or trained
        listed = get_task(tok.arith_format.task).item_list
        if args.items and not listed:
            parser.error(f"--items: {name} does not sort lists")
        items = (args.items or limits.training_items) if listed else None
        n_random = args.random or (1_000_000 if name == "minimal-add10" else 200_000)
        load_before = load_average()
        spec = problem_spec(tok.arith_format, low, high, items=items)
        random_set = held_out_problems(spec, n_random, seed=args.seed)
        sets = {"random": (random_set.to_text(), random_set.answer_text())}
        for offset, (key, kind) in enumerate(HARD_SETS.items(), start=1):
            if kind in get_task(spec.task).hard_kinds:
                sets[key] = hard_heldout(spec, kind, args.hard, args.seed + offset)
        record = {"model": name, "operand_digits": [low, high], **({"items": list(items)} if items else {}),
                  "seed": args.seed, "threads": args.threads,
                  "answer_views": limits.answer_views,  # solve's default: the answer most views of a problem give
                  **({"device": str(model.device)} if args.device else {}), "confidence_threshold": LOW_CONFIDENCE}
        # Every set at one token per pass; a multi-token model's sets again at its full heads.
        for k in sorted({1, max_tokens_per_step(model)}):
            part = record if k == 1 else record.setdefault("multi_token", {"tokens_per_step": k, "confirmed": True})
            for key, (texts, answers) in sets.items():
                label = f"{name} {SET_NAMES[key]}" + (f" ({k} tokens/pass)" if k > 1 else "")
                part[key] = run_set(model, tok, texts, answers, label, tokens_per_step=k)
        out = RESULTS / f"sweep_{checkpoint_label(name)}{box_suffix(record, trained, limits.training_items)}.json"
        write_results(out, record, load_before=load_before,
                      what="wrong answers of held-out problems inside the trained range (solve, greedy)")
        records.append(record)
        for k, part_of in passes(record):
            for key in SET_NAMES:
                if key in part_of:
                    part = part_of[key]
                    print(f"{name} {key}, {k} token(s)/pass: {part['wrong']} wrong of {part['n']:,} "
                          f"({part['silent_wrong']} at confidence >= {LOW_CONFIDENCE}) in {part['seconds']} s")

    write_table()
    return {"records": records}


def write_table() -> None:
    """bench/results/sweep.md (and sweep.json): every sweep_<model>.json there, each row from its own file,
    plus the rows sweep.json already holds for models whose file has left the folder (superseded files are
    pruned, the figures they gave stay cited)."""
    # An exploration file (several models in one record, no "model" key) is not one model's sweep.
    every = [r for r in (json.loads(path.read_text()) for path in sorted(RESULTS.glob("sweep_*.json"))) if "model" in r]
    rows = [[r.get("bundled_as", r["model"]), box(r), tokens, f"{p[k]['n']:,}",
             key_name, p[k]["wrong"], p[k]["silent_wrong"], f"{p[k]['lowest_confidence_right']:.3f}", r["date"][:10]]
            for r in every for tokens, p in passes(r) for k, key_name in SET_NAMES.items() if k in p]
    swept = {row[0] for row in rows}
    table_file = RESULTS / "sweep.json"
    kept = [row for row in (json.loads(table_file.read_text()).get("rows", []) if table_file.is_file() else [])
            if row[0] not in swept]
    rows = sorted(kept + rows, key=lambda row: row[0])
    write_results(table_file, {"models": sorted({row[0] for row in rows}), "rows": rows}, title="Reliability sweep",
                  what="held-out problems inside each model's trained range; wrong answers, and how many of "
                       f"them had confidence >= {LOW_CONFIDENCE} (silent); lowest confidence of a right answer. "
                       "Rows come from bench/results/sweep_<model>.json, each with its own command and machine "
                       "(rows of a model whose file was pruned stay, with its date)",
                  table=markdown_table(["model", "digits", "tokens/pass", "problems", "set", "wrong", "silent wrong",
                                        "lowest right conf.", "date"], "llrrlrrrl", rows))


def box_suffix(record: dict, trained: tuple[int, int], trained_items: tuple[int, int] | None) -> str:
    """'' for a sweep of the model's own trained range, else its smaller box ('-1to5digits', '-1to6digits-
    2to5items'), so that sweeps of one model in two boxes are two files."""
    digits, items = tuple(record["operand_digits"]), tuple(record.get("items", ()))
    if digits == tuple(trained) and items == tuple(trained_items or ()):
        return ""
    return f"-{digits[0]}to{digits[1]}digits" + (f"-{items[0]}to{items[1]}items" if items else "")


def box(record: dict) -> str:
    """The digits column: operand lengths, and a sort sweep's list sizes where its record names them."""
    low, high = record["operand_digits"]
    return f"{low}-{high}" + (f", {record['items'][0]}-{record['items'][1]} items" if "items" in record else "")


def passes(record: dict) -> list[tuple[int, dict]]:
    """(tokens per pass, the sets measured so) of one record: one token per pass at the top level,
    a multi-token model's full heads under "multi_token" ("unconfirmed": the heads' own tokens,
    measured before `solve` confirmed them with the first head)."""
    out = [(1, record)]
    if "multi_token" in record:
        multi = record["multi_token"]
        out.append((f"{multi['tokens_per_step']}{'' if multi.get('confirmed') else ' (unconfirmed)'}", multi))
    return out


if __name__ == "__main__":
    main()
