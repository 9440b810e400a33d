"""Which part of a sorting scratchpad a checkpoint has learned: teacher-forced token accuracy.

    python bench/sort_line_probe.py runs/abacus-gpt2-sort-10/checkpoint-1000
    python bench/sort_line_probe.py CHECKPOINT --digits 1:4 --samples 200
    python bench/sort_line_probe.py runs/sort-unmarked/final --rounds 20x6 5x6 --samples 300 [--spread]
    python bench/sort_line_probe.py --kinds uniform tie_heavy carried_ties --samples 2000

Each set's held-out lists are rendered with their written answers and scored in one forward pass:
for every answer token, whether the model's most likely next token is the written one. Printed per
set: the share of lists with every token right, the accuracy of digit tokens (keyed forms) and of
label tokens, and of each line's tokens (line 0 is the first pass; the last is the sorted labels).
During training this separates a form whose keys are learned but whose labels are not, which the
mean loss of a keyed form hides (half its tokens are digits). Sets: lists of 2-10 items with each
length drawn on its own (--digits), ten items of the longest length, ten one-digit items.

With --rounds (forms that write a place's last round with the next place's digits, so every round
compares two digits of the line before): lists of exactly ITEMS items of DIGITS digits, fed one at a
time, and each label of every line after the first counted by the comparison that wrote it: a slot
paired in its round whose two digits in the line before tie or differ (by where the round lies in its
place: first, middle, last), or a slot left unpaired at a line's end. A miss is a label whose most
likely token is not the written one. Why: a tie kept is the one comparison a list's later places cannot
mend when the higher digits tie too, and long lists hold far more ties than short ones, so the rate per
tie, not per token, says what a long list asks for. --spread moves each list's items to random places
among the model's labels (far apart in the alphabet, as in training with data.item_spread). The ties
are counted again by whether a larger digit has just moved into the slot before the pair, the tie a long
list meets far more often than a short one; --kinds counts, with no model, how often training lists of
each problem kind hold it.
"""

from __future__ import annotations

import numpy as np
import torch
from common import script_parser
from machine import command_line, machine_info

from hf_arith.data.formatting import PROMPT_END, SORT_LABELS, get_task, render
from hf_arith.data.problems import ProblemSpec, sample, with_items_moved
from hf_arith.data.tasks.sort import Sort, transposition_rounds
from hf_arith.runtime.decoding import forced_logits
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


def carried_tie(order, before, digit, slot: int) -> bool:
    """Whether the tie at a pair's left `slot` comes just after a larger digit moved into the slot before it:
    `before` and `order` the item order of the line before and of the label's line, `digit` the line before's
    digits at the place, by slot."""
    return slot >= 2 and order[slot - 1] == before[slot - 2] and digit[slot - 2] > digit[slot]


def compared_lines(problems, lines, row: int):
    """For each line after the first that list `row` writes (`lines` from `transposition_rounds`): its index,
    place and round, the item order of the line before and of its own, and the line before's digits at the
    place, by slot: what the line's comparisons read."""
    present = problems.lengths > 0
    rounds = int(present.sum(axis=1).max())
    before = np.argsort(~present[row], kind="stable")
    for i, (order, has_line) in enumerate(lines):
        if not has_line[row]:
            continue
        place, round_ = divmod(i, rounds)
        if i:
            yield i, place, round_, before, order[row], problems.operands[row, before, place]
        before = order[row]


def carried_ties_per_list(problems) -> float:
    """How many labels of the written working, per list, keep a tie just after a larger digit moved in."""
    items, lines = (problems.lengths > 0).sum(axis=1), transposition_rounds(problems)
    count = 0
    for row in range(len(problems)):
        for _, _, round_, before, order, digit in compared_lines(problems, lines, row):
            count += sum(digit[s] == digit[s + 1] and carried_tie(order, before, digit, s)
                         for s in range(round_ % 2, items[row] - 1, 2))
    return count / len(problems)


