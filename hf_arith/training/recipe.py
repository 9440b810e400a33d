"""Training recipes: YAML presets shipped in the package, overridable from the command line.

A recipe names a model family and its config, the number format, the data (digit range and
curriculum), the optimisation and any extra Trainer arguments (`trainer:`). Every malformed
value is reported in one line naming its key.

Every check of a recipe lives here. `load_recipe` / `recipe_from_dict` check each value as they
build the recipe; `check_recipe` checks what needs the package's number formats, model families
and TrainingArguments, once per run, in each entry point (`hf-arith train`, `training.train`).
Checks of the launch (processes against devices) need the runtime and are `training.check_launch`.

TrainingArguments names that are recipe keys under another name (`trainer.learning_rate` is
`optim.learning_rate`, see `ARGUMENT_RECIPE_KEYS`) are read as those keys while the recipe is
built, each with a one-line note in `recipe.notes`; the two given with different values is refused.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import importlib.util
import inspect
import math
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import ClassVar

import yaml

from ..data.errors import HfArithError
from ..data.formatting import NumberFormat, get_task, task_names
from ..data.problems import HARD_KINDS, SAMPLE_BY
from ..data.tasks import tasks_with_kind

PRESETS_DIR = Path(__file__).resolve().parent.parent / "presets"


class RecipeError(HfArithError):
    """A recipe that cannot be used, with a one-line reason."""


@dataclass
class CurriculumPhase:
    until_step: int = 0  # this phase lasts until global step `until_step` (must increase)
    min_digits: int = 1
    max_digits: int = 10


@dataclass
class DataRecipe:
    min_digits: int = 1
    max_digits: int = 10
    min_items: int = 2
    max_items: int = 5
    # Uniform problems (and the held-out ones) draw operand lengths so that every length in
    # [min_digits, max_digits] is as likely ("length") or every value is ("value": mostly
    # max_digits digits, like the tiny-adder protocol). Curriculum phases keep it; the hard
    # cases of data.hard_kind draw their lengths as they always do.
    sample_by: str = "length"
    test_fraction: float = 0.1
    curriculum: list[CurriculumPhase] = field(default_factory=list)
    chunk_size: int = 2048  # problems generated per vectorized call
    # Length buckets: each run of this many batches is sorted by problem length and every batch cut to
    # its longest row (1: each batch only cut), so lists and products of mixed sizes stop paying for the
    # longest one the spec allows (one training process; 0 = off: every row padded to that longest problem).
    length_buckets: int = 0
    # Filler: each example starts after a random number of attended <pad> tokens, up to this many
    # beyond the longest example, so where a problem starts and how long the context is stop being
    # tied to the operand lengths (a length-generalization aid; 0 = off).
    random_prefix: int = 0
    # Packing: each training sequence holds 1 to 1 + this many problems, each closed by <eos>, every
    # answer a label. With model.abacus_offset_per_problem each problem draws its own abacus offset,
    # so digits whose indices lie far apart meet in one sequence, as they do in one long problem
    # (0 = one problem per sequence).
    context_problems: int = 0
    # Share of training problems drawn from the hard cases uniform sampling almost never gives
    # (repeated digits; carry and borrow chains for add and sub): targeted fine-tuning (0 = off).
    hard_fraction: float = 0.0
    # [start, end] global steps: the hard share holds until `start`, then falls linearly to 0 at
    # `end`, so training floods the carry circuit early and finishes on the natural distribution
    # (the carry-mix fade of the small AdderBoard models; empty = a constant share).
    hard_fraction_fade: list[int] = field(default_factory=list)
    # What the hard share draws: "hard" (repeated digits and chains, half and half), "repeated",
    # "chains", or "carries" (addition only: sparse problems around one carry, the carry mix of the
    # small AdderBoard models; see hf_arith.data.problems).
    hard_kind: str = "hard"
    # Hard-example mining (hf_arith.training.mining), for a stage with init_from: before its first step the
    # starting model answers this many training-split problems (and a tenth as many of each hard kind);
    # those it gets wrong or answers with a confidence below mined_confidence form a pool that
    # mined_fraction of the training examples are drawn from (0 = off).
    mine_problems: int = 0
    mined_confidence: float = 0.9
    mined_fraction: float = 0.0
    # The hard kinds mined besides the uniform draw, a tenth as many of each (empty: the task's
    # repeated digits and chains; sorting may name tie_heavy and near_ties).
    mine_kinds: list[str] = field(default_factory=list)
    # Mining inside a corner of the stage's range (0: the stage's own limit): the pool comes from the
    # operands of at most mine_max_digits digits (and lists of at most mine_max_items items) while the rest of
    # each batch keeps the whole range, so polishing the box an older model was exact in does not unlearn the
    # longer problems (a stage trained on that box alone did: docs/findings.md).
    mine_max_digits: int = 0
    mine_max_items: int = 0
    # Item places (lists only): each training list moves, items together, to a random run of this many item
    # places (hf_arith.data.problems.with_items_moved), so a model trained on lists of 5 items learns the labels
    # and places of a list of up to this many (0 = off: item i stays item i).
    item_places: int = 0
    # With item_places: each list's items go to random item places, in their order, instead of one run, so
    # labels far apart in the alphabet stand side by side, as in the written rounds of a long list.
    item_spread: bool = False


@dataclass
class OptimRecipe:
    steps: int = 20000
    batch_size: int = 128  # the global batch: split evenly across processes under torchrun / accelerate
    learning_rate: float = 3e-3
    weight_decay: float = 0.0
    decay_all: bool = False  # decay norms and biases too (the Trainer leaves them out), as plain AdamW does
    warmup_steps: float = 0.02  # < 1 is a fraction of steps
    adam_beta2: float = 0.99
    max_grad_norm: float = 1.0
    restart_at: float = 0.0  # > 0: a second cosine phase starts at this fraction of steps
    restart_lr_scale: float = 0.3  # peak of the second phase relative to learning_rate
    min_lr_ratio: float = 0.0  # each cosine ends at this fraction of its peak (0: at zero)
    # Grokfast-EMA gradient filter (hf_arith.training.grokfast): grad += lambda * EMA(grad) with decay alpha,
    # from step grokfast_start on (< 1 is a fraction of steps). lambda 0 = off.
    grokfast_lambda: float = 0.0
    grokfast_alpha: float = 0.98
    grokfast_start: float = 0.0
    seed: int = 0
    # Random restarts (hf_arith.training.seed_screen): with screen_steps > 0, fresh inits (candidate k trains with
    # seed + 1000 * k) each train screen_steps steps of the full schedule; the first whose logged training
    # loss there is at most screen_max_loss goes on to optim.steps, or, after screen_tries candidates
    # without one, the one with the lowest loss. Tiny models find the circuit from few inits only.
    # screen_min_token_accuracy > 0 screens on the held-out token accuracy of the adaptive decay's score at
    # screen_steps instead (at least that passes; otherwise the highest goes on).
    screen_steps: int = 0
    screen_tries: int = 1
    screen_max_loss: float = 0.0
    screen_min_token_accuracy: float = 0.0
    # screen_abandon_step > 0 (screened runs only): the init a run goes on with is given up at that step if held-out
    # exact match was at most screen_abandon_exact at every score up to it (0: it solved nothing, an init still on
    # the plateau), and the run goes on with the screen's next candidate instead (from its screen checkpoint; a
    # fresh one while screen_tries allow). 0 = never.
    screen_abandon_step: int = 0
    screen_abandon_exact: float = 0.0
    # Adaptive weight decay (hf_arith.training.adaptive_decay): every wd_eval_steps steps, wd_eval_samples held-out
    # problems are scored teacher-forced; at exact match >= wd_drop_exact (and token accuracy >=
    # wd_drop_token_accuracy) the decay is weight_decay * wd_drop_factor, at >= wd_drop_exact_final
    # weight_decay * wd_drop_factor ** 2. wd_drop_exact 0 = off.
    wd_drop_exact: float = 0.0
    wd_drop_exact_final: float = 0.0
    wd_drop_token_accuracy: float = 0.7
    wd_drop_factor: float = 0.1
    wd_eval_steps: int = 3000
    wd_eval_samples: int = 5000
    # On the same held-out scores (hf_arith.training.best_held_out): stop once exact match reaches stop_exact
    # (0 = never), and with keep_best end on the scored weights with the best exact match.
    stop_exact: float = 0.0
    keep_best: bool = False
    # And (hf_arith.training.held_out_lr): from the first score with exact match >= lr_drop_exact (0 = never) to the
    # end, the learning rate is at most learning_rate * lr_drop_factor (the schedule's where lower).
    lr_drop_exact: float = 0.0
    lr_drop_factor: float = 0.1
    threads: int = 1  # tiny models run faster on one torch thread
    compile: bool = False  # torch.compile the model for training (pays a one-off compile time)
    # With init_from: train only the tensors the checkpoint lacks (new heads) and keep the loaded
    # ones fixed, so the model's existing outputs stay exactly as they were.
    freeze_init: bool = False
    # Abacus models: weight of the penalty that keeps abacus indices data.max_digits or more apart
    # (never in one training problem together) apart in attention (hf_arith.training.index_separation). 0 = off.
    abacus_separation: float = 0.0
    abacus_separation_margin: float = 4.0  # logits each far index must stay below a head's preferred one
    abacus_separation_gap: int = 0  # indices this far apart count as far; 0 = data.max_digits
    save_steps: int = 5000
    logging_steps: int = 500


@dataclass
class EvalRecipe:
    samples: int = 2000  # held-out problems for the final report
    verify: bool = False  # also run the tiny-adder protocol (10-digit addition only)
    batch_size: int = 0  # 0: hf_arith.runtime.decoding.default_batch_size, from the model's width
    # Held-out problems the Trainer scores (teacher-forced exact match, per length) whenever it
    # evaluates during training: only with trainer.eval_strategy=steps (or trainer.eval_on_start).
    during_training_samples: int = 512


@dataclass
class Recipe:
    family: str = "minimal"
    model: dict = field(default_factory=dict)
    format: dict = field(default_factory=dict)
    data: DataRecipe = field(default_factory=DataRecipe)
    optim: OptimRecipe = field(default_factory=OptimRecipe)
    eval: EvalRecipe = field(default_factory=EvalRecipe)
    # Extra TrainingArguments passed through to the Trainer as they are (deepspeed, fsdp, bf16,
    # gradient_accumulation_steps, report_to, ...); the keys the recipe sets itself are refused.
    trainer: dict = field(default_factory=dict)
    output_dir: str = "runs/minimal-add10"
    name: str = "minimal-add10"
    # Warm start: a bundled model name or checkpoint folder whose weights initialise the model
    # (tensors it lacks, such as new multi-token heads, keep their fresh init), or preset:NAME, the
    # final model of that preset's run, trained first when it is not there. "" = from scratch.
    init_from: str = ""
    # How the recipe was read (TrainingArguments names taken as recipe keys), one line each, printed
    # once per run by training.prepare_run. Not a field: not part of the recorded recipe.
    notes: ClassVar[tuple[str, ...]] = ()
    # A chain's stages, oldest first, this recipe the last (train_config.Stage; `load_recipe` sets them,
    # `training.prepare_run` trains the earlier ones first). Not a field: each stage records its own recipe.
    stages: ClassVar[tuple] = ()


_SECTIONS = {"data": DataRecipe, "optim": OptimRecipe, "eval": EvalRecipe}
# Upper bounds that keep a run within memory (each value is held at once); typos beyond them are refused.
MAX_BATCH_SIZE = 1_000_000
MAX_CHUNK_SIZE = 1_000_000
MAX_EVAL_SAMPLES = 1_000_000  # as `hf-arith eval --samples`
MAX_MINE_PROBLEMS = 10_000_000  # each one answered by the starting model before training
MAX_SCREEN_TRIES = 100  # candidate k seeds with optim.seed + 1000 * k: fewer than 1000 keeps them apart


def _check_keys(data, cls, where: str = "") -> None:
    """`data` must be a mapping whose keys are fields of `cls`; `where` names its section ("": the recipe itself)."""
    if not isinstance(data, dict):
        what = where or "a recipe"
        raise RecipeError(f"{what} must be a {'' if where else 'YAML '}mapping, got {type(data).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        place = f"key(s) {unknown} in {where}" if where else f"top-level key(s) {unknown}"
        raise RecipeError(f"unknown {place}; known: {', '.join(sorted(known))}")


def _build(cls, data: dict, where: str):
    _check_keys(data, cls, where)
    defaults = {f.name: f.default for f in fields(cls)}
    values = {}
    for key, value in data.items():
        default = defaults[key]
        if key == "curriculum":
            if not isinstance(value, list):
                raise RecipeError(f"{where}.curriculum must be a list of phases")
            value = [_build(CurriculumPhase, p, f"{where}.curriculum[{i}]") for i, p in enumerate(value)]
        else:
            _check_like(f"{where}.{key}", value, default)
            if type(default) in (int, float):
                value = type(default)(value)
        values[key] = value
    return cls(**values)


def _check_like(name: str, value, default) -> None:
    """A value whose default is a bool must be a bool, an int an integer, a float a number."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise RecipeError(f"{name} must be true or false, got {value!r}")
    elif type(default) in (int, float):
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or (type(default) is int and not float(value).is_integer())):
            raise RecipeError(f"{name} must be {'an integer' if type(default) is int else 'a number'}, got {value!r}")
        if not math.isfinite(value):
            raise RecipeError(f"{name} must be a finite number, got {value!r}")


