"""hf_arith: train, evaluate, publish and demo small transformers that do exact arithmetic.

`import hf_arith` registers every model family and the tokenizer with the Auto classes, and the
`arithmetic` pipeline task with transformers' pipeline registry (`register()`, which loads
torch and transformers). The one exception is the `hf-arith` command, which starts without them so
that `--help` and `--version` answer at once; its commands call `register()` before they load a
model. The names below (`solve`, `load`, the config and model classes, ...) are imported from their
modules when first used (PEP 562).
"""

from __future__ import annotations

import importlib
import os
import sys

__version__ = "0.1.0"

# Public name -> the module that defines it.
_EXPORTS = {
    "AbacusGPT2Config": "models", "AbacusGPT2ForCausalLM": "models", "AbacusGPT2Model": "models",
    "LoopedConfig": "models", "LoopedForCausalLM": "models", "LoopedModel": "models",
    "MinimalConfig": "models", "MinimalForCausalLM": "models", "MinimalModel": "models",
    "ArithTokenizer": "data.tokenization_arith", "ArithmeticPipeline": "runtime.pipeline_arithmetic",
    "Answer": "runtime.solving", "solve": "runtime.solving", "BeyondTrainingWarning": "runtime.limits",
    "CheckpointError": "runtime.loading", "load": "runtime.loading", "FormatError": "data.formatting", "NumberFormat": "data.formatting",
    "HfArithError": "data.errors", "bundled_models": "bundled", "bundled_path": "bundled",
    "bundled_model_for_problem": "runtime.loading",
    "compute_metrics": "evaluation.metrics", "metric_path": "evaluation.metrics",
}
__all__ = sorted([*_EXPORTS, "PIPELINE_TASK", "register"])

_registered = False


def register() -> None:
    """Register the model families and the tokenizer with transformers' Auto classes (and for Hub
    remote code), and the `arithmetic` pipeline task. Idempotent; `import hf_arith` calls it."""
    global _registered
    if _registered:
        return
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer
    from transformers.pipelines import PIPELINE_REGISTRY

    from . import models
    from .data.tokenization_arith import ArithTokenizer
    from .models.modeling_common import ArithModelMixin
    from .runtime.pipeline_arithmetic import TASK, ArithmeticPipeline, saved_pipeline

    for config_cls, base_cls, lm_cls in ((models.MinimalConfig, models.MinimalModel, models.MinimalForCausalLM),
                                         (models.AbacusGPT2Config, models.AbacusGPT2Model, models.AbacusGPT2ForCausalLM),
                                         (models.LoopedConfig, models.LoopedModel, models.LoopedForCausalLM)):
        AutoConfig.register(config_cls.model_type, config_cls, exist_ok=True)
        AutoModel.register(config_cls, base_cls, exist_ok=True)
        AutoModelForCausalLM.register(config_cls, lm_cls, exist_ok=True)
        AutoTokenizer.register(config_cls, tokenizer_class=ArithTokenizer, exist_ok=True)
        # Hub remote code: save_pretrained copies the family's files and writes auto_map.
        config_cls.register_for_auto_class()
        base_cls.register_for_auto_class("AutoModel")
        lm_cls.register_for_auto_class("AutoModelForCausalLM")
    ArithTokenizer.register_for_auto_class("AutoTokenizer")
    ArithModelMixin.arith_pipeline = saved_pipeline()  # every saved model carries the pipeline
    PIPELINE_REGISTRY.register_pipeline(TASK, pipeline_class=ArithmeticPipeline, pt_model=AutoModelForCausalLM,
                                        type="text")
    _registered = True


def __getattr__(name: str):
    if name == "PIPELINE_TASK":
        from .runtime.pipeline_arithmetic import TASK

        return TASK
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'hf_arith' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__})


def _started_as_the_command() -> bool:
    """Whether this process is the `hf-arith` console script (its file is named after the command)."""
    return os.path.basename(sys.argv[0] if sys.argv else "") in ("hf-arith", "hf-arith.exe", "hf-arith-script.py")


if not _started_as_the_command():
    register()
