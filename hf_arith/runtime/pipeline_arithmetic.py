"""The `arithmetic` pipeline: plain decimal problems in, plain decimal answers out.

    from transformers import pipeline
    solver = pipeline("arithmetic", model="ORG/NAME", trust_remote_code=True)
    solver("123+456")                          # {'problem': '123+456', 'answer': '579'}
    solver(["1+1", "99+1"])                    # a list of such dicts, decoded in batches
    solver("123+456", return_confidence=True)  # adds 'confidence' and each written token's probability

The model's own tokenizer writes each problem in the model's number format (`tok(...)`) and
reads the answer back as plain decimal (`tok.decode_answers`: None where the model wrote no
well-formed answer); the model writes every answer token, decoded greedily in batches with a KV
cache by the decoder `hf_arith.solve` uses (`decoding.greedy_decode`), so the pipeline and `solve`
give the same answers. A multi-token model's extra heads draft tokens that its first head verifies
(`decoding.speculative_decode`): the answers of one token per pass, in fewer passes. No arithmetic
happens here. Looped models take `num_recurrences`. A model whose config records `answer_views` > 1
answers that many views of each problem and gives the answer most of them give (`answer_views`), as
`solve` does. The
tokenizer checks that it belongs to the model (`check_model`) when the pipeline is built.

Every hf_arith model's save_pretrained (`ArithModelMixin.save_pretrained`, so also `push_to_hub` and
`Trainer.save_model`) copies this file next to the model and names it in the saved
`config.custom_pipelines` (`saved_pipeline`), so it travels with pushed models as Hub remote code: it imports only
torch, transformers and its sibling `decoding` and `answer_views` modules, and reaches the number format only through
the tokenizer object.
`import hf_arith` registers the task, so local checkpoints work without remote code too.
"""

from __future__ import annotations

import numbers
import types

import torch
from transformers import Pipeline

from .answer_views import agreed_answers, problem_views
from .decoding import default_tokens_per_step, greedy_decode

TASK = "arithmetic"
DEFAULT_BATCH_SIZE = 64  # problems per generate call when a list is given and no batch_size


def saved_pipeline() -> tuple[dict, str]:
    """What a saved model needs to name and carry this pipeline: its `config.custom_pipelines` entry (in the
    form `Pipeline.save_pretrained` writes and `transformers.pipeline` reads) and this file, whose
    relative imports go along. `hf_arith.register()` gives it to every family (`ArithModelMixin.arith_pipeline`)."""
    module = __name__.rsplit(".", 1)[-1]
    entry = {"impl": f"{module}.{ArithmeticPipeline.__name__}", "pt": ["AutoModelForCausalLM"], "type": "text"}
    return {TASK: entry}, __file__


