"""`hf-arith train`: a recipe in, a trained checkpoint and its held-out accuracy out.

Runs the Hugging Face Trainer on the infinite problem stream. The loss covers answer tokens
only (labels are -100 elsewhere); the curriculum is a TrainerCallback; the schedule is cosine
with an optional restarted second phase.

With an evaluation strategy in the recipe's `trainer:` section (`eval_strategy=steps`), the Trainer
also scores a fixed set of held-out problems (`eval.during_training_samples`, from the test split)
as it trains: teacher-forced exact match overall and per operand length (`hf_arith.metrics`).

Several processes (`torchrun`, `accelerate launch`): `optim.batch_size` is the global batch.
Rank 0 draws it from its stream and accelerate dispatches an equal slice to every rank
(`dispatch_batches` + `split_batches`), so N processes train on exactly the examples one
process would, the slices are disjoint, and the curriculum and data position (a function of
the global step) agree on all ranks by construction.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import Trainer, TrainerCallback, TrainingArguments, set_seed

from .bundled import bundled_models
from .evaluation import evaluate_model, verify_tiny_adder
from .families import family_classes
from .formatting import FormatError, NumberFormat, Problems
from .hardware import available_cpu_cores, machine_info
from .index_separation import abacus_separation_penalty, has_abacus_table
from .metrics import compute_metrics, preprocess_logits_for_metrics
from .problems import ProblemSpec, sample
from .saving import save_checkpoint
from .streaming import CurriculumState, ProblemStream, encode_examples, stack_examples, worst_case_length
from .tokenization_arith import ArithTokenizer
from .train_config import Recipe, RecipeError, check_recipe, evaluates_during_training
from .warm_start import describe_warm_start, earlier_stages, freeze_all_but, warm_start


def problem_spec(recipe: Recipe, fmt: NumberFormat) -> ProblemSpec:
    d = recipe.data
    return ProblemSpec(task=fmt.task, base=fmt.base, min_digits=d.min_digits, max_digits=d.max_digits,
                       min_items=d.min_items, max_items=d.max_items)


def build_tokenizer(fmt: NumberFormat, context: int) -> ArithTokenizer:
    return ArithTokenizer(number_format=fmt, model_max_length=context)


def world_size() -> int:
    """Processes in this run (torchrun / accelerate launch set WORLD_SIZE; 1 otherwise)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def check_launch(recipe: Recipe) -> None:
    """Refuse a launch that cannot work: more processes per node than devices, an indivisible batch.

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
    set_seed(recipe.optim.seed)  # the init is seeded explicitly, before the weights exist
    return model_cls(config)


def cosine_with_restart(optimizer, total: int, warmup: int, restart_at: float, restart_scale: float):
    """Warmup then cosine to zero; with restart_at > 0 a second cosine starts at that fraction."""
    split = int(total * restart_at) if restart_at > 0 else total

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / max(1, warmup)
        if step < split:
            progress = (step - warmup) / max(1, split - warmup)
            return 0.5 * (1 + math.cos(math.pi * progress))
        progress = (step - split) / max(1, total - split)
        return restart_scale * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class ArithTrainer(Trainer):
    def __init__(self, *args, restart_at: float = 0.0, restart_lr_scale: float = 0.3,
                 abacus_separation: float = 0.0, separation_gap: int = 0, separation_margin: float = 4.0, **kwargs):
        self.restart_at, self.restart_lr_scale = restart_at, restart_lr_scale
        self.abacus_separation, self.separation_gap = abacus_separation, separation_gap
        self.separation_margin = separation_margin
        super().__init__(*args, **kwargs)

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
                self.restart_at, self.restart_lr_scale,
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
            (folder / RECIPE_FILE).write_text(json.dumps(dataclasses.asdict(self.recipe), indent=2) + "\n")


def _checkpoint_step(path: Path) -> int | None:
    match = re.fullmatch(r"checkpoint-(\d+)", path.name)
    return int(match.group(1)) if match and path.is_dir() else None


def is_complete_checkpoint(path: Path) -> bool:
    """trainer_state.json is the last file the Trainer writes: a run killed while saving has none, or a cut one."""
    try:
        state = json.loads((Path(path) / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(state, dict) and state.get("global_step") == _checkpoint_step(Path(path))


def last_checkpoint(output_dir: str | Path) -> str | None:
    """The newest complete checkpoint-* folder (skipping one a killed run left half-written)."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return None
    steps = sorted(((step, p) for p in folder.iterdir() if (step := _checkpoint_step(p)) is not None), reverse=True)
    return next((str(p) for _, p in steps if is_complete_checkpoint(p)), None)


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
_CONFIG_BOOKKEEPING = {"transformers_version", "architectures", "auto_map", "use_cache", "_name_or_path", "dtype",
                       "torch_dtype", "output_attentions", "output_hidden_states", "return_dict"}


