"""Quick length-generalization probe of a checkpoint: exact match at a few operand lengths.

    python bench/length_probe.py runs/abacus-gpt2-add/checkpoint-2000
    python bench/length_probe.py runs/looped-add/final --lengths 10,20 --samples 500 --per-digit

For each length L, --samples held-out problems whose two operands both have L digits (the same
problems for every model: seed 4321, decimal lengths), decoded greedily with the shared decoder.
With --per-digit, also the accuracy of each answer digit (units first) and the share of answers of
the right length, which tells a failing carry or end token from failing digit lookup.
Used during training to compare recipes (bench/results/abacus-length.md); prints only.
"""

from __future__ import annotations

import torch
from common import decimal_heldout, decode, per_digit, script_parser
from machine import command_line, machine_info

from hf_arith.loading import load_checkpoint


def main(argv=None) -> None:
    parser = script_parser(__doc__)
    parser.add_argument("model", help="bundled name or checkpoint folder")
    parser.add_argument("--lengths", default="5,10,13,16,20,25,30")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--per-digit", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok = load_checkpoint(args.model)
    print(command_line())
    print(machine_info())
    for length in (int(x) for x in args.lengths.split(",")):
        texts, refs, _ = decimal_heldout(tok, length, length, args.samples, seed=4321)
        answers, _, _ = decode(model, tok, texts)
        exact = sum(a == r for a, r in zip(answers, refs)) / len(refs)
        line = f"{length:>3} digits: exact match {exact:.3f} ({len(refs)} problems)"
        if args.per_digit:
            right_length = sum(len(a or "") == len(r) for a, r in zip(answers, refs)) / len(refs)
            line += f"; right length {right_length:.3f}; per digit, units first: {per_digit(answers, refs)}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