def recipe_from_dict(data: dict) -> Recipe:
    """A recipe from its YAML mapping, each value checked (types, ranges); see `check_recipe` for the rest.

    TrainingArguments names in `trainer:` that are recipe keys under another name (`ARGUMENT_RECIPE_KEYS`)
    are read as those keys, with a note in `recipe.notes`; both given with different values is an error.
    """
    _check_keys(data, Recipe)
    data, notes = _map_argument_names(data)
    kwargs = {}
    for key, value in data.items():
        if key in _SECTIONS:
            kwargs[key] = _build(_SECTIONS[key], value or {}, key)
        elif key in ("model", "format", "trainer"):
            if not isinstance(value, dict):
                raise RecipeError(f"{key} must be a mapping, got {type(value).__name__}")
            kwargs[key] = value
        else:
            if not isinstance(value, str):
                raise RecipeError(f"{key} must be a string, got {value!r}")
            kwargs[key] = value
    recipe = Recipe(**kwargs)
    _check_values(recipe)
    recipe.notes = tuple(notes.values())
    return recipe


def _check_values(recipe: Recipe) -> None:
    """Each recipe value on its own and against the others: the data section, the numeric bounds, then
    the optimizer's settings that depend on each other."""
    _check_data(recipe.data)
    _check_bounds(recipe)
    _check_optim(recipe)


