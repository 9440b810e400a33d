"""How each view of a problem is answered: the answer of every view, read back, and the right answer.

Usage: python bench/view_votes.py [PROBLEM ...] [--model MODEL] [--views N]

Each problem's views come from `answer_views.problem_views` (for sorting: the list relabelled, equal
values kept in order); every view is solved alone (`solve(..., views=1)`) and its answer read back as
an answer to the problem as given (`Task.answer_from_view`). Default: the lists the bundled
abacus-gpt2-sort got wrong at one view in its sweeps (seeds 2026 and 2027), at 8 views. Prints JSON
(the machine and this command included) to keep with the figures it backs.
"""

from __future__ import annotations

import json
import sys

import torch
from common import script_parser
from machine import machine_info

from hf_arith.evaluation.stress import references
from hf_arith.runtime.answer_views import problem_views
from hf_arith.runtime.loading import load_checkpoint
from hf_arith.runtime.solving import solve

SWEEP_WRONG = ["a:14,b:7,c:0,d:6,e:6", "a:30333,b:3,c:30000,d:300000,e:300000",
               "a:696,b:696,c:184,d:184,e:722", "a:60000,b:0,c:600000,d:6,e:666606"]


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("problems", nargs="*", default=SWEEP_WRONG)
    parser.add_argument("--model", default="abacus-gpt2-sort")
    parser.add_argument("--views", type=int, default=8)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    model, tok = load_checkpoint(args.model)
    fmt = tok.arith_format
    task = fmt.task_rules
    texts, orders, counts = problem_views(task, fmt, args.problems, args.views)
    answers = solve(model, tok, texts, return_confidence=True, views=1, warn_beyond_training=False)
    record, start = {"model": args.model, "views": args.views, "problems": []}, 0
    for problem, right, count in zip(args.problems, references(args.problems, fmt), counts):
        read = [task.answer_from_view(answers[i].answer, orders[i]) for i in range(start, start + count)]
        record["problems"].append({"problem": problem, "right": right, "views": count,
                                   "right_views": sum(a == right for a in read), "answers": read,
                                   "confidences": [round(answers[i].confidence, 4) for i in range(start, start + count)]})
        start += count
    record.update(machine=machine_info(), command="python bench/view_votes.py " + " ".join(sys.argv[1:]))
    print(json.dumps(record, indent=1))
    return record


if __name__ == "__main__":
    main()
