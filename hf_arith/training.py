"""`hf-arith train`: a recipe in, a trained checkpoint and its held-out accuracy out.

Runs the Hugging Face Trainer on the infinite problem stream. The loss covers answer tokens
only (labels are -100 elsewhere); the curriculum is a TrainerCallback; the schedule is cosine
with an optional restarted second phase.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import shutil
import sys
from pathlib import Path

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments, set_seed
from transformers.trainer_utils import get_last_checkpoint

from .evaluation import evaluate_model, is_tiny_adder_format, verify_tiny_adder
from .families import family_classes
from .formatting import TASK_NAMES, NumberFormat
from .problems import ProblemSpec
from .saving import save_checkpoint
from .streaming import CurriculumState, ProblemStream, stack_examples, worst_case_length
from .tokenization_arith import ArithTokenizer
from .train_config import Recipe, RecipeError


def problem_spec(recipe: Recipe, fmt: NumberFormat) -> ProblemSpec:
    d = recipe.data
    return ProblemSpec(task=fmt.task, base=fmt.base, min_digits=d.min_digits, max_digits=d.max_digits,
                       min_items=d.min_items, max_items=d.max_items)


def build_tokenizer(fmt: NumberFormat, context: int) -> ArithTokenizer:
    return ArithTokenizer(number_format=fmt, model_max_length=context)


def check_recipe(recipe: Recipe) -> NumberFormat:
    """Check a recipe before any training (format, data vs format, eval, model keys); return its format."""
    try:
        fmt = NumberFormat.from_dict(recipe.format)
    except ValueError as err:
        raise RecipeError(f"format: {err}") from None
    if fmt.operand_width and recipe.data.max_digits > fmt.operand_width:
        raise RecipeError(f"data.max_digits {recipe.data.max_digits} exceeds format.operand_width {fmt.operand_width}")
    if recipe.eval.verify and not is_tiny_adder_format(fmt):
        raise RecipeError(f"eval.verify: the tiny-adder protocol needs 10-digit decimal addition, but this recipe "
                          f"trains {TASK_NAMES[fmt.task]} in base {fmt.base}; set eval.verify=false")
    try:
        config_cls, _ = family_classes(recipe.family)
    except ValueError as err:
        raise RecipeError(f"family: {err}") from None
    # A config stores unknown keyword arguments silently, so a misspelt key would train the default.
    known = {n for n, p in inspect.signature(config_cls.__init__).parameters.items()
             if n != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    unknown = sorted(set(recipe.model) - known - {"attn_implementation", "dtype"})
    if unknown:
        raise RecipeError(f"unknown key(s) {unknown} in model for the {recipe.family!r} family; known: {sorted(known)}")
    return fmt


def build_model(recipe: Recipe, tokenizer: ArithTokenizer, context: int):
    config_cls, model_cls = family_classes(recipe.family)
    kwargs = dict(recipe.model)
    kwargs.setdefault("max_position_embeddings", context)
    kwargs.update(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    if "num_digit_tokens" in config_cls().to_dict():
        kwargs["num_digit_tokens"] = tokenizer.arith_format.base
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
    def __init__(self, *args, restart_at: float = 0.0, restart_lr_scale: float = 0.3, **kwargs):
        self.restart_at, self.restart_lr_scale = restart_at, restart_lr_scale
        super().__init__(*args, **kwargs)

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

    The phase is a pure function of the global step, so a resumed run lands in the same phase.
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

    on_train_begin = on_step_begin


def can_compile() -> bool:
    """torch.compile on CPU generates C++: without a compiler, train uncompiled instead of failing."""
    return torch.cuda.is_available() or any(shutil.which(cc) for cc in ("g++", "c++", "clang++"))


def training_arguments(recipe: Recipe, output_dir: str) -> TrainingArguments:
    o = recipe.optim
    compile_model = o.compile and can_compile()
    if o.compile and not compile_model:
        print("hf-arith: no C++ compiler found, so training runs without torch.compile (slower)", file=sys.stderr)
    return TrainingArguments(
        output_dir=output_dir,
        max_steps=o.steps,
        per_device_train_batch_size=o.batch_size,
        learning_rate=o.learning_rate,
        weight_decay=o.weight_decay,
        warmup_steps=o.warmup_steps,
        adam_beta2=o.adam_beta2,
        max_grad_norm=o.max_grad_norm,
        logging_steps=o.logging_steps,
        save_steps=o.save_steps,
        save_total_limit=2,
        seed=o.seed,
        report_to="none",
        dataloader_num_workers=0,  # the curriculum callback must reach the generator
        dataloader_pin_memory=False,
        remove_unused_columns=False,
        use_cpu=not torch.cuda.is_available(),
        torch_compile=compile_model,
    )


def train(recipe: Recipe, output_dir: str | None = None, resume: bool = False, evaluate: bool = True) -> dict:
    """Train a model from a recipe; returns a summary with the held-out report."""
    output_dir = output_dir or recipe.output_dir
    fmt = check_recipe(recipe)
    torch.set_num_threads(recipe.optim.threads)
    spec = problem_spec(recipe, fmt)
    context = worst_case_length(spec, fmt)
    tokenizer = build_tokenizer(fmt, context)
    model = build_model(recipe, tokenizer, context)

    state = CurriculumState(spec.min_digits, spec.max_digits)
    phases = recipe.data.curriculum
    stream = ProblemStream(spec, fmt, state, seed=recipe.optim.seed, rank=int(os.environ.get("RANK", 0)),
                           chunk_size=recipe.data.chunk_size, test_fraction=recipe.data.test_fraction)
    checkpoint = None
    if resume:
        checkpoint = get_last_checkpoint(output_dir) if Path(output_dir).is_dir() else None
        if checkpoint is None:
            raise RecipeError(f"--resume: no checkpoint-* folder in {output_dir}")
    trainer = ArithTrainer(
        model=model,
        args=training_arguments(recipe, output_dir),
        train_dataset=stream,
        data_collator=stack_examples,
        processing_class=tokenizer,
        callbacks=[CurriculumCallback(state, phases, (spec.min_digits, spec.max_digits))],
        restart_at=recipe.optim.restart_at,
        restart_lr_scale=recipe.optim.restart_lr_scale,
    )
    result = trainer.train(resume_from_checkpoint=checkpoint)
    # The final folder is a publishable checkpoint (safetensors only: unlike Trainer.save_model,
    # no pickled training_args.bin; the checkpoint-* folders keep theirs for --resume).
    final_dir = save_checkpoint(model, tokenizer, Path(output_dir) / "final")
    summary = {
        "name": recipe.name, "output": str(final_dir), "steps": result.global_step,
        "train_seconds": result.metrics.get("train_runtime"), "train_loss": result.training_loss,
        "unique_params": model.num_parameters(),
    }
    if evaluate:
        model.eval()
        summary["heldout"] = evaluate_model(model, tokenizer, spec, n=recipe.eval.samples,
                                            batch_size=recipe.eval.batch_size,
                                            test_fraction=recipe.data.test_fraction)
        if recipe.eval.verify:
            summary["verify"] = verify_tiny_adder(model, tokenizer)
    (final_dir / "training_summary.json").write_text(json.dumps(summary, indent=2))
    return summary
