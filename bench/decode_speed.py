"""Decoding speed, in one run: `model.generate()` vs the shared greedy decoder, without and with a cache.

    python bench/decode_speed.py                          # every bundled model, 1 and 2 torch threads
    python bench/decode_speed.py minimal-add10 --threads 1 --compile

For each bundled model (or the models named) and each batch size (1, 64, 256) it decodes the
same held-out problems (in the model's own format, operands of 1 to `--max-digits` digits) with:

- `generate`: `model.generate(do_sample=False, max_new_tokens=<answer budget>)`, eos/pad set;
- `decoder-nocache`: `hf_arith.decoding.greedy_decode(use_cache=False)` (the whole sequence again each pass);
- `decoder-cache`: `greedy_decode(use_cache=True)` (KV cache, only new tokens each pass);
- `decoder-cache-kN`: the same with `tokens_per_step=N`, for models with `config.num_future_tokens` > 1;
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

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch
from machine import write_results

from hf_arith.bundled import bundled_models
from hf_arith.cli import default_max_digits
from hf_arith.decoding import greedy_decode, max_tokens_per_step
from hf_arith.evaluation import heldout_problems
from hf_arith.loading import load_checkpoint
from hf_arith.problems import ProblemSpec
from hf_arith.solving import answer_budget

RESULTS = Path(__file__).parent / "results"


def problems_for(model, tokenizer, n: int, max_digits: int, seed: int = 99) -> list[str]:
    fmt = tokenizer.arith_format
    items = {"min_items": 2, "max_items": min(5, fmt.max_items)} if fmt.task == "sort" else {}
    digits = min(max_digits, default_max_digits(model, fmt))
    spec = ProblemSpec(task=fmt.task, base=fmt.base, min_digits=1, max_digits=digits, **items)
    texts, _, _ = heldout_problems(spec, n, seed=seed)
    return texts


def make_batches(tokenizer, texts: list[str], batch_size: int, count: int):
    batches = []
    for i in range(count):
        chunk = texts[i * batch_size:(i + 1) * batch_size]
        enc = tokenizer(chunk, padding=True, return_tensors="pt")
        batches.append((enc["input_ids"], enc["attention_mask"], answer_budget(tokenizer, chunk)))
    return batches


def methods(model, tokenizer, compiled=None):
    eos = tokenizer.eos_token_id if tokenizer.arith_format.end_token else None
    pad = tokenizer.pad_token_id

    def generate(ids, mask, budget):
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=budget, do_sample=False,
                             eos_token_id=eos, pad_token_id=pad)
        return out[:, ids.shape[1]:]

    def decoder(use_cache, k=1, target=model):
        return lambda ids, mask, budget: greedy_decode(target, ids, mask, budget, eos_token_id=eos, pad_token_id=pad,
                                                       use_cache=use_cache, tokens_per_step=k)

    table = {"generate": generate, "decoder-nocache": decoder(False), "decoder-cache": decoder(True)}
    for k in range(2, max_tokens_per_step(model) + 1):
        table[f"decoder-cache-k{k}"] = decoder(True, k)
    if compiled is not None:
        table["decoder-cache-compiled"] = decoder(True, target=compiled)
    return table


def answers(tokenizer, tokens) -> list:
    return tokenizer.decode_answers(tokens)


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
            timed = time_methods(methods(model, tokenizer, compiled), batches, repeats)
            reference = [a for out in timed["decoder-cache"][2] for a in answers(tokenizer, out)]
            for method, (first, calls, outputs) in timed.items():
                decoded = [a for out in outputs for a in answers(tokenizer, out)]
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
    lines = ["| model | threads | batch | method | problems/s (best call) | x generate() | problems/s (median) | "
             "x generate() | agree | first call (s) |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['threads']} | {r['batch_size']} | {r['method']} | "
                     f"{r['problems_per_second']:,.0f} | {r['speedup_vs_generate']:.2f} | "
                     f"{r['median_problems_per_second']:,.0f} | {r['median_speedup_vs_generate']:.2f} | "
                     f"{r['agree']:.3f} | {r['first_call_seconds']:.3f} |")
    compiled = [r for r in rows if "compile_seconds" in r]
    if compiled:
        lines += ["", "torch.compile (cached decoder): one-off compile time and the problems needed to pay it back",
                  "", "| model | threads | batch | compile (s) | break-even problems |", "| --- | ---: | ---: | ---: | ---: |"]
        for r in compiled:
            even = "never" if r["break_even_problems"] is None else f"{r['break_even_problems']:,.0f}"
            lines.append(f"| {r['model']} | {r['threads']} | {r['batch_size']} | {r['compile_seconds']:.1f} | {even} |")
    return lines


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="bundled names or checkpoint folders (default: every bundled model)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 64, 256])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batches", type=int, default=8, help="batches timed per setting (batch size 1: 4x as many)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-digits", type=int, default=10,
                        help="longest operands (default 10, or less where the model's width or context is shorter)")
    parser.add_argument("--compile", action="store_true", help="also time the cached decoder on torch.compile(model)")
    parser.add_argument("--out", default=str(RESULTS / "decode_speed.json"))
    args = parser.parse_args(argv)

    names = args.models or bundled_models()
    n_batches = {b: args.batches * (4 if b == 1 else 1) for b in args.batch_sizes}
    load_before = os.getloadavg()[0]
    rows = []
    for name in names:
        rows += bench_model(name, args.batch_sizes, args.threads, n_batches, args.repeats, args.compile,
                            args.max_digits)
    what = ("problems/s of greedy decoding (answers identical across methods: see agree), from the best "
            f"and the median of {args.repeats} rounds x {args.batches} batches (x4 at batch 1) of single timed "
            "calls, methods taking turns, after one warm-up call; prompts tokenized outside the clock")
    result = write_results(args.out, what, rows, argv, "Decoding speed", table(rows), load_before)
    return result


if __name__ == "__main__":
    main()
