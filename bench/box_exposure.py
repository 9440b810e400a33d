"""How many training lists of each sorting recipe lie inside a box of list sizes and number lengths.

Usage: python bench/box_exposure.py [RECIPE ...] [--items A:B] [--digits A:B] [--draws N]

Per stage: its steps x batch size x the share of lists drawn by the stage's data spec that lie in
the box (N uniform lists and N of the stage's hard kind, weighted by its hard_fraction; the rng seed
is the stage's index). Mined lists are counted as drawn like the rest. Default: the two sorting
presets and abacus-gpt2-sort's box (2-5 items, 1-6 digits), the box abacus-gpt2-sort-10 must stay
exact in. Prints JSON (the machine and this command included) to keep with the figures it backs.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from common import script_parser
from machine import machine_info

from hf_arith.cli.common import item_range, length_range
from hf_arith.data.formatting import NumberFormat
from hf_arith.data.problems import ProblemSpec, sample
from hf_arith.training.recipe import load_stages
from hf_arith.training.run import recipe_spec


def share_in_box(spec: ProblemSpec, kind: str, draws: int, items, digits, seed: int) -> float:
    lists = sample(spec, draws, np.random.default_rng(seed), split=None, kind=kind)
    size, longest = (lists.lengths > 0).sum(axis=1), lists.lengths.max(axis=1)
    inside = (items[0] <= size) & (size <= items[1]) & (digits[0] <= longest) & (longest <= digits[1])
    return float(inside.mean())


def chain_exposure(recipe: str, items, digits, draws: int) -> dict:
    stages, total = [], 0.0
    for index, stage in enumerate(load_stages(recipe)):
        data, optim = stage.recipe.data, stage.recipe.optim
        spec = recipe_spec(stage.recipe, NumberFormat.from_dict(stage.recipe.format))
        share = (1 - data.hard_fraction) * share_in_box(spec, "uniform", draws, items, digits, index)
        if data.hard_fraction:
            share += data.hard_fraction * share_in_box(spec, data.hard_kind, draws, items, digits, index)
        lists = optim.steps * optim.batch_size
        stages.append({"stage": stage.label, "steps": optim.steps, "batch_size": optim.batch_size,
                       "range": f"{data.min_items}-{data.max_items} items of {data.min_digits}-{data.max_digits} "
                                f"digits, sample_by {data.sample_by}",
                       "hard_fraction": data.hard_fraction, "hard_kind": data.hard_kind,
                       "share_in_box": round(share, 4), "lists_in_box": int(round(share * lists))})
        total += share * lists
    return {"stages": stages, "lists_in_box": int(round(total))}


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("recipes", nargs="*", default=["abacus-gpt2-sort-10", "abacus-gpt2-sort"])
    parser.add_argument("--items", type=item_range, default=(2, 5))
    parser.add_argument("--digits", type=length_range, default=(1, 6))
    parser.add_argument("--draws", type=int, default=20000)
    args = parser.parse_args(argv)
    report = {"what": __doc__.split("\n\n")[1].replace("\n", " "), "box": {"items": args.items, "digits": args.digits},
              "chains": {r: chain_exposure(r, args.items, args.digits, args.draws) for r in args.recipes},
              "machine": machine_info(), "command": "python bench/box_exposure.py " + " ".join(sys.argv[1:])}
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
