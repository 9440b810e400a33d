"""One torch thread or two, for training and decoding tiny models (the choice behind the defaults).

    python bench/threads.py                      # minimal-add10 preset, 300 training steps per setting
    python bench/threads.py --steps 600 --compile

Training: `hf_arith.training.run.train` on the minimal-add10 preset (evaluation off), once per thread
count (and, with --compile, compiled too); the figure is steady-state seconds per step, from
per-step timestamps after the first `--warmup` steps (so torch.compile's one-off compile time is
reported apart, as `first_steps_seconds`). Decoding: the tiny-adder `verify` (10,010 problems,
batch 16384) on the bundled minimal-add10, best of `--repeats`, the thread counts taking turns
(round robin) so that load from other users of the machine falls on both. The machine's load
average is recorded. Results go to bench/results/threads.json and .md.
"""

from __future__ import annotations

import tempfile
import time

import torch
from common import script_parser
from machine import RESULTS, load_average, markdown_table, write_results

import hf_arith.training.run as training
from hf_arith.evaluation.held_out import verify_tiny_adder
from hf_arith.runtime.loading import load_checkpoint
from hf_arith.training.recipe import load_recipe


def timed_training(threads: int, compile_: bool, steps: int, warmup: int) -> dict:
    stamps = []
    original = training.ArithTrainer.training_step

    def training_step(self, *args, **kwargs):
        stamps.append(time.perf_counter())
        return original(self, *args, **kwargs)

    training.ArithTrainer.training_step = training_step
    try:
        with tempfile.TemporaryDirectory() as out:
            recipe = load_recipe("minimal-add10", [f"optim.steps={steps}", f"optim.threads={threads}",
                                                   f"optim.compile={str(compile_).lower()}", f"output_dir={out}",
                                                   f"optim.save_steps={steps * 10}"])
            training.train(recipe, evaluate=False)
    finally:
        training.ArithTrainer.training_step = original
    steady = (stamps[-1] - stamps[warmup]) / (len(stamps) - 1 - warmup)
    return {"kind": "train", "threads": threads, "compile": compile_, "steps": steps,
            "seconds_per_step": steady, "steps_per_second": 1 / steady,
            "first_steps_seconds": stamps[warmup] - stamps[0]}


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=50, help="steps left out of the steady-state figure")
    parser.add_argument("--compile", action="store_true", help="also time compiled training")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS / "threads.json"))
    args = parser.parse_args(argv)

    load_before = load_average()
    rows = []
    model, tokenizer = load_checkpoint("minimal-add10")
    verify_best = {1: float("inf"), 2: float("inf")}
    train_rows: dict = {}
    for _ in range(args.repeats):
        for threads in (1, 2):
            torch.set_num_threads(threads)
            start = time.perf_counter()
            verify_tiny_adder(model, tokenizer)
            verify_best[threads] = min(verify_best[threads], time.perf_counter() - start)
    for compile_ in (False, True) if args.compile else (False,):
        for threads in (1, 2):
            row = timed_training(threads, compile_, args.steps, args.warmup)
            train_rows[(threads, compile_)] = row
            print(f"train threads={threads} compile={compile_}: {row['steps_per_second']:.1f} steps/s "
                  f"(first {args.warmup} steps {row['first_steps_seconds']:.1f} s)", flush=True)
    for threads, seconds in verify_best.items():
        rows.append({"kind": "verify", "threads": threads, "seconds": seconds, "problems_per_second": 10010 / seconds})
        print(f"verify threads={threads}: {seconds:.3f} s", flush=True)
    rows += list(train_rows.values())
    what = ("torch threads 1 vs 2: steady-state training steps/s of the minimal-add10 preset (batch 256; "
            f"per-step timestamps after {args.warmup} steps) and the wall time of verify (10,010 problems, "
            f"best of {args.repeats})")
    lines = markdown_table(["what", "threads", "compile", "figure"], "lrlr", [
        [r["kind"], r["threads"], r.get("compile", "-"),
         f"{r['seconds']:.3f} s" if r["kind"] == "verify" else f"{r['steps_per_second']:.1f} steps/s"] for r in rows])
    return write_results(args.out, {"rows": rows}, what=what, load_before=load_before, title="Threads: 1 vs 2",
                         table=lines)


if __name__ == "__main__":
    main()
