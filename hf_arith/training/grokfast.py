"""Grokfast-EMA (Lee et al. 2024, arXiv 2405.20233) as a Trainer callback.

Before each optimizer step the gradient g gets `lamb` times an exponential moving average of the
past gradients added to it: ema <- alpha * ema + (1 - alpha) * g, then g <- g + lamb * ema. That
amplifies the slow-varying part of the gradient, which the paper finds speeds up the move from
memorising to the general algorithm (grokking).

It runs on the Trainer's `on_pre_optimizer_step`, after gradient clipping, so `lamb` scales the
clipped gradient. The averages are saved into each checkpoint (GROKFAST_FILE, safetensors) and read
back on --resume, so a resumed run filters exactly as an uninterrupted one.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import TrainerCallback

GROKFAST_FILE = "grokfast_ema.safetensors"


class GrokfastCallback(TrainerCallback):
    """alpha: the average's decay (0 <= alpha < 1); lamb: its weight (> 0); start_step: the first
    optimizer step it acts on (steps before it train plainly); resume_from: the checkpoint folder a
    resumed run starts from (its averages are loaded)."""

    def __init__(self, alpha: float, lamb: float, start_step: int = 0, resume_from: str | Path | None = None):
        if not 0 <= alpha < 1 or lamb <= 0 or start_step < 0:
            raise ValueError(f"Grokfast needs 0 <= alpha < 1, lamb > 0 and start_step >= 0; got alpha={alpha}, "
                             f"lamb={lamb}, start_step={start_step}")
        self.alpha, self.lamb, self.start_step = alpha, lamb, start_step
        self.ema: dict[str, torch.Tensor] = {}
        if resume_from is not None and (Path(resume_from) / GROKFAST_FILE).is_file():
            self.ema = load_file(str(Path(resume_from) / GROKFAST_FILE))

    @torch.no_grad()
    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if model is None or state.global_step < self.start_step:
            return
        for name, p in model.named_parameters():
            if p.grad is None:
                continue
            ema = self.ema.get(name)
            if ema is None:  # the first filtered step: the average starts at the gradient
                ema = self.ema[name] = p.grad.detach().clone()
            else:
                ema.mul_(self.alpha).add_(p.grad, alpha=1 - self.alpha)
            p.grad.add_(ema, alpha=self.lamb)

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if self.ema and state.is_world_process_zero and folder.is_dir():
            save_file({k: v.contiguous() for k, v in self.ema.items()}, str(folder / GROKFAST_FILE))


__all__ = ["GROKFAST_FILE", "GrokfastCallback"]
