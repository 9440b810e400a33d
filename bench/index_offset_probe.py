"""Far abacus indices or long sequences: which one breaks an abacus model beyond its training length?

    python bench/index_offset_probe.py runs/abacus-gpt2-add-long/final --lengths 20,40,60,100 --offsets 0,20,50,80
    python bench/index_offset_probe.py abacus-gpt2-add --lengths 10,20,30 --offsets 0,10 --out bench/results/x.json

For each operand length L and index offset k: --samples held-out additions whose two operands both
have L digits, run teacher forced (the whole answer in the input, one forward pass), with k added
to every abacus index, as the training offset does. A problem counts as right when every answer
token is the model's top choice, which is exactly when greedy decoding writes it. Short operands
at a large k have far indices in a short sequence; long operands at k = 0 have near indices in a
long sequence. Also printed: the answer token (units first, 0-based) where each wrong answer first
goes wrong, which tells failing lookups at far indices from failures spread over every position.
Only for abacus models whose position ids are digit indices (optionally with segments).
"""

from __future__ import annotations

import numpy as np
import torch
from common import add_length_probe_options, script_parser
from machine import command_line, load_average, machine_info, write_results

from hf_arith.data.formatting import render
from hf_arith.data.problems import ProblemSpec, sample
from hf_arith.models.abacus_positions import pack_positions, unpack_positions
from hf_arith.runtime.loading import load_checkpoint

SEED = 4321  # the same problems for every model


@torch.no_grad()
def probe(model, tok, length: int, offset: int, samples: int) -> dict:
    """Exact match (teacher forced) of `samples` L-digit additions with every abacus index moved up by `offset`."""
    fmt, config = tok.arith_format, model.config
    problems = sample(ProblemSpec(task=fmt.task, base=fmt.base, min_digits=length, max_digits=length), samples,
                      np.random.default_rng(SEED + length), split="test")
    ids, lengths, prompt_lengths = (torch.from_numpy(a) for a in render(problems, fmt, with_answer=True))
    columns = torch.arange(ids.shape[1])[None]
    mask = (columns < lengths[:, None]).long()
    index, segment = unpack_positions(model.position_ids_from_input_ids(ids), config.abacus_max_digits)
    positions = pack_positions(index + offset, segment, config.abacus_max_digits)
    predicted = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits.argmax(-1)[:, :-1]
    target_columns = columns[:, 1:]
    in_answer = (target_columns >= prompt_lengths[:, None]) & (target_columns < lengths[:, None])
    wrong = (predicted != ids[:, 1:]) & in_answer
    failed = wrong.any(-1)
    first = (wrong.int().argmax(-1) + 1 - prompt_lengths)[failed]
    return {"length": length, "offset": offset, "problems": samples,
            "exact_match": round(1 - failed.float().mean().item(), 4),
            "token_accuracy": round(1 - wrong.sum().item() / in_answer.sum().item(), 5),
            "first_wrong_token": np.bincount(first.numpy(), minlength=1).tolist() if len(first) else []}


def main(argv=None) -> None:
    parser = script_parser(__doc__)
    add_length_probe_options(parser, "10,20,30")
    parser.add_argument("--offsets", default="0,10,20")
    args = parser.parse_args(argv)
    load_before = load_average()
    torch.set_num_threads(args.threads)
    model, tok = load_checkpoint(args.model)
    model.eval()
    if not hasattr(model, "position_ids_from_input_ids") or tok.arith_format.task not in ("add", "sub"):
        raise SystemExit(f"{args.model}: not an abacus addition or subtraction model")
    print(command_line())
    print(machine_info())
    top = model.config.abacus_max_digits
    rows = []
    for length in (int(x) for x in args.lengths.split(",")):
        for offset in (int(x) for x in args.offsets.split(",")):
            if length + 2 + offset > top:  # the answer (one digit longer, aligned one up) must fit the table
                continue
            row = probe(model, tok, length, offset, args.samples)
            first = [i for i, c in enumerate(row["first_wrong_token"]) for _ in range(c)]
            print(f"{length:>4} digits, offset {offset:>3}: exact {row['exact_match']:.3f}, "
                  f"token accuracy {row['token_accuracy']:.4f}; first wrong token (median) "
                  f"{int(np.median(first)) if first else '-'}", flush=True)
            rows.append(row)
    if args.out:
        what = __doc__.split("\n\n")[1].replace("\n", " ")
        write_results(args.out, {"model": str(args.model), "seed": SEED, "rows": rows}, what=what,
                      load_before=load_before)


if __name__ == "__main__":
    main()
