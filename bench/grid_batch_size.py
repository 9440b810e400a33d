"""Wall time of the length grid against the batch size (rows per forward pass), for one model.

    python bench/grid_batch_size.py abacus-gpt2-add --grid 1:30 --samples-per-cell 10

Runs `hf_arith.evaluation.grid.length_grid` (teacher-forced pass over every problem, then decoding of the
ones it does not confirm) once per batch size, after one small warm-up grid, on one torch thread
by default. Writes bench/results/grid_batch_size_<model>.json and .md with the machine and the
command. This is what `hf_arith.runtime.decoding.default_batch_size` is based on.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from common import script_parser
from machine import RESULTS, load_average, markdown_table, write_results

from hf_arith.evaluation.grid import length_grid, parse_length_range
from hf_arith.runtime.decoding import default_batch_size
from hf_arith.runtime.loading import load_checkpoint


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("model", nargs="?", default="abacus-gpt2-add")
    parser.add_argument("--grid", default="1:30")
    parser.add_argument("--samples-per-cell", type=int, default=10)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[4096, 1024, 512, 256, 128, 64])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    model, tok = load_checkpoint(args.model)
    lengths = parse_length_range(args.grid)
    length_grid(model, tok, (lengths[0], lengths[0] + 1), 2)  # warm-up
    load_before = load_average()
    rows = []
    for batch_size in args.batch_sizes:
        start = time.perf_counter()
        result = length_grid(model, tok, lengths, args.samples_per_cell, batch_size=batch_size)
        wall = time.perf_counter() - start
        s = result["summary"]
        rows.append({"batch_size": batch_size, "wall_seconds": round(wall, 2), "problems": s["n"],
                     "decoded": s["decoded"], "problems_per_second": round(s["n"] / wall, 1),
                     "exact_match": s["exact_match"]})
        print(f"batch {batch_size:>5}: {s['n']:,} problems in {wall:.1f} s ({s['n'] / wall:,.0f}/s), "
              f"{s['decoded']:,} decoded", flush=True)
    name = Path(str(args.model)).name
    record = {"model": args.model, "grid": list(lengths), "samples_per_cell": args.samples_per_cell,
              "threads": args.threads, "default_batch_size": default_batch_size(model), "rows": rows}
    lines = [f"Grid {args.grid}, {args.samples_per_cell} problems per cell, {args.threads} thread(s); "
             f"`default_batch_size` of this model: {record['default_batch_size']}", ""]
    lines += markdown_table(["batch size", "seconds", "problems/s", "decoded"], "rrrr", [
        [r["batch_size"], r["wall_seconds"], f"{r['problems_per_second']:,.0f}", f"{r['decoded']:,}"] for r in rows])
    what = "wall time of length_grid (teacher-forced pass + decoding of unconfirmed problems) per batch size"
    return write_results(RESULTS / f"grid_batch_size_{name}.json", record, what=what, load_before=load_before,
                         title=f"Grid time by batch size: {args.model}", table=lines)


if __name__ == "__main__":
    main()
