"""Sorting with ties: a sort model on held-out ordinary, tie-heavy and near-tie lists (issue 57).

Usage: python bench/sort_ties.py [MODEL ...] [--random N] [--hard N] [--items MIN:MAX] [--digits MIN:MAX]
                                 [--seed S] [--threads T] [--views N ...] [--note TEXT] [--out FILE]

MODEL is a bundled name or a checkpoint folder, or LABEL=MODEL to name it in the record (default:
abacus-gpt2-sort). Sets, all from the test split, lists of --items items (default 2-5) of --digits
digits (default: the trained range):
- random: `held_out_problems`, ordinary lists (default 2,000);
- tie_heavy: lists with repeated values, the sort task's kind "tie_heavy" (default 1,000);
- near_ties: lists whose values differ in one digit, kind "near_ties" (default 1,000);
- reported: the sort task's `reported_failures`, lists a bundled model once answered wrong.
With --views, each model is measured at each of those view counts (`solve(..., views=N)`), else at
its own default (`config.answer_views`); each record says which.
Each answer comes from `solve(..., return_confidence=True)`; a wrong answer is listed with its
confidence and counted as silent when that confidence is at or above `LOW_CONFIDENCE`.
Results: bench/results/abacus-gpt2-sort-ties.json (and .md), one entry per model.
"""

from __future__ import annotations

import torch
from common import hard_heldout, run_set, script_parser
from machine import RESULTS, load_average, markdown_table, write_results

from hf_arith.data.problems import held_out_problems
from hf_arith.evaluation.stress import references
from hf_arith.runtime.limits import model_limits, problem_spec
from hf_arith.runtime.loading import checkpoint_folder, load_checkpoint
from hf_arith.runtime.solving import LOW_CONFIDENCE

KINDS = {"tie_heavy": "tie-heavy lists", "near_ties": "near-tie lists"}
SETS = ("random", *KINDS, "reported")


def measure(model_name: str, n_random: int, n_hard: int, seed: int, items: tuple[int, int],
            digits: tuple[int, int] | None, views: int | None = None) -> dict:
    model, tok = load_checkpoint(model_name)
    limits = model_limits(model, tok, checkpoint_folder(model))
    low, high = digits or limits.training_range or (1, limits.max_digits)
    spec = problem_spec(tok.arith_format, low, high, items=items)
    random_set = held_out_problems(spec, n_random, seed=seed)
    sets = {"random": (random_set.to_text(), random_set.answer_text())}
    for offset, kind in enumerate(KINDS, start=1):
        sets[kind] = hard_heldout(spec, kind, n_hard, seed + offset)
    reported = list(tok.arith_format.task_rules.reported_failures)
    sets["reported"] = (reported, references(reported, tok.arith_format))
    record = {"model": model_name, "operand_digits": [low, high], "items": list(items),
              "answer_views": limits.check_views(views)}
    for key, (texts, answers) in sets.items():
        record[key] = run_set(model, tok, texts, answers, f"{model_name} {key}", views=views)
    return record


def _span(text: str) -> tuple[int, int]:
    low, _, high = text.partition(":")
    return int(low), int(high or low)


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("models", nargs="*", default=["abacus-gpt2-sort"])
    parser.add_argument("--random", type=int, default=2000, help="ordinary held-out lists (default 2,000)")
    parser.add_argument("--hard", type=int, default=1000, help="lists of each tie kind (default 1,000)")
    parser.add_argument("--seed", type=int, default=57)
    parser.add_argument("--items", default="2:5", help="items per list, MIN:MAX (default 2:5)")
    parser.add_argument("--digits", default=None, help="digits per item, MIN:MAX (default: the trained range)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--views", type=int, nargs="+", default=None,
                        help="view counts to measure each model at (default: each model's config.answer_views)")
    parser.add_argument("--note", default=None, help="a line recorded with the figures (how a candidate was trained)")
    parser.add_argument("--out", default=str(RESULTS / "abacus-gpt2-sort-ties.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = load_average()
    records = {}
    for entry in args.models:
        label, _, name = entry.rpartition("=")
        for views in args.views or [None]:
            shown = (label or name) + (f" ({views} view{'s' if views > 1 else ''})" if args.views else "")
            records[shown] = measure(name, args.random, args.hard, args.seed, _span(args.items),
                                     _span(args.digits) if args.digits else None, views)
    rows = [(label, key, f"{r[key]['n']:,}", f"{100 * (1 - r[key]['wrong'] / r[key]['n']):.2f} %", r[key]["wrong"],
             r[key]["silent_wrong"]) for label, r in records.items() for key in SETS]
    write_results(args.out, {"seed": args.seed, "threads": args.threads, "confidence_threshold": LOW_CONFIDENCE,
                             **({"note": args.note} if args.note else {}), "models": records}, load_before=load_before, title="Sorting with ties",
                  what=f"held-out lists of {args.items.replace(':', '-')} items of "
                       f"{args.digits.replace(':', '-') if args.digits else 'the trained range of'} digits: ordinary (random), "
                       "tie-heavy (repeated values) and near-tie (values differing in one digit); exact match, "
                       f"wrong answers, and wrong answers at confidence >= {LOW_CONFIDENCE} (silent)",
                  table=markdown_table(["model", "set", "lists", "exact match", "wrong", "silent wrong"], "llrrrr",
                                       rows))
    for label, r in records.items():
        for key in SETS:
            print(f"{label} {key}: {r[key]['wrong']} wrong of {r[key]['n']:,} ({r[key]['silent_wrong']} silent)")
    return records


if __name__ == "__main__":
    main()
