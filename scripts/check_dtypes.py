"""Check which dtypes leave a checkpoint's answers unchanged, and record it in its dtype_check.json.

    python scripts/check_dtypes.py                    # every bundled model
    python scripts/check_dtypes.py minimal-add10 runs/x/final [--samples N]

For each model: its held-out set (the problems of its own eval_results.json: operand lengths, list
sizes, seed, n; without one, 2,000 problems over the lengths the model takes) is solved, one decode
of each problem as given (no answer views), in float32, the reference, then with the model loaded
in bfloat16 and in float16 (as `hf_arith.load(..., dtype=)` loads it), on the CPU, one thread. Each dtype's exact match and its agreement with float32 (the
share of identical answers) go into `<checkpoint>/dtype_check.json`. `hf_arith.load` and the
`--dtype` option refuse a dtype recorded there with agreement below 100 %, and warn about a dtype
that is not recorded; the model card lists the checked dtypes.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

import hf_arith
from hf_arith.data.problems import held_out_problems
from hf_arith.evaluation.metrics import arith_scores
from hf_arith.models.modeling_common import DTYPE_CHECK_FILE, REFERENCE_DTYPE
from hf_arith.runtime.hardware import machine_info
from hf_arith.runtime.limits import model_limits, problem_spec
from hf_arith.runtime.loading import (
    DTYPES,
    _quiet_transformers,
    load_checkpoint,
    one_line,
    resolve_checkpoint,
)

DEFAULT_SAMPLES = 2000
EVAL_FILE = "eval_results.json"


def heldout_set(folder: Path, model, tokenizer, samples: int | None) -> dict:
    """The held-out set of the checkpoint's own eval report (or a default one): its parameters."""
    fmt = tokenizer.arith_format
    try:
        report = json.loads((folder / EVAL_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = None
    if isinstance(report, dict) and report.get("task") == fmt.task and report.get("base") == fmt.base:
        params = {key: report[key] for key in ("min_digits", "max_digits", "seed", "n", "items") if key in report}
        params["source"] = EVAL_FILE
    else:
        params = {"min_digits": 1, "max_digits": model_limits(model, tokenizer, folder).max_digits, "seed": 1234,
                  "n": DEFAULT_SAMPLES, "source": "default"}
    if samples is not None:
        params["n"] = samples
    return {"task": fmt.task, "base": fmt.base, **params}


def check_model(name: str, samples: int | None = None) -> tuple[Path, dict]:
    folder = resolve_checkpoint(name)
    model, tokenizer = load_checkpoint(name)
    problems = heldout_set(folder, model, tokenizer, samples)
    items = tuple(problems["items"]) if "items" in problems else None  # a sort report's list sizes
    spec = problem_spec(tokenizer.arith_format, problems["min_digits"], problems["max_digits"], items=items)
    held = held_out_problems(spec, problems["n"], problems["seed"])
    texts, answers, lengths = held.to_text(), held.answer_text(), held.lengths
    results = {}
    reference = None
    for dtype_name, dtype in DTYPES.items():
        start = time.perf_counter()
        try:
            # The same call hf_arith.load(..., dtype=) makes (both would refuse what this file records).
            with _quiet_transformers():
                candidate = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype, ignore_dtype_check=True).eval()
            # One decode of each problem as given (views=1), whatever the model's answer_views: the check
            # compares what the weights compute, and a vote only gathers such decodes of relabelled problems.
            predictions = hf_arith.solve(candidate, tokenizer, texts, views=1)
        except (RuntimeError, NotImplementedError, ValueError, TypeError) as err:  # an op without this dtype
            results[dtype_name] = {"error": one_line(err)[:300]}
            print(f"  {name} {dtype_name}: error: {one_line(err)[:200]}", flush=True)
            continue
        seconds = time.perf_counter() - start
        if dtype_name == REFERENCE_DTYPE:
            reference = predictions
        changed = sum(p != r for p, r in zip(predictions, reference, strict=True))
        results[dtype_name] = {
            "exact_match": arith_scores(predictions, answers, lengths)["exact_match"],
            "agreement": 1 - changed / len(texts), "changed_answers": changed, "seconds": round(seconds, 3),
        }
        print(f"  {name} {dtype_name}: exact match {100 * results[dtype_name]['exact_match']:.2f} %, agreement with "
              f"{REFERENCE_DTYPE} {100 * results[dtype_name]['agreement']:.2f} % ({changed} changed), {seconds:.1f} s",
              flush=True)
    record = {
        "model": name, "reference": REFERENCE_DTYPE, "device": "cpu", "problems": problems, "views": 1,
        "dtypes": results,
        "rule": "hf_arith.load refuses a dtype whose agreement with the reference is below 1, and warns about "
                "a dtype not listed here",
        "command": shlex.join(["python", "scripts/check_dtypes.py", *sys.argv[1:]]),
        "machine": machine_info(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    return folder, record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", metavar="MODEL", help="bundled names or checkpoint folders (default: every bundled model)")
    parser.add_argument("--samples", type=int, metavar="N", help="held-out problems (default: the eval report's n)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for name in args.models or hf_arith.bundled_models():
        folder, record = check_model(name, args.samples)
        path = folder / DTYPE_CHECK_FILE
        path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
