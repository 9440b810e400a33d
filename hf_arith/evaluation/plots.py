"""The pictures: length-grid heatmaps, the loops curve, attention maps and embedding trajectories.

Figures are built with `matplotlib.figure.Figure` and the Agg canvas, never pyplot: no global
state, no GUI backend, safe in a Trainer callback or a Gradio worker thread. Every figure has a
fixed size in inches at `DPI`, and `save_figure` writes exactly that many pixels (no tight
bounding box), so tests can check a PNG's size.

This module imports only numpy and matplotlib: `hf-arith space build` copies it next to a built
Space's app.py (as `hf_arith_plots.py`), which draws its attention maps with it without hf_arith.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FormatStrFormatter, LogFormatter

DPI = 100
GRID_SIZE = (12.0, 5.4)  # inches: accuracy and perplexity side by side
LOOPS_SIZE = (6.4, 4.4)
TRAJECTORY_SIZE = (12.0, 5.0)
ANNOTATE_UP_TO = 12  # write the numbers into heatmap cells for grids this small


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write `fig` as a PNG of exactly its size in pixels; the folder must exist."""
    path = Path(path)
    fig.savefig(path, dpi=DPI, format="png")
    return path


AXIS_LABELS = {"len_a": "digits of the first operand", "len_b": "digits of the second operand",
               "items": "numbers in the list", "digits": "digits of every number"}


def compact_number(value: float) -> str:
    """A cell's number in at most four characters, so neighbouring cells' labels never overlap: '1.32',
    '92.5', '281', then a power of ten for large values ('4e5' for 437,000); '-' for a cell not measured."""
    if not np.isfinite(value):
        return "-"
    if abs(value) < 100:
        return f"{value:.3g}"
    if abs(value) < 1000:
        return f"{value:.0f}"
    exponent = int(np.floor(np.log10(abs(value))))
    mantissa = round(value / 10**exponent)
    if abs(mantissa) == 10:
        mantissa, exponent = mantissa // 10, exponent + 1
    return f"{mantissa}e{exponent}"


def _floats(matrix) -> np.ndarray:
    """A grid matrix as floats, NaN for the cells not run (None in JSON)."""
    return np.array([[np.nan if v is None else v for v in row] for row in matrix], dtype=np.float64)


def _heatmap(fig, ax, matrix, rows: list[int], columns: list[int], title: str, norm=None, vmin=None, vmax=None,
             cmap="viridis", fmt="{:.2f}", axes=("len_a", "len_b")):
    """One matrix as a heatmap, its ticks labelled by the lengths (or list sizes) of its rows and columns;
    cells not run (None) stay blank."""
    data = _floats(matrix)
    image = ax.imshow(data, origin="lower", cmap=cmap, norm=norm, vmin=vmin, vmax=vmax, aspect="equal",
                      interpolation="nearest")
    for set_ticks, values in ((ax.set_yticks, rows), (ax.set_xticks, columns)):
        ticks = list(range(0, len(values), max(1, len(values) // 10)))
        set_ticks(ticks, [str(values[t]) for t in ticks])
    ax.set_xlabel(AXIS_LABELS[axes[1]])
    ax.set_ylabel(AXIS_LABELS[axes[0]])
    ax.set_title(title)
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    bar.ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))  # plain numbers on a log scale, not 6x10^0
    # Minor ticks are labelled only on short ranges (under half a decade), else they overlap.
    bar.ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.5)))
    if max(data.shape) <= ANNOTATE_UP_TO:
        for (i, j), value in np.ndenumerate(data):
            if np.isnan(value):
                continue
            r, g, b, _ = image.cmap(image.norm(value))
            ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"  # readable on its cell
            label = fmt(value) if callable(fmt) else fmt.format(value)
            ax.text(j, i, label, ha="center", va="center", fontsize=7, color=ink)
    return image


def _inside(values: list[int], bounds) -> list[int]:
    """The positions of the (ascending) values within bounds (low, high): consecutive ones."""
    return [i for i, v in enumerate(values) if bounds[0] <= v <= bounds[1]]


