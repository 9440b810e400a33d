"""How well each layer's attention heads tell one abacus index from the others.

    python bench/abacus_index_margins.py abacus-gpt2-add --max-index 20

For every layer and head, the query of abacus index i and the keys of every index j in
1..--max-index are computed from the abacus embedding table alone (through the block's ln_1 and
its query/key projections, with no token or segment embedding). The margin of i is its own score
minus the best other index's score (in logits; > 0 means index i picks itself), and the table
names that rival. An index-matching head with a small or negative margin against a far index
(|i - j| > the training length) is a collision: a long operand puts those two digits side by
side and the lookup can fetch the wrong one. Writes bench/results/abacus_index_margins_<name>.json and .md.
"""

from __future__ import annotations

from pathlib import Path

import torch
from common import script_parser
from machine import RESULTS, load_average, markdown_table, write_results

from hf_arith.runtime.loading import load_checkpoint
from hf_arith.training.index_separation import has_abacus_table, index_scores


@torch.no_grad()
def margins(model, max_index: int) -> list[dict]:
    """One row per (layer, head): margin and rival of each index 1..max_index."""
    body = model.transformer
    table = body.abacus.weight[1 : max_index + 1]  # indices 1..max_index (row 0: not a digit)
    rows = []
    for layer, block in enumerate(body.h):
        scores = index_scores(block, table)
        for head in range(len(scores)):
            s = scores[head]
            own = s.diagonal()
            others = s - torch.diag(torch.full_like(own, float("inf")))
            best, rival = others.max(dim=1)
            rows.append({"layer": layer, "head": head, "margin": (own - best).tolist(),
                         "rival": (rival + 1).tolist()})
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("model", nargs="?", default="abacus-gpt2-add")
    parser.add_argument("--max-index", type=int, default=20)
    args = parser.parse_args(argv)
    load_before = load_average()
    model, _ = load_checkpoint(args.model)
    if not has_abacus_table(model):
        raise SystemExit(f"{args.model}: not an abacus model")
    rows = margins(model, args.max_index)
    lines = [f"Each cell: margin (rival index). Indices 1..{args.max_index}.", ""]
    lines += markdown_table(["layer", "head", *range(1, args.max_index + 1)], "r" * (args.max_index + 2), [
        [r["layer"], r["head"], *(f"{m:.1f} ({j})" for m, j in zip(r["margin"], r["rival"]))] for r in rows])
    print("\n".join(lines))
    what = __doc__.split("\n\n")[1].replace("\n", " ")
    return write_results(RESULTS / f"abacus_index_margins_{Path(str(args.model)).name}.json",
                         {"model": args.model, "max_index": args.max_index, "rows": rows}, what=what,
                         load_before=load_before, title=f"Abacus index margins: {args.model}", table=lines)


if __name__ == "__main__":
    main()