class ArithmeticPipeline(Pipeline):
    """`pipeline("arithmetic", model=...)`: answers problems such as '123+456' with the model alone.

    Call parameters: `return_confidence` (bool) adds `confidence`, the lowest probability the
    model gave any token of its answer (the end token included), and `tokens`, each written
    token with its probability, in the order written (reversed formats write the lowest digit
    first); `num_recurrences` (looped models) sets the loop count; `batch_size`. A model that answers
    several views of each problem (`config.answer_views`) adds `views` to that: how many, how many gave
    the answer, and the problem as the view `tokens` come from wrote it.
    """

    _load_tokenizer = True
    _load_processor = False
    _load_image_processor = False
    _load_video_processor = False
    _load_feature_extractor = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not all(hasattr(self.tokenizer, name) for name in ("decode_answers", "answer_budget", "check_model")):
            raise ValueError(f"the arithmetic pipeline needs the model's hf_arith tokenizer (one with a number "
                             f"format), got {type(self.tokenizer).__name__}")
        self.tokenizer.check_model(self.model.config)  # the tokenizer must write problems as the model reads them
        self._batch_size = DEFAULT_BATCH_SIZE if self._batch_size is None else _batch_size(self._batch_size)

    def __call__(self, inputs, *args, batch_size=None, **kwargs):
        """Answer one problem (a string; returns a dict) or a list of them (returns a list of dicts)."""
        if args:
            raise TypeError(f"the arithmetic pipeline takes the problems and keyword parameters only, got "
                            f"{len(args)} more positional argument(s)")
        if isinstance(inputs, (list, tuple)):
            if not inputs:
                raise ValueError("inputs: an empty list of problems; give at least one problem such as '123+456'")
            inputs = list(inputs)
        elif not isinstance(inputs, (str, types.GeneratorType, torch.utils.data.Dataset)):
            raise TypeError(f"inputs must be a problem (a string such as '123+456') or a list of problems, "
                            f"got {type(inputs).__name__}")
        batch_size = self._batch_size if batch_size is None else _batch_size(batch_size)
        if isinstance(inputs, list):
            return self._answer_list(inputs, batch_size, **kwargs)
        if getattr(self.model.config, "answer_views", 1) > 1:
            batch_size = 1  # a problem is one batch of its views (transformers' batching takes a row per problem)
        return super().__call__(inputs, batch_size=batch_size, **kwargs)

    def _answer_list(self, problems: list, batch_size: int, **kwargs) -> list[dict]:
        """A list of problems, `batch_size` at a time: each batch tokenized in one call, decoded in one
        `_forward`, as `solve` batches them (the pipeline's per-item data loader costs more than decoding)."""
        _, forward, post = self._sanitize_parameters(**kwargs)
        forward, post = {**self._forward_params, **forward}, {**self._postprocess_params, **post}
        answers = []
        for start in range(0, len(problems), batch_size):
            chunk = problems[start : start + batch_size]
            inputs = self._prepare(chunk)
            outputs = self.forward(inputs, **forward)
            first = 0
            for problem, count in zip(chunk, inputs["views"]):  # each problem's rows: one per view
                rows = slice(first, first + count)
                row = {k: outputs[k][rows] for k in ("answer_ids", "budget", "probabilities") if k in outputs}
                answers.append(self.postprocess({**row, "problem": problem, "texts": inputs["texts"][rows],
                                                 "orders": inputs["orders"][rows]}, **post))
                first += count
        return answers

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
        return {**self._prepare([problem]), "problem": problem}

    def _prepare(self, problems: list) -> dict:
        """Problems (strings) as one left-padded batch with each one's answer budget, every problem
        checked against the model's answer length, context and hard limit first (one-line errors)."""
        for problem in problems:
            if not isinstance(problem, str):
                raise TypeError(f"a problem is a string such as '123+456', got {type(problem).__name__}")
        enc = self.tokenizer(problems, padding=True, return_tensors="pt")  # a malformed problem: one-line ValueError
        budgets = [self.tokenizer.answer_budget([problem]) for problem in problems]
        prompts = enc["attention_mask"].sum(1).tolist()
        limit = self.model.generation_config.max_new_tokens
        context = getattr(self.model.config, "max_position_embeddings", None)
        for problem, prompt, budget in zip(problems, prompts, budgets):
            if limit is not None and budget > limit:
                raise ValueError(f"{problem!r} is too long for this model: its answer may take {budget} tokens, and "
                                 f"the model writes at most {limit} (generation_config.max_new_tokens)")
            if context and prompt + budget > context:
                raise ValueError(f"{problem!r} is too long for this model: {prompt} prompt + {budget} answer tokens "
                                 f"exceed its context of {context} positions (config.max_position_embeddings)")
        hard_limit = getattr(self.model.config, "max_operand_digits", None)
        if hard_limit:  # the limit the model's card states, for every operand, even where a lopsided problem fits
            for problem, digits in zip(problems, self.tokenizer.operand_digits(problems)):
                if digits > hard_limit:
                    raise ValueError(f"{problem!r} is too long for this model: an operand of {digits} digits, and it "
                                     f"takes at most {hard_limit} (config.max_operand_digits)")
        if context and enc["input_ids"].shape[1] + max(budgets) > context:
            raise ValueError(f"these {len(problems)} problems decoded together need {enc['input_ids'].shape[1]} prompt + "
                             f"{max(budgets)} answer tokens, more than the model's context of {context} positions; "
                             "use a smaller batch_size")
        texts, orders, views = problems, [None] * len(problems), [1] * len(problems)
        count = getattr(self.model.config, "answer_views", 1)
        if count > 1:  # every view of a problem has its length, items and so its budget
            texts, orders, views = problem_views(self.tokenizer.arith_format.task_rules, self.tokenizer.arith_format,
                                                 problems, count)
            budgets = [b for b, n in zip(budgets, views) for _ in range(n)]
            enc = self.tokenizer(texts, padding=True, return_tensors="pt")
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                "budget": torch.tensor(budgets), "problem": problems, "texts": texts, "orders": orders, "views": views}

    def _forward(self, inputs, return_confidence: bool = False, num_recurrences=None):
        extra = {} if num_recurrences is None else {"num_recurrences": num_recurrences}
        end = self.tokenizer.eos_token_id if self.tokenizer.arith_format.end_token else None
        # drafts verified by the first head (exact answers), where that is faster than one token per pass
        heads = default_tokens_per_step(self.model, inputs["input_ids"].shape[0])
        # views vote by their confidences
        return_confidence = return_confidence or getattr(self.model.config, "answer_views", 1) > 1
        written = greedy_decode(self.model, inputs["input_ids"], inputs["attention_mask"], int(inputs["budget"].max()),
                                eos_token_id=end, pad_token_id=self.tokenizer.pad_token_id, tokens_per_step=heads,
                                model_kwargs=extra, return_probabilities=return_confidence)
        written, probabilities = written if return_confidence else (written, None)
        result = {key: inputs[key] for key in ("budget", "problem", "texts", "orders", "views")}
        result["answer_ids"] = written
        if return_confidence:
            result["probabilities"] = probabilities
        return result

    def postprocess(self, outputs, return_confidence: bool = False):
        # A problem's own budget, also when it shared a batch with longer ones: the same answer either way.
        rows = outputs["answer_ids"].shape[0]  # one per view of the problem
        written = [outputs["answer_ids"][r, : int(outputs["budget"][r])].tolist() for r in range(rows)]
        answers = self.tokenizer.decode_answers(written, list(outputs["texts"]))
        eos = self.tokenizer.eos_token_id
        # The tokens the model wrote: up to and including its end token; generate pads after it.
        ends = [w.index(eos) + 1 if eos in w else len(w) for w in written]
        probabilities = [outputs["probabilities"][r, :n].tolist() for r, n in enumerate(ends)] \
            if "probabilities" in outputs else None
        confidences = [min(p) if p else 0.0 for p in probabilities] if probabilities is not None else None
        answer, confidence, shown, agreeing = answers[0], (confidences or [0.0])[0], 0, 1
        if rows > 1:
            task = self.tokenizer.arith_format.task_rules
            answer, confidence, shown, agreeing, _ = agreed_answers(task, answers, confidences, list(outputs["orders"]),
                                                                   [rows])[0]
        result = {"problem": outputs["problem"], "answer": answer}
        if return_confidence:
            result["confidence"] = confidence
            # The tokens of the first view that gave the answer (the problem as given, where it did).
            tokens = self.tokenizer.convert_ids_to_tokens(written[shown][: ends[shown]])
            result["tokens"] = [{"token": t, "probability": p} for t, p in zip(tokens, probabilities[shown])]
            if rows > 1:
                result["views"] = {"count": rows, "agreeing": agreeing, "problem": outputs["texts"][shown]}
        return result


def _batch_size(value) -> int:
    """A pipeline batch size: a positive integer, else a one-line error naming `batch_size`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"batch_size must be a positive integer, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"batch_size must be a positive integer, got {value}")
    return int(value)
