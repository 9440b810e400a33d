"""Trainer callbacks for looking inside a run: how the digit and operator embeddings move.

`EmbeddingTrajectoryCallback` records the input-embedding vector of every digit and operator
token every `every` steps, and the training loss whenever the Trainer logs it. At the end of
training it writes `embedding_trajectories.json` and `.png` (first two principal components of
all recorded vectors, one path per token, next to the loss curve) into the output folder:
digits that line up in order, or on a circle, are the model finding its number line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from transformers import TrainerCallback

from ..data.formatting import EOS_TOKEN, PAD_TOKEN
from ..evaluation.plots import plot_embedding_trajectories, save_figure
from ..records import write_json


def pca_2d(points: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """Project [n, d] points onto their first two principal components: ([n, 2], variance ratios)."""
    points = np.asarray(points, dtype=np.float64)
    centred = points - points.mean(axis=0, keepdims=True)
    _, singular, components = np.linalg.svd(centred, full_matrices=False)
    projection = centred @ components[:2].T
    if projection.shape[1] < 2:  # a one-dimensional embedding: the second component is zero
        projection = np.pad(projection, ((0, 0), (0, 2 - projection.shape[1])))
    variance = singular**2
    ratio = (variance / variance.sum()).tolist() if variance.sum() > 0 else [0.0] * len(variance)
    return projection, (ratio + [0.0, 0.0])[:2]


class EmbeddingTrajectoryCallback(TrainerCallback):
    """Record token embeddings during training and plot their trajectories beside the loss.

    tokenizer: the run's ArithTokenizer (its format names the digits and operators).
    every: record every this many optimizer steps (and at the start and end of training).
    output_dir: where the JSON and PNG go at the end of training (default: the Trainer's
    output_dir); with write=False nothing is written and `record()` holds everything.
    """

    NAME = "embedding_trajectories"

    def __init__(self, tokenizer, every: int = 50, output_dir: str | Path | None = None, write: bool = True):
        if every < 1:
            raise ValueError(f"every must be a positive number of steps, got {every}")
        vocab = tokenizer.arith_format.vocab()
        self.tokens = [t for t in vocab if t not in (PAD_TOKEN, EOS_TOKEN)]  # digits, operators, '='
        self.ids = [vocab.index(t) for t in self.tokens]
        self.every, self.output_dir, self.write = every, output_dir, write
        self.steps: list[int] = []
        self.vectors: list[np.ndarray] = []
        self.loss_steps: list[int] = []
        self.losses: list[float] = []

    @torch.no_grad()
    def snapshot(self, model, step: int) -> None:
        embeddings = model.get_input_embeddings()
        device = next(model.parameters()).device
        vectors = embeddings(torch.tensor(self.ids, device=device))
        self.steps.append(int(step))
        self.vectors.append(vectors.float().cpu().numpy())

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is not None:
            self.snapshot(model, state.global_step)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if model is not None and state.global_step % self.every == 0:
            self.snapshot(model, state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.loss_steps.append(int(state.global_step))
            self.losses.append(float(logs["loss"]))

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if model is not None and (not self.steps or self.steps[-1] != state.global_step):
            self.snapshot(model, state.global_step)
        if self.write and state.is_world_process_zero and self.steps:
            self.save(self.output_dir or args.output_dir)

    def record(self) -> dict:
        """Steps, tokens, raw vectors [steps, tokens, d], their PCA projection [steps, tokens, 2], loss."""
        if not self.vectors:
            raise ValueError("no embeddings recorded yet")
        stacked = np.stack(self.vectors)  # [steps, tokens, d]
        projection, ratio = pca_2d(stacked.reshape(-1, stacked.shape[-1]))
        return {"steps": self.steps, "tokens": self.tokens, "vectors": stacked.tolist(),
                "projection": projection.reshape(len(self.steps), len(self.tokens), 2).tolist(),
                "explained_variance_ratio": ratio, "loss_steps": self.loss_steps, "losses": self.losses}

    def save(self, folder: str | Path) -> tuple[Path, Path]:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        record = self.record()
        data = folder / f"{self.NAME}.json"
        write_json(data, record, indent=None)
        return data, save_figure(plot_embedding_trajectories(record), folder / f"{self.NAME}.png")


__all__ = ["EmbeddingTrajectoryCallback", "pca_2d"]
