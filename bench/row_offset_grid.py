"""The length grid of a model with operand rows, its rows and digit indices moved up by fixed offsets at test time.

    python bench/row_offset_grid.py runs/abacus-gpt2-mul-5-to-10-variants/final --grid 1:10 --row-offset 3 --out x.json

An `abacus_operand_rows` model gives digit j of b and answer line j row j, and digit i of a number
index i. Training moves the rows, and apart from them the indices, by random offsets, a share of
the index draws left at 0; `--row-offset` and `--index-offset` move them by fixed ones at test time
(the index one as training does: every token with abacus_offset_all_tokens, else the digits), and
the usual `eval --grid` runs on greedy answers (one view). Whether a model fails past its trained
lengths only where the offsets are 0 tells an untrained offset-0 regime from an untrained index.
Rows and indices stay within the table (abacus_max_digits).
"""

from __future__ import annotations

import numpy as np
import torch
from common import script_parser
from machine import command_line, load_average, machine_info, write_results

from hf_arith.evaluation.grid import length_grid, parse_length_range
from hf_arith.models.abacus_positions import pack_positions, pack_rows, unpack_positions, unpack_rows
from hf_arith.runtime.loading import load_checkpoint


def move_positions(model, row_offset: int, index_offset: int) -> None:
    """Make `model.position_ids_from_input_ids` add `row_offset` to every row above 0, and `index_offset`
    to every index (above 0 unless the model's training offset moves every token)."""
    config, computed = model.config, model.position_ids_from_input_ids
    top = config.abacus_max_digits

    def moved(input_ids, generated_from=None):
        index, packed = unpack_positions(computed(input_ids, generated_from), top)
        row, segment = unpack_rows(packed, config.abacus_num_segments)
        row = torch.where(row > 0, row + row_offset, row).clamp(max=top)
        placed = torch.ones_like(index, dtype=torch.bool) if config.abacus_offset_all_tokens else index > 0
        index = torch.where(placed, index + index_offset, index).clamp(max=top)
        return pack_positions(index, pack_rows(row, segment, config.abacus_num_segments), top)

    model.position_ids_from_input_ids = moved


def main(argv=None) -> None:
    parser = script_parser(__doc__)
    parser.add_argument("model", help="checkpoint folder of an abacus_operand_rows model")
    parser.add_argument("--grid", default="1:10", help="operand lengths A:B of both axes")
    parser.add_argument("--row-offset", type=int, default=0)
    parser.add_argument("--index-offset", type=int, default=0)
    parser.add_argument("--samples-per-cell", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", help="also write the results here (JSON, with the machine and the command)")
    args = parser.parse_args(argv)
    load_before = load_average()
    torch.set_num_threads(args.threads)
    model, tok = load_checkpoint(args.model)
    if not getattr(model.config, "abacus_operand_rows", False):
        raise SystemExit(f"{args.model}: not a model with operand rows (config.abacus_operand_rows)")
    model.eval()
    move_positions(model, args.row_offset, args.index_offset)
    print(command_line())
    print(machine_info())
    grid = length_grid(model, tok, parse_length_range(args.grid), args.samples_per_cell, args.seed, views=1)
    matrix = np.array([[np.nan if x is None else x for x in row] for row in grid["matrices"]["exact_match"]])
    print(f"rows moved by {args.row_offset}, indices by {args.index_offset}; exact match, a's length down, b's across:")
    for length, row in zip(grid["rows"], matrix):
        print(f"{length:>3} " + " ".join(f"{x:5.2f}" for x in row))
    if args.out:
        what = __doc__.split("\n\n")[1].replace("\n", " ")
        write_results(args.out, {"model": str(args.model), "row_offset": args.row_offset,
                                 "index_offset": args.index_offset, "seed": args.seed,
                                 "samples_per_cell": args.samples_per_cell, "rows": grid["rows"],
                                 "exact_match": grid["matrices"]["exact_match"], "summary": grid["summary"]},
                      what=what, load_before=load_before)


if __name__ == "__main__":
    main()
