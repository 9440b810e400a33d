"""Pieces several benchmarks share: their command lines, the problems they decode and how they decode them.

Benchmarks import these from here, never from one another.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from tqdm import tqdm

from hf_arith.data.formatting import parse_problems
from hf_arith.data.problems import ProblemSpec, held_out_problems, sample
from hf_arith.evaluation.metrics import is_silent_wrong
from hf_arith.runtime.decoding import greedy_decode
from hf_arith.runtime.limits import answer_budget, max_tokens_per_step, model_limits, problem_spec
from hf_arith.runtime.solving import LOW_CONFIDENCE, solve


# -- command lines ----------------------------------------------------------------------------
def script_parser(doc: str) -> argparse.ArgumentParser:
    """A benchmark's parser: its module docstring is the --help text, as written."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_length_probe_options(parser: argparse.ArgumentParser, lengths: str) -> None:
    """A length probe's options: one model, operand --lengths, --samples per length, --threads, --out."""
    parser.add_argument("model", help="bundled name or checkpoint folder")
    parser.add_argument("--lengths", default=lengths)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", help="also write the results here (JSON, with the machine and the command)")


def add_model_batch_options(parser: argparse.ArgumentParser, out, batch_sizes=(1, 64, 256), batches: int = 4,
                            batches_help: str = "batches timed per setting", repeats: int | None = 5) -> None:
    """Models (default: every bundled one), batch sizes, batches, repeats (None: no --repeats), --max-digits, --out."""
    parser.add_argument("models", nargs="*", help="bundled names or checkpoint folders (default: every bundled model)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=list(batch_sizes))
    parser.add_argument("--batches", type=int, default=batches, help=batches_help)
    if repeats is not None:
        parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--max-digits", type=int, default=10,
                        help="longest operands (default 10, or less where the model's width or context is shorter)")
    parser.add_argument("--out", default=str(out))


# -- problems ---------------------------------------------------------------------------------
def problems_for(model, tokenizer, n: int, max_digits: int, seed: int = 99) -> list[str]:
    """`n` held-out problems in the model's own format, operands of 1 to `max_digits` digits (or what the model takes)."""
    digits = min(max_digits, model_limits(model, tokenizer).max_digits)
    return held_out_problems(problem_spec(tokenizer.arith_format, 1, digits), n, seed=seed).to_text()


def decimal_heldout(tok, lo: int, hi: int, n: int, seed: int = 1234):
    """Held-out problems with lo..hi decimal-digit operands (the same problems whatever the model's base)."""
    spec = ProblemSpec(task=tok.arith_format.task, base=10, min_digits=lo, max_digits=hi)
    problems = held_out_problems(spec, n, seed=seed)
    return problems.to_text(), problems.answer_text(), problems.lengths


def make_batches(tokenizer, texts: list[str], batch_size: int, count: int):
    """`count` batches of (input_ids, attention_mask, answer budget), tokenized once, outside any clock."""
    batches = []
    for i in range(count):
        chunk = texts[i * batch_size:(i + 1) * batch_size]
        enc = tokenizer(chunk, padding=True, return_tensors="pt")
        batches.append((enc["input_ids"], enc["attention_mask"], answer_budget(tokenizer, chunk)))
    return batches


# -- decoding ---------------------------------------------------------------------------------
def decode_methods(model, tokenizer, compiled=None) -> dict:
    """Method name -> fn(ids, mask, budget) returning the new tokens: generate() and the shared decoder's variants."""
    eos = tokenizer.eos_token_id if tokenizer.arith_format.end_token else None
    pad = tokenizer.pad_token_id

    def generate(ids, mask, budget):
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=budget, do_sample=False,
                             eos_token_id=eos, pad_token_id=pad)
        return out[:, ids.shape[1]:]

    def decoder(use_cache, k=1, target=model, confirm=True):
        return lambda ids, mask, budget: greedy_decode(target, ids, mask, budget, eos_token_id=eos, pad_token_id=pad,
                                                       use_cache=use_cache, tokens_per_step=k, confirm=confirm)

    table = {"generate": generate, "decoder-nocache": decoder(False), "decoder-cache": decoder(True)}
    for k in range(2, max_tokens_per_step(model) + 1):
        table[f"decoder-cache-k{k}"] = decoder(True, k)
        table[f"decoder-cache-k{k}-raw"] = decoder(True, k, confirm=False)
    if compiled is not None:
        table["decoder-cache-compiled"] = decoder(True, target=compiled)
    return table


