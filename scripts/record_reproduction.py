"""Record a staged model trained from scratch by one command: each stage's training seconds, their
sum, and the held-out report of the final model, as bench/results/history/NAME-reproduction-2threads-training.json.

    python scripts/record_reproduction.py RUN_FOLDER NAME PRESET HELDOUT_JSON

RUN_FOLDER is the last stage's output folder (its final/training_summary.json lists the earlier
stages); HELDOUT_JSON is an `hf-arith eval --json` report of RUN_FOLDER/final.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HISTORY = Path(__file__).resolve().parents[1] / "bench" / "results" / "history"


def main(argv: list[str]) -> None:
    if len(argv) != 4:
        raise SystemExit(__doc__)
    run, name, preset, heldout = argv
    final = json.loads(Path(run, "final", "training_summary.json").read_text())
    stages = [*final["earlier_stages"], {k: final.get(k) for k in ("name", "steps", "train_seconds", "machine", "mined")}]
    # A stage with hard-example mining (data.mine_problems) first answers its pool's candidates: that time counts too.
    mining = [((s.get("mined") or {}).get("seconds") or 0.0) for s in stages]
    rows = [{"stage": i + 1, "steps": s["steps"], "train_seconds": round(s["train_seconds"], 1),
             **({"mining_seconds": round(m, 1)} if m else {}),
             "load_average_1m_after": (s.get("machine") or {}).get("load_average_1m")} for i, (s, m) in enumerate(zip(stages, mining))]
    total = sum(s["train_seconds"] for s in stages) + sum(mining)
    record = {
        "what": (f"{name} trained from scratch with one command on a CPU where nothing else trained (two torch "
                 "threads): the training seconds of each stage (the Trainer's train_runtime, without the held-out "
                 "scoring after each stage, plus the mining of a stage with data.mine_problems), their sum, and the held-out exact match of the final model. Light "
                 "editing and a few short test runs may have shared the CPU (the load average after each stage is "
                 "recorded), so the sum is an upper bound on the idle time"),
        "command": f"hf-arith train {preset} --threads 2  (run in an empty folder, so that every stage trains)",
        "machine": final["machine"],
        "stages": rows, "total_train_seconds": round(total, 1), "total_train_minutes": round(total / 60, 1),
        "heldout": json.loads(Path(heldout).read_text()),
        "final_summary": {k: final.get(k) for k in ("name", "steps", "train_seconds", "train_loss", "unique_params",
                                                    "machine", "train_digits")},
    }
    out = HISTORY / f"{name}-reproduction-2threads-training.json"
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {out}: {record['total_train_minutes']} minutes over {len(rows)} stages")


if __name__ == "__main__":
    main(sys.argv[1:])
