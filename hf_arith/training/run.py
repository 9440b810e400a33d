"""`hf-arith train`: a recipe in, a trained checkpoint and its held-out accuracy out.

Runs the Hugging Face Trainer on the infinite problem stream. The loss covers answer tokens
only (labels are -100 elsewhere); the curriculum is a TrainerCallback; the schedule is cosine
with an optional restarted second phase.

With an evaluation strategy in the recipe's `trainer:` section (`eval_strategy=steps`), the Trainer
also scores a fixed set of held-out problems (`eval.during_training_samples`, from the test split)
as it trains: teacher-forced exact match overall and per operand length (`hf_arith.evaluation.metrics`).

Several processes (`torchrun`, `accelerate launch`): `optim.batch_size` is the global batch.
Rank 0 draws it from its stream and accelerate dispatches an equal slice to every rank
(`dispatch_batches` + `split_batches`), so N processes train on exactly the examples one
process would, the slices are disjoint, and the curriculum and data position (a function of
the global step) agree on all ranks by construction.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import shutil
import sys
from pathlib import Path

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments, set_seed
from transformers.trainer_utils import TrainOutput

from ..bundled import bundled_models
from ..data.formatting import FormatError, NumberFormat, Problems
from ..data.problems import ProblemSpec, held_out_problems
from ..data.streaming import CurriculumState, ProblemStream, encode_examples, stack_examples, worst_case_length
from ..data.tokenization_arith import ArithTokenizer
from ..evaluation.held_out import evaluate_model, verify_tiny_adder
from ..evaluation.metrics import compute_metrics, preprocess_logits_for_metrics
from ..families import family_classes
from ..models.configuration_common import LIMIT_FIELDS
from ..records import SUMMARY_FILE, read_summary, write_json
from ..runtime.hardware import available_cpu_cores, machine_info, memory_bytes
from ..runtime.limits import FINGERPRINT_KEY, problem_spec
from ..runtime.saving import record_limits, save_checkpoint
from .adaptive_decay import AdaptiveWeightDecayCallback
from .best_held_out import BestHeldoutCallback
from .grokfast import GrokfastCallback
from .held_out_lr import HeldoutLearningRateDrop
from .index_separation import abacus_separation_penalty, has_abacus_table
from .mining import MINED_FILE, load_pool, mine_problems, save_pool
from .recipe import Recipe, RecipeError, check_recipe, evaluates_during_training, place_stages
from .run_lock import LOCK_FILE, RunLock, lock_output
from .seed_screen import (
    SCREEN_FILE,
    SCREEN_FOLDER,
    AbandonOnPlateau,
    StopAtStep,
    can_abandon,
    give_up,
    read_screen,
    screen,
    screened_recipe,
)
from .warm_start import describe_warm_start, earlier_stages, freeze_all_but, warm_start


def recipe_spec(recipe: Recipe, fmt: NumberFormat) -> ProblemSpec:
    """The problems a recipe's data section draws (its digit range, list sizes and sampling)."""
    d = recipe.data
    return problem_spec(fmt, d.min_digits, d.max_digits, (d.min_items, d.max_items), d.sample_by)


def mining_spec(spec: ProblemSpec, recipe: Recipe) -> ProblemSpec:
    """The problems data.mine_problems draws: the stage's `spec`, within data.mine_max_digits and mine_max_items."""
    d = recipe.data
    return dataclasses.replace(spec, max_digits=d.mine_max_digits or spec.max_digits,
                               max_items=d.mine_max_items or spec.max_items)


def build_tokenizer(fmt: NumberFormat, context: int) -> ArithTokenizer:
    return ArithTokenizer(number_format=fmt, model_max_length=context)