def _check_data(d) -> None:
    if not 1 <= d.min_digits <= d.max_digits:
        raise RecipeError(f"data: need 1 <= min_digits <= max_digits, got {d.min_digits}..{d.max_digits}")
    if not 0 < d.test_fraction < 1:
        raise RecipeError(f"data.test_fraction must be between 0 and 1, got {d.test_fraction}")
    if not isinstance(d.length_buckets, int) or isinstance(d.length_buckets, bool) or not 0 <= d.length_buckets <= 256:
        raise RecipeError(f"data.length_buckets must be an integer in 0..256 (batches sorted by length together), "
                          f"got {d.length_buckets!r}")
    if not isinstance(d.random_prefix, int) or d.random_prefix < 0:
        raise RecipeError(f"data.random_prefix must be an integer >= 0, got {d.random_prefix!r}")
    if not isinstance(d.context_problems, int) or isinstance(d.context_problems, bool) or not 0 <= d.context_problems <= 16:
        raise RecipeError(f"data.context_problems must be an integer in 0..16, got {d.context_problems!r}")
    last = 0
    for i, phase in enumerate(d.curriculum):
        if phase.until_step <= last:
            raise RecipeError(f"data.curriculum[{i}].until_step must increase, got {phase.until_step} after {last}")
        if not 1 <= phase.min_digits <= phase.max_digits <= d.max_digits:
            raise RecipeError(f"data.curriculum[{i}]: digits must lie in 1..data.max_digits ({d.max_digits})")
        last = phase.until_step
    fade = d.hard_fraction_fade
    if fade and (not isinstance(fade, list) or len(fade) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in fade)
                 or not 0 <= fade[0] < fade[1]):
        raise RecipeError(f"data.hard_fraction_fade must be [start, end] steps with 0 <= start < end, got {fade!r}")
    if fade and not d.hard_fraction:
        raise RecipeError("data.hard_fraction_fade needs data.hard_fraction > 0 (the share it fades from)")
    if d.sample_by not in SAMPLE_BY:
        raise RecipeError(f"data.sample_by must be one of {SAMPLE_BY}, got {d.sample_by!r}")
    if d.hard_kind not in HARD_KINDS:
        raise RecipeError(f"data.hard_kind must be one of {HARD_KINDS}, got {d.hard_kind!r}")
    if not isinstance(d.mine_kinds, list) or any(kind not in HARD_KINDS for kind in d.mine_kinds):
        raise RecipeError(f"data.mine_kinds must be a list of {HARD_KINDS}, got {d.mine_kinds!r}")


def _check_bounds(recipe: Recipe) -> None:
    d, o = recipe.data, recipe.optim
    if o.steps < 1 or o.batch_size < 1 or o.learning_rate <= 0:
        raise RecipeError("optim: steps, batch_size and learning_rate must be positive")
    # Each value within what the optimizer, the schedule and memory take (not found after the model is built).
    bounds = [  # (key, value, the lowest, the highest, what the range means)
        ("optim.batch_size", o.batch_size, 1, MAX_BATCH_SIZE, "every batch is held in memory at once"),
        ("optim.save_steps", o.save_steps, 1, None, "steps between checkpoints"),
        ("optim.logging_steps", o.logging_steps, 1, None, "steps between loss logs"),
        ("optim.warmup_steps", o.warmup_steps, 0, None, "< 1 is a fraction of the steps"),
        ("optim.weight_decay", o.weight_decay, 0, None, ""),
        ("optim.max_grad_norm", o.max_grad_norm, 0, None, "0 turns clipping off"),
        ("optim.restart_lr_scale", o.restart_lr_scale, 0, None, ""),
        ("optim.min_lr_ratio", o.min_lr_ratio, 0, 1, "the cosine's floor, as a fraction of its peak"),
        ("optim.grokfast_lambda", o.grokfast_lambda, 0, None, "0 turns Grokfast off"),
        ("optim.grokfast_alpha", o.grokfast_alpha, 0, 0.999999, "the gradient average's decay"),
        ("optim.grokfast_start", o.grokfast_start, 0, None, "< 1 is a fraction of the steps"),
        ("optim.wd_drop_exact", o.wd_drop_exact, 0, 1, "0 turns adaptive weight decay off"),
        ("optim.wd_drop_exact_final", o.wd_drop_exact_final, 0, 1, "held-out exact match for the second drop"),
        ("optim.wd_drop_token_accuracy", o.wd_drop_token_accuracy, 0, 1, "the token accuracy both drops need"),
        ("optim.wd_eval_steps", o.wd_eval_steps, 1, None, "steps between held-out scores"),
        ("optim.wd_eval_samples", o.wd_eval_samples, 1, MAX_EVAL_SAMPLES, "held-out problems scored"),
        ("optim.stop_exact", o.stop_exact, 0, 1, "0 never stops early"),
        ("optim.lr_drop_exact", o.lr_drop_exact, 0, 1, "0 never lowers the learning rate"),
        ("optim.screen_min_token_accuracy", o.screen_min_token_accuracy, 0, 1, "0 screens on the loss"),
        ("optim.screen_abandon_exact", o.screen_abandon_exact, 0, 0.99, "the best held-out exact match that gives an init up"),
        ("data.chunk_size", d.chunk_size, 1, MAX_CHUNK_SIZE, "problems generated at once"),
        ("data.hard_fraction", d.hard_fraction, 0, 1, "the share of hard problems"),
        ("data.mine_problems", d.mine_problems, 0, MAX_MINE_PROBLEMS, "training problems the starting model answers"),
        ("data.mined_confidence", d.mined_confidence, 0, 1, "answers below it join the mined pool"),
        ("data.mined_fraction", d.mined_fraction, 0, 0.99, "the share of examples drawn from the mined pool"),
        ("eval.samples", recipe.eval.samples, 1, MAX_EVAL_SAMPLES, "held-out problems scored after training"),
        ("eval.during_training_samples", recipe.eval.during_training_samples, 1, MAX_EVAL_SAMPLES,
         "held-out problems scored during training"),
    ]
    for key, value, low, high, meaning in bounds:
        if value < low or (high is not None and value > high):
            limit = f"from {low} to {high:,}" if high is not None else f">= {low}"
            raise RecipeError(f"{key} must be {limit}{f' ({meaning})' if meaning else ''}, got {value!r}")


