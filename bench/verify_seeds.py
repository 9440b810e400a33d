"""The tiny-adder protocol on several seeds: does a model's score hold beyond AdderBoard's seed 2025?

    python bench/verify_seeds.py minimal-add10-split-wide-arc
    python bench/verify_seeds.py runs/minimal-add10/final --seeds 2025 0 1 2 3 4

Each seed is the protocol as `hf-arith verify --seed S` runs it: the 10 edge cases plus 10,000
pairs from random.Random(S). Writes bench/results/verify_seeds_<model>.json and .md.
"""

from __future__ import annotations

import torch
from common import script_parser
from machine import RESULTS, load_average, markdown_table, write_results

from hf_arith.evaluation.held_out import verify_tiny_adder
from hf_arith.runtime.loading import checkpoint_label, load_checkpoint

DEFAULT_SEEDS = [2025, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("model", help="bundled name or checkpoint folder")
    parser.add_argument("--seeds", type=int, nargs="+", default=DEFAULT_SEEDS,
                        help=f"protocol seeds (default: {' '.join(map(str, DEFAULT_SEEDS))})")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if any(not 0 <= s < 2**32 for s in args.seeds):
        parser.error("--seeds: each seed must be in 0 to 2^32 - 1")

    torch.set_num_threads(args.threads)
    load_before = load_average()
    model, tokenizer = load_checkpoint(args.model)
    runs = [verify_tiny_adder(model, tokenizer, seed=s) for s in args.seeds]
    correct, total = sum(r["correct"] for r in runs), sum(r["total"] for r in runs)
    worst = min(runs, key=lambda r: r["accuracy"])
    label = checkpoint_label(args.model)
    table = [f"{label}: {correct:,} of {total:,} correct over {len(runs)} seeds; the lowest, seed "
             f"{worst['seed']}, {100 * worst['accuracy']:.2f} %.", "",
             *markdown_table(["seed", "accuracy", "correct", "edge cases"], "rrrr",
                             [(r["seed"], f"{100 * r['accuracy']:.2f} %", f"{r['correct']:,} of {r['total']:,}",
                               f"{r['edge_cases_correct']} of 10") for r in runs])]
    record = {"model": args.model, "unique_params": runs[0]["unique_params"], "seeds": args.seeds,
              "correct": correct, "total": total, "accuracy": correct / total,
              "lowest_seed": worst["seed"], "lowest_accuracy": worst["accuracy"],
              "runs": [{k: r[k] for k in ("seed", "accuracy", "correct", "total", "edge_cases_correct")}
                       for r in runs]}
    result = write_results(RESULTS / f"verify_seeds_{label}.json", record,
                           what="the tiny-adder protocol (10 edge cases + 10,000 random pairs) on each seed",
                           load_before=load_before, title=f"{label} on the tiny-adder protocol, seed by seed",
                           table=table)
    print("\n".join(table))
    return result


if __name__ == "__main__":
    main()
