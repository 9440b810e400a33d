"""The `arithmetic` pipeline: plain decimal problems in, plain decimal answers out.

    from transformers import pipeline
    solver = pipeline("arithmetic", model="ORG/NAME", trust_remote_code=True)
    solver("123+456")                          # {'problem': '123+456', 'answer': '579'}
    solver(["1+1", "99+1"])                    # a list of such dicts, decoded in batches
    solver("123+456", return_confidence=True)  # adds 'confidence' and each written token's probability

The model's own tokenizer writes each problem in the model's number format (`tok(...)`) and
reads the answer back as plain decimal (`tok.decode_answers`: None where the model wrote no
well-formed answer); the model writes every answer token by greedy `generate`. No arithmetic
happens here. Looped models take `num_recurrences`.

`hf_arith.saving.save_checkpoint` copies this file next to every saved model and names it in
`config.custom_pipelines`, so it travels with pushed models as Hub remote code: it imports only
torch and transformers, and reaches the number format only through the tokenizer object.
`import hf_arith` registers the task, so local checkpoints work without remote code too.
"""

from __future__ import annotations

import torch
from transformers import Pipeline

TASK = "arithmetic"
DEFAULT_BATCH_SIZE = 64  # problems per generate call when a list is given and no batch_size


class ArithmeticPipeline(Pipeline):
    """`pipeline("arithmetic", model=...)`: answers problems such as '123+456' with the model alone.

    Call parameters: `return_confidence` (bool) adds `confidence`, the lowest probability the
    model gave any token of its answer (the end token included), and `tokens`, each written
    token with its probability, in the order written (reversed formats write the lowest digit
    first); `num_recurrences` (looped models) sets the loop count; `batch_size`.
    """

    _load_tokenizer = True
    _load_processor = False
    _load_image_processor = False
    _load_video_processor = False
    _load_feature_extractor = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not hasattr(self.tokenizer, "decode_answers") or not hasattr(self.tokenizer, "answer_budget"):
            raise ValueError(f"the arithmetic pipeline needs the model's hf_arith tokenizer (one with a number "
                             f"format), got {type(self.tokenizer).__name__}")
        if self._batch_size is None:
            self._batch_size = DEFAULT_BATCH_SIZE

    def _sanitize_parameters(self, return_confidence=None, num_recurrences=None, **unknown):
        if unknown:
            raise TypeError(f"the arithmetic pipeline takes no parameter {sorted(unknown)[0]!r}; it takes "
                            "return_confidence, num_recurrences and batch_size")
        forward, post = {}, {}
        if return_confidence is not None:
            forward["return_confidence"] = post["return_confidence"] = bool(return_confidence)
        if num_recurrences is not None:
            if not hasattr(self.model.config, "num_recurrences"):
                raise ValueError(f"num_recurrences={num_recurrences!r}: {type(self.model).__name__} has no "
                                 "recurrence (its config has no num_recurrences)")
            forward["num_recurrences"] = num_recurrences
        return {}, forward, post

    def preprocess(self, problem):
        if not isinstance(problem, str):
            raise TypeError(f"a problem is a string such as '123+456', got {type(problem).__name__}")
        enc = self.tokenizer([problem], return_tensors="pt")  # a malformed problem: one-line ValueError
        budget = self.tokenizer.answer_budget([problem])
        limit = self.model.generation_config.max_new_tokens
        if limit is not None and budget > limit:
            raise ValueError(f"{problem!r} is too long for this model: its answer may take {budget} tokens, and "
                             f"the model writes at most {limit} (generation_config.max_new_tokens)")
        context = getattr(self.model.config, "max_position_embeddings", None)
        prompt = enc["input_ids"].shape[1]
        if context and prompt + budget > context:
            raise ValueError(f"{problem!r} is too long for this model: {prompt} prompt + {budget} answer tokens "
                             f"exceed its context of {context} positions (config.max_position_embeddings)")
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                "budget": torch.tensor([budget]), "problem": problem}

    def _forward(self, inputs, return_confidence: bool = False, num_recurrences=None):
        ids = inputs["input_ids"]
        extra = {} if num_recurrences is None else {"num_recurrences": num_recurrences}
        out = self.model.generate(input_ids=ids, attention_mask=inputs["attention_mask"],
                                  max_new_tokens=int(inputs["budget"].max()), do_sample=False,
                                  return_dict_in_generate=True, output_logits=return_confidence, **extra)
        written = out.sequences[:, ids.shape[1]:]
        result = {"answer_ids": written, "budget": inputs["budget"], "problem": inputs["problem"]}
        if return_confidence:
            probabilities = torch.stack(out.logits, dim=1).float().softmax(-1)
            result["probabilities"] = probabilities.gather(2, written[..., None])[..., 0]
        return result

    def postprocess(self, outputs, return_confidence: bool = False):
        # A problem's own budget, also when it shared a batch with longer ones: the same answer either way.
        written = outputs["answer_ids"][0, : int(outputs["budget"][0])].tolist()
        result = {"problem": outputs["problem"], "answer": self.tokenizer.decode_answers([written], [outputs["problem"]])[0]}
        if return_confidence:
            # The tokens the model wrote: up to and including its end token; generate pads after it.
            eos = self.tokenizer.eos_token_id
            n = written.index(eos) + 1 if eos in written else len(written)
            probabilities = outputs["probabilities"][0, :n].tolist()
            result["confidence"] = min(probabilities) if probabilities else 0.0
            result["tokens"] = [{"token": token, "probability": p} for token, p in
                                zip(self.tokenizer.convert_ids_to_tokens(written[:n]), probabilities)]
        return result
