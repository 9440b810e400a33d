"""Measure a trained abacus model against the issue's targets and write its results.

    python bench/abacus_report.py abacus-gpt2-add                    # a bundled name
    python bench/abacus_report.py runs/abacus-gpt2-add/final --name abacus-gpt2-add

Measures, on problems from the held-out split only (lengths are decimal digits, so models in
other bases are scored on the very same problems; the split is a function of operand values):
  * exact match on N problems with 1-10-digit operands (every (len_a, len_b) pair equally likely);
  * exact match on problems whose two operands both have 20 digits (and 15 and 30, or --lengths), with
    the share of answers of the right length and the accuracy of each answer digit (units first),
    and for a multi-token model also with the k heads' own tokens (raw, `confirm=False`);
  * for every tokens_per_step k the model supports (1, 2, 4, ...): exact match and the forward
    passes of the raw heads (k tokens per pass, the inexact opt-in; the default self-speculative
    decoding writes k = 1's answers), relative to k = 1;
  * batched greedy decoding with and without the KV cache: identical outputs, and the time of each;
  * sequence lengths: mean prompt + answer tokens for the 1-10-digit problems.
Writes bench/results/<name>.json with the machine and the command, and prints it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from common import decimal_heldout, decode, per_digit, script_parser
from machine import RESULTS, load_average, write_results

from hf_arith.evaluation.metrics import arith_scores
from hf_arith.runtime.limits import max_tokens_per_step
from hf_arith.runtime.loading import load_checkpoint


def main(argv=None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("model", help="bundled name or checkpoint folder")
    parser.add_argument("--name", default=None, help="results name (default: the model argument's last part)")
    parser.add_argument("--samples", type=int, default=10_000, help="held-out 1-10-digit problems")
    parser.add_argument("--long-samples", type=int, default=1000, help="problems per long operand length")
    parser.add_argument("--lengths", default="15,20,30", help="operand lengths of the long problems (both operands)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = load_average()
    model, tok = load_checkpoint(args.model)
    name = args.name or Path(args.model).name

    texts, refs, lengths = decimal_heldout(tok, 1, 10, args.samples)
    result = {"model": args.model, "unique_params": model.num_parameters(), "format": tok.arith_format.to_dict()}
    ids = tok(texts)["input_ids"]
    result["mean_prompt_tokens_1_10"] = float(np.mean([len(x) for x in ids]))
    result["max_prompt_tokens_1_10"] = int(max(len(x) for x in ids))
    per_k = {}
    for k in sorted({1, 2, 4, max_tokens_per_step(model)} & set(range(1, max_tokens_per_step(model) + 1))):
        answers, passes, seconds = decode(model, tok, texts, k=k, confirm=False)
        report = arith_scores(answers, refs, lengths)
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
    for length in (int(x) for x in args.lengths.split(",")):
        if length + 1 > getattr(model.config, "abacus_max_digits", length + 1):
            continue  # beyond the model's abacus range
        t, r, _ = decimal_heldout(tok, length, length, args.long_samples, seed=4321)
        answers, _, seconds = decode(model, tok, t)
        result["by_operand_length"][length] = {"exact_match": arith_scores(answers, r)["exact_match"], "n": len(t),
                                               "seconds": round(seconds, 2),
                                               "right_length": float(np.mean([len(a or "") == len(b)
                                                                              for a, b in zip(answers, r)])),
                                               "per_answer_digit_lsb_first": per_digit(answers, r)}
        for k in per_k.keys() - {1}:  # does decoding k tokens per pass generalize as far as one?
            answers, _, _ = decode(model, tok, t, k=k, confirm=False)
            result["by_operand_length"][length][f"exact_match_{k}_tokens_per_pass"] = arith_scores(answers, r)["exact_match"]

    sample = texts[:2000]
    cached, _, t_cached = decode(model, tok, sample, use_cache=True, batch_size=500)
    uncached, _, t_uncached = decode(model, tok, sample, use_cache=False, batch_size=500)
    result["kv_cache"] = {"problems": len(sample), "batch_size": 500, "identical_outputs": cached == uncached,
                          "seconds_with_cache": round(t_cached, 3), "seconds_without_cache": round(t_uncached, 3),
                          "speedup": round(t_uncached / t_cached, 2)}
    what = "a trained abacus model against the issue's targets, on held-out problems"
    result = write_results(RESULTS / f"{name}.json", result, what=what, load_before=load_before)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
