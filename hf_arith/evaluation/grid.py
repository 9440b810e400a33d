"""The length-generalization grid: accuracy for every pair of operand lengths (len_a, len_b), and
for sorting, for every list size and item length (items, digits). The lengths are a range (every
length from A to B) or a sparse list such as 1, 10, 100, 1000 (`length_list`: every pair of listed
lengths, or with `diagonal` only equal ones), which is how models are measured far beyond training.

Each cell holds `samples_per_cell` problems whose operands have exactly len_a and len_b digits
(in the model's base), or lists of exactly `items` numbers of exactly `digits` digits each (the
hardest lists of that size: every radix pass orders every item), drawn from the held-out split
(the split hash of `problems.py`), so a cell inside the training range measures held-out accuracy. Small cells (1x1 has 100 problems,
of which about 10 are held out) are enumerated and sampled with replacement; the JSON records
how many distinct problems a cell used. Per-cell scores come from `hf_arith.evaluation.metrics`, the same
code as the evaluate metric.

Every problem first gets one teacher-forced pass over its correct answer. It yields the answer's
perplexity (near 1 means "almost right", large means "lost") and tells which problems greedy
decoding answers correctly: those where the correct token is the argmax at every answer step.
Only the other problems are decoded (`solve`: batched, KV-cached greedy decoding), so a grid
costs about one forward pass per problem where the model is right. Both passes run in chunks
sized to their sequences' length (`decoding.row_chunks`), so memory stays bounded at any length.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence

import numpy as np
import torch

from ..data.formatting import FormatError, Problems, get_task, quote, render
from ..data.problems import (
    DEFAULT_TEST_FRACTION,
    ProblemSpec,
    count_of_length,
    problem_hash,
    sample,
    split_of,
    with_answers,
)
from ..runtime.decoding import forced_scores, row_chunks
from ..runtime.limits import ModelLimits, model_limits
from ..runtime.solving import solve
from ..text import progress_bar
from .metrics import arith_scores, group_scores, length_key

ENUMERATE_LIMIT = 200_000  # cells with at most this many problems are enumerated, not sampled
SOLVED = 0.99  # a cell counts as solved at this exact match (the summary's `solved_up_to`)
MAX_LENGTHS = 100  # a sparse grid lists at most this many lengths (its full grid has their square of cells)


def parse_length_range(text: str, option: str = "--grid") -> tuple[int, int]:
    """'1:30' -> (1, 30); anything else is a one-line error naming the option."""
    m = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", str(text))
    if m is None or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise FormatError(f"{option} {text!r}: expected A:B with 1 <= A <= B operand digits, e.g. 1:30")
    return int(m.group(1)), int(m.group(2))


def parse_length_list(text: str, option: str = "--lengths") -> list[int]:
    """'1,10,100', '100:1000:100' (A:B:STEP, from A up to B; A:B is every length) or several of them
    separated by commas -> the sorted distinct lengths; anything else is a one-line error naming the option."""
    values: set[int] = set()
    for part in str(text).split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?::\s*(\d+)\s*(?::\s*(\d+)\s*)?)?", part)
        if m is None:
            raise FormatError(f"{option} {quote(text)}: expected lengths separated by commas, or A:B:STEP, "
                              "e.g. 1,10,100 or 100:1000:100")
        low, high, step = int(m.group(1)), int(m.group(2) or m.group(1)), int(m.group(3) or 1)
        if low < 1:
            raise FormatError(f"{option} {quote(text)}: lengths are numbers of digits, at least 1 (got {low})")
        if high < low or step < 1:
            raise FormatError(f"{option} {quote(text)}: a range A:B:STEP runs upwards (A <= B, STEP >= 1), "
                              f"got {quote(part.strip())}")
        if len(values) + len(range(low, high + 1, step)) > MAX_LENGTHS:  # before building a huge range
            raise FormatError(f"{option} {quote(text)}: at most {MAX_LENGTHS} lengths")
        values.update(range(low, high + 1, step))
    return sorted(values)


def grid_cells(rows: Sequence[int], columns: Sequence[int], diagonal: bool = False) -> list[tuple[int, int]]:
    """The (row, column) cells a grid runs: every pair, or with `diagonal` only equal lengths."""
    return [(a, b) for a in rows for b in columns if not diagonal or a == b]


# -- problems of one cell -------------------------------------------------------------------
def _random_operands(base: int, length: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """n numbers of exactly `length` digits, [n, length], least significant digit first."""
    digits = rng.integers(0, base, size=(n, length), dtype=np.int8)
    if length > 1:  # a non-zero leading digit, so the length is what was asked for
        digits[:, -1] = rng.integers(1, base, size=n, dtype=np.int8)
    return digits


def _all_operands(base: int, length: int) -> np.ndarray:
    """Every number of exactly `length` digits, [count, length], least significant digit first."""
    low = 0 if length == 1 else base ** (length - 1)
    values = np.arange(low, base**length, dtype=np.int64)
    return ((values[:, None] // base ** np.arange(length)[None, :]) % base).astype(np.int8)


def _pair(task: str, base: int, a: np.ndarray, b: np.ndarray) -> Problems:
    width = max(a.shape[1], b.shape[1])
    operands = np.zeros((len(a), 2, width), dtype=np.int8)
    operands[:, 0, : a.shape[1]], operands[:, 1, : b.shape[1]] = a, b
    lengths = np.tile(np.array([a.shape[1], b.shape[1]], dtype=np.int64), (len(a), 1))
    return Problems(task, base, operands, lengths)


def cell_problems(task: str, base: int, len_a: int, len_b: int, n: int, seed: int = 0,
                  test_fraction: float = DEFAULT_TEST_FRACTION) -> tuple[Problems, dict]:
    """n problems with operands of exactly len_a and len_b digits, from the held-out split.

    Returns the problems (operands only: `with_answers` adds answers) and how they were drawn: `distinct` problems, and
    `heldout` False where a cell's held-out split is empty (then the whole cell is used). The
    draw depends only on (seed, len_a, len_b), so a cell is the same in every grid.
    """
    rng = np.random.default_rng([seed, len_a, len_b])
    space = count_of_length(base, len_a) * count_of_length(base, len_b)
    heldout = test_fraction > 0
    if space <= ENUMERATE_LIMIT:
        a, b = _all_operands(base, len_a), _all_operands(base, len_b)
        pool = _pair(task, base, np.repeat(a, len(b), axis=0), np.tile(b, (len(a), 1)))
        test = np.flatnonzero(split_of(pool, test_fraction)) if heldout else np.arange(len(pool))
        if len(test) == 0:
            test, heldout = np.arange(len(pool)), False
        pick = rng.choice(test, size=n, replace=len(test) < n)
        problems, distinct = pool.select(np.sort(pick)), len(np.unique(pick))
    else:
        problems = _distinct_draws(task, base, len_a, len_b, n, rng, test_fraction if heldout else None)
        distinct = n
    return problems, {"distinct": int(distinct), "heldout": bool(heldout)}


def _distinct_draws(task: str, base: int, len_a: int, len_b: int, n: int, rng: np.random.Generator,
                    test_fraction: float | None) -> Problems:
    """n distinct random problems of a cell too large to enumerate (held out where `test_fraction`
    is given), in the order drawn: rejection sampling, a held-out problem being about test_fraction
    of the draws. Repeats are rare in a space this large; dropping them keeps `distinct` true."""
    chunks, have = [], 0
    while have < n:
        m = int(1.5 * (n - have) / (test_fraction or 1.0)) + 16
        batch = _pair(task, base, _random_operands(base, len_a, m, rng), _random_operands(base, len_b, m, rng))
        if test_fraction is not None:
            batch = batch.select(split_of(batch, test_fraction))
        chunks.append(batch)
        drawn = Problems(task, base, np.concatenate([c.operands for c in chunks]),
                         np.concatenate([c.lengths for c in chunks]))
        first = np.sort(np.unique(problem_hash(drawn), return_index=True)[1])  # the first draw of each problem
        have = len(first)
    return drawn.select(first[:n])


def sort_cell_problems(base: int, items: int, digits: int, n: int, seed: int = 0,
                       test_fraction: float = DEFAULT_TEST_FRACTION, task: str = "sort") -> tuple[Problems, dict]:
    """n held-out lists of exactly `items` numbers of exactly `digits` digits each (with answers),
    and how they were drawn, as `cell_problems` says. Small spaces repeat lists (1-digit pairs:
    100 lists, about 10 held out)."""
    spec = ProblemSpec(task=task, base=base, min_digits=digits, max_digits=digits, min_items=items, max_items=items)
    rng = np.random.default_rng([seed, items, digits])
    problems = sample(spec, n, rng, split="test" if test_fraction > 0 else None, test_fraction=test_fraction)
    return problems, {"distinct": len(np.unique(problem_hash(problems))), "heldout": test_fraction > 0}


def stack(parts: list[Problems]) -> Problems:
    """One batch from batches of (possibly) different operand widths and item counts, without answers."""
    items = max(p.operands.shape[1] for p in parts)
    width = max(p.operands.shape[2] for p in parts)
    operands = np.concatenate([np.pad(p.operands, ((0, 0), (0, items - p.operands.shape[1]),
                                                   (0, width - p.operands.shape[2]))) for p in parts])
    lengths = np.concatenate([np.pad(p.lengths, ((0, 0), (0, items - p.lengths.shape[1]))) for p in parts])
    return Problems(parts[0].task, parts[0].base, operands, lengths)


def cell_of(problems: Problems) -> np.ndarray:
    """Each problem's grid cell as (row, column), [n, 2]: its operand lengths (len_a, len_b), or for
    a sorting list its item count and its longest item's digits (items, digits)."""
    return get_task(problems.task).grid_cell(problems.lengths)


