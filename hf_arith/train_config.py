"""Training recipes: YAML presets shipped in the package, overridable from the command line.

A recipe names a model family and its config, the number format, the data (digit range and
curriculum), the optimisation and any extra Trainer arguments (`trainer:`). Every malformed
value is reported in one line naming its key.

Every check of a recipe lives here. `load_recipe` / `recipe_from_dict` check each value as they
build the recipe; `check_recipe` checks what needs the package's number formats, model families
and TrainingArguments, once per run, in each entry point (`hf-arith train`, `training.train`).
Checks of the launch (processes against devices) need the runtime and are `training.check_launch`.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field, fields
from pathlib import Path

import yaml

from .formatting import TASK_NAMES, NumberFormat

PRESETS_DIR = Path(__file__).parent / "presets"


class RecipeError(ValueError):
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
    test_fraction: float = 0.1
    curriculum: list[CurriculumPhase] = field(default_factory=list)
    chunk_size: int = 2048  # problems generated per vectorized call
    # Filler: each example starts after a random number of attended <pad> tokens, up to this many
    # beyond the longest example, so where a problem starts and how long the context is stop being
    # tied to the operand lengths (a length-generalization aid; 0 = off).
    random_prefix: int = 0


@dataclass
class OptimRecipe:
    steps: int = 20000
    batch_size: int = 128  # the global batch: split evenly across processes under torchrun / accelerate
    learning_rate: float = 3e-3
    weight_decay: float = 0.0
    warmup_steps: float = 0.02  # < 1 is a fraction of steps
    adam_beta2: float = 0.99
    max_grad_norm: float = 1.0
    restart_at: float = 0.0  # > 0: a second cosine phase starts at this fraction of steps
    restart_lr_scale: float = 0.3  # peak of the second phase relative to learning_rate
    seed: int = 0
    threads: int = 1  # tiny models run faster on one torch thread
    compile: bool = False  # torch.compile the model for training (pays a one-off compile time)
    # With init_from: train only the tensors the checkpoint lacks (new heads) and keep the loaded
    # ones fixed, so the model's existing outputs stay exactly as they were.
    freeze_init: bool = False
    # Abacus models: weight of the penalty that keeps abacus indices data.max_digits or more apart
    # (never in one training problem together) apart in attention (hf_arith.index_separation). 0 = off.
    abacus_separation: float = 0.0
    abacus_separation_margin: float = 4.0  # logits each far index must stay below a head's preferred one
    abacus_separation_gap: int = 0  # indices this far apart count as far; 0 = data.max_digits
    save_steps: int = 5000
    logging_steps: int = 500


@dataclass
class EvalRecipe:
    samples: int = 2000  # held-out problems for the final report
    verify: bool = False  # also run the tiny-adder protocol (10-digit addition only)
    batch_size: int = 0  # 0: hf_arith.decoding.default_batch_size, from the model's width


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
    # (tensors it lacks, such as new multi-token heads, keep their fresh init). "" = from scratch.
    init_from: str = ""


_SECTIONS = {"data": DataRecipe, "optim": OptimRecipe, "eval": EvalRecipe}


def _check_keys(data, cls, where: str = "") -> None:
    """`data` must be a mapping whose keys are fields of `cls`; `where` names its section ("": the recipe itself)."""
    if not isinstance(data, dict):
        what = where or "a recipe"
        raise RecipeError(f"{what} must be a {'' if where else 'YAML '}mapping, got {type(data).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        place = f"key(s) {unknown} in {where}" if where else f"top-level key(s) {unknown}"
        raise RecipeError(f"unknown {place}; known: {sorted(known)}")


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


def recipe_from_dict(data: dict) -> Recipe:
    """A recipe from its YAML mapping, each value checked (types, ranges); see `check_recipe` for the rest."""
    _check_keys(data, Recipe)
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
    return recipe


def _check_values(recipe: Recipe) -> None:
    d, o = recipe.data, recipe.optim
    if not 1 <= d.min_digits <= d.max_digits:
        raise RecipeError(f"data: need 1 <= min_digits <= max_digits, got {d.min_digits}..{d.max_digits}")
    if not 0 < d.test_fraction < 1:
        raise RecipeError(f"data.test_fraction must be between 0 and 1, got {d.test_fraction}")
    if not isinstance(d.random_prefix, int) or d.random_prefix < 0:
        raise RecipeError(f"data.random_prefix must be an integer >= 0, got {d.random_prefix!r}")
    last = 0
    for i, phase in enumerate(d.curriculum):
        if phase.until_step <= last:
            raise RecipeError(f"data.curriculum[{i}].until_step must increase, got {phase.until_step} after {last}")
        if not 1 <= phase.min_digits <= phase.max_digits <= d.max_digits:
            raise RecipeError(f"data.curriculum[{i}]: digits must lie in 1..data.max_digits ({d.max_digits})")
        last = phase.until_step
    if o.steps < 1 or o.batch_size < 1 or o.learning_rate <= 0:
        raise RecipeError("optim: steps, batch_size and learning_rate must be positive")
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


# -- what the values alone cannot show: format, model family, Trainer arguments ----------------
def check_recipe(recipe: Recipe) -> NumberFormat:
    """Check a loaded recipe against the package before any training; return its number format.

    The format, the data against it, eval.verify, the model keys of the family and the `trainer:`
    section. Each entry point calls it once per run (`hf-arith train`, `training.train`). Model
    families and TrainingArguments are imported here, so reading a recipe stays light.
    """
    from .evaluation import is_tiny_adder_format
    from .families import family_classes

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
    known = config_keys(config_cls)
    unknown = sorted(set(recipe.model) - known - {"attn_implementation", "dtype"})
    if unknown:
        raise RecipeError(f"unknown key(s) {unknown} in model for the {recipe.family!r} family; known: {sorted(known)}")
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


# TrainingArguments the recipe sets itself (key -> the recipe key to use instead, or why not).
MANAGED_ARGUMENTS = {
    "output_dir": "--output-dir", "max_steps": "optim.steps", "num_train_epochs": "optim.steps",
    "per_device_train_batch_size": "optim.batch_size (the global batch)", "learning_rate": "optim.learning_rate",
    "weight_decay": "optim.weight_decay", "warmup_steps": "optim.warmup_steps", "adam_beta2": "optim.adam_beta2",
    "max_grad_norm": "optim.max_grad_norm", "logging_steps": "optim.logging_steps", "save_steps": "optim.save_steps",
    "seed": "optim.seed", "torch_compile": "optim.compile", "use_cpu": "CUDA_VISIBLE_DEVICES=''",
    "lr_scheduler_type": "optim.restart_at (the schedule is cosine)",
    "dataloader_num_workers": "nothing (the curriculum must reach the generator in the main process)",
    "remove_unused_columns": "nothing", "accelerator_config": "nothing (batches are dispatched from rank 0 and split)",
    "ignore_data_skip": "nothing (the stream resumes at the checkpoint's step itself)",
}


def check_trainer_section(extra: dict) -> None:
    """`trainer:` keys must be TrainingArguments fields that the recipe does not set itself."""
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


# -- presets and overrides --------------------------------------------------------------------
def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def _parse_value(text: str):
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply `section.key=value` overrides (values parsed as YAML) to a raw recipe dict."""
    for item in overrides:
        if "=" not in item:
            raise RecipeError(f"override {item!r} must look like section.key=value")
        path, value = item.split("=", 1)
        keys = path.strip().split(".")
        node = data
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise RecipeError(f"override {item!r}: {k!r} is not a section")
        node[keys[-1]] = _parse_value(value)
    return data


def load_recipe(name_or_path: str | None = None, overrides: list[str] | None = None) -> Recipe:
    """A preset name (see `list_presets`) or a YAML file path, plus overrides."""
    name_or_path = name_or_path or "minimal-add10"
    path = Path(name_or_path)
    if not path.is_file():
        preset = PRESETS_DIR / f"{name_or_path}.yaml"
        if not preset.is_file():
            raise RecipeError(f"no preset or file named {name_or_path!r}; presets: {', '.join(list_presets())}")
        path = preset
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise RecipeError(f"{path}: not a UTF-8 text file, so not a YAML recipe") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise RecipeError(f"{path}: malformed YAML{where}: {getattr(err, 'problem', err)}") from None
    data = apply_overrides(data or {}, overrides or [])
    return recipe_from_dict(data)
