"""Where one decode's time goes: prefill, forward passes, cache handling and Python overhead.

    python bench/decode_profile.py                                  # k2 model, 30 digits, batch 1 and 128
    python bench/decode_profile.py --digits 100 --batch-sizes 128 --threads 2

Decodes the same held-out problems (`--digits` digits per operand, the bundled
abacus-gpt2-add-window-10-k2 or `--model`) with each mode of the shared decoder:

- `one-token`: `greedy_decode` one token per forward pass;
- `raw-kN`: the N heads' own tokens, N per pass (`confirm=False`: fewer passes, not exact);
- `speculative-kN`: the extra heads draft, the first head verifies (`speculative_decode`, the
  default; `commit="row"`), and with `--min` also `commit="min"`;
- with `--all-keys`, `one-token-all-keys`: one token per pass with every decoding step of a windowed
  model attending over the whole cache under its mask, as before steps read only their window's keys
  (`modeling_common.GATHER_MIN_ROW_KEYS`, set out of reach for that mode).

Each decode is split by explicit timers (wall clock): `prefill` is the model calls on the prompt
(an empty cache), `forward` every other model call, `cache` the time in the decoder's cache
layers (writes, take-backs, row and column selection, inside model calls or not; it is taken out
of prefill and forward), and `python` the rest: everything the decoder does on the host between
passes (positions, masks, argmax, verification, bookkeeping). The figures are medians over
`--repeats` decodes, the modes taking turns. With `--ops`, one more decode per setting runs under
torch.profiler and the table lists its five most expensive operators (self CPU time).
Results go to bench/results/decode_profile.json and .md, with the machine, threads and command.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict

import torch
from common import decimal_heldout, script_parser
from machine import RESULTS, load_average, markdown_table, write_results

from hf_arith.models import modeling_common
from hf_arith.runtime import decoding
from hf_arith.runtime.limits import answer_budget
from hf_arith.runtime.loading import load_checkpoint

PARTS = ("prefill", "forward", "cache", "python")
CACHE_METHODS = ("update", "crop", "select_positions", "batch_select_indices")


class Timers:
    """Wall time per part of a decode, from hooks on the model and wrappers on the cache layer's methods."""

    def __init__(self, model):
        self.seconds, self.passes = defaultdict(float), 0
        self._model_start = self._cache_at_start = None
        self._prefill = False
        self._hooks = [model.register_forward_pre_hook(self._before, with_kwargs=True),
                       model.register_forward_hook(self._after)]
        self._originals = {name: getattr(decoding.PreallocatedLayer, name) for name in CACHE_METHODS}
        for name, method in self._originals.items():
            setattr(decoding.PreallocatedLayer, name, self._timed(method))

    def _timed(self, method):
        def wrapper(layer, *args, **kwargs):
            start = time.perf_counter()
            try:
                return method(layer, *args, **kwargs)
            finally:
                self.seconds["cache"] += time.perf_counter() - start
        return wrapper

    def _before(self, module, args, kwargs):
        cache = kwargs.get("past_key_values")
        self._prefill = cache is None or cache.get_seq_length() == 0
        self._cache_at_start = self.seconds["cache"]
        self._model_start = time.perf_counter()

    def _after(self, module, args, output):
        elapsed = time.perf_counter() - self._model_start
        self.seconds["prefill" if self._prefill else "forward"] += elapsed - (self.seconds["cache"] - self._cache_at_start)
        self.passes += not self._prefill

    def close(self) -> None:
        for hook in self._hooks:
            hook.remove()
        for name, method in self._originals.items():
            setattr(decoding.PreallocatedLayer, name, method)


def modes(k: int, with_min: bool, all_keys: bool = False) -> dict:
    """Mode name -> greedy_decode / speculative_decode keyword arguments (and `all_keys`)."""
    table = {"one-token": {"tokens_per_step": 1}}
    if all_keys:
        table["one-token-all-keys"] = {"tokens_per_step": 1, "all_keys": True}
    if k > 1:
        table[f"raw-k{k}"] = {"tokens_per_step": k, "confirm": False}
        table[f"speculative-k{k}"] = {"tokens_per_step": k}
        if with_min:
            table[f"speculative-k{k}-min"] = {"tokens_per_step": k, "commit": "min"}
    return table


def decode(model, batch, eos, pad, kwargs: dict):
    ids, mask, budget = batch
    kwargs, threshold = dict(kwargs), modeling_common.GATHER_MIN_ROW_KEYS
    if kwargs.pop("all_keys", False):
        modeling_common.GATHER_MIN_ROW_KEYS = float("inf")
    try:
        if "commit" in kwargs:
            return decoding.speculative_decode(model, ids, mask, budget, eos, pad, **kwargs)
        return decoding.greedy_decode(model, ids, mask, budget, eos, pad, **kwargs)
    finally:
        modeling_common.GATHER_MIN_ROW_KEYS = threshold


