"""How long the tiny-adder `verify` protocol (10,010 problems) takes, by torch threads and batch size.

Usage: python bench/verify_speed.py [MODEL] [--repeats 3]
Times `hf_arith.evaluation.held_out.verify_tiny_adder` end to end (parse, format, batched KV-cached greedy
decoding, answer decoding) and reports the best of `--repeats` runs per setting. Results go to
bench/results/verify_speed.json together with the machine, its load average and the command.
"""

from __future__ import annotations

import argparse
import time

import torch
from machine import RESULTS, load_average, write_results

import hf_arith
from hf_arith.evaluation.held_out import verify_tiny_adder
from hf_arith.runtime.loading import load_checkpoint


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="minimal-add10")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS / "verify_speed.json"))
    args = parser.parse_args(argv)

    model, tok = load_checkpoint(args.model)
    load_before = load_average()
    rows = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for batch_size in (1024, 4096, 16384):
            times, report = [], None
            for _ in range(args.repeats):
                start = time.perf_counter()
                report = verify_tiny_adder(model, tok, batch_size=batch_size)
                times.append(time.perf_counter() - start)
            row = {"threads": threads, "batch_size": batch_size, "best_seconds": min(times),
                   "all_seconds": times, "accuracy": report["accuracy"],
                   "additions_per_second": report["total"] / min(times)}
            rows.append(row)
            print(f"threads={threads} batch={batch_size:>5}: best {min(times):.3f} s "
                  f"({row['additions_per_second']:.0f} additions/s), accuracy {report['accuracy']:.4%}")
    what = "wall time of verify_tiny_adder (10 edge cases + 10,000 random pairs, seed 2025), best of repeats"
    return write_results(args.out, {"model": args.model, "unique_params": model.num_parameters(),
                                    "hf_arith": hf_arith.__version__, "rows": rows},
                         what=what, load_before=load_before)


if __name__ == "__main__":
    main()