def axis_names(task: str) -> tuple[str, str]:
    """What a grid's rows and columns count: ('len_a', 'len_b'), or ('items', 'digits') for sorting."""
    return get_task(task).grid_axes


def plain_text(problems: Problems) -> tuple[list[str], list[str]]:
    """Problems and answers as plain decimal text ('123+456', '579'), fast for large batches."""
    return problems.to_text(), problems.answer_text()


# -- teacher forcing: perplexity of the correct answer, and whether greedy decoding finds it --
@torch.inference_mode()
def teacher_forced(model, tokenizer, problems: Problems, batch_size: int | None = None, model_kwargs: dict | None = None,
                   on_batch=None) -> tuple[np.ndarray, np.ndarray]:
    """One forward pass over prompt + correct answer (and end token) per problem. Returns

    - the perplexity of the correct answer: exp(mean negative log-likelihood of its tokens);
    - whether every answer token is the model's argmax given the correct tokens before it. Greedy
      decoding then writes exactly the correct answer (it follows the same path step by step), so
      those rows need no decoding; the argmax can differ only at floating-point ties.
    """
    fmt = tokenizer.arith_format
    ids, lengths, prompt_lengths = render(problems, fmt, with_answer=True)
    pad = tokenizer.pad_token_id
    device = next(model.parameters()).device
    perplexity = np.empty(len(problems), dtype=np.float64)
    agrees = np.empty(len(problems), dtype=bool)
    for rows in row_chunks(lengths, model, batch_size):  # fewer rows at a time where sequences are long
        lens, prompts = lengths[rows], prompt_lengths[rows]
        width = int(lens.max())
        # Left padding, as `solve` feeds prompts: every row ends at the last column.
        shift = width - lens
        src = np.arange(width)[None, :] - shift[:, None]
        real = src >= 0
        batch = np.where(real, np.take_along_axis(ids[rows, :width], np.clip(src, 0, None), axis=1), pad)
        input_ids = torch.from_numpy(batch).to(device)
        mask = torch.from_numpy(real.astype(np.int64)).to(device)
        # Token at column c (an answer token when c >= shift + prompt length) is scored by column c - 1.
        cols = np.arange(1, width)[None, :]
        answer = torch.from_numpy(cols >= (shift + prompts)[:, None]).to(device)
        logp, agree = forced_scores(model, input_ids, mask, answer, model_kwargs)
        nll = -(logp * answer).sum(1) / answer.sum(1)
        perplexity[rows] = torch.exp(nll).cpu().numpy()
        agrees[rows] = agree.cpu().numpy()
        if on_batch is not None:
            on_batch(len(lens))
    return perplexity, agrees


