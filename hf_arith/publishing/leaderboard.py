"""Where a minimal-family adder would stand on AdderBoard's trained table, and what each trick saves.

`TRAINED_TABLE` is a snapshot of the "Trained Weights" table of github.com/anadim/AdderBoard
(README at commit of 2026-03-04): (parameters, accuracy on the protocol) per entry. AdderBoard
ranks qualifying entries (>= 99 % on its protocol) by unique parameter count.

`parameter_savings` counts, for each trick a config uses, how many unique parameters it saves: the
model is built once more with that one trick undone and the counts compared, so the figures are
the models' own counts (AdderBoard's rule: tied tensors once, fixed tables not at all).
"""

from __future__ import annotations

import torch

from .adderboard import PASS_ACCURACY

TRAINED_TABLE_DATE = "2026-03-04"
TRAINED_TABLE_SOURCE = f"the README of github.com/anadim/AdderBoard, {TRAINED_TABLE_DATE}"
TRAINED_TABLE = (  # (unique parameters, protocol accuracy), in the table's order
    (62, 1.0), (67, 1.0), (83, 1.0), (86, 1.0), (89, 1.0), (95, 0.9903), (101, 1.0), (122, 0.9995),
    (234, 0.9991), (262, 0.9995), (275, 0.9998), (305, 0.9998), (311, 0.99999), (456, 1.0), (491, 0.9997),
    (512, 0.99988), (777, 0.9969), (1644, 0.9904), (6080, 1.0),
)

# (what the trick is, the config values that undo it). Each is undone alone.
TRICKS = (
    ("every token on one circular arc (digits and delimiters, which continue it or sit at digit 0: 3 parameters)",
     {"digit_embedding": "learned", "special_embedding": "learned"}),
    ("circular-arc digit embedding (3 parameters for the 10 digits)", {"digit_embedding": "learned"}),
    ("tied output head (logits read the embedding table)", {"tie_word_embeddings": False}),
    ("tied K = V", {"tie_kv": False}),
    ("tied O = Q^T", {"tie_qo": False}),
    ("one norm for queries and keys", {"share_qk_norm": False}),
    ("shared block norms", {"norm_sharing": "none"}),
    ("low-rank projections", {"projection_rank": 0}),
    ("RoPE (fixed, uncounted) instead of learned positions", {"position_embedding": "learned"}),
    ("the head projection is also the FFN's down projection", {"tie_down_head": False}),
    ("tied K = Q, queries turned by one learned angle", {"tie_qk_rotation": False}),
    ("low-rank attention output", {"o_proj_rank": 0}),
    ("fixed (uncounted) instead of learned spiral positions", {"learn_spiral": True}),
    ("'=' at a fixed spiral point (or one learned coordinate) instead of a learned point",
     {"answer_start_position": "learned"}),
    ("head, attention output and FFN on some of the residual's dims", {"split_paths": "all"}),
    ("queries and keys read the spiral's circle alone", {"query_positions": "spiral"}),
    ("norm weights on the paths' dims alone", {"norm_weights": "all"}),
    ("values are the token dims themselves", {"split_values": "head"}),
    ("the output reads two token values along one learned angle", {"o_proj_angle": False}),
)

# Options that only exist on top of another: undoing the other undoes them too.
DEPENDENTS = {
    "split_values": {"o_proj_angle": False},
    "o_proj_rank": {"o_proj_angle": False},
    "split_paths": {"norm_weights": "all"},
}


def trained_rank(params: int, accuracy: float) -> int | None:
    """The place an entry with this count and protocol accuracy would take on the trained table
    (1 = first); None when it does not qualify (below 99 %)."""
    if accuracy < PASS_ACCURACY:
        return None
    ahead = sum(1 for p, a in TRAINED_TABLE if p < params or (p == params and a >= accuracy))
    return ahead + 1


def _uses(config, undo: dict) -> bool:
    if "digit_embedding" in undo:  # the two arc tricks: every token on the arc, or the digits only
        every_token = "special_embedding" in undo
        return config.digit_embedding == "circular_arc" and (config.special_embedding != "learned") == every_token
    if "position_embedding" in undo:
        return config.position_embedding == "rope"
    if "learn_spiral" in undo:
        return config.position_embedding == "spiral" and not config.learn_spiral
    return any(getattr(config, key) != value for key, value in undo.items())


