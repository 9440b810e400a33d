"""Wall time of the length-generalization grid (`hf-arith eval MODEL --grid A:B`) for any bundled model.

Usage: python bench/eval_grid.py [MODEL] [--grid 1:30] [--samples-per-cell 100] [--seed 0] [--threads 1]
Runs `hf_arith.evaluation.grid.length_grid` end to end (drawing the held-out problems of every cell, batched
KV-cached greedy decoding through `solve`, the teacher-forced answer perplexity, scoring) and
writes bench/results/eval_grid_<model>.json (timing, seed, summary, machine, command) and the heatmap
bench/results/eval_grid_<model>.png. The grid is clipped to what the model's format can write
(a fixed-width model's grid ends at its width). Target for the 30x30 grid at 100 per cell: <= 60 s
on the project's 2-core CPU.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from machine import RESULTS, load_average, write_results

from hf_arith.evaluation.grid import length_grid, parse_length_range
from hf_arith.evaluation.plots import plot_grid, save_figure
from hf_arith.runtime.decoding import default_batch_size
from hf_arith.runtime.limits import training_range
from hf_arith.runtime.loading import load_checkpoint, resolve_checkpoint


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="minimal-add10")
    parser.add_argument("--grid", default="1:30", help="A:B operand lengths (default 1:30)")
    parser.add_argument("--samples-per-cell", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0, help="seed of the held-out problems (default 0, as hf-arith eval)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as hf-arith eval)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="rows per batch (default: hf_arith.runtime.decoding.default_batch_size of the model)")
    parser.add_argument("--out", default=None, help="JSON path (default bench/results/eval_grid_<model>.json)")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    model, tok = load_checkpoint(args.model)
    fmt = tok.arith_format
    lo, hi = parse_length_range(args.grid)
    if fmt.operand_width and hi > fmt.operand_width:
        print(f"{args.model} has {fmt.operand_width}-digit operands: grid clipped to {lo}:{fmt.operand_width}")
        hi = fmt.operand_width
    train = training_range(fmt, resolve_checkpoint(args.model))
    load_before = load_average()  # the machine may be shared: record how busy it was
    start = time.perf_counter()
    batch_size = args.batch_size or default_batch_size(model)
    result = length_grid(model, tok, (lo, hi), args.samples_per_cell, seed=args.seed, batch_size=batch_size,
                         train_range=train)
    wall = time.perf_counter() - start
    name = Path(str(args.model)).name
    out = Path(args.out) if args.out else RESULTS / f"eval_grid_{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    png = save_figure(plot_grid(result, title=f"{args.model}: length grid {lo}-{hi}, "
                                              f"{args.samples_per_cell} held-out problems per cell"),
                      out.with_suffix(".png"))
    s = result["summary"]
    record = {
        "model": args.model, "unique_params": model.num_parameters(), "grid": [lo, hi],
        "samples_per_cell": args.samples_per_cell, "seed": args.seed, "problems": s["n"], "threads": args.threads,
        "batch_size": batch_size, "wall_seconds": wall, "model_seconds": s["seconds"],
        "problems_per_second": s["n"] / wall, "summary": s, "train_range": result["train_range"],
        "exact_match_matrix": result["matrices"]["exact_match"], "figure": png.name,
    }
    print(f"{args.model}: {lo}-{hi} x {lo}-{hi} grid, {s['n']:,} problems in {wall:.1f} s "
          f"({s['n'] / wall:,.0f}/s); exact match {s['exact_match']:.2%}; heatmap {png}")
    what = "wall time of the length grid (problem drawing, batched KV-cached decoding, answer perplexity, scoring)"
    return write_results(out, record, what=what, load_before=load_before)


if __name__ == "__main__":
    main()
