"""Early stopping and best-weights keeping on the held-out scores, as a Trainer callback.

Tiny adders can find the whole carry circuit and then lose it: one 54-parameter init scored 100 %
of its held-out problems at step 27,000 and 0.04 % at step 33,000, while the learning rate was
still high (docs/results.md). The callback reads the scores that the adaptive weight decay
callback (hf_arith.training.adaptive_decay) takes every `wd_eval_steps` steps; it scores nothing itself.

- `stop_exact` > 0: training stops, with a checkpoint, once held-out exact match reaches it.
- `keep_best`: the weights of the best score so far (exact match, then token accuracy) are kept; if
  the last score is below them when training ends, the model gets them back, so the final folder
  holds them. They travel in each checkpoint (`BEST_WEIGHTS`), so a resumed run keeps them too.

The held-out problems come from the test split, drawn apart from the problems the final report and
`hf-arith verify` score, so choosing weights on them does not score the model on its own choice.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import TrainerCallback

from ..records import write_json

BEST_WEIGHTS = "held_out_best.safetensors"
BEST_FILE = "held_out_best.json"


def score_key(score: dict) -> tuple[float, float]:
    return score["exact_match"], score["token_accuracy"]


class BestHeldoutCallback(TrainerCallback):
    """scores: the AdaptiveWeightDecayCallback whose `history` holds the held-out scores (it must come
    before this callback in the Trainer's list, so each score is there when this one reads it)."""

    def __init__(self, scores, stop_exact: float, keep_best: bool, resume_from: str | Path | None = None):
        self.scores, self.stop_exact, self.keep_best = scores, stop_exact, keep_best
        self.best: dict | None = None  # {"step", "exact_match", "token_accuracy"}
        self.weights: dict[str, torch.Tensor] | None = None
        self.stopped_at: int | None = None
        if resume_from is not None and (Path(resume_from) / BEST_FILE).is_file():
            self.best = json.loads((Path(resume_from) / BEST_FILE).read_text(encoding="utf-8"))["best"]
            if (Path(resume_from) / BEST_WEIGHTS).is_file():
                self.weights = load_file(str(Path(resume_from) / BEST_WEIGHTS))

    def on_step_end(self, args, state, control, model=None, **kwargs):
        history = self.scores.history
        if not history or history[-1]["step"] != state.global_step:
            return control
        latest = {k: history[-1][k] for k in ("step", "exact_match", "token_accuracy")}
        if self.keep_best and model is not None and (self.best is None or score_key(latest) > score_key(self.best)):
            self.best = latest
            self.weights = {k: v.detach().to("cpu", copy=True).contiguous() for k, v in model.state_dict().items()}
        if self.stop_exact and latest["exact_match"] >= self.stop_exact:
            self.stopped_at = state.global_step
            if state.is_world_process_zero:
                print(f"step {state.global_step}: held-out exact match {latest['exact_match']:.2%} reached "
                      f"optim.stop_exact ({self.stop_exact:.2%}): training stops", flush=True)
            control.should_training_stop = control.should_save = True
        return control

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            self.write(folder)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        history = self.scores.history
        if (self.keep_best and self.weights is not None and model is not None and history
                and score_key(history[-1]) < score_key(self.best)):
            model.load_state_dict({k: v.to(next(model.parameters()).device) for k, v in self.weights.items()})
            if state.is_world_process_zero:
                print(f"keep_best: the final weights are step {self.best['step']}'s (held-out exact match "
                      f"{self.best['exact_match']:.2%}; the last score, step {history[-1]['step']}: "
                      f"{history[-1]['exact_match']:.2%})", flush=True)
        if state.is_world_process_zero:
            self.write(Path(args.output_dir), weights=False)

    def record(self) -> dict:
        """What the training summary says: the best score and where training stopped early, if it did."""
        return {"best": self.best, "stopped_at_step": self.stopped_at, "stop_exact": self.stop_exact,
                "keep_best": self.keep_best}

    def write(self, folder: Path, weights: bool = True) -> None:
        write_json(folder / BEST_FILE, self.record(), indent=1)
        if weights and self.weights is not None:
            save_file(self.weights, str(folder / BEST_WEIGHTS))


__all__ = ["BEST_FILE", "BEST_WEIGHTS", "BestHeldoutCallback", "score_key"]
