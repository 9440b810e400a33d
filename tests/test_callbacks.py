"""EmbeddingTrajectoryCallback: PCA by hand, and a short real Trainer run that records the
embeddings at the right steps and writes the JSON and the PNG."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from test_plots import assert_png
from transformers import Trainer, TrainingArguments

from hf_arith.data.streaming import ProblemStream, stack_examples, worst_case_length
from hf_arith.evaluation.plots import TRAJECTORY_SIZE
from hf_arith.training.callbacks import EmbeddingTrajectoryCallback, pca_2d
from hf_arith.training.recipe import load_recipe
from hf_arith.training.run import build_model, build_tokenizer, check_recipe, recipe_spec


def test_pca_of_points_on_a_line():
    t = np.linspace(-2, 3, 6)
    points = np.stack([t, t, np.zeros_like(t)], axis=1) + np.array([5.0, -1.0, 2.0])
    projection, ratio = pca_2d(points)
    centred = t - t.mean()
    assert np.allclose(np.abs(projection[:, 0]), np.abs(centred) * np.sqrt(2))
    assert np.allclose(projection[:, 1], 0.0, atol=1e-9)
    assert ratio[0] == pytest.approx(1.0) and ratio[1] == pytest.approx(0.0, abs=1e-12)


def test_pca_of_one_dimensional_points():
    projection, ratio = pca_2d(np.array([[1.0], [2.0], [4.0]]))
    assert projection.shape == (3, 2) and np.allclose(projection[:, 1], 0.0)


def test_records_during_a_real_training_run(tmp_path):
    recipe = load_recipe("minimal-add10", ["optim.steps=6", "optim.batch_size=8", "optim.compile=false",
                                           "optim.logging_steps=2"])
    fmt = check_recipe(recipe)
    spec = recipe_spec(recipe, fmt)
    tok = build_tokenizer(fmt, worst_case_length(spec, fmt))
    model = build_model(recipe, tok, worst_case_length(spec, fmt))
    callback = EmbeddingTrajectoryCallback(tok, every=4)
    initial = model.get_input_embeddings()(torch.tensor(callback.ids)).detach().numpy()
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=6, per_device_train_batch_size=8, learning_rate=0.01,
                             logging_steps=2, save_strategy="no", report_to="none", use_cpu=True,
                             dataloader_num_workers=0, remove_unused_columns=False)
    Trainer(model=model, args=args, train_dataset=ProblemStream(spec, fmt, chunk_size=64),
            data_collator=stack_examples, callbacks=[callback]).train()
    assert callback.tokens == list("0123456789+=")
    assert callback.steps == [0, 4, 6]  # start, every 4 steps, end
    assert np.allclose(callback.vectors[0], initial)
    assert not np.allclose(callback.vectors[-1], initial)  # training moved them
    assert callback.loss_steps == [2, 4, 6] and all(x > 0 for x in callback.losses)
    record = json.loads((tmp_path / "embedding_trajectories.json").read_text())
    assert np.array(record["projection"]).shape == (3, 12, 2)
    assert np.array(record["vectors"]).shape == (3, 12, model.config.hidden_size)
    assert_png(tmp_path / "embedding_trajectories.png", TRAJECTORY_SIZE)


def test_every_must_be_positive():
    from hf_arith.data.formatting import NumberFormat
    from hf_arith.data.tokenization_arith import ArithTokenizer

    with pytest.raises(ValueError, match="every"):
        EmbeddingTrajectoryCallback(ArithTokenizer(number_format=NumberFormat()), every=0)