def answer_perplexity(model, tokenizer, problems: Problems, batch_size: int | None = None,
                      model_kwargs: dict | None = None, on_batch=None) -> np.ndarray:
    """exp(mean negative log-likelihood) of each problem's correct answer tokens (and end token),
    with the prompt and the correct answer so far as context (teacher forcing)."""
    return teacher_forced(model, tokenizer, problems, batch_size, model_kwargs, on_batch)[0]


# -- the grid -------------------------------------------------------------------------------
def grid_problem_set(fmt, cells: Sequence[tuple[int, int]], samples_per_cell: int = 100, seed: int = 0,
                     test_fraction: float = DEFAULT_TEST_FRACTION) -> tuple[Problems, dict]:
    """All cells' problems in one batch (cell by cell, with answers), and how each cell was drawn.
    `cells`: (len_a, len_b), or for sorting (items, digits) (`grid_cells`), ones the format can
    write (`length_grid` checks them)."""
    parts, drawn = [], {}
    for a, b in cells:
        if fmt.task_rules.item_list:
            problems, drawn[(a, b)] = sort_cell_problems(fmt.base, a, b, samples_per_cell, seed, test_fraction,
                                                         task=fmt.task)
        else:
            problems, drawn[(a, b)] = cell_problems(fmt.task, fmt.base, a, b, samples_per_cell, seed, test_fraction)
        parts.append(problems)
    return with_answers(stack(parts)), drawn  # answers in one vectorized pass over all cells


