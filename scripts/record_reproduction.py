"""Record a staged model trained from scratch by one command: each stage's training seconds, their
sum, and the held-out report of the final model, as bench/results/NAME-training.json.

    python scripts/record_reproduction.py RUN_FOLDER NAME PRESET HELDOUT_JSON [COMMAND]

RUN_FOLDER is the last stage's output folder (its final/training_summary.json lists the earlier
stages); HELDOUT_JSON is an `hf-arith eval --json` report of RUN_FOLDER/final. COMMAND, when the last stage was
not trained by `hf-arith train PRESET --threads 2`, is the command that trained it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hf_arith.publishing.model_card import training_device

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"


def main(argv: list[str]) -> None:
    if len(argv) not in (4, 5):
        raise SystemExit(__doc__)
    run, name, preset, heldout = argv[:4]
    command = argv[4] if len(argv) == 5 else None
    final = json.loads(Path(run, "final", "training_summary.json").read_text())
    stages = [*final["earlier_stages"], {k: final.get(k) for k in ("name", "steps", "train_seconds", "machine", "mined")}]
    # A stage with hard-example mining (data.mine_problems) first answers its pool's candidates: that time counts too.
    mining = [((s.get("mined") or {}).get("seconds") or 0.0) for s in stages]
    devices = [training_device(s.get("machine")) or "a machine not recorded" for s in stages]
    rows = [{"stage": i + 1, "steps": s["steps"], "train_seconds": round(s["train_seconds"], 1),
             **({"mining_seconds": round(m, 1)} if m else {}), "device": d,
             "load_average_1m_after": (s.get("machine") or {}).get("load_average_1m")}
            for i, (s, m, d) in enumerate(zip(stages, mining, devices))]
    # Seconds on a GPU and on the CPU are no one figure: a chain that used both gets a total per device.
    by_device: dict[str, float] = {}
    for s, m, d in zip(stages, mining, devices):
        by_device[d] = by_device.get(d, 0.0) + s["train_seconds"] + m
    total = sum(by_device.values())
    record = {
        "what": (f"{name} trained from scratch with one command, on a CPU where nothing else trained (two torch "
                 "threads) unless a stage's device names a GPU: the training seconds of each stage (the Trainer's "
                 "train_runtime, without the held-out scoring after each stage, plus the mining of a stage with "
                 "data.mine_problems), their sum (one per device when the stages ran on more than one), and the "
                 "held-out exact match of the final model. Light editing and a few short test runs may have shared "
                 "the CPU (the load average after each stage is recorded), so a sum is an upper bound on the idle time"),
        "command": f"hf-arith train {preset} --threads 2  (run in an empty folder, so that every stage trains)",
        **({"last_stage_command": command} if command else {}),
        "machine": final["machine"],
        "stages": rows,
        **({"total_train_seconds": round(total, 1), "total_train_minutes": round(total / 60, 1)} if len(by_device) == 1
           else {"train_minutes_by_device": {d: round(t / 60, 1) for d, t in by_device.items()}}),
        "heldout": json.loads(Path(heldout).read_text()),
        "final_summary": {k: final.get(k) for k in ("name", "steps", "train_seconds", "train_loss", "unique_params",
                                                    "machine", "train_digits")},
    }
    out = RESULTS / f"{name}-training.json"
    out.write_text(json.dumps(record, indent=2) + "\n")
    minutes = record.get("total_train_minutes", record.get("train_minutes_by_device"))
    print(f"wrote {out}: {minutes} minutes over {len(rows)} stages")


if __name__ == "__main__":
    main(sys.argv[1:])
