"""Peak resident memory per row of a batch of long problems, against the estimate that sizes chunks.

    python bench/chunk_memory.py --digits 120 300 1000 --rows 4 16

`hf_arith.runtime.decoding.row_bytes` estimates what one row of T tokens takes in a pass over all of
them, and `rows_within_budget` cuts batches to BATCH_MEMORY_BUDGET with it. This measures it: for the
architecture of a bundled model (default abacus-gpt2-add-window-10-k2), its abacus range and context
widened so that long operands fit (random weights: memory does not depend on them), each
measurement runs in a fresh process and records how far ru_maxrss rises during one batch of `rows`
problems of two `digits`-digit operands, in the grid's teacher-forced pass (prompt and answer at
once) and in decoding (`solve`: prefill, then one token at a time with a KV cache), with chunking
switched off (the budget lifted), so that the batch runs whole. Writes
bench/results/chunk_memory.json and .md with the machine and the command.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

from common import script_parser
from machine import RESULTS, load_average, markdown_table, write_results

MIB = 2**20


def child(model_name: str, digits: int, rows: int, what: str) -> dict:
    """One measurement, in this (fresh) process."""
    import torch
    from transformers import AutoModelForCausalLM

    import hf_arith
    import hf_arith.runtime.decoding as decoding
    from hf_arith.data.problems import with_answers
    from hf_arith.evaluation.grid import cell_problems, plain_text, teacher_forced
    from hf_arith.runtime.limits import model_limits
    from hf_arith.runtime.solving import solve

    torch.set_num_threads(1)
    model, tok = hf_arith.load(model_name)
    config = model.config
    config.abacus_max_digits = max(config.abacus_max_digits, digits + 8)  # room for the sum and its alignment
    config.max_position_embeddings = max(config.max_position_embeddings, 4 * digits + 16)
    model = AutoModelForCausalLM.from_config(config).eval()
    decoding.BATCH_MEMORY_BUDGET = 1 << 62  # the whole batch at once: what is measured is one batch
    problems = with_answers(cell_problems("add", 10, digits, digits, rows, seed=0)[0])
    tokens = int(model_limits(model, tok).sequence_tokens(problems).max())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if what == "teacher-forced":
        teacher_forced(model, tok, problems, batch_size=rows)
    else:
        solve(model, tok, plain_text(problems)[0], batch_size=rows, checked=True)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    return {"digits": digits, "rows": rows, "pass": what, "tokens": tokens, "measured_mib_per_row": grown / rows / MIB,
            "estimated_mib_per_row": decoding.row_bytes(model, tokens) / MIB}


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("--model", default="abacus-gpt2-add-window-10-k2")
    parser.add_argument("--digits", type=int, nargs="+", default=[120, 300, 1000])
    parser.add_argument("--rows", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--child", nargs=3, metavar=("DIGITS", "ROWS", "PASS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.model, int(args.child[0]), int(args.child[1]), args.child[2])))
        return {}
    load_before = load_average()
    measured = []
    for digits in args.digits:
        for rows in args.rows:
            for what in ("teacher-forced", "decoding"):
                out = subprocess.run([sys.executable, str(Path(__file__)), "--model", args.model, "--child", str(digits),
                                      str(rows), what], check=True, capture_output=True, text=True).stdout
                measured.append(json.loads(out.strip().splitlines()[-1]))
                print(measured[-1], flush=True)
    from hf_arith.runtime.decoding import BATCH_MEMORY_BUDGET, PAIR_BYTES, TOKEN_BYTES

    table = markdown_table(["digits", "tokens", "rows", "pass", "measured MiB/row", "estimated MiB/row"], "rrrlrr",
                           [(m["digits"], m["tokens"], m["rows"], m["pass"], f"{m['measured_mib_per_row']:.1f}",
                             f"{m['estimated_mib_per_row']:.1f}") for m in measured])
    what = (f"growth of peak resident memory (ru_maxrss) per row during one batch, {args.model}'s architecture with "
            "random weights, chunking off, one thread; estimated: hf_arith.runtime.decoding.row_bytes, which "
            f"sizes chunks to BATCH_MEMORY_BUDGET = {BATCH_MEMORY_BUDGET / MIB:.0f} MiB")
    return write_results(RESULTS / "chunk_memory.json",
                         {"model": args.model, "pair_bytes": PAIR_BYTES, "token_bytes": TOKEN_BYTES,
                          "budget_mib": BATCH_MEMORY_BUDGET / MIB, "measured": measured},
                         what=what, load_before=load_before, title="Memory per row of long problems", table=table)


if __name__ == "__main__":
    main()
