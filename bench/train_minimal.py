"""Train a tiny-adder preset from scratch and record what it measured.

    python bench/train_minimal.py                       # the default preset, minimal-add10
    python bench/train_minimal.py minimal-add10-long    # another preset
    python bench/train_minimal.py minimal-add10 optim.threads=2 --output-dir /tmp/run

Writes bench/results/<preset>.json (wall time, steps, steps/s, verify accuracy on the public
tiny-adder protocol, unique parameters, held-out exact match, the machine and the exact command;
with optim.screen_steps, every init the screen tried and the time they took)
and prints it. Overrides are `section.key=value`, as for `hf-arith train`.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from common import script_parser
from machine import RESULTS, load_average, write_results

from hf_arith.records import read_summary
from hf_arith.training.recipe import load_recipe, place_stages
from hf_arith.training.run import train


def _stage_cost(summary: dict) -> dict:
    """An earlier stage's steps, training seconds and screen seconds, from its training summary."""
    return {"steps": summary.get("steps"), "train_seconds": summary.get("train_seconds") or 0.0,
            "screen_seconds": (summary.get("screen") or {}).get("screen_seconds", 0.0),
            "verify_accuracy": (summary.get("verify") or {}).get("accuracy"),
            "unique_params": summary.get("unique_params")}


def main(argv: list[str] | None = None) -> dict:
    parser = script_parser(__doc__)
    parser.add_argument("preset", nargs="?", default="minimal-add10", help="preset name or YAML path")
    parser.add_argument("overrides", nargs="*", help="section.key=value overrides")
    parser.add_argument("--output-dir", default=None, help="training output (default: a temporary folder)")
    parser.add_argument("--results", default=None, help="results JSON (default: bench/results/<preset>.json)")
    args = parser.parse_args(argv)

    recipe = load_recipe(args.preset, args.overrides)
    output_dir = args.output_dir or tempfile.mkdtemp(prefix=f"bench-{recipe.name}-")
    load_before = load_average()  # the machine may be shared: record how busy it was
    start = time.perf_counter()
    summary = train(recipe, output_dir=output_dir)
    wall = time.perf_counter() - start  # everything: model build, training, saving, held-out eval, verify

    verify, heldout = summary.get("verify", {}), summary.get("heldout", {})
    train_seconds = summary["train_seconds"]
    # A chain (stages) trains its earlier stages first, each into its own folder: their time counts too.
    placed = place_stages(list(recipe.stages), output_dir)[:-1] if len(recipe.stages) > 1 else []
    earlier = [read_summary(Path(stage.recipe.output_dir) / "final") or {} for stage in placed]
    stages = [{"stage": stage.label, **_stage_cost(record)} for stage, record in zip(placed, earlier)]
    # optim.screen_steps: the inits tried before the run (or its first stage) went on with one
    screen = summary.get("screen") or next((record["screen"] for record in earlier if record.get("screen")), None)
    screen_seconds = (summary.get("screen") or {}).get("screen_seconds", 0.0)
    earlier_seconds = sum(stage["train_seconds"] + stage["screen_seconds"] for stage in stages)
    result = {
        "preset": args.preset,
        "name": recipe.name,
        "overrides": args.overrides,
        "wall_seconds": round(wall, 2),
        "train_seconds": round(train_seconds, 2) if train_seconds else None,
        "screen": screen,
        # What the run cost from scratch: the screened inits' training and the chosen one's rest, and
        # every earlier stage of a chain.
        "total_train_seconds": round(train_seconds + screen_seconds + earlier_seconds, 2) if train_seconds else None,
        **({"earlier_stages": stages} if stages else {}),
        "steps": summary["steps"],
        # optim.stop_exact / keep_best: where training stopped early and which scored weights it kept.
        **({"held_out_best": summary["held_out_best"]} if "held_out_best" in summary else {}),
        **({"held_out_lr_drop": summary["held_out_lr_drop"]} if "held_out_lr_drop" in summary else {}),
        "steps_per_second": round(summary["steps"] / train_seconds, 2) if train_seconds else None,
        "batch_size": recipe.optim.batch_size,
        "learning_rate": recipe.optim.learning_rate,
        "verify_accuracy": verify.get("accuracy"),
        "verify_correct": verify.get("correct"),
        "verify_total": verify.get("total"),
        "verify_edge_cases_correct": verify.get("edge_cases_correct"),
        "unique_params": summary["unique_params"],
        "heldout_exact_match": heldout.get("exact_match"),
        "heldout_n": heldout.get("n"),
        "train_loss": summary.get("train_loss"),
        "output": summary["output"],
    }
    path = Path(args.results) if args.results else RESULTS / f"{Path(args.preset).stem}.json"
    what = "training a preset from scratch: wall time, speed, verify and held-out accuracy"
    result = write_results(path, result, what=what, load_before=load_before)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