def check_resume(recipe: Recipe, model, checkpoint: str) -> None:
    """Refuse to resume from a checkpoint of another model, format or training recipe."""
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
    recipe_file = where / RECIPE_FILE
    if recipe_file.is_file():
        try:
            old = json.loads(recipe_file.read_text())
        except ValueError:
            return
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
DURING_TRAINING_SEED = 1234  # the seed of the final held-out report (evaluation.heldout_problems)


def during_training_problems(recipe: Recipe, fmt: NumberFormat) -> Problems:
    """The fixed held-out problems the Trainer evaluates on: eval.during_training_samples problems from
    the test split, over the recipe's whole digit range (not the curriculum's current phase)."""
    n = recipe.eval.during_training_samples
    try:
        return sample(problem_spec(recipe, fmt), n, np.random.default_rng(DURING_TRAINING_SEED), split="test",
                      test_fraction=recipe.data.test_fraction)
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


def prepare_run(recipe: Recipe, output_dir: str | None = None, resume: bool = False) -> TrainingRun:
    """Everything that can refuse a run before training, once: the recipe (`train_config.check_recipe`),
    the launch (`check_launch`), the held-out problems of an evaluation during training and, to resume,
    the newest complete checkpoint in the output folder. Prints the recipe's notes (TrainingArguments
    names read as recipe keys) once, on the main process."""
    output_dir = str(output_dir or recipe.output_dir)
    fmt = check_recipe(recipe)
    check_launch(recipe)
    eval_problems = during_training_problems(recipe, fmt) if evaluates_during_training(recipe.trainer) else None
    checkpoint = None
    if resume:
        checkpoint = last_checkpoint(output_dir)
        if checkpoint is None:
            raise RecipeError(f"--resume: no complete checkpoint-* folder in {output_dir} to resume from "
                              f"(train without --resume first)")
    if is_main_process():
        for note in recipe.notes:
            print(f"hf-arith: {note}", file=sys.stderr, flush=True)
    return TrainingRun(recipe, fmt, output_dir, checkpoint, eval_problems)


def train(recipe: Recipe, output_dir: str | None = None, resume: bool = False, evaluate: bool = True) -> dict:
    """Train a model from a recipe; returns a summary with the held-out report.

    The Python entry point: `prepare_run` (every check), then `run_training`. Under torchrun /
    accelerate launch every process runs this; only rank 0 saves the final checkpoint and
    evaluates it (the other ranks return the training figures only).
    """
    return run_training(prepare_run(recipe, output_dir, resume), evaluate=evaluate)


