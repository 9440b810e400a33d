"""Random restarts for training from scratch: screen fresh inits on the start of the schedule.

Tiny models (the minimal family's 10-digit adders of ~60 parameters) find the addition circuit
from only some inits. A screen bets that the training loss early in the schedule tells those
apart; how well it does is measured, not assumed (docs/results.md: at 61 parameters, a loss under
the preset's bound at step 14,000 did not mark an init that went on to learn). With `optim.screen_steps`
a run trains candidate inits one after another (candidate k with seed `optim.seed + 1000 * k`),
each for `screen_steps` steps of the full schedule, and continues the first whose logged loss at
that step is at most `optim.screen_max_loss`, or, after `optim.screen_tries` candidates without
one, the candidate with the lowest loss. With `optim.screen_min_token_accuracy` the screen reads
the held-out token accuracy that the adaptive weight decay scored at that step instead (from the
candidate's checkpoint): the first at or above the bound goes on, else the highest. Every
candidate's loss, held-out score, logged loss curve and time go into
`screen.json` in the output folder, and the chosen one into the final `training_summary.json`, so a
result states how many inits it took and what the screen cost.

Candidates train in `OUTPUT/screen/seed-S/`; only the chosen one's checkpoint is kept, and the run
goes on from it into OUTPUT itself. `--resume` continues where a stopped run left: the next
candidate of an unfinished screen, or the chosen candidate's run.

The screen's marker is weak: an init below the bound may leave the plateau late, one near it may never
leave (docs/findings.md). With `optim.screen_abandon_step` the run itself is the longer test: if the
init it goes on with has solved no held-out problem (exact match 0 at every score) by that step, or at
most `optim.screen_abandon_exact` of them (an init that left the plateau and stalled), it is given up
(`abandoned` in `screen.json`, with the seconds it cost) and the run goes on with the screen's next
candidate, from its screen checkpoint (every candidate keeps one then), or with a fresh one while
`screen_tries` allow. The last init that can be tried is never given up.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from pathlib import Path

from transformers import TrainerCallback

from ..records import write_json
from .adaptive_decay import read_history
from .recipe import Recipe, RecipeError

SCREEN_FILE = "screen.json"
SCREEN_FOLDER = "screen"
SEED_STRIDE = 1000  # candidate k trains with seed + SEED_STRIDE * k


def candidate_seed(seed: int, k: int) -> int:
    return seed + SEED_STRIDE * k


def with_seed(recipe: Recipe, seed: int) -> Recipe:
    return dataclasses.replace(recipe, optim=dataclasses.replace(recipe.optim, seed=seed))


class StopAtStep(TrainerCallback):
    """End training at `step` with a log and a checkpoint there (the screen reads both)."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= self.step:
            control.should_log = control.should_save = control.should_training_stop = True
        return control


class AbandonOnPlateau(TrainerCallback):
    """Stop a screened run at `step` if held-out exact match was at most `exact` at every score up to it. `scores`
    is the adaptive decay callback whose `history` holds the scores (it comes before this one in the Trainer's list)."""

    def __init__(self, scores, step: int, exact: float = 0.0):
        self.scores, self.step, self.exact = scores, step, exact
        self.abandoned: dict | None = None  # {"step", "best_exact_match", "best_token_accuracy"} once given up

    def on_step_end(self, args, state, control, **kwargs):
        history = self.scores.history
        if state.global_step != self.step or not history or history[-1]["step"] != self.step:
            return control
        best = max(h["exact_match"] for h in history)
        if best <= self.exact:
            self.abandoned = {"step": self.step, "best_exact_match": best,
                              "best_token_accuracy": max(h["token_accuracy"] for h in history)}
            if state.is_world_process_zero:
                print(f"step {self.step}: best held-out exact match {best:.2%} (at most optim.screen_abandon_exact, "
                      f"{self.exact:.2%}), best token accuracy {self.abandoned['best_token_accuracy']:.3f}: "
                      f"optim.screen_abandon_step gives this init up", flush=True)
            control.should_training_stop = True
            control.should_save = False  # the run's checkpoints are deleted with the init
        return control