def parameter_savings(model) -> list[tuple[str, int]]:
    """(trick, unique parameters it saves) for each trick the minimal-family model uses."""
    from ..models import MinimalConfig
    from ..models.modeling_minimal import MinimalForCausalLM

    config = model.config
    base = config.to_dict()
    out = []
    for name, undo in TRICKS:
        if not _uses(config, undo):
            continue
        dependents = {k: v for key in undo for k, v in DEPENDENTS.get(key, {}).items()}
        variant = MinimalConfig(**{**base, **dependents, **undo})
        with torch.device("meta"):  # counted, never run: no weights allocated
            other = MinimalForCausalLM(variant)
        saving = other.num_parameters() - model.num_parameters()
        if saving:
            out.append((name, saving))
    return out


def leaderboard_entry(model, tokenizer, report: dict | None = None) -> dict | None:
    """For a minimal-family 10-digit adder: its protocol result (seed 2025), the rank it would take on
    the trained table, and each trick's saving; None for any other model. `report`: the model's
    seed-2025 `verify_tiny_adder` result, when it was run already."""
    from ..evaluation.held_out import is_tiny_adder_format, verify_tiny_adder
    from .adderboard import MODEL_TYPE

    fmt = getattr(tokenizer, "arith_format", None)
    if model.config.model_type != MODEL_TYPE or fmt is None or not is_tiny_adder_format(fmt):
        return None
    if report is None or report.get("seed") != 2025:
        report = verify_tiny_adder(model, tokenizer)
    params = model.num_parameters()
    return {
        "params": params, "accuracy": report["accuracy"], "correct": report["correct"], "total": report["total"],
        "rank": trained_rank(params, report["accuracy"]), "entries": len(TRAINED_TABLE),
        "first": TRAINED_TABLE[0][0], "source": TRAINED_TABLE_SOURCE,
        "savings": [{"trick": t, "saving": s} for t, s in parameter_savings(model)],
    }


# The columns of the tables in AdderBoard's README ("Trained Weights (Learned from Data)").
README_COLUMNS = ("Rank", "Params", "Accuracy", "Author", "Built with", "Architecture", "Key Tricks", "Link")


def readme_accuracy(correct: int, total: int) -> str:
    """An accuracy as the board writes it ('100%', '99.97%'): never rounded up to 100 % unless all are right."""
    if correct == total:
        return "100%"
    text = f"{100 * correct / total:.3f}".rstrip("0").rstrip(".")
    return f"{text}%" if text != "100" else "99.999%"


def _cell(text) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def readme_row(entry: dict, metadata: dict, link: str, built_with: str = "") -> str:
    """The entry as one row of the trained table in AdderBoard's README (`README_COLUMNS`): `entry` from
    `leaderboard_entry` (the rank is the place on the snapshot `TRAINED_TABLE`, said so: a later table may
    hold smaller entries; '-' when it does not qualify), `metadata` the submission file's (author, architecture, tricks), `link` its markdown link."""
    rank = f"{entry['rank']} (on the {TRAINED_TABLE_DATE} snapshot)" if entry["rank"] else "- (below 99 %)"
    cells = [rank, f"{entry['params']:,}",
             readme_accuracy(entry["correct"], entry["total"]), metadata.get("author") or "unknown", built_with,
             metadata["architecture"], "; ".join(metadata.get("tricks") or []), link]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def readme_table(rows: list[str]) -> str:
    """The header of AdderBoard's table, then `rows`."""
    return "\n".join(["| " + " | ".join(README_COLUMNS) + " |", "|" + "|".join("---" for _ in README_COLUMNS) + "|",
                      *rows])


__all__ = ["README_COLUMNS", "TRAINED_TABLE", "TRAINED_TABLE_DATE", "TRAINED_TABLE_SOURCE", "leaderboard_entry", "parameter_savings",
           "readme_accuracy", "readme_row", "readme_table", "trained_rank"]
