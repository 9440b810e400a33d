"""Structured pruning of a split-residual adder: a wider checkpoint's weights mapped onto a narrower layout.

A minimal-family model with a split residual (`token_dims` > 0) can warm-start a model of the same
design whose layout options read fewer dimensions: narrower paths (`split_paths`), norm weights on the
paths alone (`norm_weights`), values read as tokens (`split_values`), fewer query dimensions
(`head_dim`, `query_positions`) or an '=' with fewer learned coordinates (`answer_start_position`).
Each tensor keeps the rows and columns the narrower layout still has. Where a parameter disappears
without losing expressiveness its value is folded into another one, so those steps give the same
logits: a norm weight of a dimension only queries read goes into the query projection, a rank-r
output reading values through the head takes the head's transpose into its first factor, a rank-1
first factor's length goes into the second, and a tied query head over the three spiral dims becomes
a head of dim 3 with the same scores (`fold_query_dims`). The other steps drop what they no longer
read (narrower paths, queries on the circle, the '=' point), and training goes on from there.

Used by warm starts (`init_from`) between stages of one recipe; not part of the models' remote code.
"""

from __future__ import annotations

import inspect

import torch

from .configuration_minimal import MinimalConfig

# Layout options a narrowing may change, each from a wider to a narrower value (or keep it).
_ORDER = {
    "split_paths": ("all", "tokens_and_slope", "tokens"),
    "norm_weights": ("all", "paths"),
    "split_values": ("head", "tokens"),
    "query_positions": ("spiral", "circle"),
    "answer_start_position": ("learned", "circle", "spiral"),
    "o_proj_angle": (False, True),
}
_FREE = ("head_dim",) + tuple(_ORDER)  # everything else must match


class NarrowingError(ValueError):
    """A checkpoint that cannot be narrowed onto this layout, with a one-line reason."""


def path_dims(config) -> list[int]:
    """The residual dimensions a split layout's head, output and FFN read and write (`split_paths`)."""
    t, d = config.token_dims, config.hidden_size
    return {"all": list(range(d)), "tokens": list(range(t)), "tokens_and_slope": [*range(t), d - 1]}[config.split_paths]


def norm_dims(config) -> list[int]:
    """The residual dimensions whose norm weight is learned."""
    return path_dims(config) if config.norm_weights == "paths" else list(range(config.hidden_size))


def _folds_queries(old: MinimalConfig, new: MinimalConfig) -> bool:
    """A tied-Q/K head (one turned plane per pair) shrinking to head dim 3 over the three spiral dims."""
    return (old.tie_qk_rotation and new.head_dim == 3 < old.head_dim and old.query_positions == "spiral"
            and new.query_positions == "spiral")


def is_narrowing(old: MinimalConfig, new: MinimalConfig) -> bool:
    """Whether `old` -> `new` is a split layout losing dimensions (not the same layout)."""
    return bool(old.token_dims and new.token_dims) and any(getattr(old, k) != getattr(new, k) for k in _FREE)


def check_narrowing(old: MinimalConfig, new: MinimalConfig) -> None:
    """Refuse, in one line, what is not a narrowing of the same design."""
    options = [k for k, p in inspect.signature(MinimalConfig.__init__).parameters.items()
               if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and k != "self"]
    differ = [k for k in options if k not in _FREE and getattr(old, k) != getattr(new, k)]
    if differ:
        raise NarrowingError(f"a narrower layout keeps everything but {', '.join(_FREE)}; these differ: "
                             f"{', '.join(differ)}")
    for key, order in _ORDER.items():
        if order.index(getattr(new, key)) < order.index(getattr(old, key)):
            raise NarrowingError(f"{key} can narrow ({' -> '.join(order)}), not widen: "
                                 f"{getattr(old, key)!r} -> {getattr(new, key)!r}")
    if new.head_dim > old.head_dim:
        raise NarrowingError(f"head_dim can shrink, not grow: {old.head_dim} -> {new.head_dim}")
    if not set(path_dims(new)) <= set(path_dims(old)):
        raise NarrowingError("the narrower paths must be a subset of the wider ones")


