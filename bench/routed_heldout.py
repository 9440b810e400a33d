"""Held-out exact match of `hf-arith solve` with no model named: each problem answered by the bundled
model for its task and size (`runtime.loading.bundled_model_for_problem`), at that model's default views.

Usage: python bench/routed_heldout.py [--draw-from abacus-gpt2-sort-10] [--digits 1:10] [--items 2:10] [--samples 10000]
       [--seed 1234] [--threads 2] [--out PATH]

The problems are the test split's (`problems.held_out_problems`, which training never draws), drawn as
`hf-arith eval` draws them in the format of --draw-from (with the same seed, the problems of its
eval_results.json).
Prints, and with --out writes as JSON (the machine and this command included): overall exact match,
wrong answers and how many were at confidence >= 0.9, and per routed model its share and exact match.
"""

from __future__ import annotations

import json
import sys
import time

import torch
from common import run_set, script_parser
from machine import load_average, machine_info

from hf_arith.cli.common import item_range, length_range
from hf_arith.data.problems import held_out_problems
from hf_arith.runtime.limits import problem_spec
from hf_arith.runtime.loading import bundled_model_for_problem, load_checkpoint
from hf_arith.runtime.solving import LOW_CONFIDENCE


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("--draw-from", default="abacus-gpt2-sort-10", help="the model whose format the problems are drawn in")
    parser.add_argument("--digits", type=length_range, default=(1, 10))
    parser.add_argument("--items", type=item_range, default=(2, 10))
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before, start = load_average(), time.perf_counter()

    # Drawn in the format of --draw-from (the same seed gives its eval_results.json's problems).
    _, tok = load_checkpoint(args.draw_from)
    fmt = tok.arith_format
    spec = problem_spec(fmt, *args.digits, items=args.items if fmt.task_rules.item_list else None)
    drawn = held_out_problems(spec, args.samples, seed=args.seed)
    texts, answers = drawn.to_text(), drawn.answer_text()
    routes: dict[str, list[int]] = {}
    for i, text in enumerate(texts):
        routes.setdefault(bundled_model_for_problem(text), []).append(i)

    record = {"task": fmt.task, "drawn_from": args.draw_from, "digits": list(args.digits), "items": list(args.items),
              "samples": args.samples, "seed": args.seed, "threads": args.threads,
              "confidence_threshold": LOW_CONFIDENCE, "models": {}}
    wrong, count, silent = [], 0, 0  # the wrong answers listed (run_set keeps the first 200 a model), all of them
    for name, chosen in routes.items():
        model, tok = load_checkpoint(name)
        part = run_set(model, tok, [texts[i] for i in chosen], [answers[i] for i in chosen], name)
        record["models"][name] = {"problems": part["n"], "exact_match": 1 - part["wrong"] / part["n"],
                                  "answer_views": model.config.answer_views}
        wrong += [{**w, "model": name} for w in part["wrong_answers"]]
        count, silent = count + part["wrong"], silent + part["silent_wrong"]
    record.update(exact_match=1 - count / len(texts), wrong=count, silent_wrong=silent,
                  seconds=round(time.perf_counter() - start, 1), wrong_answers=wrong[:50],
                  machine=machine_info(load_before), command="python bench/routed_heldout.py " + " ".join(sys.argv[1:]))
    print(json.dumps({k: v for k, v in record.items() if k != "wrong_answers"}, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            f.write(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