def round_census(model, fmt, items: int, digits: int, n: int, spread: bool = False) -> dict:
    """Teacher-forced misses of `n` held-out lists of `items` items of `digits` digits, by comparison
    (module docstring): per class its labels and misses; the ties again by how many of the four slots of
    the line before that the label's query sees (slots - 2 to + 1: its own line's token before it sees
    its own slot's neighbours) hold the tied digit, and by whether the slot before the pair has just taken
    a larger digit from the slot before it (the query is that digit, moving right one slot a round, as a
    large digit does for many rounds in a long list); and each miss's line, place, round and slot."""
    spec = ProblemSpec(task="sort", min_digits=digits, max_digits=digits, min_items=items, max_items=items)
    rng = np.random.default_rng(SEED)
    problems = sample(spec, n, rng, split="test")
    if spread:
        problems = with_items_moved(problems, fmt.max_items, rng, spread=True)
    ids, lengths, prompt_lengths = render(problems, fmt, with_answer=True)
    lines = transposition_rounds(problems)
    width = 2 * items + 1  # a line's label-digit pairs and the `=` that follows
    tally = {"classes": {}, "ties_by_window": {}, "ties_by_carry": {}}  # each: kind -> [labels, misses]
    where = []
    for row in range(n):
        row_ids = torch.tensor(ids[row: row + 1, : lengths[row]], dtype=torch.long)
        predicted = forced_logits(model, row_ids)[0].argmax(-1)  # in column spans where a list is long
        start = int(prompt_lengths[row])
        # the first line compares the prompt's digits, which no line before holds
        for i, place, round_, before, order, digit in compared_lines(problems, lines, row):
            stage = "first" if round_ == 0 else "last" if round_ == items - 1 else "middle"
            for slot in range(items):
                partner = slot + 1 if slot % 2 == round_ % 2 else slot - 1
                kinds = {"classes": "unpaired"}
                if 0 <= partner < items:
                    tie = digit[slot] == digit[partner]
                    kinds["classes"] = f"{'tie' if tie else 'differ'}, {stage} round"
                    if tie:
                        assert order[slot] == before[slot], "a tie the reference swapped"
                        seen = digit[max(slot - 2, 0): slot + 2]
                        kinds["ties_by_window"] = f"{int((seen == digit[slot]).sum())} of the window's digits equal"
                        carried = carried_tie(order, before, digit, slot)
                        kinds["ties_by_carry"] = f"{'after' if carried else 'not after'} a larger digit moved in"
                at = start + i * width + 2 * slot
                missed = int(predicted[at - 1]) != int(row_ids[0, at])
                for table, kind in kinds.items():
                    counts = tally[table].setdefault(kind, [0, 0])
                    counts[0], counts[1] = counts[0] + 1, counts[1] + missed
                if missed:
                    where.append({"list": row, "line": i, "place": place, "round": round_, "slot": slot,
                                  "kind": "; ".join(kinds.values())})
    record = {"lists": n, "label_tokens": sum(c[0] for c in tally["classes"].values()), "misses": len(where)}
    for table, kinds in tally.items():
        record[table] = {k: {"labels": c[0], "misses": c[1], "rate": round(c[1] / c[0], 6)} for k, c in sorted(kinds.items())}
    return record | {"where": where}


def main(argv=None) -> None:
    parser = script_parser(__doc__)
    parser.add_argument("model", nargs="?", help="checkpoint folder or bundled name of a sorting model")
    parser.add_argument("--digits", default="1:10", help="A:B, the lengths of the first set (default 1:10)")
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", nargs="+", metavar="ITEMSxDIGITS",
                        help="instead: the miss census by comparison on lists of that shape (module docstring)")
    parser.add_argument("--spread", action="store_true", help="with --rounds: items moved to random places among the labels")
    parser.add_argument("--kinds", nargs="+", metavar="KIND",
                        help="instead, no model: how often lists of 2-5 items of 1-6 digits of each problem kind "
                             "(uniform, tie_heavy, carried_ties, ...) hold a tie just after a larger digit moved in")
    args = parser.parse_args(argv)
    if args.kinds:
        spec = ProblemSpec(task="sort", min_digits=1, max_digits=6, min_items=2, max_items=5)
        print(command_line())
        for kind in args.kinds:
            problems = sample(spec, args.samples, np.random.default_rng(0), split=None, kind=kind)
            print(f"{kind}: {carried_ties_per_list(problems):.2f} a list ({args.samples} lists)")
        return
    if args.model is None:
        parser.error("name a model (or ask --kinds)")
    torch.set_num_threads(args.threads)
    model, tok = load_checkpoint(args.model)
    model.eval()
    fmt = tok.arith_format
    low, high = (int(x) for x in args.digits.split(":"))
    print(command_line())
    print(machine_info())
    if args.rounds:
        if fmt.scratchpad not in Sort._next:
            parser.error(f"--rounds needs a form that compares digits of the line before ({', '.join(Sort._next)}), "
                         f"not {fmt.scratchpad}")
        for shape in args.rounds:
            items, digits = (int(x) for x in shape.split("x"))
            census = round_census(model, fmt, items, digits, args.samples, args.spread)
            where = census.pop("where")
            print(f"{items} items of {digits} digits{' (spread)' if args.spread else ''}: {census}")
            print(f"  misses (list, line, place, round, slot, kind): {[tuple(w.values()) for w in where[:40]]}")
        return
    sets = {f"2-10 items of {low}-{high} digits": ProblemSpec(task="sort", min_digits=low, max_digits=high,
                                                             min_items=2, max_items=10),
            f"10 items of {high} digits": ProblemSpec(task="sort", min_digits=high, max_digits=high,
                                                      min_items=10, max_items=10),
            "10 items of 1 digit": ProblemSpec(task="sort", min_digits=1, max_digits=1, min_items=10, max_items=10)}
    for name, spec in sets.items():
        print(f"{name}: {line_scores(model, fmt, spec, args.samples)}")


if __name__ == "__main__":
    main()
