from .configuration_minimal import MinimalConfig
from .modeling_minimal import MinimalForCausalLM, MinimalModel, MinimalPreTrainedModel

__all__ = ["MinimalConfig", "MinimalForCausalLM", "MinimalModel", "MinimalPreTrainedModel"]