def world_size() -> int:
    """Processes in this run (torchrun / accelerate launch set WORLD_SIZE; 1 otherwise)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def check_launch(recipe: Recipe) -> None:
    """Refuse a launch that cannot work: more processes per node than devices, an indivisible batch,
    length buckets (which only the one-process batch stream makes) in several processes.

    On GPUs each process needs its own device. On CPU (gloo) any number of processes runs, but
    more processes than cores only time-share them, so that is refused as well.
    """
    world = world_size()
    local = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    if torch.cuda.is_available():
        gpus = torch.cuda.device_count()
        if local > gpus:
            raise RecipeError(f"{local} processes per node but only {gpus} GPU(s) visible: each process needs "
                              f"its own GPU; use --nproc_per_node {gpus} (or --num_processes {gpus}) or fewer")
    elif local > 1:
        cores = available_cpu_cores()
        if local > cores:
            raise RecipeError(f"{local} processes per node on a CPU with {cores} core(s) available: each process "
                              f"needs a core; use --nproc_per_node {cores} or fewer")
    if recipe.data.length_buckets and world > 1:  # the Trainer's own loader feeds several processes
        raise RecipeError(f"data.length_buckets works in one training process; set it to 0 to train in {world}")
    if recipe.optim.batch_size % world:
        raise RecipeError(f"optim.batch_size {recipe.optim.batch_size} is the global batch and must split evenly "
                          f"across the {world} processes; use a multiple of {world}")


def build_model(recipe: Recipe, tokenizer: ArithTokenizer, context: int):
    config_cls, model_cls = family_classes(recipe.family)
    kwargs = dict(recipe.model)
    kwargs.setdefault("max_position_embeddings", context)
    kwargs.update(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    defaults = config_cls().to_dict()
    if "num_digit_tokens" in defaults:
        kwargs["num_digit_tokens"] = tokenizer.arith_format.base
    if "answer_start_token_id" in defaults:  # abacus models align the answer after this token
        kwargs["answer_start_token_id"] = tokenizer.convert_tokens_to_ids("=")
    try:
        config = config_cls(**kwargs)
    except (TypeError, ValueError) as err:
        raise RecipeError(f"model: {err}") from None
    # Every checkpoint of the run records the number format it was trained on (see limits.check_pair).
    setattr(config, FINGERPRINT_KEY, tokenizer.arith_format.fingerprint())
    set_seed(recipe.optim.seed)  # the init is seeded explicitly, before the weights exist
    model = model_cls(config)
    record_limits(model, tokenizer)  # so every checkpoint the Trainer saves has its generation defaults
    return model


BYTES_PER_PARAMETER = 16  # float32 weights, gradients and Adam's two moments


def check_model(recipe: Recipe, fmt: NumberFormat, checkpoint: str | None = None) -> None:
    """The recipe's model, checked before any weights exist (built on the meta device as `build_model`
    builds it): its config; to resume, the checkpoint's config and recipe against it and the recipe
    (`check_resume`); a context that holds the longest training example (with data.random_prefix filler),
    an abacus range that places its longest number, and memory for its weights and optimizer state."""
    from transformers.utils import logging as hf_logging

    from ..runtime.limits import MAX_CONTEXT, ModelLimits

    spec = recipe_spec(recipe, fmt)
    context = worst_case_length(spec, fmt)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # build_model's own warnings come when the run builds it
    try:
        with torch.device("meta"):
            model = build_model(recipe, build_tokenizer(fmt, context), context)
    finally:
        hf_logging.set_verbosity(verbosity)
    if checkpoint is not None:
        check_resume(recipe, model, checkpoint)
    config, d = model.config, recipe.data
    rows = context * (1 + d.context_problems) + d.random_prefix
    if d.context_problems and not (getattr(config, "abacus_offset_per_problem", False) and fmt.end_token):
        raise RecipeError("data.context_problems packs problems closed by <eos>: it needs format.end_token and "
                          "model.abacus_offset_per_problem: true (each problem its own offset, segments restarting)")
    positions = getattr(config, "max_position_embeddings", None)
    if positions and positions > MAX_CONTEXT:
        raise RecipeError(f"model.max_position_embeddings must be at most {MAX_CONTEXT:,}, got {positions:,}")
    if positions and rows > positions:
        given = "max_position_embeddings" in recipe.model
        raise RecipeError(f"model.max_position_embeddings {positions}{'' if given else ' (by default the longest problem)'} "
                          f"is shorter than the longest training example: {context} tokens for {d.max_digits}-digit "
                          f"operands{f' x {1 + d.context_problems} packed problems' if d.context_problems else ''} + "
                          f"data.random_prefix {d.random_prefix}; set it to at least {rows}, or lower "
                          f"data.max_digits, data.context_problems or data.random_prefix")
    limits = ModelLimits(fmt=fmt, context=None, abacus_max_digits=getattr(config, "abacus_max_digits", None),
                         abacus_answer_offset=int(bool(getattr(config, "abacus_align_answer", False))),
                         loops=None, tokens_per_step=(1, 1))
    try:
        limits.check_digit_range(d.min_digits, d.max_digits, names=("data.min_digits", "data.max_digits"))
    except FormatError as err:
        raise RecipeError(f"{err}; raise model.abacus_max_digits or lower data.max_digits") from None
    params = sum(p.numel() for p in model.parameters())
    have = memory_bytes()
    if have and params * BYTES_PER_PARAMETER > have:
        raise RecipeError(f"model: {params:,} parameters need {params * BYTES_PER_PARAMETER / 2**30:,.1f} GiB for "
                          f"weights, gradients and Adam state, more than the {have / 2**30:,.1f} GiB of memory here; "
                          f"make it smaller (hidden_size, intermediate_size, num_hidden_layers)")


def cosine_with_restart(optimizer, total: int, warmup: int, restart_at: float, restart_scale: float,
                        min_ratio: float = 0.0):
    """Warmup then cosine down to `min_ratio` of the peak; with restart_at > 0 a second cosine starts at
    that fraction of the steps, with its peak `restart_scale` times the first's."""
    split = int(total * restart_at) if restart_at > 0 else total

    def cosine(progress: float) -> float:
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / max(1, warmup)
        if step < split:
            return cosine((step - warmup) / max(1, split - warmup))
        return restart_scale * cosine((step - split) / max(1, total - split))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class ArithTrainer(Trainer):
    def __init__(self, *args, restart_at: float = 0.0, restart_lr_scale: float = 0.3, min_lr_ratio: float = 0.0,
                 abacus_separation: float = 0.0, separation_gap: int = 0, separation_margin: float = 4.0,
                 loss_before: dict | None = None, decay_all: bool = False, **kwargs):
        self.decay_all = decay_all
        self.restart_at, self.restart_lr_scale, self.min_lr_ratio = restart_at, restart_lr_scale, min_lr_ratio
        self.abacus_separation, self.separation_gap = abacus_separation, separation_gap
        self.separation_margin = separation_margin
        self.loss_before = loss_before  # the loss record of the checkpoint this run resumes from, if it has one
        super().__init__(*args, **kwargs)

    def get_train_dataloader(self):
        # One process: the stream hands out whole batches (the same examples in the same order) instead of
        # the Trainer's DataLoader collating them one by one. Several processes keep the Trainer's loader,
        # whose batch size accelerate needs to split each global batch between them.
        if isinstance(self.train_dataset, ProblemStream) and self.accelerator.num_processes == 1:
            batches = self.train_dataset.batches(self._train_batch_size)
            return self.accelerator.prepare(torch.utils.data.DataLoader(batches, batch_size=None))
        return super().get_train_dataloader()

    def get_decay_parameter_names(self, model) -> list[str]:
        # The Trainer leaves norms and biases out of weight decay; optim.decay_all puts them in, as a plain
        # AdamW over model.parameters() does (MicroAdder's tiny adders train that way).
        if self.decay_all:
            return [name for name, _ in model.named_parameters()]
        return super().get_decay_parameter_names(model)

    def _save_checkpoint(self, model, trial) -> None:
        super()._save_checkpoint(model, trial)
        # Before the recipe file (written by RecipeRecorder.on_save, the last file of a checkpoint).
        record = self.loss_record()
        if record is not None and self.args.should_save:
            folder = Path(self._get_output_dir(trial=trial)) / f"checkpoint-{self.state.global_step}"
            write_json(folder / LOSS_FILE, record, indent=None)

    def loss_record(self, session_mean: float | None = None) -> dict | None:
        """The training loss summed over the steps run so far: {first_step, last_step, loss_sum}. It spans
        the whole run when the checkpoint this run resumed from had a record (or there was none), else
        the steps of this session only. `session_mean`: this session's mean (the Trainer's train_loss)."""
        start = getattr(self, "_initial_global_step", None)
        if session_mean is not None and start is not None:
            session = session_mean * (self.state.global_step - start)
        elif start is not None and hasattr(self, "_total_loss_scalar") and hasattr(self, "_tr_loss"):
            session = self._total_loss_scalar + float(self._tr_loss.item())  # logged so far + not yet logged
        else:
            return None
        before = self.loss_before
        if before is not None and before.get("last_step") == start:
            return {"first_step": before["first_step"], "last_step": self.state.global_step,
                    "loss_sum": before["loss_sum"] + session}
        return {"first_step": start + 1, "last_step": self.state.global_step, "loss_sum": session}

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        out = super().compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)
        if not self.abacus_separation:
            return out
        # A function of the weights alone: added once per optimizer step, whatever the accumulation.
        penalty = self.abacus_separation * abacus_separation_penalty(
            self.accelerator.unwrap_model(model), self.separation_gap, self.separation_margin,
        ) / self.args.gradient_accumulation_steps
        return (out[0] + penalty, out[1]) if return_outputs else out + penalty

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        if self.lr_scheduler is None:
            self.lr_scheduler = cosine_with_restart(
                optimizer or self.optimizer, num_training_steps, self.args.get_warmup_steps(num_training_steps),
                self.restart_at, self.restart_lr_scale, self.min_lr_ratio,
            )
            self._created_lr_scheduler = True
        return self.lr_scheduler


