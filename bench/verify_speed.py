"""How long the tiny-adder `verify` protocol (10,010 problems) takes, by torch threads and batch size.

Usage: python bench/verify_speed.py [MODEL] [--repeats 3]
Times `hf_arith.evaluation.verify_tiny_adder` end to end (parse, format, batched KV-cached greedy
decoding, answer decoding) and reports the best of `--repeats` runs per setting. Results go to
bench/results/verify_speed.json together with the machine and the command.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch
import transformers

import hf_arith
from hf_arith.evaluation import verify_tiny_adder
from hf_arith.loading import load_checkpoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="minimal-add10")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "verify_speed.json"))
    args = parser.parse_args()

    model, tok = load_checkpoint(args.model)
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
    result = {
        "what": "wall time of verify_tiny_adder (10 edge cases + 10,000 random pairs, seed 2025), best of repeats",
        "model": args.model, "unique_params": model.num_parameters(), "rows": rows,
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpu_count": os.cpu_count(), "torch": torch.__version__,
                    "transformers": transformers.__version__, "hf_arith": hf_arith.__version__},
        "command": "python " + " ".join(sys.argv),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