def _check_optim(recipe: Recipe) -> None:
    from ..runtime.hardware import THREADS_PER_CORE, max_threads

    d, o = recipe.data, recipe.optim
    if bool(d.mine_problems) != bool(d.mined_fraction):
        raise RecipeError(f"data.mine_problems ({d.mine_problems}) and data.mined_fraction ({d.mined_fraction}) "
                          f"go together: mining fills a pool that a share of the examples is drawn from")
    if d.mine_problems and not recipe.init_from:
        raise RecipeError("data.mine_problems mines the problems a starting model gets wrong, but the recipe has no init_from")
    if (d.mine_max_digits or d.mine_max_items) and not d.mine_problems:
        raise RecipeError("data.mine_max_digits and data.mine_max_items narrow where data.mine_problems mines, "
                          "but the recipe mines nothing (data.mine_problems is 0)")
    if not 0 <= o.adam_beta2 < 1:
        raise RecipeError(f"optim.adam_beta2 must be in [0, 1), got {o.adam_beta2!r}")
    if not 1 <= o.threads <= max_threads():
        raise RecipeError(f"optim.threads must be from 1 to {max_threads()} ({THREADS_PER_CORE} per CPU core of this "
                          f"machine), got {o.threads}")
    if recipe.eval.batch_size < 0:
        raise RecipeError(f"eval.batch_size must be >= 0 (0 chooses from the model's width), got {recipe.eval.batch_size}")
    if o.abacus_separation < 0 or o.abacus_separation_margin <= 0 or o.abacus_separation_gap < 0:
        raise RecipeError(f"optim.abacus_separation and abacus_separation_gap must be >= 0 and "
                          f"abacus_separation_margin > 0, got {o.abacus_separation}, {o.abacus_separation_gap} and "
                          f"{o.abacus_separation_margin}")
    if o.freeze_init and not recipe.init_from:
        raise RecipeError("optim.freeze_init keeps the weights of init_from fixed, but the recipe has no init_from")
    if not 0 <= o.restart_at < 1:
        raise RecipeError(f"optim.restart_at must be in [0, 1), got {o.restart_at}")
    if o.wd_drop_exact:
        if o.weight_decay <= 0:
            raise RecipeError(f"optim.wd_drop_exact ({o.wd_drop_exact}) lowers the weight decay, but "
                              f"optim.weight_decay is {o.weight_decay}")
        if not o.wd_drop_exact <= o.wd_drop_exact_final or not 0 < o.wd_drop_factor < 1:
            raise RecipeError(f"optim.wd_drop_exact_final must be >= optim.wd_drop_exact ({o.wd_drop_exact}) and "
                              f"optim.wd_drop_factor in (0, 1); got {o.wd_drop_exact_final} and {o.wd_drop_factor}")
    if o.lr_drop_exact and not 0 < o.lr_drop_factor < 1:
        raise RecipeError(f"optim.lr_drop_factor must be in (0, 1), the share of the peak learning rate kept; "
                          f"got {o.lr_drop_factor}")
    held_out_keys = [f"optim.{k}" for k in ("stop_exact", "keep_best", "screen_min_token_accuracy", "lr_drop_exact")
                     if getattr(o, k)] + (["optim.screen_abandon_step"] if o.screen_steps and o.screen_abandon_step else [])
    if held_out_keys and not o.wd_drop_exact:
        raise RecipeError(f"{', '.join(held_out_keys)} read the held-out scores of the adaptive weight decay, which "
                          f"optim.wd_drop_exact > 0 turns on (1.0 scores without ever lowering the decay)")
    if o.screen_min_token_accuracy and o.screen_steps % o.wd_eval_steps:
        raise RecipeError(f"optim.screen_min_token_accuracy reads the held-out score at optim.screen_steps "
                          f"({o.screen_steps}), which must then be a multiple of optim.wd_eval_steps ({o.wd_eval_steps})")
    if o.screen_steps:
        if not 0 < o.screen_steps < o.steps or o.screen_steps % o.logging_steps:
            raise RecipeError(f"optim.screen_steps must be below optim.steps ({o.steps}) and a multiple of "
                              f"optim.logging_steps ({o.logging_steps}), whose logged loss screens each init; "
                              f"got {o.screen_steps}")
        if recipe.init_from:
            raise RecipeError("optim.screen_steps screens fresh inits, but the recipe starts from init_from")
        if not 1 <= o.screen_tries <= MAX_SCREEN_TRIES or o.screen_max_loss < 0:
            raise RecipeError(f"optim.screen_tries must be from 1 to {MAX_SCREEN_TRIES} and optim.screen_max_loss "
                              f">= 0, got {o.screen_tries} and {o.screen_max_loss}")
        if o.screen_abandon_step and not (o.screen_steps < o.screen_abandon_step < o.steps
                                          and o.screen_abandon_step % o.wd_eval_steps == 0):
            raise RecipeError(f"optim.screen_abandon_step ({o.screen_abandon_step}) gives up a screened init on its "
                              f"held-out scores: it must lie between optim.screen_steps ({o.screen_steps}) and "
                              f"optim.steps ({o.steps}) and be a multiple of optim.wd_eval_steps ({o.wd_eval_steps})")


