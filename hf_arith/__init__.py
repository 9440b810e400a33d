"""hf_arith: train, evaluate, publish and demo small transformers that do exact arithmetic.

Importing the package registers every model family and the tokenizer with the Auto classes, and
the `arithmetic` pipeline task with transformers' pipeline registry.
"""

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer
from transformers.pipelines import PIPELINE_REGISTRY

from .bundled import bundled_models, bundled_path
from .formatting import FormatError, NumberFormat
from .limits import BeyondTrainingWarning
from .loading import CheckpointError, load
from .metrics import compute_metrics, metric_path
from .models import (
    AbacusGPT2Config,
    AbacusGPT2ForCausalLM,
    AbacusGPT2Model,
    LoopedConfig,
    LoopedForCausalLM,
    LoopedModel,
    MinimalConfig,
    MinimalForCausalLM,
    MinimalModel,
)
from .pipeline_arithmetic import TASK as PIPELINE_TASK
from .pipeline_arithmetic import ArithmeticPipeline
from .solving import Answer, solve
from .tokenization_arith import ArithTokenizer

__version__ = "0.1.0"


def _register(config_cls, base_cls, lm_cls):
    AutoConfig.register(config_cls.model_type, config_cls, exist_ok=True)
    AutoModel.register(config_cls, base_cls, exist_ok=True)
    AutoModelForCausalLM.register(config_cls, lm_cls, exist_ok=True)
    AutoTokenizer.register(config_cls, tokenizer_class=ArithTokenizer, exist_ok=True)
    # Hub remote code: save_pretrained copies the family's files and writes auto_map.
    config_cls.register_for_auto_class()
    base_cls.register_for_auto_class("AutoModel")
    lm_cls.register_for_auto_class("AutoModelForCausalLM")


_register(MinimalConfig, MinimalModel, MinimalForCausalLM)
_register(AbacusGPT2Config, AbacusGPT2Model, AbacusGPT2ForCausalLM)
_register(LoopedConfig, LoopedModel, LoopedForCausalLM)
ArithTokenizer.register_for_auto_class("AutoTokenizer")
PIPELINE_REGISTRY.register_pipeline(PIPELINE_TASK, pipeline_class=ArithmeticPipeline, pt_model=AutoModelForCausalLM,
                                    type="text")

__all__ = [
    "AbacusGPT2Config", "AbacusGPT2ForCausalLM", "AbacusGPT2Model", "ArithTokenizer", "ArithmeticPipeline",
    "Answer", "BeyondTrainingWarning", "CheckpointError", "FormatError",
    "LoopedConfig", "LoopedForCausalLM", "LoopedModel",
    "MinimalConfig", "MinimalForCausalLM", "MinimalModel", "NumberFormat",
    "bundled_models", "bundled_path", "compute_metrics", "load", "metric_path", "solve",
]
