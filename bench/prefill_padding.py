"""How much of a batched prompt pass is padding, and how much bucketed prefill leaves.

    python bench/prefill_padding.py                       # every bundled model, batches of 64 and 256

For each model it tokenizes the same held-out problems `bench/decode_speed.py` decodes (the
model's own format, operands of 1 to `--max-digits` digits), left-padded in batches, and counts
tokens, not seconds:
- `padded`: tokens one padded forward pass computes (rows x the longest prompt);
- `real`: the prompts' own tokens;
- `bucketed`: tokens the decoder's bucketed prefill computes (`hf_arith.runtime.decoding.prefill_buckets`),
  with the number of forward calls it makes.
Deterministic; results go to bench/results/prefill_padding.json and .md with the machine and command.
"""

from __future__ import annotations

from common import add_model_batch_options, make_batches, problems_for, script_parser
from machine import RESULTS, markdown_table, write_results

from hf_arith.bundled import bundled_models
from hf_arith.runtime.decoding import prefill_buckets
from hf_arith.runtime.loading import load_checkpoint


def count(batches) -> dict:
    padded = real = bucketed = calls = 0
    for ids, mask, _ in batches:
        lengths = mask.sum(1).tolist()
        bounds = prefill_buckets(lengths)
        padded += ids.numel()
        real += sum(lengths)
        bucketed += sum(min(b for b in bounds if b >= n) for n in lengths)
        calls += len(bounds)
    return {"padded_tokens": padded, "real_tokens": real, "bucketed_tokens": bucketed,
            "padding_share": 1 - real / padded, "bucketed_share_of_padded": bucketed / padded,
            "forward_calls_per_batch": calls / len(batches)}


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    add_model_batch_options(parser, RESULTS / "prefill_padding.json", batch_sizes=(64, 256),
                            batches_help="batches per setting", repeats=None)
    args = parser.parse_args(argv)

    rows = []
    for name in args.models or bundled_models():
        model, tokenizer = load_checkpoint(name)
        texts = problems_for(model, tokenizer, max(args.batch_sizes) * args.batches, args.max_digits)
        for batch_size in args.batch_sizes:
            row = {"model": name, "batch_size": batch_size,
                   **count(make_batches(tokenizer, texts, batch_size, args.batches))}
            rows.append(row)
            print(f"{name:>18} batch={batch_size:>3}: padding {row['padding_share']:.1%} of prompt tokens; "
                  f"bucketed prefill computes {row['bucketed_share_of_padded']:.1%} of them in "
                  f"{row['forward_calls_per_batch']:.2f} calls", flush=True)
    lines = markdown_table(["model", "batch", "padding share", "bucketed tokens / padded", "forward calls"], "lrrrr", [
        [r["model"], r["batch_size"], f"{r['padding_share']:.1%}", f"{r['bucketed_share_of_padded']:.1%}",
         f"{r['forward_calls_per_batch']:.2f}"] for r in rows])
    what = f"prompt tokens of {args.batches} left-padded batches per size (decode_speed.py's problems)"
    return write_results(args.out, {"rows": rows}, what=what, title="Prompt padding and bucketed prefill", table=lines)


if __name__ == "__main__":
    main()
