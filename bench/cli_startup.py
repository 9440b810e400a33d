"""Start-up time of the `hf-arith` console script: `--version`, `--help` and every command's `--help`.

Usage: python bench/cli_startup.py [--repeats 5]

Each command line runs `--repeats` times as a fresh process (the installed console script next to
this interpreter, so exactly what a user types); the median wall time is recorded, beside a bare
`python -c pass` for the interpreter's own start-up. The load average before and after is in the
machine record: on a shared machine every figure grows with it. Writes
bench/results/cli_startup.json and .md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from machine import RESULTS, load_average, markdown_table, write_results

from hf_arith.cli import command_paths


def console_script() -> Path:
    script = Path(sys.executable).parent / ("hf-arith.exe" if sys.platform == "win32" else "hf-arith")
    if not script.is_file():
        raise SystemExit(f"the hf-arith console script is not installed next to {sys.executable}")
    return script


def median_seconds(argv: list[str], repeats: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per command line (default 5)")
    args = parser.parse_args()
    script = str(console_script())
    lines = [["--version"], ["--help"], *([*path, "--help"] for path in command_paths())]
    load_before = load_average()
    baseline, _ = median_seconds([sys.executable, "-c", "pass"], args.repeats)
    rows = []
    for argv in lines:
        median, times = median_seconds([script, *argv], args.repeats)
        rows.append({"command": " ".join(["hf-arith", *argv]), "median_seconds": round(median, 3),
                     "seconds": [round(t, 3) for t in times]})
        print(f"{rows[-1]['command']:<32} {median:.3f} s")
    table = markdown_table(["command", f"median of {args.repeats} (s)"], "lr",
                           [("`python -c pass`", f"{baseline:.3f}"),
                            *((f"`{r['command']}`", f"{r['median_seconds']:.3f}") for r in rows)])
    write_results(RESULTS / "cli_startup.json",
                  {"repeats": args.repeats, "python_baseline_seconds": round(baseline, 3), "rows": rows,
                   "slowest_median_seconds": max(r["median_seconds"] for r in rows)},
                  what=f"Wall time of the hf-arith console script, median of {args.repeats} fresh processes per "
                       "command line (each answers without importing torch or transformers)",
                  load_before=load_before, title="hf-arith start-up", table=table)


if __name__ == "__main__":
    main()
