"""Measure a trained abacus model against the issue's targets and write its results.

    python bench/abacus_report.py abacus-gpt2-add                    # a bundled name
    python bench/abacus_report.py runs/abacus-gpt2-add/final --name abacus-gpt2-add

Measures, on problems from the held-out split only (lengths are decimal digits, so models in
other bases are scored on the very same problems; the split is a function of operand values):
  * exact match on N problems with 1-10-digit operands (every (len_a, len_b) pair equally likely);
  * exact match on problems whose two operands both have 20 digits (and 15 and 30), with the
    share of answers of the right length and the accuracy of each answer digit (units first);
  * for every tokens_per_step k the model supports (1, 2, 4, ...): exact match and the forward
    passes the shared decoder made, relative to k = 1;
  * batched greedy decoding with and without the KV cache: identical outputs, and the time of each;
  * sequence lengths: mean prompt + answer tokens for the 1-10-digit problems.
Writes bench/results/<name>.json with the machine and the command, and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch
from machine import command_line, machine_info, utc_now

from hf_arith.decoding import greedy_decode, max_tokens_per_step
from hf_arith.evaluation import heldout_problems, score
from hf_arith.formatting import parse_problems
from hf_arith.loading import load_checkpoint
from hf_arith.problems import ProblemSpec

RESULTS_DIR = Path(__file__).parent / "results"


def decode(model, tok, texts, k=1, use_cache=True, batch_size=1000):
    """Answers, total forward passes (summed over batches) and seconds."""
    fmt, answers, passes = tok.arith_format, [], 0
    start = time.perf_counter()
    for i in range(0, len(texts), batch_size):
        chunk = texts[i : i + batch_size]
        budget = fmt.max_answer_tokens(parse_problems(chunk, fmt))
        enc = tok(chunk, padding=True, return_tensors="pt")
        new, n = greedy_decode(model, enc.input_ids, enc.attention_mask, budget, eos_token_id=tok.eos_token_id,
                               pad_token_id=tok.pad_token_id, use_cache=use_cache, tokens_per_step=k,
                               return_passes=True)
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


def heldout(tok, lo, hi, n, seed=1234):
    spec = ProblemSpec(task=tok.arith_format.task, base=10, min_digits=lo, max_digits=hi)
    return heldout_problems(spec, n, seed=seed)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="bundled name or checkpoint folder")
    parser.add_argument("--name", default=None, help="results name (default: the model argument's last part)")
    parser.add_argument("--samples", type=int, default=10_000, help="held-out 1-10-digit problems")
    parser.add_argument("--long-samples", type=int, default=1000, help="problems per long operand length")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    model, tok = load_checkpoint(args.model)
    name = args.name or Path(args.model).name

    texts, refs, lengths = heldout(tok, 1, 10, args.samples)
    result = {"model": args.model, "unique_params": model.num_parameters(), "format": tok.arith_format.to_dict()}
    ids = tok(texts)["input_ids"]
    result["mean_prompt_tokens_1_10"] = float(np.mean([len(x) for x in ids]))
    result["max_prompt_tokens_1_10"] = int(max(len(x) for x in ids))
    per_k = {}
    for k in sorted({1, 2, 4, max_tokens_per_step(model)} & set(range(1, max_tokens_per_step(model) + 1))):
        answers, passes, seconds = decode(model, tok, texts, k=k)
        report = score(answers, refs, lengths)
        per_k[k] = {"exact_match": report["exact_match"], "malformed": report["malformed"],
                    "forward_passes": passes, "seconds": round(seconds, 2)}
        if k == 1:
            result["heldout_1_10"] = report
            fmt = tok.arith_format  # answer tokens in the model's base, + <eos>
            digits = [len(np.base_repr(int(a), fmt.base)) for a in refs]
            result["mean_answer_tokens_1_10"] = float(np.mean(digits)) + int(fmt.end_token)
    for row in per_k.values():
        row["passes_vs_k1"] = round(row["forward_passes"] / per_k[1]["forward_passes"], 3)
    result["tokens_per_step"] = per_k

    result["by_operand_length"] = {}
    for length in (15, 20, 30):
        if length + 1 > getattr(model.config, "abacus_max_digits", length + 1):
            continue  # beyond the model's abacus range
        t, r, _ = heldout(tok, length, length, args.long_samples, seed=4321)
        answers, _, seconds = decode(model, tok, t)
        result["by_operand_length"][length] = {"exact_match": score(answers, r)["exact_match"], "n": len(t),
                                               "seconds": round(seconds, 2),
                                               "right_length": float(np.mean([len(a or "") == len(b)
                                                                              for a, b in zip(answers, r)])),
                                               "per_answer_digit_lsb_first": per_digit(answers, r)}

    sample = texts[:2000]
    cached, _, t_cached = decode(model, tok, sample, use_cache=True, batch_size=500)
    uncached, _, t_uncached = decode(model, tok, sample, use_cache=False, batch_size=500)
    result["kv_cache"] = {"problems": len(sample), "batch_size": 500, "identical_outputs": cached == uncached,
                          "seconds_with_cache": round(t_cached, 3), "seconds_without_cache": round(t_uncached, 3),
                          "speedup": round(t_uncached / t_cached, 2)}
    result.update(machine=machine_info(load_before), command=command_line(argv), date=utc_now())
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
