from .abacus_positions import abacus_position_ids
from .configuration_abacus_gpt2 import AbacusGPT2Config
from .modeling_abacus_gpt2 import AbacusGPT2ForCausalLM, AbacusGPT2Model, AbacusGPT2PreTrainedModel

__all__ = ["AbacusGPT2Config", "AbacusGPT2ForCausalLM", "AbacusGPT2Model", "AbacusGPT2PreTrainedModel",
           "abacus_position_ids"]
