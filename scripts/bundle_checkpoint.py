"""Turn a finished training run into a bundled checkpoint, with the evaluation its card needs.

    python scripts/bundle_checkpoint.py runs/abacus-gpt2-add/final abacus-gpt2-add --grid 1:30
    python scripts/bundle_checkpoint.py runs/looped-add-window/final looped-add-window --grid 1:30 --loops 1,2,4,8,16,32
    python scripts/bundle_checkpoint.py - abacus-gpt2-sort --grid-only --max-digits 6 --grid 1:10 --items 2:8
    python scripts/bundle_checkpoint.py runs/abacus-gpt2-sort-10/final abacus-gpt2-sort-10 --answer-views 9 --grid 1:12 --items 2:12

Steps, all through `hf-arith eval` (so the numbers are the ones a user gets):
  1. copy the run's final folder (safetensors weights and JSON files; no remote-code .py files, which
     save_pretrained writes again whenever a bundled model is saved or pushed) to hf_arith/bundled/NAME,
     with --answer-views recorded in its config.json (the views of each problem its answers vote over);
  2. held-out exact match on --samples problems with 1 to --max-digits digit operands ->
     eval_results.json (the model card's model-index numbers);
  3. the length grid (--grid, --samples-per-cell; for sorting, lists of --items numbers by their
     numbers' digits) -> length_grid.json (matrices and summary) and images/length_heatmap.png; its
     summary and the wall time of the grid also go to bench/results/NAME-grid.json (the picture stays
     with the model; --grid-only: this step alone, on the bundled folder as it is); with the held-out
     report it sets config.json's measured_max_digits (every length up to it at >= 99 %);
  4. with --loops (looped models): the accuracy-vs-recurrences curve on a smaller grid
     (--loops-grid, --loops-samples-per-cell) -> loops.json and images/loops.png; the curve also goes
     to bench/results/NAME-grid.json.
bench/results/NAME-grid.json records the machine and the command like every benchmark's results
(bench/machine.py's write_results).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from hf_arith.bundled import BUNDLED_DIR
from hf_arith.cli import main as hf_arith
from hf_arith.publishing.model_card import EVAL_FILE, GRID_FILE, HEATMAP_FILE
from hf_arith.records import LOOPS_FILE, LOOPS_PICTURE
from hf_arith.runtime.limits import measured_max_digits

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from machine import RESULTS, load_average, write_results  # noqa: E402  (bench/machine.py: how results are recorded)

KEEP = {".safetensors", ".json"}  # weights, config/tokenizer/summary
REMOTE_CODE_KEYS = ("auto_map", "custom_pipelines")  # written again by save_pretrained on save and push


def run(argv: list[str]) -> float:
    print("+ hf-arith " + " ".join(argv), flush=True)
    start = time.perf_counter()
    status = hf_arith(argv)
    if status:
        raise SystemExit(f"hf-arith {argv[0]} failed with status {status}")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", help="the training run's final folder")
    parser.add_argument("name", help="bundled name")
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--max-digits", type=int, default=10)
    parser.add_argument("--grid", default="1:30")
    parser.add_argument("--samples-per-cell", type=int, default=100)
    parser.add_argument("--loops", default=None, help="loop counts for looped models, e.g. 1,2,4,8,16,32")
    parser.add_argument("--loops-samples-per-cell", type=int, default=10)
    parser.add_argument("--loops-grid", default=None,
                        help="the loops curve's grid (default: --grid); a 1:100 grid at 8 loops takes an hour here")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--items", default=None, help="sorting models: the grid's list sizes, e.g. 2:8 "
                                                      "(default: every size the format writes)")
    parser.add_argument("--answer-views", type=int, default=None,
                        help="record config.answer_views: answer this many views of each problem by default")
    parser.add_argument("--grid-only", action="store_true", help="step 3 alone, on the bundled folder NAME")
    args = parser.parse_args(argv)
    if args.grid_only:
        bundle_grid(args, BUNDLED_DIR / args.name, load_average())
        return

    source, target = Path(args.run), BUNDLED_DIR / args.name
    if not (source / "config.json").is_file():
        raise SystemExit(f"{source}: not a checkpoint folder (no config.json)")
    if target.exists():
        shutil.rmtree(target)
    (target / "images").mkdir(parents=True)
    for path in source.iterdir():
        if path.is_file() and path.suffix in KEEP:
            shutil.copy2(path, target / path.name)
    # A bundled folder loads with the installed classes: its configs name no remote code.
    for name in ("config.json", "tokenizer_config.json"):
        config = json.loads((target / name).read_text())
        for key in REMOTE_CODE_KEYS:
            config.pop(key, None)
        if name == "config.json" and args.answer_views is not None:
            config["answer_views"] = args.answer_views
        (target / name).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")

    load_before = load_average()
    threads = ["--threads", str(args.threads)]
    run(["eval", str(target), "--samples", str(args.samples), "--max-digits", str(args.max_digits),
         "--json", str(target / EVAL_FILE), *threads])
    report_path = target / EVAL_FILE  # named after the bundle, not this machine's path
    report_path.write_text(json.dumps({**json.loads(report_path.read_text()), "model": args.name}, indent=2) + "\n")
    bundle_grid(args, target, load_before)


def _rounded(value):
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def shipped_grid(grid: dict) -> dict:
    """The grid as the package ships it: the matrices and summary the card and the Space read, without
    the per-cell list that repeats them (a 100x100 grid's cells are megabytes), floats to 6 places."""
    return _rounded({key: value for key, value in grid.items() if key != "cells"})


def bundle_grid(args, target: Path, load_before) -> None:
    """Step 3 (and 4 with --loops): the grid of the bundled folder `target`, into it and bench/results/."""
    if not (target / EVAL_FILE).is_file():
        raise SystemExit(f"{target}: no eval_results.json (bundle it first, without --grid-only)")
    threads = ["--threads", str(args.threads)]
    items = ["--items", args.items] if args.items else []
    # --max-digits keeps the 100 held-out problems of the grid run inside the longest list the model takes.
    heldout = ["--heldout", "--samples", "100", "--max-digits", str(args.max_digits)]
    scratch = RESULTS / f".{args.name}-eval"
    grid_seconds = run(["eval", str(target), *heldout, "--grid", args.grid, *items,
                        "--samples-per-cell", str(args.samples_per_cell), "--output-dir", str(scratch), *threads])
    (target / "images").mkdir(exist_ok=True)
    grid = json.loads((scratch / "grid.json").read_text())
    (target / GRID_FILE).write_text(json.dumps(shipped_grid(grid), separators=(",", ":")) + "\n")
    shutil.copy2(scratch / "grid.png", target / HEATMAP_FILE)
    record = {"name": args.name, "grid": args.grid, **({"items": grid["items"]} if "items" in grid else {}),
              "samples_per_cell": args.samples_per_cell,
              "seconds_with_100_heldout": round(grid_seconds, 1), "summary": grid.get("summary")}
    if args.loops:
        loops_dir = scratch / "loops"
        run(["eval", str(target), *heldout, "--grid", args.loops_grid or args.grid, "--samples-per-cell",
             str(args.loops_samples_per_cell), "--loops", args.loops, "--output-dir", str(loops_dir), *threads])
        shutil.copy2(loops_dir / "loops.json", target / LOOPS_FILE)  # hf-arith eval --loops's names, then the folder's
        shutil.copy2(loops_dir / "loops.png", target / LOOPS_PICTURE)
        record["loops"] = json.loads((loops_dir / "loops.json").read_text())
        record["loops_grid"] = args.loops_grid or args.grid
    record["heldout"] = json.loads((target / EVAL_FILE).read_text())
    # Where it was measured to answer (>= 99 % on every length up to it), as a pushed folder records it.
    config = json.loads((target / "config.json").read_text())
    config["measured_max_digits"] = measured_max_digits(record["heldout"], grid)
    (target / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    what = f"the evaluation bundled with {args.name}: held-out exact match, length grid (and loops), through hf-arith eval"
    write_results(RESULTS / f"{args.name}-grid.json", record, what=what, load_before=load_before)
    shutil.rmtree(scratch)
    print(f"bundled {target}")


if __name__ == "__main__":
    main()
