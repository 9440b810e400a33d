"""The `arithmetic` pipeline's time per problem against `hf_arith.solve`'s, on the same batch.

Usage: python bench/pipeline_speed.py [MODEL] [--problems 512] [--batch-size 64] [--repeats 3]
Both decode through the same batched, KV-cached greedy decoder; this measures what the pipeline's
own steps (preprocess, postprocess, batching) add. Alternates the two `--repeats` times on one
thread, keeps the best of each, and writes bench/results/pipeline_speed.json with the machine, its
load average and the command.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import torch
from machine import RESULTS, load_average, write_results

import hf_arith
from hf_arith.runtime.limits import BeyondTrainingWarning
from hf_arith.runtime.loading import load_checkpoint


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="abacus-gpt2-add")
    parser.add_argument("--problems", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS / "pipeline_speed.json"))
    args = parser.parse_args(argv)

    torch.set_num_threads(1)
    model, tok = load_checkpoint(args.model)
    rng = np.random.default_rng(0)
    problems = [f"{rng.integers(0, 10**rng.integers(1, 11))}+{rng.integers(0, 10**rng.integers(1, 11))}"
                for _ in range(args.problems)]
    pipe = hf_arith.ArithmeticPipeline(model=model, tokenizer=tok)
    load_before = load_average()
    solve_times, pipe_times = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BeyondTrainingWarning)
        for _ in range(args.repeats):
            start = time.perf_counter()
            solved = hf_arith.solve(model, tok, problems, batch_size=args.batch_size)
            solve_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            piped = [out["answer"] for out in pipe(problems, batch_size=args.batch_size)]
            pipe_times.append(time.perf_counter() - start)
    record = {"model": args.model, "problems": args.problems, "batch_size": args.batch_size, "threads": 1,
              "identical_answers": piped == solved, "solve_best_seconds": min(solve_times),
              "pipeline_best_seconds": min(pipe_times), "ratio": min(pipe_times) / min(solve_times)}
    print(f"{args.model}, {args.problems} problems, batch {args.batch_size}, one thread (best of {args.repeats}): "
          f"solve {record['solve_best_seconds']:.3f} s, pipeline {record['pipeline_best_seconds']:.3f} s "
          f"({record['ratio']:.2f}x); identical answers: {record['identical_answers']}")
    return write_results(args.out, record, what="time of the arithmetic pipeline against solve on one batch",
                         load_before=load_before)


if __name__ == "__main__":
    main()