def profile_once(model, batch, eos, pad, kwargs: dict) -> dict:
    """One decode, split into parts: seconds per part, and the forward passes after the prefill."""
    timers = Timers(model)
    try:
        start = time.perf_counter()
        decode(model, batch, eos, pad, kwargs)
        total = time.perf_counter() - start
    finally:
        timers.close()
    parts = {part: timers.seconds[part] for part in PARTS[:3]}
    parts["python"] = total - sum(parts.values())
    return {"total": total, **parts, "passes": timers.passes}


def top_operators(model, batch, eos, pad, kwargs: dict, n: int = 5) -> list[str]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        decode(model, batch, eos, pad, kwargs)
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events)
    return [f"{e.key} {100 * e.self_cpu_time_total / total:.0f}%" for e in events[:n]]


def bench(model, tok, digits: int, batch_size: int, repeats: int, with_min: bool, ops: bool,
          all_keys: bool = False) -> list[dict]:
    texts, _, _ = decimal_heldout(tok, digits, digits, batch_size, seed=digits)
    enc = tok(texts, padding=True, return_tensors="pt")
    batch = (enc["input_ids"], enc["attention_mask"], answer_budget(tok, texts))
    eos, pad = tok.eos_token_id, tok.pad_token_id
    table = modes(model.config.num_future_tokens, with_min, all_keys)
    for kwargs in table.values():
        decode(model, batch, eos, pad, kwargs)  # warm-up
    runs = defaultdict(list)
    for _ in range(repeats):  # the modes take turns, so a burst of load falls on all of them
        for mode, kwargs in table.items():
            runs[mode].append(profile_once(model, batch, eos, pad, kwargs))
    rows = []
    for mode, kwargs in table.items():
        row = {"mode": mode, "digits": digits, "batch_size": batch_size, "threads": torch.get_num_threads(),
               "repeats": repeats, "passes": runs[mode][0]["passes"]}
        row.update({f"{part}_seconds": statistics.median(r[part] for r in runs[mode]) for part in ("total", *PARTS)})
        if ops:
            row["top_operators"] = top_operators(model, batch, eos, pad, kwargs)
        rows.append(row)
    return rows


def table(rows: list[dict]) -> list[str]:
    header = ["digits", "batch", "threads", "mode", "passes", "total ms", "prefill ms", "forward ms", "cache ms",
              "python ms", "ms / pass", "python %"]
    lines = markdown_table(header, "rrrlrrrrrrrr", [
        [r["digits"], r["batch_size"], r["threads"], r["mode"], r["passes"],
         *(f"{1000 * r[f'{part}_seconds']:.1f}" for part in ("total", *PARTS)),
         f"{1000 * r['forward_seconds'] / max(r['passes'], 1):.2f}",
         f"{100 * r['python_seconds'] / r['total_seconds']:.0f}"] for r in rows])
    ops = [r for r in rows if "top_operators" in r]
    if ops:
        lines += ["", "Most expensive operators (self CPU time, one decode under torch.profiler)", ""]
        lines += markdown_table(["digits", "batch", "mode", "operators"], "rrll", [
            [r["digits"], r["batch_size"], r["mode"], ", ".join(r["top_operators"])] for r in ops])
    return lines


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("--model", default="abacus-gpt2-add-window-10-k2", help="bundled name or checkpoint folder")
    parser.add_argument("--digits", type=int, nargs="+", default=[30])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 128])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--min", action="store_true", help="also profile speculative decoding with commit='min'")
    parser.add_argument("--all-keys", action="store_true",
                        help="also profile one token per pass with windowed steps attending over every cached key")
    parser.add_argument("--ops", action="store_true", help="also list each mode's top operators (torch.profiler)")
    parser.add_argument("--note", default="", help="a remark recorded with the results (e.g. that the machine was busy)")
    parser.add_argument("--out", default=str(RESULTS / "decode_profile.json"))
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    model, tok = load_checkpoint(args.model)
    model.eval()
    load_before = load_average()
    rows = [row for digits in args.digits for batch_size in args.batch_sizes
            for row in bench(model, tok, digits, batch_size, args.repeats, args.min, args.ops, args.all_keys)]
    for line in table(rows):
        print(line)
    what = (f"one decode of {args.model} split into prefill, forward passes, cache handling and Python overhead "
            f"(medians of {args.repeats} decodes per mode, modes taking turns, after a warm-up; wall clock; "
            f"{args.threads} torch thread(s)); passes: forward passes after the prefill")
    return write_results(args.out, {"model": args.model, "rows": rows}, what=what, note=args.note, load_before=load_before,
                         title="Where one decode's time goes", table=table(rows))


if __name__ == "__main__":
    main()