def _outline(ax, train_range, rows: list[int], columns: list[int], train_rows=None, square: bool = True) -> None:
    """A red box around the trained cells: both lengths in the training range, or for sorting (not
    `square`: rows are item counts) list sizes in `train_rows` and item lengths in `train_range`."""
    train_rows = train_range if square else train_rows
    if train_range is None or train_rows is None:
        return
    across, up = _inside(columns, train_range), _inside(rows, train_rows)
    if not across or not up:
        return
    ax.add_patch(Rectangle((across[0] - 0.5, up[0] - 0.5), len(across), len(up), fill=False,
                           edgecolor="red", linewidth=2.5, clip_on=False))
    trained, box = f"{train_range[0]}-{train_range[1]} digits", "red square"
    if not square:
        trained, box = f"lists of {train_rows[0]}-{train_rows[1]} numbers of {trained}", "red box"
    ax.set_title(f"{ax.get_title()}\n({box}: trained on {trained})", fontsize=10)


def grid_axis_values(result: dict) -> tuple[list[int], list[int]]:
    """A grid result's row and column lengths (or list sizes): as it lists them, else (results written
    before it did) the ranges of its `lengths` and `items`."""
    if result.get("columns"):
        return list(result["rows"]), list(result["columns"])
    lo, hi = result["lengths"]
    columns = list(range(lo, hi + 1))
    return (list(range(result["items"][0], result["items"][1] + 1)) if result.get("items") else columns), columns


def plot_grid(result: dict, title: str | None = None) -> Figure:
    """Exact match and mean answer perplexity per (len_a, len_b) cell of a `length_grid` result, or
    per (items, digits) cell of a sorting model's; a sparse grid's axes are labelled by its lengths."""
    rows, columns = grid_axis_values(result)
    axes = tuple(result.get("axes") or ("len_a", "len_b"))
    fig = Figure(figsize=GRID_SIZE, dpi=DPI, layout="constrained")
    left, right = fig.subplots(1, 2)
    _heatmap(fig, left, result["matrices"]["exact_match"], rows, columns, "exact match", vmin=0.0, vmax=1.0,
             axes=axes)
    perplexity = _floats(result["matrices"]["mean_perplexity"])
    # Perplexity runs from 1 (certain of the right answer) upwards; a floor of 2 for the top of
    # the scale keeps a model that is right everywhere from painting its rounding noise.
    top = max(float(np.nanmax(perplexity)), 2.0)
    _heatmap(fig, right, perplexity, rows, columns, "mean perplexity of the correct answer",
             norm=LogNorm(vmin=1.0, vmax=top), cmap="magma_r", fmt=compact_number, axes=axes)
    for ax in (left, right):
        _outline(ax, result.get("train_range"), rows, columns, result.get("train_items"), not result.get("items"))
    s = result["summary"]
    spacing = "; the axes list the lengths run, not to scale" if result.get("sparse") else ""
    if result.get("views", 1) > 1:
        spacing = f", each the vote of {result['views']} views{spacing}"
    fig.suptitle(title or f"{result['task']}: {s['exact_match']:.2%} exact match over {s['n']:,} problems "
                          f"({result['samples_per_cell']} per cell{spacing})")
    return fig


def plot_loops(curve: dict, title: str | None = None) -> Figure:
    """Exact match against the number of recurrences (log2 axis), overall and by training range."""
    fig = Figure(figsize=LOOPS_SIZE, dpi=DPI, layout="constrained")
    ax = fig.subplots()
    loops = curve["loops"]
    for key, label, style in (("exact_match", "all problems", "o-"),
                              ("in_training_range", "inside the training range", "s--"),
                              ("beyond_training_range", "beyond the training range", "^:")):
        values = curve.get(key)
        if values and any(v is not None for v in values):
            ax.plot(loops, [np.nan if v is None else v for v in values], style, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(loops, [str(n) for n in loops])
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("recurrences (num_recurrences)")
    ax.set_ylabel("exact match")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or "accuracy against recurrences")
    return fig


def attention_figsize(n_maps: int, n_heads: int, n_tokens: int) -> tuple[float, float]:
    """Inches for `n_maps` rows of `n_heads` panels (and the colour bar): panels grow with the
    tokens, within limits."""
    panel = float(np.clip(0.16 * n_tokens, 2.8, 7.0))
    return n_heads * panel + 1.0, n_maps * panel + 0.9