def decode(model, tok, texts, k=1, use_cache=True, batch_size=1000, confirm=True):
    """Answers, total forward passes (summed over batches) and seconds; `confirm=False`: the k heads' own tokens."""
    fmt, answers, passes = tok.arith_format, [], 0
    start = time.perf_counter()
    for i in range(0, len(texts), batch_size):
        chunk = texts[i : i + batch_size]
        budget = fmt.max_answer_tokens(parse_problems(chunk, fmt))
        enc = tok(chunk, padding=True, return_tensors="pt")
        new, n = greedy_decode(model, enc.input_ids, enc.attention_mask, budget, eos_token_id=tok.eos_token_id,
                               pad_token_id=tok.pad_token_id, use_cache=use_cache, tokens_per_step=k,
                               return_passes=True, confirm=confirm)
        answers.extend(tok.decode_answers(new))
        passes += n
    return answers, passes, time.perf_counter() - start


def per_digit(answers, refs) -> list[float]:
    """For each answer digit i (units first), the share of the answers that have it which got it right."""
    width = max(len(r) for r in refs)
    hits, count = np.zeros(width), np.zeros(width)
    for a, r in zip(answers, refs):
        a, r = (a or "")[::-1], r[::-1]
        count[: len(r)] += 1
        hits[: len(r)] += [i < len(a) and a[i] == r[i] for i in range(len(r))]
    return [round(float(h), 3) for h in hits / np.maximum(count, 1)]


# -- reliability sets ---------------------------------------------------------------------------
SWEEP_CHUNK = 20_000  # problems per solve call: a progress step, and memory bounded whatever the total
SHOW = 200  # wrong answers listed per set in the results


def hard_heldout(spec, kind: str, n: int, seed: int) -> tuple[list[str], list[str]]:
    """n distinct test-split problems of one hard kind (`problems.sample`): (texts, answers)."""
    rng = np.random.default_rng(seed)
    texts: dict[str, str] = {}
    for _ in range(100):
        batch = sample(spec, n, rng, split="test", kind=kind)
        for text, answer in zip(batch.to_text(), batch.answer_text()):
            texts.setdefault(text, answer)
        if len(texts) >= n:
            break
    chosen = list(texts.items())[:n]
    return [t for t, _ in chosen], [a for _, a in chosen]


def run_set(model, tok, texts: list[str], answers: list[str], label: str, tokens_per_step: int = 1,
            views: int | None = None) -> dict:
    """Every wrong answer of `solve` on `texts` (at `views` views of each problem; None: the model's default)."""
    wrong, silent, lowest_right = [], 0, 1.0
    start = time.perf_counter()
    for i in tqdm(range(0, len(texts), SWEEP_CHUNK), desc=label, unit="chunk"):
        got = solve(model, tok, texts[i:i + SWEEP_CHUNK], return_confidence=True, warn_beyond_training=False,
                    tokens_per_step=tokens_per_step, views=views)
        for text, answer, (prediction, confidence) in zip(texts[i:i + SWEEP_CHUNK], answers[i:i + SWEEP_CHUNK], got):
            if prediction != answer:
                silent += is_silent_wrong(prediction, answer, confidence, LOW_CONFIDENCE)
                wrong.append({"problem": text, "expected": answer, "got": prediction, "confidence": confidence})
            else:
                lowest_right = min(lowest_right, confidence)
    return {"n": len(texts), "wrong": len(wrong), "silent_wrong": silent, "lowest_confidence_right": lowest_right,
            "seconds": round(time.perf_counter() - start, 1), "wrong_answers": wrong[:SHOW]}
