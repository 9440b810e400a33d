"""A model summary: parameters per module, unique versus total after tying, and the multiply-adds
needed per generated token.

Parameters are read from the module tree; a tensor registered under several names (tied
embeddings) counts once in `unique` and every time in `total`. Multiply-adds are measured, not
estimated: torch's own FlopCounterMode counts the matrix products (linear layers, attention
scores and mixing; norms, softmax and activations are not multiply-adds of matrices and are
left out) while the model answers one problem with a KV cache, as `solve` runs it; the caller
(`hf-arith summary`) checks that problem against the model's limits (`hf_arith.runtime.limits`).
"""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from ..runtime.decoding import greedy_decode
from ..runtime.limits import answer_budget
from .attention_maps import eager_attention


def _implicit_head(model) -> dict | None:
    """A row for an output head that reads the input embedding table without registering it
    (the minimal family's tied head): those parameters are used twice, so `total` counts them twice."""
    if not getattr(model.config, "tie_word_embeddings", False) or model.get_output_embeddings() is not None:
        return None
    embeddings = model.get_input_embeddings()
    count = sum(p.numel() for p in embeddings.parameters())
    name = next((n for n, m in model.named_modules() if m is embeddings), "input embeddings")
    return {"module": "(output head)", "type": f"tied to {name}", "parameters": count, "tied": count}


def parameter_table(model) -> list[dict]:
    """One row per module that owns parameters: name, class, own parameters, and those of them
    that are shared with a module listed earlier (tied)."""
    seen: set[int] = set()
    rows = []
    for name, module in model.named_modules(remove_duplicate=False):
        own = list(module.parameters(recurse=False))
        if not own:
            continue
        shared = sum(p.numel() for p in own if id(p) in seen)
        seen.update(id(p) for p in own)
        rows.append({"module": name or "(root)", "type": type(module).__name__,
                     "parameters": sum(p.numel() for p in own), "tied": shared})
    head = _implicit_head(model)
    return rows + ([head] if head else [])


def tied_groups(model) -> list[list[str]]:
    """Names that refer to one and the same tensor, e.g. [['lm_head.weight', 'model.wte.weight']]."""
    names: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    groups = [sorted(group) for group in names.values() if len(group) > 1]
    head = _implicit_head(model)
    return groups + ([["(output head)", head["type"].removeprefix("tied to ")]] if head else [])


def parameter_counts(model) -> dict:
    """unique: distinct tensors' elements (what training updates); total: counted at every use
    (per registered name, plus an unregistered tied output head)."""
    every = list(model.named_parameters(remove_duplicate=False))
    unique = {id(p): p.numel() for _, p in every}
    head = _implicit_head(model)
    return {"unique": sum(unique.values()),
            "total": sum(p.numel() for _, p in every) + (head["parameters"] if head else 0),
            "trainable_unique": sum({id(p): p.numel() for _, p in every if p.requires_grad}.values())}


def multiply_adds(model, tokenizer, problem: str, model_kwargs: dict | None = None) -> dict:
    """Measured multiply-adds to answer `problem`: the prompt pass, each cached decoding step,
    and the total divided by the answer tokens generated."""
    enc = tokenizer([problem], return_tensors="pt")
    budget = answer_budget(tokenizer, [problem])
    device = next(model.parameters()).device
    ids, mask = enc["input_ids"].to(device), enc["attention_mask"].to(device)
    end = tokenizer.eos_token_id if tokenizer.arith_format.end_token else None
    kwargs = dict(model_kwargs or {})
    with eager_attention(model), torch.inference_mode():
        with FlopCounterMode(display=False) as prefill:
            model(input_ids=ids, attention_mask=mask, use_cache=True, logits_to_keep=1, **kwargs)
        with FlopCounterMode(display=False) as whole:
            new, passes = greedy_decode(model, ids, mask, budget, eos_token_id=end,
                                        pad_token_id=tokenizer.pad_token_id, model_kwargs=kwargs, return_passes=True)
    prefill_macs = prefill.get_total_flops() // 2  # a multiply-add is two flops
    total = whole.get_total_flops() // 2
    generated = int(new.shape[1])
    steps = max(passes - 1, 0)
    return {
        "problem": problem, "prompt_tokens": int(ids.shape[1]), "generated_tokens": generated,
        "prefill_macs": prefill_macs,
        "macs_per_decoding_step": (total - prefill_macs) / steps if steps else 0.0,
        "macs_per_generated_token": total / generated if generated else 0.0,
        "total_macs": total,
    }


def model_summary(model, tokenizer, problem: str, model_kwargs: dict | None = None) -> dict:
    """Everything above in one JSON-ready dict."""
    return {
        "class": type(model).__name__, "model_type": getattr(model.config, "model_type", None),
        "parameters": parameter_counts(model), "tied": tied_groups(model),
        "modules": parameter_table(model), "compute": multiply_adds(model, tokenizer, problem, model_kwargs),
    }


def format_summary(summary: dict) -> str:
    """The summary as a plain-text table."""
    rows = summary["modules"]
    width = max([len("module")] + [len(r["module"]) for r in rows])
    type_width = max([len("type")] + [len(r["type"]) for r in rows])
    lines = [f"{'module':<{width}}  {'type':<{type_width}}  {'params':>8}  {'tied':>6}"]
    lines += [f"{r['module']:<{width}}  {r['type']:<{type_width}}  {r['parameters']:>8,}  {r['tied']:>6,}" for r in rows]
    p, c = summary["parameters"], summary["compute"]
    lines += [
        "",
        f"parameters: {p['unique']:,} unique, {p['total']:,} counted at every use (tying saves {p['total'] - p['unique']:,})",
    ]
    for group in summary["tied"]:
        lines.append(f"  tied: {' = '.join(group)}")
    lines += [
        f"multiply-adds for {c['problem']!r} ({c['prompt_tokens']} prompt tokens, {c['generated_tokens']} generated):",
        f"  prompt pass            {c['prefill_macs']:>12,}",
        f"  per decoding step      {c['macs_per_decoding_step']:>12,.0f}",
        f"  per generated token    {c['macs_per_generated_token']:>12,.0f}  (prompt pass included)",
    ]
    return "\n".join(lines)


__all__ = ["format_summary", "model_summary", "multiply_adds", "parameter_counts", "parameter_table", "tied_groups"]