class CurriculumCallback(TrainerCallback):
    """Moves the stream's digit range through the recipe's phases as global steps pass.

    The phase is a pure function of the global step, so a resumed run lands in the same phase,
    and all ranks (which share the global step) agree on it. At the start of training it also
    tells the stream which step it starts from, so a resumed run draws the examples an
    uninterrupted one would have (the Trainer's own data skipping is switched off).
    """

    def __init__(self, state: CurriculumState, phases, final_range: tuple[int, int]):
        self.state, self.phases, self.final_range = state, phases, final_range

    def range_at(self, step: int) -> tuple[int, int]:
        for phase in self.phases:
            if step < phase.until_step:
                return phase.min_digits, phase.max_digits
        return self.final_range

    def on_step_begin(self, args, state, control, **kwargs):
        self.state.min_digits, self.state.max_digits = self.range_at(state.global_step)

    def on_train_begin(self, args, state, control, **kwargs):
        self.state.start_step = state.global_step
        self.on_step_begin(args, state, control, **kwargs)


RECIPE_FILE = "hf_arith_recipe.json"
# Recipe values that may change when a run is resumed (the rest must match the checkpoint).
RESUMABLE_CHANGES = {"optim.steps", "optim.save_steps", "optim.logging_steps", "optim.threads", "optim.compile",
                     "eval", "output_dir", "name", "trainer"}


class RecipeRecorder(TrainerCallback):
    """Writes the recipe into every checkpoint folder, so that --resume can refuse a different one."""

    def __init__(self, recipe: Recipe):
        self.recipe = recipe

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            write_json(folder / RECIPE_FILE, dataclasses.asdict(self.recipe))


def _checkpoint_step(path: Path) -> int | None:
    match = re.fullmatch(r"checkpoint-(\d+)", path.name)
    return int(match.group(1)) if match and path.is_dir() else None


