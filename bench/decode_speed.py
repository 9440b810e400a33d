"""Decoding speed, in one run: `model.generate()` vs the shared greedy decoder, without and with a cache.

    python bench/decode_speed.py                          # every bundled model, 1 and 2 torch threads
    python bench/decode_speed.py minimal-add10 --threads 1 --compile

For each bundled model (or the models named) and each batch size (1, 64, 256) it decodes the
same held-out problems (in the model's own format, operands of 1 to `--max-digits` digits) with:

- `generate`: `model.generate(do_sample=False, max_new_tokens=<answer budget>)`, eos/pad set;
- `decoder-nocache`: `hf_arith.runtime.decoding.greedy_decode(use_cache=False)` (the whole sequence again each pass);
- `decoder-cache`: `greedy_decode(use_cache=True)` (KV cache, only new tokens each pass);
- `decoder-cache-kN`: the same with `tokens_per_step=N`, for models with `config.num_future_tokens` > 1
  (self-speculative: the extra heads draft, the first head verifies; the answers of one token per pass);
- `decoder-cache-kN-raw`: the N heads' own tokens (`confirm=False`), N per pass;
- with `--compile`: `decoder-cache-compiled`, the cached decoder on `torch.compile(model, dynamic=True)`;
  its one-off compile time (first call minus a steady call) is reported separately, with the number
  of problems after which it pays off.

Timed: tokenizing the prompts is done once, outside the clock; each call of generate or
greedy_decode on one batch is timed alone (wall clock), `--batches` batches x `--repeats` rounds
after one warm-up call, the methods taking turns on each batch. Reported: problems/s of the best
call (the uncontended speed on a shared machine) and of the median call.
Every method's tokens are checked against the cached decoder's (`agree` = share of identical
answers). Results go to bench/results/decode_speed.json and .md with the machine and command.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from common import add_model_batch_options, decode_methods, make_batches, problems_for, script_parser
from machine import RESULTS, load_average, markdown_table, write_results

from hf_arith.bundled import bundled_models
from hf_arith.runtime.loading import load_checkpoint


def time_methods(table: dict, batches, repeats: int) -> dict:
    """Per method: first call seconds, sorted per-call seconds, and the outputs of the last round.

    Every batch is timed on its own and the methods take turns on it (round robin), `repeats`
    rounds, so a burst of load from other users of a shared machine falls on all of them alike;
    the minimum over many calls estimates the uncontended speed, the median the typical one.
    """
    first, calls, outputs = {}, {m: [] for m in table}, {m: [] for m in table}
    for method, fn in table.items():
        if method.endswith("-compiled"):
            torch._dynamo.reset()  # count this batch size's compilation in its first call
        start = time.perf_counter()
        fn(*batches[0])  # warm-up (and compilation, for a compiled model)
        first[method] = time.perf_counter() - start
    for round_ in range(repeats):
        for batch in batches:
            for method, fn in table.items():
                start = time.perf_counter()
                out = fn(*batch)
                calls[method].append(time.perf_counter() - start)
                if round_ == repeats - 1:
                    outputs[method].append(out)
    return {m: (first[m], sorted(calls[m]), outputs[m]) for m in table}


def bench_model(name: str, batch_sizes, threads_list, n_batches: dict, repeats: int, compile_: bool,
                max_digits: int) -> list[dict]:
    model, tokenizer = load_checkpoint(name)
    model.eval()
    need = max(b * n_batches[b] for b in batch_sizes)
    texts = problems_for(model, tokenizer, need, max_digits)
    rows = []
    for threads in threads_list:
        torch.set_num_threads(threads)
        compiled = None
        if compile_:
            torch._dynamo.reset()
            compiled = torch.compile(model, dynamic=True)
        for batch_size in batch_sizes:
            batches = make_batches(tokenizer, texts, batch_size, n_batches[batch_size])
            timed = time_methods(decode_methods(model, tokenizer, compiled), batches, repeats)
            reference = [a for out in timed["decoder-cache"][2] for a in tokenizer.decode_answers(out)]
            for method, (first, calls, outputs) in timed.items():
                decoded = [a for out in outputs for a in tokenizer.decode_answers(out)]
                best, median = calls[0], calls[len(calls) // 2]
                rows.append({"model": name, "threads": threads, "batch_size": batch_size, "method": method,
                             "calls": len(calls), "best_call_seconds": best, "median_call_seconds": median,
                             "problems_per_second": batch_size / best, "median_problems_per_second": batch_size / median,
                             "first_call_seconds": first,
                             "agree": float(np.mean([a == b for a, b in zip(decoded, reference, strict=True)]))})
                print(f"{name:>16} threads={threads} batch={batch_size:>3} {method:<24} "
                      f"{batch_size / best:>10,.0f} problems/s best, {batch_size / median:>10,.0f} median "
                      f"(first call {first:.3f} s)", flush=True)
            by_method = {r["method"]: r for r in rows if r["model"] == name and r["threads"] == threads
                         and r["batch_size"] == batch_size}
            gen = by_method["generate"]
            for row in by_method.values():
                row["speedup_vs_generate"] = row["problems_per_second"] / gen["problems_per_second"]
                row["median_speedup_vs_generate"] = (row["median_problems_per_second"]
                                                     / gen["median_problems_per_second"])
            compiled_row = by_method.get("decoder-cache-compiled")
            if compiled_row is not None:
                eager = by_method["decoder-cache"]
                compile_cost = compiled_row["first_call_seconds"] - compiled_row["median_call_seconds"]
                saving = (eager["median_call_seconds"] - compiled_row["median_call_seconds"]) / batch_size
                compiled_row["compile_seconds"] = compile_cost
                compiled_row["break_even_problems"] = (compile_cost / saving) if saving > 0 else None
    return rows


def table(rows: list[dict]) -> list[str]:
    header = ["model", "threads", "batch", "method", "problems/s (best call)", "x generate()", "problems/s (median)",
              "x generate()", "agree", "first call (s)"]
    lines = markdown_table(header, "lrrlrrrrrr", [
        [r["model"], r["threads"], r["batch_size"], r["method"], f"{r['problems_per_second']:,.0f}",
         f"{r['speedup_vs_generate']:.2f}", f"{r['median_problems_per_second']:,.0f}",
         f"{r['median_speedup_vs_generate']:.2f}", f"{r['agree']:.3f}", f"{r['first_call_seconds']:.3f}"]
        for r in rows])
    compiled = [r for r in rows if "compile_seconds" in r]
    if compiled:
        lines += ["", "torch.compile (cached decoder): one-off compile time and the problems needed to pay it back", ""]
        lines += markdown_table(["model", "threads", "batch", "compile (s)", "break-even problems"], "lrrrr", [
            [r["model"], r["threads"], r["batch_size"], f"{r['compile_seconds']:.1f}",
             "never" if r["break_even_problems"] is None else f"{r['break_even_problems']:,.0f}"]
            for r in compiled])
    return lines


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    add_model_batch_options(parser, RESULTS / "decode_speed.json", batches=8,
                            batches_help="batches timed per setting (batch size 1: 4x as many)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--compile", action="store_true", help="also time the cached decoder on torch.compile(model)")
    args = parser.parse_args(argv)

    names = args.models or bundled_models()
    n_batches = {b: args.batches * (4 if b == 1 else 1) for b in args.batch_sizes}
    load_before = load_average()
    rows = []
    for name in names:
        rows += bench_model(name, args.batch_sizes, args.threads, n_batches, args.repeats, args.compile,
                            args.max_digits)
    what = ("problems/s of greedy decoding (answers identical across methods: see agree), from the best "
            f"and the median of {args.repeats} rounds x {args.batches} batches (x4 at batch 1) of single timed "
            "calls, methods taking turns, after one warm-up call; prompts tokenized outside the clock")
    return write_results(args.out, {"rows": rows}, what=what, load_before=load_before, title="Decoding speed",
                         table=table(rows))


if __name__ == "__main__":
    main()
