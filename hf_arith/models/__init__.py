"""Model families, one flat folder: each family's configuration and modeling file in the transformers
layout, beside the files they share (`modeling_common.py`, `abacus_positions.py`) and the minimal family's
plain-torch computation (`minimal_core.py`). Those files import
only torch, transformers and each other (`from .x import`), so save_pretrained ships them as Hub
remote code."""

from .abacus_positions import abacus_position_ids
from .configuration_abacus_gpt2 import AbacusGPT2Config
from .configuration_looped import MAX_RECURRENCES, LoopedConfig, check_num_recurrences
from .configuration_minimal import MinimalConfig
from .modeling_abacus_gpt2 import AbacusGPT2ForCausalLM, AbacusGPT2Model, AbacusGPT2PreTrainedModel
from .modeling_common import IGNORE_INDEX
from .modeling_looped import LoopedForCausalLM, LoopedModel
from .modeling_minimal import MinimalForCausalLM, MinimalModel, MinimalPreTrainedModel

__all__ = ["IGNORE_INDEX", "MAX_RECURRENCES", "AbacusGPT2Config", "AbacusGPT2ForCausalLM", "AbacusGPT2Model",
           "AbacusGPT2PreTrainedModel", "LoopedConfig", "LoopedForCausalLM", "LoopedModel", "MinimalConfig",
           "MinimalForCausalLM", "MinimalModel", "MinimalPreTrainedModel", "abacus_position_ids",
           "check_num_recurrences"]
