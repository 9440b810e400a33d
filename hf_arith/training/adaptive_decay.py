"""Weight decay that steps down once the model starts to solve held-out problems, as a Trainer callback.

Tiny adders find the carry circuit late and suddenly. Weight decay helps them get there (it pulls
apart the basins of memorised patterns) but then drags on the weights of the circuit found. The
callback scores held-out problems every `every` steps, teacher-forced, and sets the decay of every
decayed parameter group from the latest score (MicroAdder's schedule, github evindor/MicroAdder):

- exact match >= `final_exact` and token accuracy >= `min_token_accuracy`: base * factor**2;
- exact match >= `drop_exact` and token accuracy >= `min_token_accuracy`: base * factor;
- otherwise: base.

The level follows the latest score both ways, so a run that loses its circuit gets the full decay
back. Each score is written to `adaptive_weight_decay.json` in the output folder and in each
checkpoint, which a resumed run reads back, so it goes on at the level it stopped at.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import TrainerCallback

from ..models.modeling_common import IGNORE_INDEX
from ..records import write_json

DECAY_FILE = "adaptive_weight_decay.json"


@torch.no_grad()
def teacher_forced_scores(model, input_ids, labels, attention_mask=None, batch_size: int = 1024) -> dict:
    """{"exact_match", "token_accuracy"} of the greedy next-token guesses on the labelled answer tokens."""
    was_training = model.training
    model.eval()
    exact = correct = total = 0
    device = next(model.parameters()).device
    for start in range(0, len(input_ids), batch_size):
        ids = input_ids[start:start + batch_size].to(device)
        mask = None if attention_mask is None else attention_mask[start:start + batch_size].to(device)
        logits = model(input_ids=ids, attention_mask=mask).logits
        guess, target = logits[:, :-1].argmax(-1), labels[start:start + batch_size, 1:].to(device)
        answer = target != IGNORE_INDEX
        right = (guess == target) & answer
        exact += int((right.sum(1) == answer.sum(1)).sum())
        correct, total = correct + int(right.sum()), total + int(answer.sum())
    model.train(was_training)
    return {"exact_match": exact / max(len(input_ids), 1), "token_accuracy": correct / max(total, 1)}


def decay_scale(scores: dict | None, drop_exact: float, final_exact: float, min_token_accuracy: float,
                factor: float) -> float:
    """The multiple of the base weight decay that the latest held-out scores call for."""
    if not scores or scores["token_accuracy"] < min_token_accuracy:
        return 1.0
    if scores["exact_match"] >= final_exact:
        return factor * factor
    return factor if scores["exact_match"] >= drop_exact else 1.0


def read_history(folder: str | Path) -> list[dict] | None:
    """The held-out scores a run or checkpoint folder recorded (None: no readable record there)."""
    try:
        return json.loads((Path(folder) / DECAY_FILE).read_text(encoding="utf-8"))["history"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


class AdaptiveWeightDecayCallback(TrainerCallback):
    """examples: held-out (input_ids, labels, attention_mask or None) tensors, encoded as the training
    examples are; base: the recipe's weight decay (groups the Trainer does not decay stay at 0);
    resume_from: the checkpoint folder a resumed run starts from."""

    def __init__(self, examples: tuple, base: float, every: int, drop_exact: float, final_exact: float,
                 min_token_accuracy: float, factor: float, resume_from: str | Path | None = None):
        if base <= 0 or every < 1 or not 0 < factor < 1 or not 0 < drop_exact <= final_exact <= 1:
            raise ValueError(f"adaptive weight decay needs base > 0, every >= 1, 0 < factor < 1 and "
                             f"0 < drop_exact <= final_exact <= 1; got base={base}, every={every}, factor={factor}, "
                             f"drop_exact={drop_exact}, final_exact={final_exact}")
        self.examples, self.base, self.every, self.factor = examples, base, every, factor
        self.drop_exact, self.final_exact, self.min_token_accuracy = drop_exact, final_exact, min_token_accuracy
        # {"step", "exact_match", "token_accuracy", "weight_decay"} per score
        self.history: list[dict] = (read_history(resume_from) if resume_from is not None else None) or []

    @property
    def weight_decay(self) -> float:
        """The decay the latest score calls for (the base before the first one)."""
        return self.history[-1]["weight_decay"] if self.history else self.base

    def apply(self, optimizer) -> None:
        # The Trainer puts biases and norms in a group with decay 0; only the other groups follow the schedule.
        for group in getattr(optimizer, "param_groups", []):
            if group.get("weight_decay", 0) > 0:
                group["weight_decay"] = self.weight_decay

    def on_train_begin(self, args, state, control, optimizer=None, **kwargs):
        if optimizer is not None:  # a resumed run's optimizer state holds the decay it saved; set it anyway
            self.apply(optimizer)

    def on_step_end(self, args, state, control, model=None, optimizer=None, **kwargs):
        if model is None or state.global_step % self.every:
            return
        before = self.weight_decay
        scores = teacher_forced_scores(model, *self.examples[:2], attention_mask=self.examples[2])
        scale = decay_scale(scores, self.drop_exact, self.final_exact, self.min_token_accuracy, self.factor)
        self.history.append({"step": state.global_step, **scores, "weight_decay": self.base * scale})
        if optimizer is not None:
            self.apply(optimizer)
        if self.weight_decay != before and state.is_world_process_zero:
            print(f"step {state.global_step}: held-out exact match {scores['exact_match']:.2%}, token accuracy "
                  f"{scores['token_accuracy']:.3f}: weight decay {before:g} -> {self.weight_decay:g}", flush=True)

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            self.write(folder)

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.write(Path(args.output_dir))

    def write(self, folder: Path) -> None:
        record = {"base": self.base, "every": self.every, "drop_exact": self.drop_exact,
                  "final_exact": self.final_exact, "min_token_accuracy": self.min_token_accuracy,
                  "factor": self.factor, "history": self.history}
        write_json(folder / DECAY_FILE, record, indent=1)


__all__ = ["AdaptiveWeightDecayCallback", "DECAY_FILE", "decay_scale", "read_history", "teacher_forced_scores"]
