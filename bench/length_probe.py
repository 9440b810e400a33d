"""Quick length-generalization probe of a checkpoint: exact match at a few operand lengths.

    python bench/length_probe.py runs/abacus-gpt2-add/checkpoint-2000
    python bench/length_probe.py runs/looped-add-window/final --lengths 10,20 --samples 500 --per-digit

For each length L, --samples held-out problems whose two operands both have L digits (the same
problems for every model: seed 4321, decimal lengths), decoded greedily with the shared decoder.
With --per-digit, also the accuracy of each answer digit (units first) and the share of answers of
the right length, which tells a failing carry or end token from failing digit lookup.
Used during training to compare recipes (bench/results/abacus-length.md). Prints; with --out, also
writes the figures with the machine and the command (bench/machine.py's write_results).
"""

from __future__ import annotations

import torch
from common import add_length_probe_options, decimal_heldout, decode, per_digit, script_parser
from machine import command_line, load_average, machine_info, write_results

from hf_arith.runtime.loading import load_checkpoint

SEED = 4321  # the same problems for every model


def main(argv=None) -> None:
    parser = script_parser(__doc__)
    add_length_probe_options(parser, "5,10,13,16,20,25,30")
    parser.add_argument("--per-digit", action="store_true")
    args = parser.parse_args(argv)
    load_before = load_average()
    torch.set_num_threads(args.threads)
    model, tok = load_checkpoint(args.model)
    print(command_line())
    print(machine_info())
    rows = []
    for length in (int(x) for x in args.lengths.split(",")):
        texts, refs, _ = decimal_heldout(tok, length, length, args.samples, seed=SEED)
        answers, _, _ = decode(model, tok, texts)
        exact = sum(a == r for a, r in zip(answers, refs)) / len(refs)
        line = f"{length:>3} digits: exact match {exact:.3f} ({len(refs)} problems)"
        if args.per_digit:
            right_length = sum(len(a or "") == len(r) for a, r in zip(answers, refs)) / len(refs)
            line += f"; right length {right_length:.3f}; per digit, units first: {per_digit(answers, refs)}"
        print(line, flush=True)
        rows.append({"length": length, "problems": len(refs), "exact_match": exact})
    if args.out:
        write_results(args.out, {"model": args.model, "seed": SEED, "rows": rows}, load_before=load_before,
                      what=f"exact match of {args.model} on held-out problems whose two operands both have L "
                           f"digits, {args.samples} per length (seed {SEED}), greedy decoding with the KV cache")


if __name__ == "__main__":
    main()
