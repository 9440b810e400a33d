"""Train a preset from scratch on several seeds and record every run, the failures included.

    python bench/train_seeds.py minimal-add10-tiny --seeds 0 1 2 3 4 --jobs 2
    python bench/train_seeds.py minimal-add10-tiny --seeds 0 1 --jobs 1 optim.steps=1000

Each seed is one `bench/train_minimal.py PRESET optim.seed=S` process (at most --jobs at a time,
one torch thread each: with --jobs 2 the two runs share this 2-core CPU, so each is timed while the
other runs). Each writes bench/results/<preset>-seed<S>.json; the summary goes to
bench/results/<preset>-seeds.json and .md: per seed the protocol score (verify, seed 2025), the
training time, and whether the run passed (>= 99 % on the protocol within --budget seconds).
With --keep-existing, a seed whose results file is already there (same preset, same overrides) is not
trained again, so a bench can run in chunks (one session's seeds, then the rest) and still summarise
every seed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from common import script_parser
from machine import RESULTS, load_average, markdown_table, write_results

from hf_arith.publishing.adderboard import PASS_ACCURACY


def seed_result(preset: str, seed: int) -> Path:
    return RESULTS / f"{Path(preset).stem}-seed{seed}.json"


def is_done(preset: str, overrides: list[str], seed: int) -> bool:
    """Whether the seed's results file holds a finished run of this preset with these overrides."""
    path = seed_result(preset, seed)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return record.get("preset") == preset and record.get("overrides") == [*overrides, f"optim.seed={seed}"]


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("preset", help="preset name or YAML path")
    parser.add_argument("overrides", nargs="*", help="section.key=value overrides for every seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (default 2: one per core)")
    parser.add_argument("--budget", type=float, default=1800.0, help="seconds of training a run may take to pass")
    parser.add_argument("--runs-dir", default="/tmp/train-seeds", help="where each run's checkpoints go")
    parser.add_argument("--keep-existing", action="store_true",
                        help="skip seeds whose results file exists with the same preset and overrides")
    args = parser.parse_args(argv)

    load_before = load_average()
    script = Path(__file__).with_name("train_minimal.py")
    Path(args.runs_dir).mkdir(parents=True, exist_ok=True)
    pending = [seed for seed in args.seeds if not (args.keep_existing and is_done(args.preset, args.overrides, seed))]
    for seed in sorted(set(args.seeds) - set(pending)):
        print(f"seed {seed}: kept from {seed_result(args.preset, seed)}", flush=True)
    running = {}
    while pending or running:
        while pending and len(running) < args.jobs:
            seed = pending.pop(0)
            out = Path(args.runs_dir) / f"{Path(args.preset).stem}-seed{seed}"
            command = [sys.executable, str(script), args.preset, *args.overrides, f"optim.seed={seed}",
                       "--output-dir", str(out), "--results", str(seed_result(args.preset, seed))]
            log = open(f"{out}.log", "w")
            running[seed] = (subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), log)
            print(f"seed {seed}: started, log {out}.log", flush=True)
        time.sleep(5)
        for seed, (process, log) in list(running.items()):
            if process.poll() is not None:
                log.close()
                del running[seed]
                print(f"seed {seed}: exit status {process.returncode}", flush=True)

    runs = []
    for seed in args.seeds:
        path = seed_result(args.preset, seed)
        record = json.loads(path.read_text()) if path.is_file() else {}
        accuracy = record.get("verify_accuracy")
        seconds = record.get("total_train_seconds") or record.get("train_seconds")  # screened inits included
        screen = record.get("screen") or {}
        runs.append({
            "seed": seed, "verify_accuracy": accuracy, "verify_correct": record.get("verify_correct"),
            "train_seconds": seconds, "inits_tried": len(screen.get("candidates", [])) or 1,
            "chosen_seed": screen.get("chosen_seed", seed), "steps": record.get("steps"), "unique_params": record.get("unique_params"),
            "heldout_exact_match": record.get("heldout_exact_match"), "file": path.name if record else None,
            "passed": bool(accuracy is not None and accuracy >= PASS_ACCURACY and seconds is not None
                           and seconds <= args.budget),
        })
    passed = sum(r["passed"] for r in runs)
    rows = [(r["seed"], r["inits_tried"], r["chosen_seed"], r["unique_params"], r["steps"],
             f"{r['train_seconds']:.0f} s" if r["train_seconds"] else "no result",
             f"{100 * r['verify_accuracy']:.2f} % ({r['verify_correct']:,})" if r["verify_accuracy"] is not None else "-",
             f"{100 * r['heldout_exact_match']:.2f} %" if r["heldout_exact_match"] is not None else "-",
             "yes" if r["passed"] else "no") for r in runs]
    table = markdown_table(["seed", "inits tried", "init trained on", "unique params", "steps",
                            "training time (screen included)", "verify (10,010)", "held-out",
                            f"passed (>= 99 % in <= {args.budget:.0f} s)"], "rrrrrrrrl", rows)
    table += ["", f"{passed} of {len(runs)} seeds passed; {args.jobs} run(s) at a time, one torch thread each."]
    record = {"preset": args.preset, "overrides": args.overrides, "jobs": args.jobs, "budget_seconds": args.budget,
              "pass_accuracy": PASS_ACCURACY, "passed": passed, "runs": runs}
    what = (f"{args.preset} trained from scratch on {len(runs)} seeds: the tiny-adder protocol score of each "
            f"final model and its training time")
    out = RESULTS / f"{Path(args.preset).stem}-seeds.json"
    result = write_results(out, record, what=what, load_before=load_before,
                           title=f"{Path(args.preset).stem}: seeds", table=table)
    print("\n".join(table))
    return result


if __name__ == "__main__":
    main()