def _matrix(cells: dict, rows: Sequence[int], columns: Sequence[int], field: str) -> list[list[float | None]]:
    """One field of every cell, row by column; None where a cell was not run (a diagonal grid's others)."""
    return [[cells[(a, b)][field] if (a, b) in cells else None for b in columns] for a in rows]


def _in_range(row: int, column: int, train_rows, train_range) -> bool:
    return (train_range is not None and train_rows is not None
            and train_rows[0] <= row <= train_rows[1] and train_range[0] <= column <= train_range[1])


def solved_up_to(cells: dict, lo: int, hi: int, threshold: float = SOLVED) -> int:
    """The largest L such that every cell run with both lengths in [lo, L] reaches `threshold` (lo - 1 if
    none); in a sparse grid L is one of its lengths."""
    best = lo - 1
    for size in sorted({length for key in cells for length in key if lo <= length <= hi}):
        if any(cell["exact_match"] < threshold for (a, b), cell in cells.items()
               if lo <= a <= size and lo <= b <= size):
            break
        best = size
    return best


def grid_report(predictions, answers, lengths, perplexity, lo: int, hi: int, train_range=None, *,
                rows: tuple[int, int] | None = None, train_rows=None, names: tuple[str, str] = ("len_a", "len_b"),
                cells: Sequence[tuple[int, int]] | None = None) -> dict:
    """Per-cell scores and the summary from per-problem predictions (no model: also for tests).

    lengths: each problem's cell (`cell_of`). Columns run lo..hi; rows run lo..hi too, or over
    `rows` (sorting: item counts, whose trained range is `train_rows`), named by `names`. `cells`: the
    (row, column) cells run, when not all of those (a sparse grid's, `grid_cells`)."""
    lengths = np.asarray(lengths)
    square = rows is None
    rows = (lo, hi) if square else rows
    train_rows = train_range if square else train_rows
    keys = [length_key(row) for row in lengths]
    scored = group_scores(predictions, answers, keys)
    by_key = {}
    for k, x in zip(keys, np.asarray(perplexity, dtype=np.float64)):
        by_key.setdefault(k, []).append(x)
    run = cells if cells is not None else grid_cells(range(rows[0], rows[1] + 1), range(lo, hi + 1))
    cells = {}
    for a, b in run:
        key = length_key((a, b))
        if key not in scored:
            raise ValueError(f"no problems with {names[0]} {a} and {names[1]} {b} in the grid")
        cells[(a, b)] = {names[0]: a, names[1]: b, **scored[key], "mean_perplexity": float(np.mean(by_key[key]))}
    overall = arith_scores(predictions, answers)
    summary = {**overall, "mean_perplexity": float(np.mean(perplexity)) if len(perplexity) else math.nan}
    if square:  # the lengths up to which every pair is solved; a grid of items x digits has no such diagonal
        summary[f"solved_up_to_{int(SOLVED * 100)}"] = solved_up_to(cells, lo, hi)
    if train_range is not None:
        inside = np.array([_in_range(a, b, train_rows, train_range) for a, b in lengths[:, :2]])
        for name, part in (("in_training_range", inside), ("beyond_training_range", ~inside)):
            idx = np.flatnonzero(part)
            summary[f"{name}_exact_match"] = (
                arith_scores([predictions[i] for i in idx], [answers[i] for i in idx])["exact_match"] if len(idx) else None)
    return {"cells": cells, "summary": summary}


