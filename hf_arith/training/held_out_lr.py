"""A learning rate capped once the model solves held-out problems, as a Trainer callback.

A tiny adder can find the carry circuit and lose it again within a few thousand steps while the
learning rate is high: a 54-parameter init scored 92.4 % of its held-out problems and, trained on
from those weights at the schedule's peak rate (0.02), 13.5 % three thousand steps later, but 99.4 %
and then 100 % at a tenth of it (docs/results.md). The callback reads the held-out scores that the
adaptive weight decay callback (hf_arith.training.adaptive_decay) takes; once exact match reaches
`drop_exact`, every later step runs at most at the peak learning rate times `factor` (the
schedule's rate where that is lower). A cap, not a share of the schedule: late in a cosine a tenth
of the schedule is too slow to finish the circuit.

The cap holds to the end of training, whatever the later scores: a low rate is what keeps a circuit
once found, and the best-weights keeping (hf_arith.training.best_held_out) covers a run that loses it anyway.
The step of the drop is read from the score record, so a resumed run goes on under the cap.
"""

from __future__ import annotations

from transformers import TrainerCallback


class HeldoutLearningRateDrop(TrainerCallback):
    """scores: the AdaptiveWeightDecayCallback whose `history` holds the held-out scores (it must come
    before this callback in the Trainer's list, so each score is there when this one reads it)."""

    def __init__(self, scores, drop_exact: float, factor: float):
        if not 0 < drop_exact <= 1 or not 0 < factor < 1:
            raise ValueError(f"a learning-rate drop needs 0 < drop_exact <= 1 and 0 < factor < 1; "
                             f"got drop_exact={drop_exact}, factor={factor}")
        self.scores, self.drop_exact, self.factor = scores, drop_exact, factor
        # The step of the first score at or above drop_exact; a resumed run's scores hold it already.
        self.dropped_at: int | None = next((s["step"] for s in scores.history if s["exact_match"] >= drop_exact), None)

    def apply(self, optimizer, lr_scheduler) -> None:
        # Set from the schedule's own values each step (its rate now and its peak), so nothing compounds.
        if self.dropped_at is None or optimizer is None or lr_scheduler is None:
            return
        for group, scheduled, peak in zip(optimizer.param_groups, lr_scheduler.get_last_lr(), lr_scheduler.base_lrs,
                                          strict=True):
            group["lr"] = min(scheduled, peak * self.factor)

    def on_train_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
        self.apply(optimizer, lr_scheduler)  # a resumed run past its drop

    def on_step_end(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
        history = self.scores.history
        if (self.dropped_at is None and history and history[-1]["step"] == state.global_step
                and history[-1]["exact_match"] >= self.drop_exact):
            self.dropped_at = state.global_step
            if state.is_world_process_zero:
                print(f"step {state.global_step}: held-out exact match {history[-1]['exact_match']:.2%} reached "
                      f"optim.lr_drop_exact ({self.drop_exact:.2%}): learning rate at most x{self.factor:g} the peak "
                      f"from here on",
                      flush=True)
        self.apply(optimizer, lr_scheduler)

    def record(self) -> dict:
        """What the training summary says: the threshold, the factor and the step of the drop, if any."""
        return {"drop_exact": self.drop_exact, "factor": self.factor, "dropped_at_step": self.dropped_at}


__all__ = ["HeldoutLearningRateDrop"]