def read_screen(output_dir: str | Path) -> dict | None:
    """The screen record of a run's output folder (None: no screen there, or an unreadable one)."""
    try:
        record = json.loads((Path(output_dir) / SCREEN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("candidates"), list) else None


def _write_screen(output_dir: str | Path, record: dict) -> None:
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    write_json(Path(output_dir) / SCREEN_FILE, record)


def screened_recipe(recipe: Recipe, output_dir: str | Path) -> Recipe:
    """The recipe a resumed screened run trains with: its chosen candidate's seed (unchanged when the
    screen has chosen none yet, or the recipe screens nothing)."""
    record = read_screen(output_dir) if recipe.optim.screen_steps else None
    if record is None or record.get("chosen_seed") is None:
        return recipe
    if record.get("seed") != recipe.optim.seed:
        raise RecipeError(f"--resume: {output_dir}/{SCREEN_FILE} screened inits for seed {record.get('seed')}, "
                          f"this recipe has seed {recipe.optim.seed}")
    return with_seed(recipe, record["chosen_seed"])


def logged_loss(log_history: list[dict], step: int) -> float | None:
    """The training loss the Trainer logged at `step` (None when it logged none there)."""
    losses = [e["loss"] for e in log_history if e.get("step") == step and "loss" in e]
    return float(losses[-1]) if losses else None


def logged_losses(log_history: list[dict]) -> dict[str, float]:
    """{step: loss} of every training loss the Trainer logged (a candidate's curve, for the record:
    whether an init collapses at a curriculum step shows there, not in the loss at the screen's end)."""
    return {str(e["step"]): round(float(e["loss"]), 4) for e in log_history if "loss" in e and "step" in e}


def held_out_score(checkpoint: Path, step: int) -> dict | None:
    """The adaptive decay's held-out score taken at `step`, from the checkpoint it wrote (None: none there)."""
    scores = [h for h in read_history(checkpoint) or [] if h.get("step") == step]
    return {k: scores[-1][k] for k in ("exact_match", "token_accuracy")} if scores else None


def screen_rule(recipe: Recipe):
    """(passes, rank) for screen candidates: whether one goes on at once, and the order that picks one
    when none does (lowest first)."""
    o = recipe.optim
    if o.screen_min_token_accuracy:
        def accuracy(c: dict) -> float | None:
            return c.get("token_accuracy")
        return (lambda c: accuracy(c) is not None and accuracy(c) >= o.screen_min_token_accuracy,
                lambda c: -accuracy(c) if accuracy(c) is not None else float("inf"))
    return (lambda c: c["loss"] is not None and c["loss"] <= o.screen_max_loss,
            lambda c: c["loss"] if c["loss"] is not None else float("inf"))


def screen(recipe: Recipe, output_dir: str, train_candidate) -> tuple[Recipe, str]:
    """Train candidate inits for `recipe.optim.screen_steps` steps each (see the module docstring);
    return the chosen candidate's recipe and its checkpoint to continue from.

    `train_candidate(recipe, folder, stop_at)` trains one candidate into `folder`, stopping at step
    `stop_at`, and returns the Trainer's log history.
    """
    o = recipe.optim
    record = read_screen(output_dir) or {"seed": o.seed, "screen_steps": o.screen_steps,
                                         "max_loss": o.screen_max_loss,
                                         "min_token_accuracy": o.screen_min_token_accuracy, "candidates": []}
    if record.get("seed") != o.seed or record.get("screen_steps") != o.screen_steps:
        raise RecipeError(f"{output_dir}/{SCREEN_FILE} is the screen of another recipe (seed {record.get('seed')}, "
                          f"{record.get('screen_steps')} steps); train into another --output-dir")
    candidates = record["candidates"]

    def folder(seed: int) -> Path:
        return Path(output_dir) / SCREEN_FOLDER / f"seed-{seed}"

    passes, rank = screen_rule(recipe)
    bound = (f"held-out token accuracy {o.screen_min_token_accuracy}" if o.screen_min_token_accuracy
             else f"loss {o.screen_max_loss}")
    gave_up = given_up(record)
    passed = [c for c in candidates if passes(c) and c["seed"] not in gave_up]
    while not passed and len(candidates) < o.screen_tries:
        seed = candidate_seed(o.seed, len(candidates))
        shutil.rmtree(folder(seed), ignore_errors=True)  # a candidate that a stopped run left unfinished
        print(f"Screening init {len(candidates) + 1} of up to {o.screen_tries} (seed {seed}): "
              f"{o.screen_steps} steps", flush=True)
        start = time.perf_counter()
        history = train_candidate(with_seed(recipe, seed), str(folder(seed)), o.screen_steps)
        loss = logged_loss(history, o.screen_steps)
        score = held_out_score(folder(seed) / f"checkpoint-{o.screen_steps}", o.screen_steps) or {}
        candidates.append({"seed": seed, "loss": loss, **score, "seconds": round(time.perf_counter() - start, 1),
                           "losses": logged_losses(history)})
        ok = passes(candidates[-1])
        shown = "" if not score else f", held-out token accuracy {score['token_accuracy']:.3f}"
        print(f"  seed {seed}: loss {loss if loss is None else round(loss, 4)}{shown} at step {o.screen_steps} "
              f"({'continues' if ok else f'misses {bound}'})", flush=True)
        if ok:
            passed.append(candidates[-1])
        # Only the best candidate so far keeps its checkpoint: the run goes on from it if none passes. A run that
        # may give its init up keeps them all: it goes on with the next.
        best = min(candidates, key=rank, default=None)
        for c in candidates:
            if c is not best and not o.screen_abandon_step:
                shutil.rmtree(folder(c["seed"]), ignore_errors=True)
        _write_screen(output_dir, record)
    scored = [c for c in candidates if rank(c) != float("inf") and c["seed"] not in gave_up]
    if not scored:
        what = "held-out score" if o.screen_min_token_accuracy else "logged loss"
        raise RecipeError(f"the screen has no {what} at step {o.screen_steps} for any of {len(candidates)} inits")
    chosen = passed[0] if passed else min(scored, key=rank)
    checkpoint = folder(chosen["seed"]) / f"checkpoint-{o.screen_steps}"
    if not checkpoint.is_dir():
        raise RecipeError(f"the screen chose seed {chosen['seed']}, but {checkpoint} is gone; train it again "
                          f"with --overwrite")
    if not passed:
        print(f"No init reached {bound} at step {o.screen_steps}; going on with the best, seed {chosen['seed']}",
              file=sys.stderr, flush=True)
    record["chosen_seed"] = chosen["seed"]
    record["screen_seconds"] = screen_seconds(record)
    _write_screen(output_dir, record)
    return with_seed(recipe, chosen["seed"]), str(checkpoint)


def given_up(record: dict) -> set[int]:
    """The seeds of the inits a screened run gave up (optim.screen_abandon_step)."""
    return {a["seed"] for a in record.get("abandoned", [])}


def screen_seconds(record: dict) -> float:
    """What a run spent before the init it ends with went on: every candidate's screen, and the steps
    given-up inits trained after theirs."""
    return round(sum(c["seconds"] for c in record["candidates"])
                 + sum(a["seconds"] for a in record.get("abandoned", [])), 1)


def can_abandon(recipe: Recipe, output_dir: str | Path) -> bool:
    """Whether the screened run in `output_dir` may give its init up: another screened candidate is left,
    or a screen try."""
    record = read_screen(output_dir) if recipe.optim.screen_steps and recipe.optim.screen_abandon_step else None
    if record is None:
        return False
    done = given_up(record) | {recipe.optim.seed}
    left = [c for c in record["candidates"] if c["seed"] not in done]
    return bool(left) or len(record["candidates"]) < recipe.optim.screen_tries


def give_up(recipe: Recipe, output_dir: str | Path, abandoned: dict, seconds: float | None) -> Recipe:
    """Record that the run's init (`recipe.optim.seed`) was given up, delete its screen checkpoint, and return
    the recipe the screen chooses the next init with (the run's own seed)."""
    record = read_screen(output_dir)
    seed = recipe.optim.seed
    record.setdefault("abandoned", []).append({"seed": seed, **abandoned, "seconds": round(seconds or 0.0, 1)})
    record["chosen_seed"] = None
    record["screen_seconds"] = screen_seconds(record)
    _write_screen(output_dir, record)
    shutil.rmtree(Path(output_dir) / SCREEN_FOLDER / f"seed-{seed}", ignore_errors=True)
    return with_seed(recipe, record["seed"])