def grid_axes(fmt, limits: ModelLimits, lengths=None, length_list=None, items=None, diagonal: bool = False):
    """The rows, columns and cells a grid runs, and its list sizes (sorting): `lengths` (lo, hi) or
    `length_list`, checked against the model's limits and each other before any cell runs (the CLI
    calls it before any evaluation starts)."""
    if (lengths is None) == (length_list is None):
        raise FormatError("a grid takes a range of lengths or a list of them, not both or neither")
    sort = fmt.task_rules.item_list
    items = (items or limits.grid_items) if sort else items  # other tasks: refused if given
    if length_list is None:  # the largest cells run last: checked before the first
        limits.check_grid(lengths, items)
        columns = list(range(lengths[0], lengths[1] + 1))
    else:
        columns = sorted(set(int(n) for n in length_list))
        if not columns or columns[0] < 1:
            raise FormatError(f"grid lengths must be numbers of digits, at least 1, got {list(length_list)!r}")
        limits.check_lengths(columns, items)
    if diagonal and sort:
        raise FormatError("diagonal: a sorting model's grid has list sizes for rows and digits for columns, so no "
                          "cells of equal lengths; leave out --diagonal")
    if diagonal and length_list is None:
        raise FormatError("diagonal: only a grid of listed lengths (length_list, --lengths) runs its diagonal alone")
    rows = list(range(items[0], items[1] + 1)) if sort else columns
    return rows, columns, grid_cells(rows, columns, diagonal), items


def _answer_all(model, tokenizer, problems: Problems, batch_size, model_kwargs, limits: ModelLimits, bar,
                views: int = 1):
    """Every problem's prediction and answer perplexity, in the problems' order, and how many were decoded.

    One teacher-forced pass gives every answer's perplexity and, with an end token, which rows greedy
    decoding would answer correctly; only the others are decoded. Without an end token a greedy
    answer's length is the batch's budget, so every row is decoded; so is every row answered by a vote
    of `views` views, whose answer may differ from the one view forced. Both run in order of length, so
    a chunk holds problems of about one size: little left padding, an answer budget close to every
    row's need, and as many rows as that length allows (`row_chunks`)."""
    order = np.lexsort((problems.lengths.max(axis=1), problems.lengths.sum(axis=1)))
    problems = problems.select(order)
    texts, answers = plain_text(problems)
    perplexity, agrees = teacher_forced(model, tokenizer, problems, batch_size, model_kwargs, on_batch=bar.update)
    if not tokenizer.arith_format.end_token or views > 1:
        agrees[:] = False
    predictions = [a if ok else None for a, ok in zip(answers, agrees)]
    to_decode = np.flatnonzero(~agrees)
    bar.total = len(texts) + len(to_decode)  # shown at the next update: a refresh here would print a line more
    undecided = problems.select(to_decode)
    tokens, prompts = (limits.sequence_tokens(undecided), limits.prompt_tokens(undecided)) if len(to_decode) else ([], [])
    for chunk in row_chunks(tokens, model, batch_size, prompts):  # solve decodes them with a KV cache
        rows = to_decode[chunk]
        decoded = solve(model, tokenizer, [texts[r] for r in rows], batch_size=len(rows), model_kwargs=model_kwargs,
                        checked=True, limits=limits, views=views)
        for r, prediction in zip(rows, decoded):
            predictions[r] = prediction
        bar.update(len(rows))
    back = np.argsort(order)
    return [predictions[i] for i in back], np.asarray(perplexity)[back], len(to_decode)