# -- what the values alone cannot show: format, model family, Trainer arguments ----------------
def check_recipe(recipe: Recipe) -> NumberFormat:
    """Check a loaded recipe against the package before any training; return its number format.

    The format, the data against it, eval.verify, the model keys of the family and the `trainer:`
    section. Each entry point calls it once per run (`hf-arith train`, `training.train`). Model
    families and TrainingArguments are imported here, so reading a recipe stays light.
    """
    from ..data.problems import ProblemSpec
    from ..evaluation.held_out import is_tiny_adder_format
    from ..families import family_classes

    try:
        fmt = NumberFormat.from_dict(recipe.format)
    except ValueError as err:
        raise RecipeError(f"format: {err}") from None
    if fmt.operand_width and recipe.data.max_digits > fmt.operand_width:
        raise RecipeError(f"data.max_digits {recipe.data.max_digits} exceeds format.operand_width {fmt.operand_width}")
    d = recipe.data
    try:  # the problems the run draws (training.recipe_spec)
        ProblemSpec(task=fmt.task, base=fmt.base, min_digits=d.min_digits, max_digits=d.max_digits,
                    min_items=d.min_items, max_items=d.max_items, sample_by=d.sample_by)
    except ValueError as err:
        raise RecipeError(f"data: {err}") from None
    task = fmt.task_rules
    if d.hard_fraction and d.hard_kind in HARD_KINDS and d.hard_kind not in task.hard_kinds:
        owners = " and ".join(t.title for t in tasks_with_kind(d.hard_kind))
        raise RecipeError(f"data.hard_kind {d.hard_kind!r} applies to {owners}, not {task.title}")
    for kind in d.mine_kinds:
        if kind not in task.hard_kinds:
            raise RecipeError(f"data.mine_kinds: {kind!r} is not a kind {task.title} draws ({', '.join(task.hard_kinds)})")
    if d.mine_max_digits and not d.min_digits <= d.mine_max_digits <= d.max_digits:
        raise RecipeError(f"data.mine_max_digits must be 0 (the stage's own) or from data.min_digits to data.max_digits "
                          f"({d.min_digits} to {d.max_digits}), got {d.mine_max_digits!r}")
    if d.mine_max_items and not (task.item_list and d.min_items <= d.mine_max_items <= d.max_items):
        raise RecipeError(f"data.mine_max_items must be 0 (the stage's own) or, for a list task, from data.min_items to "
                          f"data.max_items ({d.min_items} to {d.max_items}); {task.title} got {d.mine_max_items!r}")
    if d.item_places and not (task.item_list and d.max_items <= d.item_places <= fmt.max_items):
        raise RecipeError(f"data.item_places must be 0 or, for a list task, from data.max_items to format.max_items "
                          f"({d.max_items} to {fmt.max_items}); {task.title} got {d.item_places!r}")
    if d.item_spread and not d.item_places:
        raise RecipeError("data.item_spread needs data.item_places (the places a list's items spread over)")
    if task.item_list and d.max_items > fmt.max_items:
        raise RecipeError(f"data.max_items {d.max_items} exceeds format.max_items {fmt.max_items} (the items a prompt holds)")
    if recipe.eval.verify and not is_tiny_adder_format(fmt):
        raise RecipeError(f"eval.verify: the tiny-adder protocol needs 10-digit decimal addition, but this recipe "
                          f"trains {task.title} in base {fmt.base}; set eval.verify=false")
    try:
        config_cls, _ = family_classes(recipe.family)
    except ValueError as err:
        raise RecipeError(f"family: {err}") from None
    # A config stores unknown keyword arguments silently, so a misspelt key would train the default.
    known = config_keys(config_cls)
    unknown = sorted(set(recipe.model) - known - {"attn_implementation", "dtype"})
    if unknown:
        raise RecipeError(f"unknown key(s) {unknown} in model for the {recipe.family!r} family; known: "
                          f"{', '.join(sorted(known))}")
    if recipe.model.get("digit_logits_only") and (fmt.end_token or not fmt.answer_width
                                                  or not fmt.task_rules.digit_answers):
        owners = " or ".join(get_task(t).title for t in task_names() if get_task(t).digit_answers)
        raise RecipeError(f"model.digit_logits_only needs answers of digits only: {owners} with a "
                          "fixed format.answer_width and format.end_token false")
    check_trainer_section(recipe.trainer)
    return fmt


