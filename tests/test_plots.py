"""The pictures: each PNG exists, has its figure's size in pixels, is not blank, and shows the
numbers it was given (checked on hand-made inputs, not on a model)."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.image import imread
from matplotlib.patches import Rectangle

from hf_arith.evaluation.grid import grid_report
from hf_arith.evaluation.plots import (
    DPI,
    GRID_SIZE,
    LOOPS_SIZE,
    TRAJECTORY_SIZE,
    attention_figsize,
    plot_attention,
    plot_embedding_trajectories,
    plot_grid,
    plot_loops,
    save_figure,
)


def assert_png(path, size_inches) -> np.ndarray:
    """The PNG exists, is exactly size_inches * DPI pixels, and is not blank; returns its pixels."""
    assert path.is_file() and path.stat().st_size > 0
    pixels = imread(path)
    width, height = (round(x * DPI) for x in size_inches)
    assert pixels.shape[:2] == (height, width)
    rgb = pixels[..., :3].reshape(-1, 3)
    assert rgb.std() > 0.05, "the image is (almost) one flat colour"
    assert len(np.unique((rgb * 255).astype(np.uint8), axis=0)) > 20, "too few colours to hold a picture"
    return pixels


def hand_grid(train_range=(1, 2)) -> dict:
    """A 1-3 x 1-3 grid result from hand-made predictions, as length_grid would return it."""
    lengths, predictions, answers, perplexity = [], [], [], []
    for a in (1, 2, 3):
        for b in (1, 2, 3):
            for i in range(4):  # 4 problems per cell, (a + b + i) % 4 of them right... see below
                lengths.append((a, b))
                answers.append("1" * max(a, b))
                right = i < (a + b) % 4
                predictions.append(answers[-1] if right else None)
                perplexity.append(1.0 if right else float(a * b))
    report = grid_report(predictions, answers, lengths, perplexity, 1, 3, train_range)
    cells = report["cells"]
    return {"task": "add", "lengths": [1, 3], "samples_per_cell": 4, "train_range": list(train_range),
            "summary": report["summary"], "cells": list(cells.values()),
            "matrices": {f: [[cells[(a, b)][f] for b in (1, 2, 3)] for a in (1, 2, 3)]
                         for f in ("exact_match", "mean_perplexity", "per_digit_accuracy", "malformed")}}


def test_grid_picture_shows_the_hand_computed_cells(tmp_path):
    result = hand_grid()
    # By hand: cell (a, b) has (a + b) % 4 right answers out of 4; the wrong ones have perplexity a * b.
    expected = np.array([[((a + b) % 4) / 4 for b in (1, 2, 3)] for a in (1, 2, 3)])
    assert np.allclose(result["matrices"]["exact_match"], expected)
    expected_ppl = np.array([[(((a + b) % 4) + (4 - (a + b) % 4) * a * b) / 4 for b in (1, 2, 3)] for a in (1, 2, 3)])
    assert np.allclose(result["matrices"]["mean_perplexity"], expected_ppl)
    fig = plot_grid(result)
    accuracy_axes, perplexity_axes = [ax for ax in fig.axes if ax.images]  # not the colour bars
    for ticks in (accuracy_axes.get_xticklabels(), accuracy_axes.get_yticklabels()):
        assert [t.get_text() for t in ticks] == ["1", "2", "3"]  # operand lengths on both axes
    assert np.allclose(accuracy_axes.images[0].get_array(), expected)
    assert np.allclose(perplexity_axes.images[0].get_array(), expected_ppl)
    # The training range 1-2 is the square of cells (0, 0)-(1, 1): corners at -0.5 and 1.5.
    squares = [p for p in accuracy_axes.patches if isinstance(p, Rectangle)]
    assert len(squares) == 1
    assert squares[0].get_xy() == (-0.5, -0.5) and squares[0].get_width() == squares[0].get_height() == 2
    assert_png(save_figure(fig, tmp_path / "grid.png"), GRID_SIZE)


def test_grid_picture_without_training_range_has_no_outline():
    result = hand_grid()
    result["train_range"] = None
    assert not [p for p in plot_grid(result).axes[0].patches if isinstance(p, Rectangle)]


def test_loops_picture_plots_the_curve(tmp_path):
    curve = {"loops": [1, 2, 4, 8], "exact_match": [0.1, 0.5, 0.9, 0.95],
             "in_training_range": [0.2, 0.8, 1.0, 1.0], "beyond_training_range": [0.0, 0.2, 0.8, 0.9]}
    fig = plot_loops(curve)
    lines = fig.axes[0].get_lines()
    assert [list(line.get_ydata()) for line in lines] == [curve["exact_match"], curve["in_training_range"],
                                                          curve["beyond_training_range"]]
    assert all(list(line.get_xdata()) == curve["loops"] for line in lines)
    assert_png(save_figure(fig, tmp_path / "loops.png"), LOOPS_SIZE)


def test_attention_picture_has_one_panel_per_layer_and_head(tmp_path):
    tokens = list("12+34=64")
    rng = np.random.default_rng(0)
    maps = []
    for _ in range(2):  # 2 layers of 3 heads of causal, row-normalised weights
        w = np.tril(rng.random((3, 8, 8)))
        maps.append(w / w.sum(-1, keepdims=True))
    fig = plot_attention(tokens, maps)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 6
    assert np.allclose(panels[4].images[0].get_array(), maps[1][1])  # layer 2, head 2
    assert [t.get_text() for t in panels[0].get_xticklabels()] == tokens
    assert [t.get_text() for t in panels[0].get_yticklabels()] == tokens
    assert panels[4].get_title() == "layer 2, head 2"
    assert_png(save_figure(fig, tmp_path / "attention.png"), attention_figsize(2, 3, len(tokens)))
    named = plot_attention(tokens, maps, ["pass 1, layer 1", "pass 2, layer 1"])
    assert [ax for ax in named.axes if ax.images][3].get_title() == "pass 2, layer 1, head 1"


def test_embedding_picture(tmp_path):
    steps = [0, 10, 20]
    projection = [[[s * k / 10, k] for k in range(4)] for s in steps]
    record = {"steps": steps, "tokens": ["0", "1", "+", "="], "projection": projection,
              "explained_variance_ratio": [0.7, 0.2], "loss_steps": [5, 10, 15, 20], "losses": [2.0, 1.0, 0.5, 0.3]}
    fig = plot_embedding_trajectories(record)
    paths = fig.axes[0].get_lines()[::2]  # each token: its path, then its start dot
    assert np.allclose(paths[2].get_xydata(), np.asarray(projection)[:, 2])
    assert list(fig.axes[1].get_lines()[0].get_ydata()) == record["losses"]
    assert_png(save_figure(fig, tmp_path / "embeddings.png"), TRAJECTORY_SIZE)


def test_save_figure_into_a_missing_folder_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        save_figure(plot_loops({"loops": [1, 2], "exact_match": [0.5, 1.0]}), tmp_path / "no" / "such" / "x.png")


def test_the_sort_grids_cell_labels_do_not_overlap():
    """The bundled sorting model's grid (items x digits, perplexities up to a million): every cell's label
    stays clear of its neighbours' (measured as drawn), in both panels."""
    import json
    from pathlib import Path

    import hf_arith
    from hf_arith.evaluation.plots import compact_number, plot_grid

    grid = json.loads((Path(hf_arith.bundled_path("abacus-gpt2-sort")) / "length_grid.json").read_text())
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = plot_grid(grid)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    for ax in fig.axes[:2]:
        boxes = [t.get_window_extent(renderer) for t in ax.texts]
        assert len(boxes) == 7 * 10
        for i, a in enumerate(boxes):
            assert not any(a.overlaps(b) for b in boxes[i + 1:]), ax.get_title()
    assert [compact_number(v) for v in (1.0, 1.324, 92.51, 281.2, 4.37e5, 9.6e5, float("nan"))] == \
        ["1", "1.32", "92.5", "281", "4e5", "1e6", "-"]