def run_training(run: TrainingRun, evaluate: bool = True) -> dict:
    """Train a prepared run (see `prepare_run`, which has checked it); returns the summary `train` does."""
    recipe, fmt, output_dir, checkpoint = run.recipe, run.fmt, run.output_dir, run.checkpoint
    torch.set_num_threads(recipe.optim.threads)
    spec = problem_spec(recipe, fmt)
    context = worst_case_length(spec, fmt)
    tokenizer = build_tokenizer(fmt, context)
    model = build_model(recipe, tokenizer, context)
    if recipe.optim.abacus_separation and not has_abacus_table(model):
        raise RecipeError(f"optim.abacus_separation needs a model with abacus positions; the {recipe.family!r} "
                          f"family has none")
    if recipe.init_from and checkpoint is None:  # a resumed run takes every weight from its own checkpoint
        fresh = warm_start(model, recipe.init_from, fmt.to_dict())
        if recipe.optim.freeze_init:
            freeze_all_but(model, fresh)
        if is_main_process():
            print(describe_warm_start(recipe.init_from, fresh), flush=True)

    if checkpoint is not None:
        check_resume(recipe, model, checkpoint)
    args = training_arguments(recipe, output_dir)
    curriculum = CurriculumCallback(CurriculumState(spec.min_digits, spec.max_digits), recipe.data.curriculum,
                                    (spec.min_digits, spec.max_digits))
    state = curriculum.state
    state.schedule = curriculum.range_at  # each example's digit range follows from its global step
    state.examples_per_step = recipe.optim.batch_size * args.gradient_accumulation_steps
    # Rank 0 draws every global batch (dispatched in slices), so the data do not depend on the world size.
    stream = ProblemStream(spec, fmt, state, seed=recipe.optim.seed, rank=int(os.environ.get("RANK", 0)),
                           chunk_size=recipe.data.chunk_size, test_fraction=recipe.data.test_fraction,
                           random_prefix=recipe.data.random_prefix)
    # Only when the recipe turns on an evaluation strategy: otherwise training pays nothing for it.
    evaluation = {} if run.eval_problems is None else dict(
        eval_dataset=HeldoutExamples(run.eval_problems, stream), compute_metrics=compute_metrics(tokenizer),
        preprocess_logits_for_metrics=preprocess_logits_for_metrics)
    trainer = ArithTrainer(
        model=model,
        args=args,
        train_dataset=stream,
        data_collator=stack_examples,
        processing_class=tokenizer,
        callbacks=[curriculum, RecipeRecorder(recipe)],
        **evaluation,
        restart_at=recipe.optim.restart_at,
        restart_lr_scale=recipe.optim.restart_lr_scale,
        abacus_separation=recipe.optim.abacus_separation,
        # Indices max_digits apart never share a training operand; closer pairs may be rare in training.
        separation_gap=recipe.optim.abacus_separation_gap or recipe.data.max_digits,
        separation_margin=recipe.optim.abacus_separation_margin,
    )
    result = trainer.train(resume_from_checkpoint=checkpoint)
    summary = {
        "name": recipe.name, "steps": result.global_step, "world_size": world_size(),
        "train_seconds": result.metrics.get("train_runtime"), "train_loss": result.training_loss,
        "unique_params": model.num_parameters(),
        # What the model card needs to say how the model was made.
        "recipe": dataclasses.asdict(recipe), "machine": machine_info(),
        "train_digits": [spec.min_digits, spec.max_digits],
        "earlier_stages": earlier_stages(recipe.init_from) if recipe.init_from else [],
        **({"init_from": warm_start_source(recipe.init_from)} if recipe.init_from else {}),
    }
    final_dir = Path(output_dir) / "final"
    if trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled:
        # Sharded weights: every rank takes part in gathering them; rank 0 then evaluates the saved copy.
        trainer.save_model(str(final_dir))
        if not trainer.is_world_process_zero():
            return summary
        model = type(model).from_pretrained(final_dir)
        save_checkpoint(model, tokenizer, final_dir)
    elif not trainer.is_world_process_zero():
        return summary
    else:
        # The final folder is a publishable checkpoint (safetensors only: unlike Trainer.save_model,
        # no pickled training_args.bin; the checkpoint-* folders keep theirs for --resume).
        save_checkpoint(model, tokenizer, final_dir)
    summary["output"] = str(final_dir)
    if evaluate:
        model.eval()
        summary["heldout"] = evaluate_model(model, tokenizer, spec, n=recipe.eval.samples,
                                            batch_size=recipe.eval.batch_size or None,
                                            test_fraction=recipe.data.test_fraction)
        if recipe.eval.verify:
            summary["verify"] = verify_tiny_adder(model, tokenizer)
    (final_dir / "training_summary.json").write_text(json.dumps(summary, indent=2))
    return summary
