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

    python bench/chunk_memory.py --sort 20x6 20x12 20x20

With --sort, one list of ITEMS items of DIGITS digits (with its written answer) through the
teacher-forced pass of a sort model under the line window with relation bias (`--recipe`, its last
stage's architecture, random weights), once whole (the budget lifted) and once as
`decoding.forced_logits` runs it within the budget (column spans read from a KV cache): peak memory,
seconds, and the largest difference between the two logits. Kept in the same JSON under `sort_spans`.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

from common import script_parser
from machine import RESULTS, command_line, load_average, machine_info, markdown_table, utc_now, write_results

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


def sort_child(recipe_path: str, size: str, what: str) -> dict:
    """One sort measurement, in this (fresh) process: `what` is "whole" or "spans"."""
    import time

    import numpy as np
    import torch

    import hf_arith.runtime.decoding as decoding
    from hf_arith.data.formatting import render
    from hf_arith.data.problems import ProblemSpec, sample
    from hf_arith.training.recipe import check_recipe, load_recipe
    from hf_arith.training.run import build_model, build_tokenizer

    torch.set_num_threads(1)
    items, digits = (int(n) for n in size.split("x"))
    recipe = load_recipe(recipe_path)
    fmt = check_recipe(recipe)
    context = int(recipe.model.get("max_position_embeddings", 20000))
    model = build_model(recipe, build_tokenizer(fmt, context), context).eval()
    spec = ProblemSpec(task="sort", min_digits=digits, max_digits=digits, min_items=items, max_items=items)
    ids, lengths, _ = render(sample(spec, 1, np.random.default_rng(0), split="test"), fmt, with_answer=True)
    ids = torch.tensor(ids[:, : lengths[0]], dtype=torch.long)
    if what == "whole":
        decoding.BATCH_MEMORY_BUDGET = 1 << 62
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    logits = decoding.forced_logits(model, ids)
    seconds = time.perf_counter() - start
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    torch.save(logits, f"/tmp/chunk_memory_{size}_{what}.pt")  # compared by the parent, then removed
    return {"items": items, "digits": digits, "pass": what, "tokens": int(ids.shape[1]),
            "span": decoding.query_span(model, 1, ids.shape[1]), "measured_mib": grown / MIB, "seconds": seconds,
            "estimated_whole_mib": decoding.row_bytes(model, ids.shape[1]) / MIB}


def measure_sorts(recipe: str, sizes: list[str]) -> dict:
    """Each size whole and in spans, each in a fresh process; kept under `sort_spans` in chunk_memory.json."""
    import torch

    load_before = load_average()
    measured = []
    for size in sizes:
        logits = {}
        for what in ("whole", "spans"):
            out = subprocess.run([sys.executable, str(Path(__file__)), "--recipe", recipe, "--sort-child", size, what],
                                 check=True, capture_output=True, text=True).stdout
            measured.append(json.loads(out.strip().splitlines()[-1]))
            saved = Path(f"/tmp/chunk_memory_{size}_{what}.pt")
            logits[what] = torch.load(saved)
            saved.unlink()
            print(measured[-1], flush=True)
        measured[-1]["max_logit_difference"] = float((logits["whole"] - logits["spans"]).abs().max())
    from hf_arith.runtime.decoding import BATCH_MEMORY_BUDGET

    out = RESULTS / "chunk_memory.json"
    result = json.loads(out.read_text())
    result["sort_spans"] = {
        "what": ("growth of peak resident memory (ru_maxrss) and seconds of one teacher-forced pass over one sorted "
                 f"list with its written answer, the architecture of {Path(recipe).name}'s last stage with random "
                 "weights, one thread: whole (budget lifted) and as hf_arith.runtime.decoding.forced_logits runs it "
                 f"within BATCH_MEMORY_BUDGET = {BATCH_MEMORY_BUDGET / MIB:.0f} MiB (column spans read from a KV "
                 "cache); max_logit_difference compares the two passes' logits"),
        "measured": measured, "machine": machine_info(load_before), "command": command_line(), "date": utc_now()}
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("--model", default="abacus-gpt2-add-window-10-k2")
    parser.add_argument("--digits", type=int, nargs="+", default=[120, 300, 1000])
    parser.add_argument("--rows", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--child", nargs=3, metavar=("DIGITS", "ROWS", "PASS"), help=argparse.SUPPRESS)
    parser.add_argument("--sort", nargs="+", metavar="ITEMSxDIGITS", help="measure sorts of these sizes instead")
    parser.add_argument("--recipe", default=str(Path(__file__).parent / "recipes" /
                                               "abacus-gpt2-sort-digit-places-no-rows.yaml"))
    parser.add_argument("--sort-child", nargs=2, metavar=("SIZE", "PASS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.model, int(args.child[0]), int(args.child[1]), args.child[2])))
        return {}
    if args.sort_child:
        print(json.dumps(sort_child(args.recipe, args.sort_child[0], args.sort_child[1])))
        return {}
    if args.sort:
        return measure_sorts(args.recipe, args.sort)
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
