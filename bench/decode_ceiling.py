"""Where a decode's time goes: the model's own forward passes against the loop around them.

    python bench/decode_ceiling.py                      # every bundled model, batch 1, 64 and 256, one thread
    python bench/decode_ceiling.py minimal-add10 --batch-sizes 256

`model.generate()` and the shared decoder (`greedy_decode`, KV cache) run the same model. Whatever
the decoder does around the model (no logits processors, bucketed prefill, dropping finished rows),
it still calls the model's forward. This benchmark splits each method's wall time into the time
spent inside the model's forward calls (a forward pre-hook and hook on the top-level module, so
generate's own calls are counted the same way) and the rest (the method's bookkeeping). From that:

- `bound` = generate's time / the decoder's forward time: the speed-up over generate() that this
  decoder would reach if everything it does besides calling the model cost nothing. A decoder that
  makes the same forward calls cannot beat it.
- `forward_for_2x` = the forward time per batch the decoder would need, keeping its bookkeeping, to be
  twice as fast as generate(): generate's time / 2 - the decoder's bookkeeping.

Timed like bench/decode_speed.py (prompts tokenized outside the clock, one warm-up call, methods taking
turns on each batch, best and median of the calls). Results go to bench/results/decode_ceiling.json
and .md with the machine and command.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from common import add_model_batch_options, decode_methods, make_batches, problems_for, script_parser
from machine import RESULTS, load_average, markdown_table, write_results

from hf_arith.bundled import bundled_models
from hf_arith.runtime.loading import load_checkpoint

METHODS = ("generate", "decoder-cache")


class ForwardClock:
    """Adds up the wall time of every call of `module`'s forward (hooks, so any caller is counted)."""

    def __init__(self, module):
        self.seconds, self.calls, self._start = 0.0, 0, None
        self._handles = [module.register_forward_pre_hook(self._before),
                         module.register_forward_hook(self._after)]

    def _before(self, module, args):
        self._start = time.perf_counter()

    def _after(self, module, args, output):
        self.seconds += time.perf_counter() - self._start
        self.calls += 1

    def reset(self) -> None:
        self.seconds, self.calls = 0.0, 0

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


def measure(model, table: dict, batches, repeats: int) -> dict:
    """Per method, per timed call: (wall seconds, seconds inside forward, forward calls)."""
    clock = ForwardClock(model)
    records = {m: [] for m in table}
    try:
        for fn in table.values():
            fn(*batches[0])  # warm-up
        for _ in range(repeats):
            for batch in batches:
                for method, fn in table.items():
                    clock.reset()
                    start = time.perf_counter()
                    fn(*batch)
                    records[method].append((time.perf_counter() - start, clock.seconds, clock.calls))
    finally:
        clock.remove()
    return records


def summarize(calls: list[tuple[float, float, int]]) -> dict:
    """The median call's figures (by wall time), and the best call's wall time."""
    calls = sorted(calls)
    wall, forward, n = calls[len(calls) // 2]
    return {"best_seconds": calls[0][0], "median_seconds": wall, "forward_seconds": forward,
            "other_seconds": wall - forward, "forward_share": forward / wall, "forward_calls": n,
            "forward_seconds_per_call": forward / max(n, 1)}


def bench_model(name: str, batch_sizes, n_batches: int, repeats: int, max_digits: int) -> list[dict]:
    model, tokenizer = load_checkpoint(name)
    model.eval()
    texts = problems_for(model, tokenizer, max(batch_sizes) * n_batches, max_digits)
    table = {m: f for m, f in decode_methods(model, tokenizer).items() if m in METHODS}
    rows = []
    for batch_size in batch_sizes:
        records = measure(model, table, make_batches(tokenizer, texts, batch_size, n_batches), repeats)
        gen, dec = summarize(records["generate"]), summarize(records["decoder-cache"])
        row = {"model": name, "batch_size": batch_size, "generate": gen, "decoder": dec,
               "speedup": gen["median_seconds"] / dec["median_seconds"],
               "bound": gen["median_seconds"] / dec["forward_seconds"],
               "forward_for_2x_seconds": gen["median_seconds"] / 2 - dec["other_seconds"]}
        rows.append(row)
        print(f"{name:>18} batch={batch_size:>3}  generate {gen['median_seconds'] * 1e3:7.2f} ms "
              f"({gen['forward_share']:.0%} forward)  decoder {dec['median_seconds'] * 1e3:7.2f} ms "
              f"({dec['forward_share']:.0%} forward)  speed-up {row['speedup']:.2f}x  bound {row['bound']:.2f}x",
              flush=True)
    return rows


def table(rows: list[dict]) -> list[str]:
    header = ["model", "batch", "generate ms", "of it in forward", "decoder ms", "of it in forward",
              "forward calls (generate / decoder)", "decoder ms per forward call", "speed-up", "bound",
              "decoder forward ms needed for 2x"]
    cells = []
    for r in rows:
        g, d = r["generate"], r["decoder"]
        cells.append([r["model"], r["batch_size"], f"{g['median_seconds'] * 1e3:.2f}", f"{g['forward_share']:.0%}",
                      f"{d['median_seconds'] * 1e3:.2f}", f"{d['forward_share']:.0%}",
                      f"{g['forward_calls']} / {d['forward_calls']}", f"{d['forward_seconds_per_call'] * 1e3:.3f}",
                      f"{r['speedup']:.2f}", f"{r['bound']:.2f}",
                      f"{r['forward_for_2x_seconds'] * 1e3:.2f} (now {d['forward_seconds'] * 1e3:.2f})"])
    return markdown_table(header, "lrrrrrrrrrr", cells)


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    add_model_batch_options(parser, RESULTS / "decode_ceiling.json")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    load_before = load_average()
    rows = []
    for name in args.models or bundled_models():
        rows += bench_model(name, args.batch_sizes, args.batches, args.repeats, args.max_digits)
    what = ("Median call (by wall time) of greedy decoding with `model.generate()` and with the shared decoder "
            "(`greedy_decode`, KV cache), split into the time inside the model's forward calls and the rest; "
            f"{args.repeats} rounds x {args.batches} batches, methods taking turns, after one warm-up call, "
            f"{args.threads} torch thread(s). `bound` = generate's time / the decoder's forward time: the largest "
            "speed-up a decoder making the same forward calls could reach with free bookkeeping.")
    return write_results(args.out, {"rows": rows, "best_bound": float(np.max([r["bound"] for r in rows]))}, what=what,
                         load_before=load_before, title="Where decoding time goes", table=table(rows))


if __name__ == "__main__":
    main()