def config_keys(config_cls) -> set[str]:
    """The keyword arguments a family's config takes: its own `__init__`'s and, for a config that
    extends another family's (the looped config passes the abacus options on in **kwargs), those
    of every config class above it, up to transformers' PreTrainedConfig."""
    from transformers import PreTrainedConfig

    known = set()
    for klass in config_cls.__mro__:
        if klass is PreTrainedConfig or not issubclass(klass, PreTrainedConfig):
            break
        if "__init__" in vars(klass):
            known |= {n for n, p in inspect.signature(klass.__init__).parameters.items()
                      if n != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return known


# -- the trainer: section -----------------------------------------------------------------------
# TrainingArguments that are recipe keys under another name: `trainer.NAME` is read as that recipe key,
# with a one-line note; given together with the recipe key and another value, it is refused.
ARGUMENT_RECIPE_KEYS = {
    "max_steps": "optim.steps", "learning_rate": "optim.learning_rate",
    "per_device_train_batch_size": "optim.batch_size",  # per process; optim.batch_size is the global batch
    "weight_decay": "optim.weight_decay", "warmup_steps": "optim.warmup_steps", "adam_beta2": "optim.adam_beta2",
    "max_grad_norm": "optim.max_grad_norm", "logging_steps": "optim.logging_steps", "save_steps": "optim.save_steps",
    "seed": "optim.seed", "torch_compile": "optim.compile", "output_dir": "output_dir",
}
# TrainingArguments the recipe sets to a fixed value: that value is accepted (and dropped), another refused.
FIXED_ARGUMENTS = {"dataloader_num_workers": 0, "dataloader_pin_memory": False, "remove_unused_columns": False,
                   "ignore_data_skip": True}
# TrainingArguments the recipe sets itself (key -> the recipe key to use instead, or why not). Those of
# ARGUMENT_RECIPE_KEYS never reach the trainer: section of a recipe read by `recipe_from_dict`.
MANAGED_ARGUMENTS = {
    **ARGUMENT_RECIPE_KEYS, "output_dir": "output_dir or --output-dir",
    "per_device_train_batch_size": "optim.batch_size (the global batch)",
    "num_train_epochs": "optim.steps (the training data is an endless stream)",
    "use_cpu": "CUDA_VISIBLE_DEVICES=''",
    "lr_scheduler_type": "optim.warmup_steps and optim.restart_at (the schedule is cosine)",
    "dataloader_num_workers": "nothing (the curriculum must reach the generator in the main process)",
    "dataloader_pin_memory": "nothing", "remove_unused_columns": "nothing",
    "accelerator_config": "nothing (batches are dispatched from rank 0 and split)",
    "ignore_data_skip": "nothing (the stream resumes at the checkpoint's step itself)",
}
# report_to integrations: the modules any one of which makes it usable, and the package to install.
REPORTER_PACKAGES = {
    "tensorboard": (("tensorboard", "tensorboardX"), "tensorboard"), "trackio": (("trackio",), "trackio"),
    "wandb": (("wandb",), "wandb"), "mlflow": (("mlflow",), "mlflow"), "comet_ml": (("comet_ml",), "comet_ml"),
    "clearml": (("clearml",), "clearml"), "codecarbon": (("codecarbon",), "codecarbon"),
    "dvclive": (("dvclive",), "dvclive"), "swanlab": (("swanlab",), "swanlab"), "neptune": (("neptune",), "neptune"),
    "dagshub": (("dagshub",), "dagshub"), "azure_ml": (("azureml",), "azureml-core"),
}
TRACKING_EXTRA = ("tensorboard", "trackio")  # pip install 'hf_arith[tracking]' brings these


def _default_of(key: str):
    """The default value of a recipe key ('optim.steps', 'output_dir')."""
    section, _, leaf = key.rpartition(".")
    cls = _SECTIONS[section] if section else Recipe
    return next(f.default for f in fields(cls) if f.name == leaf)


def _as_recipe_key(name: str, value) -> tuple[str, object, str]:
    """(recipe key, its value, a one-line note) for `trainer.NAME=value` with NAME in ARGUMENT_RECIPE_KEYS."""
    key = ARGUMENT_RECIPE_KEYS[name]
    default = _default_of(key)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise RecipeError(f"trainer.{name} must be a string, got {value!r}")
    else:
        _check_like(f"trainer.{name} (the recipe's {key})", value, default)
    if name == "per_device_train_batch_size":
        world = max(1, int(os.environ.get("WORLD_SIZE", "1")))
        value = int(value) * world
        return key, value, (f"trainer.{name} is per process and the recipe's {key} is the global batch: using "
                            f"{key}={value} ({world} process{'es' if world > 1 else ''})")
    later = " (--output-dir overrides it)" if name == "output_dir" else ""
    return key, value, f"trainer.{name} is the recipe's {key}{later}: using {key}={value}"


def _map_argument_names(data: dict) -> tuple[dict, dict[str, str]]:
    """`data` with its trainer: names that are recipe keys moved to those keys and its fixed-value
    arguments that match dropped; and the notes saying so. Refuses a name given with its recipe key
    and another value."""
    trainer = data.get("trainer") if isinstance(data, dict) else None
    if not isinstance(trainer, dict) or not (set(trainer) & (set(ARGUMENT_RECIPE_KEYS) | set(FIXED_ARGUMENTS))):
        return data, {}
    data, trainer, notes = dict(data), dict(trainer), {}
    for name, fixed in FIXED_ARGUMENTS.items():
        if name in trainer and type(trainer[name]) is type(fixed) and trainer[name] == fixed:
            del trainer[name]  # what the recipe sets anyway
    for name in [n for n in trainer if n in ARGUMENT_RECIPE_KEYS]:
        given = trainer.pop(name)
        key, value, note = _as_recipe_key(name, given)
        section, _, leaf = key.rpartition(".")
        if section:
            node = data.get(section) or {}
            if not isinstance(node, dict):
                raise RecipeError(f"{section} must be a mapping, got {type(node).__name__}")
            node = data[section] = dict(node)
        else:
            node = data
        if leaf in node and node[leaf] != value:
            raise RecipeError(f"trainer.{name}={given} and {key}={node[leaf]} both set {key}; give one of them")
        node[leaf] = value
        notes[f"trainer.{name}"] = note
    data["trainer"] = trainer
    return data, notes


def _eval_strategy(extra: dict) -> str:
    strategy = extra.get("eval_strategy", "no")
    return str(getattr(strategy, "value", strategy))  # a string, or TrainingArguments' IntervalStrategy


def evaluates_during_training(extra: dict) -> bool:
    """Whether the `trainer:` section turns on the Trainer's evaluation (an eval_strategy, eval_on_start)."""
    return _eval_strategy(extra) != "no" or bool(extra.get("eval_on_start"))


def check_trainer_section(extra: dict) -> None:
    """`trainer:` keys must be TrainingArguments fields that the recipe does not set itself, with values
    of the right type; an evaluation strategy must be one that can happen on an endless stream, and
    every report_to integration's package must be installed."""
    from transformers import TrainingArguments

    known = {f.name: f.default for f in dataclasses.fields(TrainingArguments) if f.init}
    for key, value in extra.items():
        if key in MANAGED_ARGUMENTS:
            raise RecipeError(f"trainer.{key} is set by the recipe; use {MANAGED_ARGUMENTS[key]}")
        if key not in known:
            close = sorted(k for k in known if k.startswith(key[:4]))[:5]
            hint = f" (similar: {', '.join(close)})" if close else ""
            raise RecipeError(f"trainer.{key} is not a TrainingArguments field{hint}")
        # TrainingArguments checks few types itself: a misspelt number would fail deep inside training.
        _check_like(f"trainer.{key}", value, known[key])
    strategy = _eval_strategy(extra)
    if strategy == "epoch":
        raise RecipeError("trainer.eval_strategy=epoch never evaluates: the training data is an endless stream "
                          "without epochs; use trainer.eval_strategy=steps with trainer.eval_steps=N")
    if strategy not in ("no", "steps"):
        raise RecipeError(f"trainer.eval_strategy must be no or steps, got {strategy!r}")
    check_report_to(extra.get("report_to", "none"))


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def check_report_to(report_to) -> None:
    """Every integration named in trainer.report_to must be one the Trainer knows and have its package
    installed (the Trainer would fail on it with a traceback after building the model)."""
    from transformers.integrations import INTEGRATION_TO_CALLBACK

    if report_to is None:
        return
    names = [report_to] if isinstance(report_to, str) else report_to
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise RecipeError(f"trainer.report_to must be a name or a list of names, got {report_to!r}")
    if names in (["none"], ["all"]):  # none, or every integration whose package is installed
        return
    for name in names:
        if name not in INTEGRATION_TO_CALLBACK:
            raise RecipeError(f"trainer.report_to: unknown integration {name!r}; known: "
                              f"{', '.join(sorted(INTEGRATION_TO_CALLBACK))} (or all or none, alone)")
        modules, package = REPORTER_PACKAGES.get(name, ((), ""))
        if modules and not any(_installed(m) for m in modules):
            extra = ", or pip install 'hf_arith[tracking]'" if name in TRACKING_EXTRA else ""
            raise RecipeError(f"trainer.report_to={name} needs the {package} package (pip install {package}{extra})")


# -- presets and overrides --------------------------------------------------------------------
def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


class _RecipeLoader(yaml.SafeLoader):
    """YAML as recipes are written: PyYAML follows YAML 1.1, which reads `1e-7` (no dot) as a string."""


_RecipeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def _load_yaml(text: str):
    return yaml.load(text, Loader=_RecipeLoader)


def _parse_value(text: str):
    try:
        return _load_yaml(text)
    except yaml.YAMLError:
        return text


def _parse_overrides(overrides: list[str]) -> list[tuple[list[str], object, str]]:
    """(key path, value parsed as YAML, the override as given) for each `section.key=value`."""
    parsed = []
    for item in overrides:
        if "=" not in item:
            raise RecipeError(f"override {item!r} must look like section.key=value")
        path, value = item.split("=", 1)
        parsed.append((path.strip().split("."), _parse_value(value), item))
    return parsed


def _apply_parsed(data: dict, parsed: list[tuple[list[str], object, str]]) -> dict:
    for keys, value, item in parsed:
        node = data
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise RecipeError(f"override {item!r}: {k!r} is not a section")
        node[keys[-1]] = value
    return data


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply `section.key=value` overrides (values parsed as YAML) to a raw recipe dict."""
    return _apply_parsed(data, _parse_overrides(overrides))


def _map_override_names(overrides: list[str]) -> tuple[list[tuple[list[str], object, str]], dict[str, str]]:
    """The parsed overrides with each `trainer.NAME=value` (NAME in ARGUMENT_RECIPE_KEYS) turned into its
    recipe key, and a note per such name. Two overrides that set one key to different values under
    different names are refused (the same name twice: the last one wins, as for any override)."""
    parsed, notes, seen = [], {}, {}
    for keys, value, item in _parse_overrides(overrides):
        given = ".".join(keys)
        if len(keys) == 2 and keys[0] == "trainer" and keys[1] in ARGUMENT_RECIPE_KEYS:
            key, value, notes[given] = _as_recipe_key(keys[1], value)
            keys = key.split(".")
        key = ".".join(keys)
        if key in seen and seen[key][0] != given and seen[key][1] != value:
            raise RecipeError(f"--set {seen[key][2]} and --set {item} both set {key}; give one of them")
        seen[key] = (given, value, item)
        parsed.append((keys, value, item))
    return parsed, notes


# -- presets as files: extend:, stages: and the catalogue keys ----------------------------------------
# A preset file may state only its differences: `extend: BASE` (a preset name, or a YAML file beside it;
# BASE:STAGE takes BASE's chain up to that stage) starts from BASE's recipe, and `stages:` lists the
# runs of a chain, each a mapping of what differs
# from the stage before (the first: from the recipe around it). Mappings merge key by key; lists and
# values replace. Stage k > 0 starts from stage k - 1's final model; earlier stages train into
# `{output_dir}-{stage}` and the last into output_dir. A recipe without stages: is one stage, labelled
# by its file's name. A preset with stages: that extends a base trains the base's stages first, then
# its own (its keys outside stages: apply to its own); without stages:, it changes the base's last one,
# and so does a first listed stage that restates that stage's label (`extend: B:base`, `- stage: base`).
CATALOGUE_KEYS = ("about", "train_time")  # what `hf-arith train --list` prints; not part of the recipe
STAGE_LABEL = "stage"  # a stage's short name (letters, digits, '-'): its run folder's suffix
CHAIN_KEYS = ("name", "output_dir", "extend", "stages", *CATALOGUE_KEYS)  # the chain's, never a stage's
_LABEL = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclass
class Stage:
    """One run of a chain: its label, its recipe (output_dir and init_from as placed by `place_stages`)
    and whether it starts from the stage before it (False: from its own init_from, or from scratch)."""

    label: str
    recipe: Recipe
    chained: bool


def _merge(base: dict, changes: dict) -> dict:
    """`base` with `changes` applied: mappings merge key by key, everything else is replaced."""
    merged = dict(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _preset_path(name_or_path: str, beside: Path | None = None) -> Path:
    path = Path(name_or_path)
    if beside is not None and not path.is_absolute() and (beside / name_or_path).is_file():
        return beside / name_or_path
    if path.is_file():
        return path
    preset = PRESETS_DIR / f"{name_or_path}.yaml"
    if preset.is_file():
        return preset
    # The presets are too many to list in one error line: the closest names, and where the rest are.
    presets = list_presets()
    close = difflib.get_close_matches(name_or_path, presets, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise RecipeError(f"no preset or file named {name_or_path!r}; {hint}the {len(presets)} presets include "
                      f"minimal-add10 (the default); `hf-arith train --list` lists them all")


def _read_preset(path: Path) -> dict:
    try:
        data = _load_yaml(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise RecipeError(f"{path}: not a UTF-8 text file, so not a YAML recipe") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise RecipeError(f"{path}: malformed YAML{where}: {getattr(err, 'problem', err)}") from None
    if data is not None and not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe must be a YAML mapping (section: key: value), got a {type(data).__name__}")
    if not data:  # it would train every default (minimal-add10's recipe) without a word
        raise RecipeError(f"{path}: an empty recipe (no sections); write its sections (family, format, model, data, "
                          "optim, ...), or train the default recipe by name (hf-arith train minimal-add10)")
    return data


def _raw_stages(path: Path, seen: tuple[Path, ...] = ()) -> tuple[dict, list[dict]]:
    """(the chain's own keys: name, output_dir and the catalogue's; each stage's full raw mapping) of a
    preset file, its extend: resolved."""
    if path.resolve() in seen:
        chain = " -> ".join(p.stem for p in (*seen, path.resolve()))
        raise RecipeError(f"{path}: extend: goes round in a circle ({chain})")
    data = _read_preset(path)
    top = {k: v for k, v in data.items() if k in CHAIN_KEYS}
    body = {k: v for k, v in data.items() if k not in CHAIN_KEYS}
    own = {k: top[k] for k in ("name", "output_dir", *CATALOGUE_KEYS) if k in top}
    for key in CATALOGUE_KEYS:
        if key in own and not isinstance(own[key], str):
            raise RecipeError(f"{path}: {key} must be one line of text, got {own[key]!r}")
    base_own, stages = {}, []
    if "extend" in top:
        if not isinstance(top["extend"], str) or not top["extend"]:
            raise RecipeError(f"{path}: extend must name a preset or a YAML file, got {top['extend']!r}")
        base, _, upto = top["extend"].partition(":")  # BASE:STAGE: the base's chain up to that stage
        try:
            base_own, stages = _raw_stages(_preset_path(base, path.parent), (*seen, path.resolve()))
        except RecipeError as err:
            raise RecipeError(f"{path}: extend {top['extend']}: {err}") from None
        if upto:
            labels = [stage[STAGE_LABEL] for stage in stages]
            if upto not in labels:
                raise RecipeError(f"{path}: extend {top['extend']}: {base} has no stage {upto!r}; its stages: "
                                  f"{', '.join(labels)}")
            stages = stages[:labels.index(upto) + 1]
    own = {**{k: v for k, v in base_own.items() if k not in CATALOGUE_KEYS}, **own}
    if "stages" not in top:
        # A recipe of one stage is labelled by its file's name, as the first stage of a chain extending it.
        stages = [*stages[:-1], _merge(stages[-1] if stages else {STAGE_LABEL: path.stem}, body)]
        return own, stages
    listed = top["stages"]
    if not isinstance(listed, list) or not listed or not all(isinstance(s, dict) for s in listed):
        raise RecipeError(f"{path}: stages must be a list of mappings (what each stage changes), got {listed!r}")
    previous = _merge(stages[-1], body) if stages else body
    for i, changes in enumerate(listed):
        wrong = sorted(set(changes) & set(CHAIN_KEYS))
        if wrong:
            raise RecipeError(f"{path}: stages[{i}] sets {wrong}, which belong to the whole chain (outside stages:)")
        if STAGE_LABEL not in changes:
            raise RecipeError(f"{path}: stages[{i}] needs a {STAGE_LABEL}: label (its run folder's suffix)")
        if i == 0 and stages and changes[STAGE_LABEL] == stages[-1][STAGE_LABEL]:
            # The base's last stage restated: changed in place, so this chain starts from it changed.
            previous = stages[-1] = _merge(previous, changes)
            continue
        changes = dict(changes)
        if len(stages) + i > 0 and "init_from" not in changes:  # from the stage before, set by place_stages
            changes["init_from"] = ""
        previous = _merge(previous, changes)
        stages.append(previous)
    return own, stages


def load_stages(name_or_path: str | None = None, overrides: list[str] | None = None) -> list[Stage]:
    """Every stage of a preset name (see `list_presets`) or a YAML file path, oldest first, each with the
    overrides applied (`init_from=` to the first stage only: the others start from the stage before)."""
    path = _preset_path(name_or_path or "minimal-add10")
    own, raw = _raw_stages(path)
    # TrainingArguments names are read as recipe keys in the file, then on the command line, whose
    # overrides win over the file (a conflict is only one within the file or within the overrides).
    parsed, override_notes = _map_override_names(overrides or [])
    chain = _apply_parsed({k: own[k] for k in ("name", "output_dir") if k in own},
                          [p for p in parsed if p[0] in (["name"], ["output_dir"])])
    parsed = [p for p in parsed if p[0] not in (["name"], ["output_dir"])]
    output_dir = chain.get("output_dir", _default_of("output_dir"))
    if not isinstance(output_dir, str):
        raise RecipeError(f"output_dir must be a string, got {output_dir!r}")
    labels, stages = [], []
    for k, data in enumerate(raw):
        data = copy.deepcopy(data)  # stages share the mappings they do not change
        label = data.pop(STAGE_LABEL, "")
        if len(raw) > 1 and (not isinstance(label, str) or not _LABEL.match(label) or label in labels):
            raise RecipeError(f"{path}: stage label {label!r} must be unique, of lowercase letters, digits and '-'")
        labels.append(label)
        chained = k > 0 and data.get("init_from") == ""
        data, notes = _map_argument_names(data)
        stage_parsed = parsed if k == 0 else [p for p in parsed if p[0] != ["init_from"]]
        data = _apply_parsed({**data, **chain}, stage_parsed)
        if chained:
            data["init_from"] = "(the stage before)"  # checked as set; place_stages puts the folder in
        try:
            recipe = recipe_from_dict(data)
        except RecipeError as err:
            raise RecipeError(f"stage {label}: {err}" if len(raw) > 1 else str(err)) from None
        recipe.notes = (*{**notes, **override_notes}.values(), *recipe.notes)
        stages.append(Stage(label, recipe, chained))
    return place_stages(stages, output_dir)


def stage_folder(output_dir: str, stages: list[Stage], k: int) -> str:
    """Where stage k of a chain whose last stage trains into output_dir trains."""
    return output_dir if k == len(stages) - 1 else f"{output_dir}-{stages[k].label}"


def place_stages(stages: list[Stage], output_dir: str) -> list[Stage]:
    """The stages with the last one training into output_dir, each earlier one into `stage_folder`, and
    each chained stage starting from the final folder of the stage before."""
    placed = []
    for k, stage in enumerate(stages):
        changes = {"output_dir": stage_folder(output_dir, stages, k)}
        if stage.chained:
            changes["init_from"] = str(Path(stage_folder(output_dir, stages, k - 1)) / "final")
        recipe = dataclasses.replace(stage.recipe, **changes)
        recipe.notes = stage.recipe.notes
        placed.append(Stage(stage.label, recipe, stage.chained))
    return placed


def load_recipe(name_or_path: str | None = None, overrides: list[str] | None = None) -> Recipe:
    """The recipe of a preset name (see `list_presets`) or a YAML file path, plus overrides: a chain's
    last stage (`load_stages` gives them all; `training.train` trains the earlier ones first)."""
    stages = load_stages(name_or_path, overrides)
    recipe = stages[-1].recipe
    recipe.stages = tuple(stages)
    return recipe


def preset_catalogue() -> list[dict]:
    """Per preset: name, task, family, about, train_time and its stage labels (`hf-arith train --list`)."""
    rows = []
    for name in list_presets():
        own, _ = _raw_stages(PRESETS_DIR / f"{name}.yaml")
        stages = load_stages(name)
        recipe = stages[-1].recipe
        rows.append({"name": name, "task": recipe.format.get("task", "add"), "family": recipe.family,
                     "about": own.get("about", ""), "train_time": own.get("train_time", ""),
                     "stages": [s.label for s in stages] if len(stages) > 1 else []})
    return rows