LOSS_FILE = "hf_arith_loss.json"  # the training loss summed over the run so far (ArithTrainer.loss_record)
# What a resume reads from a checkpoint, each as (what, file names any one of which will do). The Trainer
# writes the weights, optimizer, scheduler, RNG state and trainer_state.json in that order, and
# RecipeRecorder the recipe after them all: a run killed while saving lacks one of them or has a cut one.
RESUME_FILES = (
    ("model config", ("config.json",)),
    ("weights", ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")),
    ("optimizer state", ("optimizer.pt", "optimizer.bin", "optimizer_0", "global_step*", "rank*-of-*-optimizer.pt")),
    ("learning-rate scheduler state", ("scheduler.pt",)),
    ("random number generator state", ("rng_state.pth", "rng_state_*.pth")),
)


def checkpoint_problem(path: str | Path) -> str | None:
    """Why a checkpoint-* folder cannot be resumed from (a file missing or unreadable), or None if it can."""
    path = Path(path)
    try:
        state = json.loads((path / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return "no readable trainer_state.json"
    if not isinstance(state, dict) or state.get("global_step") != _checkpoint_step(path):
        return f"trainer_state.json is not the state of step {_checkpoint_step(path)}"
    for what, patterns in RESUME_FILES:
        if not any(any(path.glob(pattern)) for pattern in patterns):
            return f"no {what} ({' or '.join(patterns[:2])})"
    try:
        recipe = json.loads((path / RECIPE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"no readable {RECIPE_FILE} (the recipe a resume is checked against)"
    if not isinstance(recipe, dict):
        return f"{RECIPE_FILE} is not a recipe (a JSON object)"
    return None


def is_complete_checkpoint(path: str | Path) -> bool:
    """Every file a resume needs is there and readable (see `checkpoint_problem`)."""
    return checkpoint_problem(path) is None


def checkpoints(output_dir: str | Path) -> list[Path]:
    """The checkpoint-* folders in `output_dir`, newest (highest step) first."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return []
    steps = sorted(((step, p) for p in folder.iterdir() if (step := _checkpoint_step(p)) is not None), reverse=True)
    return [p for _, p in steps]


def last_checkpoint(output_dir: str | Path) -> str | None:
    """The newest complete checkpoint-* folder (skipping one a killed run left half-written)."""
    return next((str(p) for p in checkpoints(output_dir) if is_complete_checkpoint(p)), None)


def _flatten(data: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and not prefix:  # sections: model.hidden_size, optim.steps, ...
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _differences(old: dict, new: dict, skip=()) -> list[str]:
    keys = sorted(set(old) | set(new))
    return [f"{k}: {old.get(k, '<unset>')!r} -> {new.get(k, '<unset>')!r}" for k in keys
            if k not in skip and not any(k.startswith(f"{s}.") for s in skip) and old.get(k) != new.get(k)]


# Config entries that describe a saved file rather than the model.
# The format fingerprint is not compared: checkpoints from before it have none, and the recipe check compares the format.
# What a saved config.json records besides the model itself: the remote code it names and the limits derived
# from the model and its format (`saving.record_limits`), which an older checkpoint may lack.
_CONFIG_BOOKKEEPING = {"transformers_version", "architectures", "auto_map", "use_cache", "_name_or_path", "dtype",
                       "torch_dtype", "output_attentions", "output_hidden_states", "return_dict", FINGERPRINT_KEY,
                       "custom_pipelines", "answer_views", *LIMIT_FIELDS}


def check_resume(recipe: Recipe, model, checkpoint: str) -> None:
    """Refuse to resume from a checkpoint of another model, format or training recipe."""
    check_resume_model(model, checkpoint)
    check_resume_recipe(recipe, checkpoint)


def check_resume_model(model, checkpoint: str) -> None:
    """Refuse to resume from a checkpoint whose config.json is not the config of `model`."""
    where = Path(checkpoint)
    try:
        saved = json.loads((where / "config.json").read_text())
    except (OSError, ValueError):
        raise RecipeError(f"--resume: {checkpoint} has no readable config.json, so it is not a checkpoint of this run") from None
    current = json.loads(model.config.to_json_string())
    diff = _differences({k: v for k, v in saved.items() if k not in _CONFIG_BOOKKEEPING},
                        {k: v for k, v in current.items() if k not in _CONFIG_BOOKKEEPING})
    if diff:
        raise RecipeError(f"--resume: {checkpoint} holds a different model ({'; '.join(diff[:4])}"
                          f"{'; ...' if len(diff) > 4 else ''}); resume with the recipe it was trained with, "
                          f"or train into another --output-dir")


def check_resume_recipe(recipe: Recipe, checkpoint: str) -> None:
    """Refuse to resume from a checkpoint trained with another recipe, or whose recipe cannot be read
    (only RESUMABLE_CHANGES may differ)."""
    recipe_file = Path(checkpoint) / RECIPE_FILE
    try:
        old = json.loads(recipe_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = None
    if not isinstance(old, dict):
        raise RecipeError(f"--resume: {checkpoint} has no readable {RECIPE_FILE}, so the recipe cannot be checked "
                          f"against the one it was trained with; resume from a complete checkpoint")
    # A key the saved recipe lacks is an option added since that run; the run behaved as its default.
    defaults = {k: v for k, v in _flatten(dataclasses.asdict(Recipe())).items() if v != {}}  # not sections
    old = {**defaults, **_flatten(old)}
    diff = _differences(old, _flatten(dataclasses.asdict(recipe)), skip=RESUMABLE_CHANGES)
    if diff:
        raise RecipeError(f"--resume: {checkpoint} was trained with a different recipe ({'; '.join(diff[:4])}"
                          f"{'; ...' if len(diff) > 4 else ''}); only optim.steps, save_steps, logging_steps, "
                          f"threads, compile, eval and trainer may change on resume")


def can_compile() -> bool:
    """torch.compile on CPU generates C++: without a compiler, train uncompiled instead of failing."""
    return torch.cuda.is_available() or any(shutil.which(cc) for cc in ("g++", "c++", "clang++"))


def training_arguments(recipe: Recipe, output_dir: str) -> TrainingArguments:
    o = recipe.optim
    compile_model = o.compile and can_compile()
    if o.compile and not compile_model:
        print("hf-arith: no C++ compiler found, so training runs without torch.compile (slower)", file=sys.stderr)
    # Evaluation (only with an eval_strategy): the inputs reach compute_metrics, for accuracy per
    # operand length, and eval batches have the training batches' shape. Loggers that group runs by
    # project (trackio, with report_to) file them under the recipe's name.
    named = {"project": recipe.name} if "project" in {f.name for f in dataclasses.fields(TrainingArguments)} else {}
    extra = {"save_total_limit": 2, "report_to": "none", "include_for_metrics": ["inputs"],
             "per_device_eval_batch_size": o.batch_size, **named, **recipe.trainer}
    try:
        return TrainingArguments(**_managed_arguments(recipe, output_dir, compile_model), **extra)
    except (TypeError, ValueError) as err:
        raise RecipeError(f"trainer: {err}") from None


def _managed_arguments(recipe: Recipe, output_dir: str, compile_model: bool) -> dict:
    o = recipe.optim
    return dict(
        output_dir=output_dir,
        max_steps=o.steps,
        learning_rate=o.learning_rate,
        weight_decay=o.weight_decay,
        warmup_steps=o.warmup_steps,
        adam_beta2=o.adam_beta2,
        max_grad_norm=o.max_grad_norm,
        logging_steps=o.logging_steps,
        save_steps=o.save_steps,
        seed=o.seed,
        dataloader_num_workers=0,  # the curriculum callback must reach the generator
        dataloader_pin_memory=False,
        remove_unused_columns=False,
        use_cpu=not torch.cuda.is_available(),
        torch_compile=compile_model,
        # Several processes: rank 0 draws each global batch of optim.batch_size and every rank gets an
        # equal slice (one process trains on the same examples). The stream resumes by itself.
        per_device_train_batch_size=o.batch_size,
        **({"accelerator_config": {"dispatch_batches": True, "split_batches": True}} if world_size() > 1 else {}),
        ignore_data_skip=True,
    )


# -- evaluation during training -----------------------------------------------------------------
DURING_TRAINING_SEED = 1234  # the seed of the final held-out report (problems.held_out_problems)


def recipe_held_out(recipe: Recipe, fmt: NumberFormat, n: int, seed: int) -> Problems:
    """n problems of the test split over the recipe's whole digit range (not the curriculum's phase)."""
    return held_out_problems(recipe_spec(recipe, fmt), n, seed, recipe.data.test_fraction)


def during_training_problems(recipe: Recipe, fmt: NumberFormat) -> Problems:
    """The fixed held-out problems the Trainer evaluates on: eval.during_training_samples problems from
    the test split, over the recipe's whole digit range (not the curriculum's current phase)."""
    n = recipe.eval.during_training_samples
    try:
        return recipe_held_out(recipe, fmt, n, DURING_TRAINING_SEED)
    except FormatError as err:
        raise RecipeError(f"evaluation during training (eval.during_training_samples={n}): {err}") from None


class HeldoutExamples(torch.utils.data.Dataset):
    """Held-out problems as the Trainer's eval_dataset, encoded as the training stream encodes its
    examples (`streaming.encode_examples`: same fixed length, labels on answer tokens only), without
    the random filler."""

    def __init__(self, problems: Problems, stream: ProblemStream):
        self.problems = problems
        self.input_ids, self.attention_mask, self.labels = encode_examples(problems, stream.fmt, stream.length)
        self.with_mask = stream.with_mask

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, i: int) -> dict:
        example = {"input_ids": self.input_ids[i], "labels": self.labels[i]}
        if self.with_mask:
            example["attention_mask"] = self.attention_mask[i]
        return example


# -- warm starts ---------------------------------------------------------------------------------------
def warm_start_source(init_from: str) -> dict:
    """Where a warm start's weights came from, for the training summary and the model card:
    {"name", "kind"} with kind "bundled" (shipped with hf_arith), "folder" (a local checkpoint folder)
    or "hub" (a Hub repo id, then also "repo_id"), in the order `loading.resolve_checkpoint` tries them."""
    path = Path(init_from).expanduser()
    if init_from in bundled_models() and not (path / "config.json").is_file():
        return {"name": init_from, "kind": "bundled"}
    if path.exists():
        return {"name": init_from, "kind": "folder"}
    return {"name": init_from, "kind": "hub", "repo_id": init_from}  # what resolved, and is neither, is a repo id


@dataclasses.dataclass
class TrainingRun:
    """A run that passed every check made before training: its recipe, the recipe's number format,
    the output folder, the checkpoint it resumes from (None: from the start) and, when the Trainer
    evaluates during training, the held-out problems it evaluates on."""

    recipe: Recipe
    fmt: NumberFormat
    output_dir: str
    checkpoint: str | None = None
    eval_problems: Problems | None = None
    overwrite: bool = False  # clear the output folder's checkpoint-* and final/ before training
    mined: Problems | None = None  # a resumed run's saved pool of data.mine_problems (a new run mines its own)
    earlier: list[TrainingRun] = dataclasses.field(default_factory=list)  # a chain's stages still to train, first
    lock: RunLock | None = None  # the output folder's lock (main process), held until the run ends
    finished: str | None = None  # --resume of a run that has ended already: what to say instead of training


def _output_entries(output_dir: str) -> list[str]:
    """What the output folder holds already (names; empty when it is missing or empty)."""
    folder = Path(output_dir)
    try:
        return sorted(p.name for p in folder.iterdir() if p.name != LOCK_FILE) if folder.is_dir() else []
    except OSError:
        return []


def earlier_runs(recipe: Recipe, output_dir: str, resume: bool) -> tuple[Recipe, list[TrainingRun], bool]:
    """A chain (train_config.load_stages) whose last stage trains into output_dir: that stage's recipe,
    starting from the final folder of the stage before; a prepared run for each earlier stage whose
    final model is not there yet (resumed where a killed run left checkpoints), on the last stage's
    threads (a setting of the machine, not of the model); and whether the last stage resumes (not when
    the chain stopped before it started)."""
    if len(recipe.stages) < 2:
        return recipe, [], resume
    stages = place_stages(list(recipe.stages), output_dir)
    notes = recipe.notes
    if stages[-1].chained:
        recipe = dataclasses.replace(recipe, init_from=stages[-1].recipe.init_from)
        recipe.notes = notes
    runs = []
    for stage in stages[:-1]:
        earlier = stage.recipe
        if (Path(earlier.output_dir) / "final" / "model.safetensors").is_file():
            continue
        earlier = dataclasses.replace(earlier, optim=dataclasses.replace(earlier.optim, threads=recipe.optim.threads))
        runs.append(prepare_run(earlier, resume=last_checkpoint(earlier.output_dir) is not None))
    if resume and runs and last_checkpoint(output_dir) is None and not _output_entries(output_dir):
        resume = False
    return recipe, runs, resume


def prepare_run(recipe: Recipe, output_dir: str | None = None, resume: bool = False,
                overwrite: bool = False) -> TrainingRun:
    """Everything that can refuse a run before training, once: the recipe (`train_config.check_recipe`),
    the launch (`check_launch`), the output folder (a non-empty one only with `resume` or `overwrite`,
    never both) and, to resume, the newest complete checkpoint in it (newer incomplete ones are named on
    stderr and skipped), the model it builds and the checkpoint against it (`check_model`), and the
    held-out problems of an evaluation during training. Prints the recipe's notes (TrainingArguments
    names read as recipe keys) once, on the main process."""
    output_dir = str(output_dir or recipe.output_dir)
    if resume and overwrite:
        raise RecipeError("--resume continues the run in the output folder and --overwrite replaces it; give one of them")
    fmt = check_recipe(recipe)
    check_launch(recipe)
    recipe, earlier, resume = earlier_runs(recipe, output_dir, resume)
    created = not Path(output_dir).exists()
    try:
        lock = lock_output(output_dir) if is_main_process() else None
    except OSError as err:
        raise RecipeError(f"output folder {output_dir}: cannot create or lock it ({err.strerror or err})") from None
    try:
        run = _prepare_locked(recipe, fmt, output_dir, resume, overwrite, earlier)
    except BaseException:
        for held in [lock, *(stage.lock for stage in earlier)]:
            if held is not None:
                held.release()
        if created:
            with contextlib.suppress(OSError):
                Path(output_dir).rmdir()  # only if still empty: nothing of a refused run stays
        raise
    if lock is not None and lock.taken_over and is_main_process():
        holder = lock.taken_over
        print(f"hf-arith: took over the lock of an earlier run that is no longer running (process "
              f"{holder.get('pid', '?')} on {holder.get('host', '?')})", file=sys.stderr, flush=True)
    run.lock = lock
    return run


def finished_run(output_dir: str, recipe: Recipe) -> str | None:
    """What to say when --resume finds the run ended already (its final/ holds a model and a training
    summary of at least optim.steps steps), else None. A corrupt summary is a RecipeError naming it."""
    final = Path(output_dir) / "final"
    if not (final / "model.safetensors").is_file() or not (final / SUMMARY_FILE).is_file():
        return None
    summary = read_summary(final)
    steps = summary.get("steps")
    if not isinstance(steps, int) or steps < recipe.optim.steps:
        return None
    return (f"hf-arith: {output_dir} holds a finished run ({steps} steps, model in {final}); nothing to resume, "
            f"nothing changed (raise optim.steps to train further, or --overwrite to start again)")


def _prepare_locked(recipe: Recipe, fmt: NumberFormat, output_dir: str, resume: bool, overwrite: bool,
                    earlier: list[TrainingRun]) -> TrainingRun:
    """`prepare_run`'s checks of the output folder and the model, made while holding the folder's lock."""
    checkpoint, mined, finished = None, None, None
    notes = list(recipe.notes)
    if resume:
        checkpoint = last_checkpoint(output_dir)
        newer = [p for p in checkpoints(output_dir)
                 if checkpoint is None or _checkpoint_step(p) > _checkpoint_step(Path(checkpoint))]
        screening = recipe.optim.screen_steps and read_screen(output_dir) is not None
        if checkpoint is not None and screening:  # the screen's chosen init, trained on in the output folder
            recipe = screened_recipe(recipe, output_dir)
        try:
            finished = finished_run(output_dir, recipe)
        except ValueError as err:
            raise RecipeError(f"--resume: {err}") from None
        if finished is not None and checkpoint is None:  # no checkpoint to check the recipe against
            return TrainingRun(recipe, fmt, output_dir, finished=finished)
        if checkpoint is None and not screening:  # an unfinished screen goes on where it stopped
            if newer:  # killed during its first save: nothing to keep, so --overwrite starts it again
                raise RecipeError(f"--resume: no complete checkpoint-* folder in {output_dir} to resume from "
                                  f"({newer[0].name}: {checkpoint_problem(newer[0])}); train again with --overwrite, "
                                  f"which deletes the incomplete checkpoint(s)")
            raise RecipeError(f"--resume: no complete checkpoint-* folder in {output_dir} to resume from "
                              f"(train without --resume first)")
        notes += [f"skipping {p.name}, incomplete: {checkpoint_problem(p)}" for p in newer]
        if recipe.data.mine_problems:
            if not (Path(output_dir) / MINED_FILE).is_file():
                raise RecipeError(f"--resume: {output_dir} has no {MINED_FILE}, the pool of data.mine_problems this run "
                                  f"trains on (it is mined from the starting model before the first step)")
            try:
                mined = load_pool(output_dir, recipe_spec(recipe, fmt))
            except ValueError as err:
                raise RecipeError(f"--resume: {err}") from None
    elif not overwrite:
        entries = _output_entries(output_dir)
        if entries:
            shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
            raise RecipeError(f"output folder {output_dir} is not empty ({shown}): --resume continues the run there, "
                              f"--overwrite replaces it (its checkpoint-* and final/ are deleted first), or choose "
                              f"another --output-dir")
    check_model(recipe, fmt, checkpoint)
    if finished is not None:  # the same recipe as the run's (checked above), which has ended: nothing to do
        return TrainingRun(recipe, fmt, output_dir, checkpoint, finished=finished)
    eval_problems = during_training_problems(recipe, fmt) if evaluates_during_training(recipe.trainer) else None
    if is_main_process():
        for note in notes:
            print(f"hf-arith: {note}", file=sys.stderr, flush=True)
    return TrainingRun(recipe, fmt, output_dir, checkpoint, eval_problems, overwrite=overwrite,
                       earlier=earlier, mined=mined)


def train(recipe: Recipe, output_dir: str | None = None, resume: bool = False, evaluate: bool = True,
          overwrite: bool = False) -> dict:
    """Train a model from a recipe; returns a summary with the held-out report.

    The Python entry point: `prepare_run` (every check), then `run_training`. A non-empty output folder
    needs `resume` (continue from its last complete checkpoint) or `overwrite` (delete its checkpoint-*
    folders and final/ first). Under torchrun / accelerate launch every process runs this; only rank 0
    saves the final checkpoint and evaluates it (the other ranks return the training figures only).
    """
    return run_training(prepare_run(recipe, output_dir, resume, overwrite), evaluate=evaluate)


FINAL_PARTIAL = ".final.partial"  # final/ is written here, then renamed into place


def publish_final(partial: Path, final: Path) -> None:
    """Put the complete folder `partial` in place of `final` (renames: final/ is the old one, then the new
    one, never a part of either)."""
    old = final.with_name(".final.old")
    if old.exists():
        shutil.rmtree(old)
    if final.exists():
        os.replace(final, old)
    os.replace(partial, final)
    shutil.rmtree(old, ignore_errors=True)


def save_failed(err: BaseException, final: Path, output_dir: str) -> RecipeError:
    """A final/ that could not be written (a full disk, ...), as the one line that says what still works."""
    from ..runtime.loading import one_line

    last = last_checkpoint(output_dir)
    keep = (f"{Path(last).name} is complete: free space, then the same train command with --resume writes "
            f"final/ from it" if last else "no checkpoint is complete: free space and train again with --overwrite")
    reason = err.strerror if isinstance(err, OSError) and err.strerror else one_line(err)
    return RecipeError(f"cannot write {final}: {reason}; no partial final/ was left ({keep})")


def screened_run(run: TrainingRun) -> TrainingRun:
    """optim.screen_steps: screen fresh inits (hf_arith.training.seed_screen) and return the run of the chosen one,
    continuing from its checkpoint at the screen's last step."""
    if run.overwrite and is_main_process():
        clear_output(run.output_dir)

    def train_candidate(candidate: Recipe, folder: str, stop_at: int) -> list[dict]:
        return run_training(dataclasses.replace(run, recipe=candidate, output_dir=folder, overwrite=False),
                            stop_at=stop_at)

    chosen, checkpoint = screen(run.recipe, run.output_dir, train_candidate)
    # Cleared before the screen; clearing again would delete the chosen checkpoint.
    return dataclasses.replace(run, recipe=chosen, checkpoint=checkpoint, overwrite=False)


def clear_output(output_dir: str) -> None:
    """--overwrite: delete the output folder's checkpoint-* folders and final/ (the run's own outputs),
    so that a later --resume cannot pick a checkpoint of the replaced run. Other files stay."""
    for path in [*checkpoints(output_dir), *(Path(output_dir) / name for name in ("final", FINAL_PARTIAL, ".final.old")),
                 Path(output_dir) / SCREEN_FOLDER]:
        if path.is_dir():
            shutil.rmtree(path)
    (Path(output_dir) / SCREEN_FILE).unlink(missing_ok=True)


def read_loss_record(checkpoint: str) -> dict | None:
    """The checkpoint's loss record (LOSS_FILE), when it has a well-formed one for its own step."""
    try:
        record = json.loads((Path(checkpoint) / LOSS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = (isinstance(record, dict) and all(isinstance(record.get(k), int) for k in ("first_step", "last_step"))
          and isinstance(record.get("loss_sum"), (int, float))
          and record["last_step"] == _checkpoint_step(Path(checkpoint)))
    return record if ok else None


def grokfast_callbacks(recipe: Recipe, checkpoint) -> list:
    """The Grokfast-EMA filter when the recipe turns it on (optim.grokfast_lambda > 0), else none."""
    o = recipe.optim
    if not o.grokfast_lambda:
        return []
    start = int(o.grokfast_start * o.steps) if o.grokfast_start < 1 else int(o.grokfast_start)
    return [GrokfastCallback(o.grokfast_alpha, o.grokfast_lambda, start, resume_from=checkpoint)]


ADAPTIVE_DECAY_SEED = 2025  # its held-out problems are drawn apart from the report's (DURING_TRAINING_SEED)


def adaptive_decay_callbacks(recipe: Recipe, stream: ProblemStream, checkpoint) -> list:
    """The adaptive weight decay when the recipe turns it on (optim.wd_drop_exact > 0), else none."""
    o = recipe.optim
    if not o.wd_drop_exact:
        return []
    held_out = HeldoutExamples(recipe_held_out(recipe, stream.fmt, o.wd_eval_samples, ADAPTIVE_DECAY_SEED), stream)
    examples = (torch.as_tensor(held_out.input_ids), torch.as_tensor(held_out.labels),
                torch.as_tensor(held_out.attention_mask) if held_out.with_mask else None)
    return [AdaptiveWeightDecayCallback(examples, o.weight_decay, o.wd_eval_steps, o.wd_drop_exact,
                                        o.wd_drop_exact_final, o.wd_drop_token_accuracy,
                                        o.wd_drop_factor, resume_from=checkpoint)]


def best_held_out_callbacks(recipe: Recipe, decay_callbacks: list, checkpoint, screening: bool) -> list:
    """Early stopping and best-weights keeping on the adaptive decay's held-out scores, when the recipe
    asks for either (optim.stop_exact, optim.keep_best; the recipe check made sure the scores are taken).
    Not for a screened candidate: it must reach the screen's step, and only the run that goes on ends."""
    o = recipe.optim
    if screening or not (o.stop_exact or o.keep_best):
        return []
    return [BestHeldoutCallback(decay_callbacks[0], o.stop_exact, o.keep_best, resume_from=checkpoint)]


def held_out_lr_callbacks(recipe: Recipe, decay_callbacks: list) -> list:
    """The learning-rate drop on the adaptive decay's held-out scores (optim.lr_drop_exact > 0), else none.
    Screened candidates have it too: it is part of the schedule the chosen one goes on with."""
    o = recipe.optim
    if not o.lr_drop_exact:
        return []
    return [HeldoutLearningRateDrop(decay_callbacks[0], o.lr_drop_exact, o.lr_drop_factor)]


def run_training(run: TrainingRun, evaluate: bool = True, stop_at: int | None = None):
    """Train a prepared run (see `prepare_run`, which has checked it); returns the summary `train` does.
    With `stop_at` (a screened init, hf_arith.training.seed_screen): stop at that step with a checkpoint there and
    return the Trainer's log history instead. A run that has ended already (`TrainingRun.finished`) is not
    trained again: the note is printed and its saved summary returned. The folder's lock is released at the end."""
    if stop_at is not None:
        return _run_training(run, evaluate, stop_at)
    try:
        if run.finished is not None:
            if is_main_process():
                print(run.finished, file=sys.stderr, flush=True)
            return read_summary(Path(run.output_dir) / "final")
        for k, stage in enumerate(run.earlier, 1):  # a chain's earlier stages, in order, each in its own folder
            if is_main_process():
                print(f"Training earlier stage {k} of {len(run.earlier)} first, into {stage.output_dir}", flush=True)
            run_training(stage, evaluate=evaluate)
        return _run_training(run, evaluate, stop_at)
    finally:
        if run.lock is not None:
            run.lock.release()


def _run_training(run: TrainingRun, evaluate: bool = True, stop_at: int | None = None):
    """One stage, in named steps: the model, the data stream, the Trainer, training (or restoring a run
    whose every step is checkpointed), the summary, then final/ written whole."""
    if stop_at is None and run.recipe.optim.screen_steps and run.checkpoint is None:
        run = screened_run(run)
    recipe, output_dir, checkpoint = run.recipe, run.output_dir, run.checkpoint
    if run.overwrite and is_main_process():
        clear_output(output_dir)
    torch.set_num_threads(recipe.optim.threads)
    spec, tokenizer, model = _stage_model(run)
    args = training_arguments(recipe, output_dir)
    mined, mining = _mined_pool(run, spec, tokenizer, model, args)
    trainer, extras = _stage_trainer(run, spec, tokenizer, model, args, mined, stop_at)
    trained = _checkpoint_step(Path(checkpoint)) if checkpoint is not None else None
    if trained is not None and trained >= recipe.optim.steps and not stop_at:
        # Every step was trained and checkpointed, and final/ was not written (a kill or a full disk while
        # writing it): final/ comes from that checkpoint. The Trainer would train one step more.
        trainer._load_from_checkpoint(checkpoint)
        result = TrainOutput(trained, float("nan"), {})
        record = read_loss_record(checkpoint)
    else:
        result = trainer.train(resume_from_checkpoint=checkpoint)
        if stop_at:
            return trainer.state.log_history
        plateau = extras["plateau"]
        if plateau and plateau[0].abandoned:  # optim.screen_abandon_step: the screen's next init goes on instead
            for path in checkpoints(output_dir):
                shutil.rmtree(path)
            screening = give_up(recipe, output_dir, plateau[0].abandoned, result.metrics.get("train_runtime"))
            return _run_training(dataclasses.replace(run, recipe=screening, checkpoint=None, overwrite=False), evaluate)
        # The Trainer's train_loss is the mean over this session's steps only; after a resume the run's mean
        # also needs the loss of the steps before it, which the checkpoint's loss record holds. Without one
        # (a checkpoint from an older version), the mean covers the steps this session ran, and says so.
        record = trainer.loss_record(session_mean=result.training_loss)
    summary = _stage_summary(run, spec, model, result, record, mining, extras)
    return _write_final(run, spec, trainer, model, tokenizer, summary, evaluate)


def _stage_model(run: TrainingRun):
    """The stage's problem spec, tokenizer and model (warm-started from init_from on a fresh run)."""
    recipe, fmt = run.recipe, run.fmt
    spec = recipe_spec(recipe, fmt)
    context = worst_case_length(spec, fmt)
    tokenizer = build_tokenizer(fmt, context)
    model = build_model(recipe, tokenizer, context)
    if recipe.optim.abacus_separation and not has_abacus_table(model):
        raise RecipeError(f"optim.abacus_separation needs a model with abacus positions; the {recipe.family!r} "
                          f"family has none")
    if recipe.init_from and run.checkpoint is None:  # a resumed run takes every weight from its own checkpoint
        fresh = warm_start(model, recipe.init_from, fmt.to_dict())
        if recipe.optim.freeze_init:
            freeze_all_but(model, fresh)
        if is_main_process():
            print(describe_warm_start(recipe.init_from, fresh), flush=True)
    return spec, tokenizer, model


def _mined_pool(run: TrainingRun, spec: ProblemSpec, tokenizer, model, args) -> tuple[Problems | None, dict | None]:
    """data.mine_problems: the pool a fresh run mines from its starting model (and saves), or the one a
    resumed run saved (read by prepare_run); with what mining found, when it ran now."""
    recipe, mined, mining = run.recipe, run.mined, None
    if recipe.data.mine_problems and run.checkpoint is None:  # a resumed run trains on its saved pool (prepare_run)
        d = recipe.data
        model.to(args.device)  # mined where it trains: a GPU answers the pool's problems many times faster
        mined, mining = mine_problems(model, tokenizer, mining_spec(spec, recipe), d.mine_problems,
                                      d.mined_confidence, recipe.optim.seed, d.test_fraction, d.mine_kinds)
        if is_main_process():  # the other processes of a multi-process run mine the same pool
            save_pool(mined, run.output_dir)
    if recipe.data.mine_problems and is_main_process():
        print(f"Mined pool: {len(mined):,} problems"
              + (f" ({json.dumps(mining['kinds'])})" if mining else f" (read from {MINED_FILE})"), flush=True)
    return mined, mining


def _stage_trainer(run: TrainingRun, spec: ProblemSpec, tokenizer, model, args, mined, stop_at: int | None):
    """The Trainer of one stage: its problem stream and curriculum, the held-out evaluation when the recipe
    asks for one, and every callback; with the held-out callbacks whose records the summary keeps."""
    recipe, checkpoint = run.recipe, run.checkpoint
    curriculum = CurriculumCallback(CurriculumState(spec.min_digits, spec.max_digits), recipe.data.curriculum,
                                    (spec.min_digits, spec.max_digits))
    state = curriculum.state
    state.schedule = curriculum.range_at  # each example's digit range follows from its global step
    state.examples_per_step = recipe.optim.batch_size * args.gradient_accumulation_steps
    # Rank 0 draws every global batch (dispatched in slices), so the data do not depend on the world size.
    d = recipe.data
    stream = ProblemStream(spec, run.fmt, state, seed=recipe.optim.seed, rank=int(os.environ.get("RANK", 0)),
                           chunk_size=d.chunk_size, test_fraction=d.test_fraction, random_prefix=d.random_prefix,
                           hard_fraction=d.hard_fraction, context_problems=d.context_problems,
                           hard_fraction_fade=d.hard_fraction_fade, hard_kind=d.hard_kind,
                           mined=mined, mined_fraction=d.mined_fraction, length_buckets=d.length_buckets,
                           item_places=d.item_places, item_spread=d.item_spread)
    # Only when the recipe turns on an evaluation strategy: otherwise training pays nothing for it.
    evaluation = {} if run.eval_problems is None else dict(
        eval_dataset=HeldoutExamples(run.eval_problems, stream), compute_metrics=compute_metrics(tokenizer),
        preprocess_logits_for_metrics=preprocess_logits_for_metrics)
    decay = adaptive_decay_callbacks(recipe, stream, checkpoint)
    best = best_held_out_callbacks(recipe, decay, checkpoint, screening=bool(stop_at))
    lr_drop = held_out_lr_callbacks(recipe, decay)
    plateau = ([AbandonOnPlateau(decay[0], recipe.optim.screen_abandon_step,
                                 recipe.optim.screen_abandon_exact)]
               if not stop_at and can_abandon(recipe, run.output_dir) else [])
    o = recipe.optim
    trainer = ArithTrainer(
        model=model,
        args=args,
        train_dataset=stream,
        data_collator=stack_examples,
        processing_class=tokenizer,
        # Callbacks that save state into a checkpoint come before RecipeRecorder, whose file is the last one.
        callbacks=[curriculum, *grokfast_callbacks(recipe, checkpoint), *decay, *best, *lr_drop, *plateau,
                   RecipeRecorder(recipe),
                   *([StopAtStep(stop_at)] if stop_at else [])],
        **evaluation,
        restart_at=o.restart_at,
        restart_lr_scale=o.restart_lr_scale,
        min_lr_ratio=o.min_lr_ratio,
        abacus_separation=o.abacus_separation,
        # Indices max_digits apart never share a training operand; closer pairs may be rare in training.
        separation_gap=o.abacus_separation_gap or d.max_digits,
        separation_margin=o.abacus_separation_margin,
        loss_before=read_loss_record(checkpoint) if checkpoint is not None else None,
        decay_all=o.decay_all,
    )
    return trainer, {"best": best, "lr_drop": lr_drop, "plateau": plateau}


def _stage_summary(run: TrainingRun, spec: ProblemSpec, model, result, record, mining, extras) -> dict:
    """What training_summary.json says of a stage: steps, time and the run's mean loss (over every step,
    across resumes, where the checkpoints' loss records allow), and how the model was made."""
    recipe = run.recipe
    if record is not None and record["last_step"] >= record["first_step"]:
        loss = record["loss_sum"] / (record["last_step"] - record["first_step"] + 1)
        loss_steps = [record["first_step"], record["last_step"]]
    else:
        loss, loss_steps = result.training_loss, None
    best, lr_drop = extras["best"], extras["lr_drop"]
    return {
        "name": recipe.name, "steps": result.global_step, "world_size": world_size(),
        "train_seconds": result.metrics.get("train_runtime"), "train_loss": loss,
        **({"train_loss_steps": loss_steps} if loss_steps is not None else {}),
        "unique_params": model.num_parameters(),
        # What the model card needs to say how the model was made.
        "recipe": dataclasses.asdict(recipe), "machine": machine_info(),
        "train_digits": [spec.min_digits, spec.max_digits],
        "earlier_stages": earlier_stages(recipe.init_from) if recipe.init_from else [],
        **({"init_from": warm_start_source(recipe.init_from)} if recipe.init_from else {}),
        **({"mined": mining} if mining else {}),
        **({"screen": read_screen(run.output_dir)} if recipe.optim.screen_steps else {}),
        **({"held_out_best": best[0].record()} if best else {}),
        **({"held_out_lr_drop": lr_drop[0].record()} if lr_drop else {}),
    }


def final_figures(summary: dict) -> dict[str, float]:
    """The final held-out and verify figures of a run's summary as Trainer logs: `test_` keys, which the
    report_to integrations file under test/ (test/exact_match, test/exact_match_len_10, test/verify_accuracy)."""
    heldout, verify = summary.get("heldout") or {}, summary.get("verify") or {}
    logs = {f"test_{k}": float(heldout[k]) for k in ("exact_match", "per_digit_accuracy", "malformed")
            if isinstance(heldout.get(k), (int, float))}
    logs.update({f"test_exact_match_len_{k}": float(v) for k, v in (heldout.get("by_max_operand_length") or {}).items()})
    if isinstance(verify.get("accuracy"), (int, float)):
        logs["test_verify_accuracy"] = float(verify["accuracy"])
    return logs


def _write_final(run: TrainingRun, spec: ProblemSpec, trainer, model, tokenizer, summary: dict, evaluate: bool) -> dict:
    """Save final/ (weights, tokenizer, held-out evaluation and summary) into a sibling folder and rename
    it into place once complete: a kill or a full disk leaves the old final/ or none, never a partial one."""
    recipe, output_dir = run.recipe, run.output_dir
    final_dir, partial = Path(output_dir) / "final", Path(output_dir) / FINAL_PARTIAL
    try:
        from safetensors import SafetensorError
    except ImportError:  # older safetensors
        SafetensorError = OSError  # noqa: N806
    try:
        if trainer.is_world_process_zero() and partial.exists():
            shutil.rmtree(partial)  # left by a killed run (the folder is locked: no live run writes it)
        if trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled:
            # Sharded weights: every rank takes part in gathering them; rank 0 then evaluates the saved copy.
            trainer.save_model(str(partial))
            if not trainer.is_world_process_zero():
                return summary
            model = type(model).from_pretrained(partial)
            save_checkpoint(model, tokenizer, partial)
        elif not trainer.is_world_process_zero():
            return summary
        else:
            # The final folder is a publishable checkpoint (safetensors only: unlike Trainer.save_model,
            # no pickled training_args.bin; the checkpoint-* folders keep theirs for --resume).
            save_checkpoint(model, tokenizer, partial)
    except (OSError, SafetensorError) as err:
        shutil.rmtree(partial, ignore_errors=True)
        raise save_failed(err, final_dir, output_dir) from None
    summary["output"] = str(final_dir)
    if evaluate:
        model.eval()
        summary["heldout"] = evaluate_model(model, tokenizer, spec, n=recipe.eval.samples,
                                            batch_size=recipe.eval.batch_size or None,
                                            test_fraction=recipe.data.test_fraction, progress=True)
        if recipe.eval.verify:
            summary["verify"] = verify_tiny_adder(model, tokenizer)
        trainer.log(final_figures(summary))  # to report_to too (TensorBoard, Trackio, ...), as test/...
    try:
        write_json(partial / SUMMARY_FILE, summary)
        publish_final(partial, final_dir)
    except OSError as err:
        shutil.rmtree(partial, ignore_errors=True)
        raise save_failed(err, final_dir, output_dir) from None
    return summary