def attention_labels(n_maps: int, n_layers: int | None) -> list[str]:
    """Names of the maps of a model with `n_layers` layers: 'layer i', or 'pass p, layer i' when
    there are more maps than layers (a looped model returns its maps pass by pass)."""
    layers = n_layers or n_maps
    if n_maps > layers and n_maps % layers == 0:
        return [f"pass {i // layers + 1}, layer {i % layers + 1}" for i in range(n_maps)]
    return [f"layer {i + 1}" for i in range(n_maps)]


def plot_attention(tokens: list[str], maps: list[np.ndarray], labels: list[str] | None = None,
                   title: str | None = None) -> Figure:
    """One panel per layer (rows) and head (columns): queries down, keys across, model tokens on
    both axes, and one colour bar for the attention weight (0 to 1; each row sums to 1).

    `labels` name the rows (default 'layer 1', 'layer 2', ...; see `attention_labels`); `title`
    replaces the default title (the tokens)."""
    if not maps:
        raise ValueError("no attention maps to plot")
    labels = labels or attention_labels(len(maps), None)
    heads = max(m.shape[0] for m in maps)
    fig = Figure(figsize=attention_figsize(len(maps), heads, len(tokens)), dpi=DPI, layout="constrained")
    axes = np.atleast_2d(fig.subplots(len(maps), heads, squeeze=False))
    size = 7 if len(tokens) <= 40 else 5
    image = None
    for layer, weights in enumerate(maps):
        for head in range(heads):
            ax = axes[layer, head]
            if head >= weights.shape[0]:
                ax.axis("off")
                continue
            image = ax.imshow(weights[head], cmap="Blues", vmin=0.0, vmax=1.0, interpolation="nearest")
            ax.set_xticks(range(len(tokens)), tokens, fontsize=size, rotation=90)
            ax.set_yticks(range(len(tokens)), tokens, fontsize=size)
            ax.set_title(f"{labels[layer]}, head {head + 1}", fontsize=9)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=min(1.0, 0.9 / len(maps) + 0.3),
                 label="attention weight (each row sums to 1)")
    fig.supxlabel("key: the token attended to", fontsize=9)
    fig.supylabel("query: the token attending", fontsize=9)
    fig.suptitle(title or " ".join(tokens), fontsize=9)
    return fig


def plot_embedding_trajectories(record: dict) -> Figure:
    """Token embeddings over training in their first two principal components, beside the loss.

    `record` is what `EmbeddingTrajectoryCallback.record()` returns: steps, tokens, the PCA
    projection [steps, tokens, 2] and the loss curve.
    """
    fig = Figure(figsize=TRAJECTORY_SIZE, dpi=DPI, layout="constrained")
    left, right = fig.subplots(1, 2)
    points = np.asarray(record["projection"], dtype=np.float64)
    colors = [f"C{i % 10}" for i in range(points.shape[1])]
    for k, token in enumerate(record["tokens"]):
        path = points[:, k]
        left.plot(path[:, 0], path[:, 1], "-", color=colors[k], alpha=0.5, linewidth=1)
        left.plot(path[0, 0], path[0, 1], "o", color=colors[k], markersize=3, alpha=0.5)
        left.annotate(token, path[-1], fontsize=11, fontweight="bold", color=colors[k], ha="center", va="center")
    ratio = record.get("explained_variance_ratio") or [np.nan, np.nan]
    left.set_xlabel(f"PC 1 ({ratio[0]:.0%} of variance)")
    left.set_ylabel(f"PC 2 ({ratio[1]:.0%} of variance)")
    left.set_title(f"token embeddings, steps {record['steps'][0]}-{record['steps'][-1]} (dot = start)")
    left.grid(alpha=0.3)
    if record.get("loss_steps"):
        right.plot(record["loss_steps"], record["losses"], "-", color="C3")
        if min(record["losses"]) > 0:
            right.set_yscale("log")
    right.set_xlabel("step")
    right.set_ylabel("training loss")
    right.set_title("loss")
    right.grid(alpha=0.3)
    return fig


__all__ = [
    "DPI", "attention_figsize", "plot_attention", "plot_embedding_trajectories", "plot_grid", "plot_loops",
    "save_figure",
]
