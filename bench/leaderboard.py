"""Where a minimal-family 10-digit adder would rank on AdderBoard's trained table, and why.

    python bench/leaderboard.py                        # the bundled minimal-add10
    python bench/leaderboard.py runs/minimal-add10-tiny/final

Runs the protocol (10 edge cases + 10,000 pairs from random.Random(2025)) on the model, counts its
unique parameters as AdderBoard does, places it on the snapshot of the trained table in
hf_arith/publishing/leaderboard.py, and counts what each trick the model uses saves (the model built again
with that one trick undone). Writes bench/results/leaderboard_<model>.json and .md.
"""

from __future__ import annotations

from common import script_parser
from machine import RESULTS, load_average, markdown_table, write_results

from hf_arith.publishing.leaderboard import leaderboard_entry
from hf_arith.runtime.loading import checkpoint_label, load_checkpoint


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("model", nargs="?", default="minimal-add10", help="bundled name or checkpoint folder")
    args = parser.parse_args(argv)

    load_before = load_average()
    model, tokenizer = load_checkpoint(args.model)
    entry = leaderboard_entry(model, tokenizer)
    if entry is None:
        raise SystemExit(f"{args.model}: not a minimal-family 10-digit adder")
    label = checkpoint_label(args.model)
    rank = f"#{entry['rank']} of {entry['entries'] + 1}" if entry["rank"] else "does not qualify (below 99 %)"
    table = [f"{label}: {entry['params']} unique parameters, {100 * entry['accuracy']:.2f} % on the protocol "
             f"({entry['correct']:,} of {entry['total']:,}); on the trained table ({entry['source']}): {rank}.", "",
             *markdown_table(["trick", "parameters saved"], "lr",
                             [(s["trick"], s["saving"]) for s in entry["savings"]])]
    what = ("the AdderBoard protocol score, the unique parameter count, the rank on the trained table and "
            "each trick's parameter saving")
    result = write_results(RESULTS / f"leaderboard_{label}.json", {"model": args.model, **entry}, what=what,
                           load_before=load_before, title=f"{label} on AdderBoard", table=table)
    print("\n".join(table))
    return result


if __name__ == "__main__":
    main()
