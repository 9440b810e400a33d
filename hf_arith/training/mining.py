"""Hard-example mining: the training-split problems a model gets wrong or is unsure of, as a pool.

A fine-tuning stage (a recipe with init_from and data.mine_problems) asks its starting model many
training-split problems before its first step, keeps those answered wrong or with a confidence
(the lowest token probability) below data.mined_confidence, and draws data.mined_fraction of its
training examples from that pool (`streaming.ProblemStream`). Why: a model near 100 % fails on a
few lists in ten thousand; uniform data shows it such lists as rarely, while its own near-misses
point at them. The pool is saved in the run's output folder, so a resumed run trains on the same
pool instead of mining again from a model that has changed. Test-split problems are never mined:
held-out scores stay held out.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..data.errors import HfArithError
from ..data.formatting import Problems, get_task
from ..data.problems import ProblemSpec, sample, with_answers
from ..evaluation.grid import stack
from ..runtime.solving import solve

MINED_FILE = "mined_problems.npz"  # in the output folder: operands, lengths, task, base (no pickle)
CHUNK = 10_000  # problems per solve call: a progress step, and memory bounded whatever the total
HARD_SHARE = 10  # each hard kind adds a tenth as many problems as the uniform draw


def mining_kinds(spec: ProblemSpec, n: int, kinds=()) -> list[tuple[str, int]]:
    """(problem kind, count) drawn for `n` mined problems: uniform ones, then `kinds` (default: the task's
    repeated digits and chains), each a tenth as many."""
    hard = [kind for kind in (kinds or ("repeated", "chains")) if kind in get_task(spec.task).hard_kinds]
    return [("uniform", n), *((kind, max(1, n // HARD_SHARE)) for kind in hard)]


def mine_problems(model, tokenizer, spec: ProblemSpec, n: int, threshold: float, seed: int,
                  test_fraction: float, kinds=()) -> tuple[Problems, dict]:
    """The training-split problems `model` answers wrong or below confidence `threshold`, and what was drawn."""
    rng = np.random.default_rng([seed, 0x6D696E65])  # its own stream: not the training data's draws
    start_time = time.perf_counter()
    was_training = model.training
    model.eval()
    pools, report = [], {"threshold": threshold, "seed": seed, "kinds": {}}
    try:
        for kind, count in mining_kinds(spec, n, kinds):
            problems = sample(spec, count, rng, split="train", test_fraction=test_fraction, kind=kind)
            texts, answers = problems.to_text(), problems.answer_text()
            wrong, unsure = np.zeros(count, bool), np.zeros(count, bool)
            for start in tqdm(range(0, count, CHUNK), desc=f"mining {kind}", unit="chunk"):
                got = solve(model, tokenizer, texts[start:start + CHUNK], return_confidence=True,
                            warn_beyond_training=False)
                for i, (answer, expected) in enumerate(zip(got, answers[start:start + CHUNK]), start):
                    wrong[i] = answer.answer != expected
                    unsure[i] = answer.confidence < threshold
            pools.append(problems.select(wrong | unsure))
            report["kinds"][kind] = {"drawn": count, "wrong": int(wrong.sum()),
                                     "right_below_threshold": int((unsure & ~wrong).sum())}
    finally:
        model.train(was_training)
    pool = with_answers(stack(pools))
    report["pool"] = len(pool)
    report["seconds"] = round(time.perf_counter() - start_time, 1)
    return pool, report


def save_pool(pool: Problems, folder: str | Path) -> Path:
    path = Path(folder) / MINED_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, operands=pool.operands, lengths=pool.lengths, task=np.array(pool.task), base=np.array(pool.base))
    return path


def load_pool(folder: str | Path, spec: ProblemSpec) -> Problems:
    """The pool a run saved (MINED_FILE), checked against the problems the run trains on."""
    path = Path(folder) / MINED_FILE
    try:
        with np.load(path, allow_pickle=False) as saved:
            task, base = str(saved["task"]), int(saved["base"])
            operands, lengths = saved["operands"], saved["lengths"]
    except (OSError, KeyError, ValueError) as err:
        raise HfArithError(f"cannot read the mined problems {path}: {err}") from None
    if (task, base) != (spec.task, spec.base) or operands.ndim != 3 or lengths.shape != operands.shape[:2]:
        raise HfArithError(f"{path} holds {task} problems in base {base} of shape {operands.shape}, not "
                         f"{spec.task} in base {spec.base}")
    return with_answers(Problems(task, base, operands, lengths))