def length_grid(model, tokenizer, lengths: tuple[int, int] | None = None, samples_per_cell: int = 100, seed: int = 0,
                batch_size: int | None = None, model_kwargs: dict | None = None, train_range=None,
                test_fraction: float = DEFAULT_TEST_FRACTION, progress: bool = False,
                keep_problems: bool = False, items: tuple[int, int] | None = None, train_items=None,
                limits: ModelLimits | None = None, *, length_list: Sequence[int] | None = None,
                diagonal: bool = False, views: int | None = None) -> dict:
    """Evaluate every (len_a, len_b) cell for len_a, len_b in [lengths[0], lengths[1]], or in
    `length_list` (a sparse grid: every pair of listed lengths, with `diagonal` only equal ones); for a
    sorting model, every (items, digits) cell for lists of `items` (default: 2 to the format's
    max_items) numbers of those digits.

    Returns a JSON-ready dict: the settings (`lengths`: [lo, hi], or a sparse grid's list with
    `sparse` true), `axes` (what rows and columns count), `rows` and `columns` (their lengths),
    `matrices` (row by column, from the smallest; None for cells not run) of exact match, per-digit
    accuracy, malformed share and mean answer perplexity, the list of `cells`, and a `summary`
    (overall, inside and beyond the trained range: `train_range` digits and, for sorting,
    `train_items`). `keep_problems` adds every problem with its prediction and answer perplexity.
    Memory stays bounded at any length: both passes run in chunks sized to the sequences
    (`decoding.row_chunks`), at most `batch_size` rows each. `views` (None: the model's
    config.answer_views): each problem's answer is the vote of that many views (`solve`), as a user of
    the model gets it; the perplexities stay those of the problem as given.
    """
    fmt = tokenizer.arith_format
    limits = limits or model_limits(model, tokenizer)
    views = limits.check_views(views)
    rows, columns, run, items = grid_axes(fmt, limits, lengths, length_list, items, diagonal)
    if samples_per_cell < 1:
        raise FormatError(f"samples per cell must be at least 1, got {samples_per_cell}")
    problems, drawn = grid_problem_set(fmt, run, samples_per_cell, seed, test_fraction)
    start = time.perf_counter()
    bar = progress_bar(2 * len(problems), "grid" if length_list is None else "lengths", "problem", enabled=progress)
    predictions, perplexity, decoded = _answer_all(model, tokenizer, problems, batch_size, model_kwargs, limits, bar,
                                                   views)
    bar.close()
    seconds = time.perf_counter() - start
    texts, answers = plain_text(problems)
    names, cell = axis_names(fmt.task), cell_of(problems)
    report = grid_report(predictions, answers, cell, perplexity, columns[0], columns[-1], train_range,
                         rows=items, train_rows=train_items, names=names, cells=run)
    cells = report["cells"]
    for key, info in drawn.items():
        cells[key].update(info)
    sort = {"items": list(items), "train_items": list(train_items) if train_items is not None else None} if items else {}
    sparse = {} if length_list is None else {"sparse": True, "diagonal": bool(diagonal)}
    result = {
        "task": fmt.task, "base": fmt.base, "axes": list(names), **sort,
        "lengths": [columns[0], columns[-1]] if length_list is None else columns, **sparse,
        "rows": rows, "columns": columns, "samples_per_cell": samples_per_cell, "views": views,
        "seed": seed, "test_fraction": test_fraction, "model_kwargs": dict(model_kwargs or {}),
        "train_range": list(train_range) if train_range is not None else None,
        "matrices": {f: _matrix(cells, rows, columns, f)
                     for f in ("exact_match", "per_digit_accuracy", "malformed", "mean_perplexity")},
        "summary": {**report["summary"], "seconds": seconds, "problems_per_second": len(texts) / seconds,
                    "decoded": decoded},  # the rest were confirmed by the teacher-forced pass
        "cells": list(cells.values()),
    }
    if keep_problems:
        result["problems"] = [{"problem": t, names[0]: int(n[0]), names[1]: int(n[1]), "answer": r, "prediction": p,
                               "perplexity": float(x)}
                              for t, n, r, p, x in zip(texts, cell, answers, predictions, perplexity)]
    return result


__all__ = [
    "answer_perplexity", "axis_names", "cell_of", "cell_problems", "grid_axes", "grid_cells", "grid_problem_set", "grid_report",
    "length_grid", "teacher_forced", "parse_length_list",
    "parse_length_range", "plain_text", "solved_up_to", "sort_cell_problems", "stack",
]