def _turn(weight: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """R W: the query projection's rows turned pair by pair by `angle` (as `rotate_pairs` turns queries)."""
    rows = weight.shape[0] - weight.shape[0] % 2
    pairs = weight[:rows].unflatten(0, (-1, 2))
    cos, sin = angle.cos(), angle.sin()
    turned = torch.stack([pairs[:, 0] * cos - pairs[:, 1] * sin, pairs[:, 0] * sin + pairs[:, 1] * cos], dim=1)
    return torch.cat([turned.flatten(0, 1), weight[rows:]])


def fold_query_dims(weight: torch.Tensor, angle: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Tied queries and keys (K = W p, Q = R(angle) W p) of any head dim over three position dims, as a head
    dim of 3 with the same scores: (W', angle') with (R' W')^T W' = scale (R W)^T W, or None when the
    scores' symmetric part is not positive definite (then no head dim of 3 gives them).

    The scores are p^T B p' with B = (R W)^T W, a 3 x 3 matrix: its symmetric part is cos(angle) W^T W
    and its antisymmetric part a turn about one axis. A head dim of 3 turns one plane: with S = L^T L
    and W' = diag(c, c, 1)^(-1/2) Q L, the symmetric part is S for any rotation Q, and the rotation
    that takes the antisymmetric part's axis to the turned plane's normal, with tan(angle') its
    length, gives the antisymmetric part."""
    w = weight.double()
    b = scale * _turn(w, angle.double()).T @ w
    sym, anti = (b + b.T) / 2, (b - b.T) / 2
    if weight.shape[1] != 3 or torch.linalg.eigvalsh(sym).min() <= 1e-9:
        return None
    lower = torch.linalg.cholesky(sym)  # sym = lower @ lower.T, so L = lower.T
    inv = torch.linalg.inv(lower.T)
    m = inv.T @ anti @ inv  # antisymmetric: [k0]x
    k0 = torch.stack([m[2, 1], m[0, 2], m[1, 0]])
    length = k0.norm()
    new_angle = torch.atan(length)
    c = new_angle.cos()
    if length < 1e-12:
        q = torch.eye(3, dtype=w.dtype)
    else:  # a rotation whose third row is u = -k0 / |k0|
        u = -k0 / length
        helper = torch.eye(3, dtype=w.dtype)[int(torch.argmin(u.abs()))]
        a = torch.linalg.cross(helper, u)
        a = a / a.norm()
        q = torch.stack([a, torch.linalg.cross(u, a), u])
    scale_rows = torch.stack([c, c, torch.ones((), dtype=w.dtype)]).rsqrt()
    new_weight = scale_rows[:, None] * (q @ lower.T)
    return new_weight.to(weight.dtype), new_angle.to(angle.dtype)


def narrow_state(saved: dict[str, torch.Tensor], old: MinimalConfig, new: MinimalConfig) -> dict[str, torch.Tensor]:
    """`saved` (a state dict of layout `old`) mapped onto layout `new` (checked by `check_narrowing`)."""
    check_narrowing(old, new)
    t = old.token_dims
    old_paths, new_paths = path_dims(old), path_dims(new)
    keep = [old_paths.index(d) for d in new_paths]  # the new path dims, as columns of the old path maps
    norm_full = {}  # each residual dim's old norm weight (1 where it learned none)
    out = {}
    for name, tensor in saved.items():
        if name.endswith(("layernorm.weight", "model.norm.weight")):
            full = torch.ones(old.hidden_size, dtype=tensor.dtype)
            full[norm_dims(old)] = tensor
            norm_full[name] = full
            out[name] = full[norm_dims(new)]
        else:
            out[name] = tensor
    head = saved["model.head_proj.weight"]
    out["model.head_proj.weight"] = head[:, keep]
    query_cols = 2 if new.query_positions == "circle" else 3
    for name, tensor in saved.items():
        if name.endswith("mlp.up_proj.weight"):
            out[name] = tensor[:, keep]
        elif name.endswith(("q_proj.weight", "k_proj.weight")):
            layer_norm = norm_full.get(name.split("self_attn")[0] + "input_layernorm.weight")
            weight = tensor[:, :query_cols].clone()
            if layer_norm is not None:  # a position dim that loses its norm weight: the scale moves here
                for col in range(query_cols):
                    if t + col not in norm_dims(new):
                        weight[:, col] *= layer_norm[t + col]
            rotation = name.replace("q_proj.weight", "q_rotation")
            folded = None
            if name.endswith("q_proj.weight") and _folds_queries(old, new):
                folded = fold_query_dims(weight, saved[rotation], (new.head_dim / old.head_dim) ** 0.5)
            if folded is None:  # no exact fold (or none needed): keep the first rows
                out[name] = weight[: new.head_dim]
            else:
                out[name], out[rotation] = folded
        elif name.endswith("o_proj.up") and not (new.o_proj_angle and not old.o_proj_angle):
            out[name] = tensor[keep, :]  # (a first factor turned into an angle rescales it below)
        elif name.endswith("o_proj.down"):
            if old.split_values == "tokens":
                down = tensor
            elif new.split_values == "tokens":  # values were head^T tokens: fold head^T into the first factor
                down = tensor[:, keep] @ head[:, keep].t()
            else:
                down = tensor[:, keep]
            if new.o_proj_angle:  # the first factor's direction as an angle, its length into the second
                del out[name]
                out[name.replace(".down", ".angle")] = torch.atan2(down[0, 1], down[0, 0])
                up = name.replace(".down", ".up")
                out[up] = saved[up][keep, :] * down.norm()
            else:
                out[name] = down
        elif name.endswith("o_proj.weight"):
            rows = tensor[keep, :]
            if old.split_values == "tokens":
                out[name] = rows
            elif new.split_values == "tokens":
                out[name] = rows[:, keep] @ head[:, keep].t()
            else:
                out[name] = rows[:, keep]
        elif name.endswith("spiral.answer_start"):
            if new.answer_start_position == "spiral":
                del out[name]
            elif new.answer_start_position == "circle":
                out[name] = tensor[-1:]  # the slope coordinate
    return out


__all__ = ["NarrowingError", "check_narrowing", "fold_query_dims", "is_narrowing", "narrow_state", "norm_dims",
           "path_dims"]
