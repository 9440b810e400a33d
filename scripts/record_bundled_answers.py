"""Record every bundled model's answers on a fixed problem set (tests/data/bundled_answers.json).

    python scripts/record_bundled_answers.py

`tests/test_bundled_answers.py` solves the same problems and requires the same answers, wrong
ones included: a refactor of the model code must not change what any shipped model writes.
Run this only when a bundled model's weights change on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

import hf_arith
from hf_arith.data.problems import held_out_problems
from hf_arith.evaluation.stress import stress_sets
from hf_arith.runtime.limits import model_limits, problem_spec
from hf_arith.runtime.loading import load_checkpoint

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "bundled_answers.json"


def problem_set(model, tokenizer) -> list[str]:
    """Held-out problems inside the training range and (where the model can place them) beyond it,
    plus carry chains and zeros (for sorting: lists of zeros and of the longest numbers)."""
    fmt = tokenizer.arith_format
    limit = model_limits(model, tokenizer).max_digits  # running sums take more of the context than answers
    top = fmt.operand_width or min(10, limit)
    spec = problem_spec(fmt, 1, top)
    texts = held_out_problems(spec, 120, seed=7).to_text()
    if fmt.task_rules.item_list:
        texts += held_out_problems(problem_spec(fmt, 7, 10), 60, seed=8).to_text()
        sets = stress_sets(fmt, 6, n=4, seed=9)
        return texts + sets["zero_operands"][:4] + sets["max_length"]
    op = fmt.task_rules.operator
    if not fmt.operand_width:
        far = min(30, limit)
        texts += held_out_problems(problem_spec(fmt, top + 1, far), 60, seed=8).to_text()
        texts += [f"{'9' * far}{op}1", f"1{op}{'9' * far}", f"{'9' * min(25, far)}{op}{'9' * min(25, far)}"]
    texts += [f"0{op}0", f"{'9' * top}{op}{'9' * top}", f"{'9' * top}{op}1", f"{'5' * top}{op}{'5' * top}"]
    return texts


def settings(model) -> list[dict]:
    """The decoding settings a model supports: tokens per step, loop counts."""
    runs = [{}]
    if getattr(model.config, "num_future_tokens", 1) > 1:
        # The extra heads' own tokens, and what solve answers with them (confirmed by the first head).
        runs.append({"tokens_per_step": model.config.num_future_tokens, "confirm": False})
        runs.append({"tokens_per_step": model.config.num_future_tokens})
    if hasattr(model.config, "num_recurrences"):
        runs += [{"model_kwargs": {"num_recurrences": n}} for n in (1, 4)]
    return runs


def main() -> None:
    torch.set_num_threads(1)
    record = {}
    for name in hf_arith.bundled_models():
        model, tokenizer = load_checkpoint(name)
        problems = problem_set(model, tokenizer)
        record[name] = {"problems": problems,
                        "runs": [{"setting": s, "answers": hf_arith.solve(model, tokenizer, problems, **s)}
                                 for s in settings(model)]}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {OUT}: " + ", ".join(f"{n} ({len(r['problems'])} problems x {len(r['runs'])})"
                                      for n, r in record.items()))


if __name__ == "__main__":
    main()
