"""Which part of a sorting scratchpad a checkpoint has learned: teacher-forced token accuracy.

    python bench/sort_line_probe.py runs/abacus-gpt2-sort-10/checkpoint-1000
    python bench/sort_line_probe.py CHECKPOINT --digits 1:4 --samples 200

Each set's held-out lists are rendered with their written answers and scored in one forward pass:
for every answer token, whether the model's most likely next token is the written one. Printed per
set: the share of lists with every token right, the accuracy of digit tokens (keyed forms) and of
label tokens, and of each line's tokens (line 0 is the first pass; the last is the sorted labels).
During training this separates a form whose keys are learned but whose labels are not, which the
mean loss of a keyed form hides (half its tokens are digits). Sets: lists of 2-10 items with each
length drawn on its own (--digits), ten items of the longest length, ten one-digit items.
"""

from __future__ import annotations

import numpy as np
import torch
from common import script_parser
from machine import command_line, machine_info

from hf_arith.data.formatting import PROMPT_END, SORT_LABELS, get_task, render
from hf_arith.data.problems import ProblemSpec, sample
from hf_arith.runtime.loading import load_checkpoint

SEED = 7


def mean(xs: list) -> float | None:
    """The share of True in `xs`, to 4 places; None for no tokens of that kind."""
    return round(float(np.mean(xs)), 4) if xs else None


def line_scores(model, fmt, spec: ProblemSpec, n: int) -> dict:
    """Teacher-forced accuracy of `n` held-out lists of `spec`: all right, digits, labels, per line."""
    problems = sample(spec, n, np.random.default_rng(SEED), split="test")
    ids, lengths, prompt_lengths = render(problems, fmt, with_answer=True)
    ids = torch.tensor(ids, dtype=torch.long)
    with torch.no_grad():
        predicted = model(input_ids=ids).logits.argmax(-1)
    line_end = fmt.token_id(PROMPT_END)
    # the task's symbols: the labels, marked (upper-case) ones too where the scratchpad writes them
    label_ids = {fmt.token_id(c) for c in get_task("sort").symbols(fmt) if c.lower() in SORT_LABELS}
    digits, labels, lines, whole = [], [], {}, []
    for row in range(n):
        start, end = int(prompt_lengths[row]), int(lengths[row])
        target = ids[row, start:end].tolist()
        right = (ids[row, start:end] == predicted[row, start - 1:end - 1]).tolist()
        whole.append(all(right))
        line = 0
        for token, ok in zip(target, right):
            if token == line_end:
                line += 1
            elif token < fmt.base:  # digit ids are their values
                digits.append(ok)
            elif token in label_ids:
                labels.append(ok)
                lines.setdefault(line, []).append(ok)
    return {"all_right": mean(whole), "digit_tokens": mean(digits), "label_tokens": mean(labels),
            "label_tokens_by_line": {str(k): mean(v) for k, v in sorted(lines.items())}}


def main(argv=None) -> None:
    parser = script_parser(__doc__)
    parser.add_argument("model", help="checkpoint folder or bundled name of a sorting model")
    parser.add_argument("--digits", default="1:10", help="A:B, the lengths of the first set (default 1:10)")
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, tok = load_checkpoint(args.model)
    model.eval()
    fmt = tok.arith_format
    low, high = (int(x) for x in args.digits.split(":"))
    print(command_line())
    print(machine_info())
    sets = {f"2-10 items of {low}-{high} digits": ProblemSpec(task="sort", min_digits=low, max_digits=high,
                                                             min_items=2, max_items=10),
            f"10 items of {high} digits": ProblemSpec(task="sort", min_digits=high, max_digits=high,
                                                      min_items=10, max_items=10),
            "10 items of 1 digit": ProblemSpec(task="sort", min_digits=1, max_digits=1, min_items=10, max_items=10)}
    for name, spec in sets.items():
        print(f"{name}: {line_scores(model, fmt, spec, args.samples)}")


if __name__ == "__main__":
    main()
