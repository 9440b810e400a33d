"""Writing a publishable checkpoint folder: safetensors weights, config, tokenizer and remote code."""

from __future__ import annotations

from pathlib import Path

from transformers import PreTrainedModel
from transformers.dynamic_module_utils import custom_object_save

from .limits import FINGERPRINT_KEY, model_limits
from .pipeline_arithmetic import TASK, ArithmeticPipeline


def custom_pipelines() -> dict:
    """`config.custom_pipelines` for the arithmetic pipeline saved next to the model as remote code,
    in the form `Pipeline.save_pretrained` writes and `transformers.pipeline` reads."""
    module = ArithmeticPipeline.__module__.rsplit(".", 1)[-1]
    return {TASK: {"impl": f"{module}.{ArithmeticPipeline.__name__}", "pt": ["AutoModelForCausalLM"], "type": "text"}}


def set_generation_defaults(model: PreTrainedModel, tokenizer) -> None:
    """Greedy decoding with room for the longest answer the model can be asked for
    (`ModelLimits.max_answer_tokens`), so plain `model.generate(**enc)` writes whole answers."""
    config = model.generation_config
    config.max_new_tokens = model_limits(model, tokenizer).max_answer_tokens
    config.do_sample = False
    config.eos_token_id = tokenizer.eos_token_id
    config.pad_token_id = tokenizer.pad_token_id
    config._from_model_config = False  # set on purpose: generate must not rebuild it from the model config


def save_checkpoint(model: PreTrainedModel, tokenizer, folder: str | Path) -> Path:
    """Save `model` and `tokenizer` so that the folder loads with or without hf_arith installed.

    Beyond save_pretrained: the config records the fingerprint of the tokenizer's number format
    (`number_format_fingerprint`, also in tokenizer_config.json), so a mismatched tokenizer is refused
    at load; the config's auto_map also names the family's base model for
    AutoModel (save_pretrained lists only the saved class); generation caching is switched
    back on (the Trainer turns `use_cache` off while training); the generation config gets
    `max_new_tokens` for the model's longest answer; and the `arithmetic` pipeline is written
    next to the model (`pipeline_arithmetic.py`, named in `config.custom_pipelines`), so
    `transformers.pipeline("arithmetic", model=folder, trust_remote_code=True)` works without hf_arith;
    the tokenizer's `model_max_length` becomes the longest sequence the model takes
    (`ModelLimits.max_sequence_tokens`).
    """
    folder = Path(folder)
    base = getattr(model, "base_model_prefix", "")
    base_cls = type(getattr(model, base)) if base and hasattr(model, base) else None
    if base_cls is not None and base_cls is not type(model):
        auto_map = dict(getattr(model.config, "auto_map", None) or {})
        auto_map["AutoModel"] = f"{base_cls.__module__.rsplit('.', 1)[-1]}.{base_cls.__name__}"
        model.config.auto_map = auto_map
    model.config.use_cache = True
    set_generation_defaults(model, tokenizer)  # refuses a tokenizer that does not belong to the model (check_pair)
    # The format the model was trained on, beside its weights; loading compares the tokenizer's with it.
    setattr(model.config, FINGERPRINT_KEY, tokenizer.arith_format.fingerprint())
    # Only the saved config names the pipeline: an in-memory model that did would make
    # `pipeline(model=model)` look for remote code it does not have.
    previous = model.config.__dict__.get("custom_pipelines")
    model.config.custom_pipelines = custom_pipelines()
    try:
        model.save_pretrained(folder)
    finally:
        if previous is None:
            del model.config.custom_pipelines
        else:
            model.config.custom_pipelines = previous
    # Every prompt the model takes (and its answer) fits in model_max_length: `tok(problem, truncation=True)`
    # never cuts one. (The tokenizer was built with the training data's longest example.)
    tokenizer.model_max_length = model_limits(model, tokenizer).max_sequence_tokens
    tokenizer.save_pretrained(folder)
    custom_object_save(ArithmeticPipeline, folder)  # the pipeline file (it imports only torch and transformers)
    # save_pretrained writes the weights through a private temporary file (mode 0600): give them the mode
    # of the other files (0644 under the usual umask), so that whoever may read the folder may load it.
    mode = (Path(folder) / "config.json").stat().st_mode & 0o777
    for weights in Path(folder).glob("*.safetensors"):
        weights.chmod(mode)
    return folder
