"""Self-speculative decoding vs one token per pass, side by side in one process.

    python bench/speculative_speed.py                       # k2 model; 30 and 100 digits; batch 128 and 1; 1 and 2 threads
    python bench/speculative_speed.py --problems 256 --single 8 --rounds 2 --min --raw

Decodes the same held-out problems (both operands `--digits` digits, the bundled
abacus-gpt2-add-window-10-k2 or `--model`) with the shared decoder:

- `one-token`: `greedy_decode(tokens_per_step=1)`;
- `speculative`: `greedy_decode(tokens_per_step=k)`, the default for multi-token models: the
  extra heads draft, the first head verifies (`decoding.speculative_decode`, `commit="row"`);
- with `--min`: `speculative-min` (`commit="min"`: every row keeps as many drafts as the row that
  accepted fewest); with `--raw`: `raw` (the heads' own tokens, `confirm=False`; not exact).

Each setting (threads x digits x batch size) decodes `--problems` problems in batches of 128, or
`--single` problems one at a time at batch size 1; prompts are tokenized outside the clock. The modes
take turns for `--rounds` rounds after one warm-up decode each, so load from other users of the
machine falls on all of them alike. Reported per mode: the median wall time of a round, its ratio to
one token per pass (> 1: faster), the forward passes per round (prefill included) and whether the
answers are identical to one token per pass. Results go to bench/results/speculative_speed.json and
.md with the machine, its load and the command.
"""

from __future__ import annotations

import statistics
import time

import torch
from common import decimal_heldout, make_batches, script_parser
from machine import RESULTS, load_average, markdown_table, write_results

from hf_arith.runtime.decoding import greedy_decode, speculative_decode
from hf_arith.runtime.loading import load_checkpoint


def mode_table(k: int, with_min: bool, with_raw: bool) -> dict:
    """Mode name -> fn(model, ids, mask, budget, eos, pad) returning (tokens, passes)."""
    def decoder(**kwargs):
        return lambda *args: greedy_decode(*args, return_passes=True, **kwargs)

    table = {"one-token": decoder(tokens_per_step=1), "speculative": decoder(tokens_per_step=k)}
    if with_min:
        table["speculative-min"] = lambda *args: speculative_decode(*args, tokens_per_step=k, commit="min",
                                                                    return_probabilities=False)[::2]
    if with_raw:
        table["raw"] = decoder(tokens_per_step=k, confirm=False)
    return table


def run_round(fn, model, batches, eos, pad) -> tuple[float, int, list]:
    """Seconds to decode every batch, the forward passes, and the answers' tokens."""
    passes, outputs = 0, []
    start = time.perf_counter()
    for ids, mask, budget in batches:
        tokens, n = fn(model, ids, mask, budget, eos, pad)
        passes += n
        outputs.append(tokens)
    return time.perf_counter() - start, passes, outputs


def bench_setting(model, tok, modes: dict, digits: int, batch_size: int, problems: int, rounds: int) -> list[dict]:
    texts, _, _ = decimal_heldout(tok, digits, digits, problems, seed=digits)
    batches = make_batches(tok, texts, batch_size, -(-problems // batch_size))
    eos, pad = tok.eos_token_id, tok.pad_token_id
    for fn in modes.values():
        fn(model, *batches[0][:3], eos, pad)  # warm-up
    seconds, passes, answers = {m: [] for m in modes}, {}, {}
    for _ in range(rounds):
        for mode, fn in modes.items():
            wall, passes[mode], outputs = run_round(fn, model, batches, eos, pad)
            seconds[mode].append(wall)
            answers[mode] = [a for out in outputs for a in tok.decode_answers(out)]
    base = statistics.median(seconds["one-token"])
    return [{"digits": digits, "batch_size": batch_size, "threads": torch.get_num_threads(), "mode": mode,
             "problems": problems, "rounds": rounds, "seconds": statistics.median(seconds[mode]),
             "round_seconds": [round(s, 4) for s in seconds[mode]], "speedup": base / statistics.median(seconds[mode]),
             "forward_passes": passes[mode], "passes_vs_one_token": passes[mode] / passes["one-token"],
             "identical_answers": answers[mode] == answers["one-token"]} for mode in modes]


def table(rows: list[dict]) -> list[str]:
    return markdown_table(
        ["threads", "digits", "batch", "problems", "mode", "median s", "x one token", "passes", "passes vs one token",
         "identical"], "rrrrlrrrrl",
        [[r["threads"], r["digits"], r["batch_size"], r["problems"], r["mode"], f"{r['seconds']:.3f}",
          f"{r['speedup']:.2f}", r["forward_passes"], f"{r['passes_vs_one_token']:.2f}",
          "yes" if r["identical_answers"] else "NO"] for r in rows])


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("--model", default="abacus-gpt2-add-window-10-k2", help="bundled name or checkpoint folder")
    parser.add_argument("--digits", type=int, nargs="+", default=[30, 100])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[128, 1])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--problems", type=int, default=512, help="problems per setting at batch sizes above 1")
    parser.add_argument("--single", type=int, default=32, help="problems per setting at batch size 1")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min", action="store_true", help="also time commit='min'")
    parser.add_argument("--raw", action="store_true", help="also time the raw heads (confirm=False, not exact)")
    parser.add_argument("--note", default="", help="a remark recorded with the results (e.g. that the machine was busy)")
    parser.add_argument("--out", default=str(RESULTS / "speculative_speed.json"))
    args = parser.parse_args(argv)

    model, tok = load_checkpoint(args.model)
    model.eval()
    modes = mode_table(model.config.num_future_tokens, args.min, args.raw)
    load_before = load_average()
    rows = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        for digits in args.digits:
            for batch_size in args.batch_sizes:
                problems = args.single if batch_size == 1 else args.problems
                rows += bench_setting(model, tok, modes, digits, batch_size, problems, args.rounds)
                for line in table(rows[-len(modes):]):
                    print(line)
    what = (f"wall time of greedy decoding with {args.model}, one token per pass vs self-speculative "
            f"(median of {args.rounds} rounds, modes taking turns, after a warm-up; prompts tokenized outside "
            "the clock); passes: forward passes per round, prefill included")
    return write_results(args.out, {"model": args.model, "rows": rows}, what=what, note=args.note, load_before=load_before,
                         title="Self-speculative decoding vs one token per pass", table=table(rows))


if __name__ == "__main__":
    main()
