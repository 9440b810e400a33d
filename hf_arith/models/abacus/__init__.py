from .abacus_positions import abacus_position_ids
from .configuration_abacus_gpt2 import AbacusGPT2Config
from .configuration_looped import LoopedConfig
from .modeling_abacus_gpt2 import AbacusGPT2ForCausalLM, AbacusGPT2Model, AbacusGPT2PreTrainedModel
from .modeling_looped import LoopedForCausalLM, LoopedModel

__all__ = ["AbacusGPT2Config", "AbacusGPT2ForCausalLM", "AbacusGPT2Model", "AbacusGPT2PreTrainedModel",
           "LoopedConfig", "LoopedForCausalLM", "LoopedModel", "abacus_position_ids"]
