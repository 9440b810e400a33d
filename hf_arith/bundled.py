"""Checkpoints that ship inside the package (small safetensors folders)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from .records import chain_items, read_summary

BUNDLED_DIR = Path(__file__).parent / "bundled"


def bundled_models() -> list[str]:
    return sorted(p.name for p in BUNDLED_DIR.iterdir() if (p / "config.json").is_file()) if BUNDLED_DIR.is_dir() else []


def bundled_path(name: str) -> str:
    """Folder of a bundled checkpoint, loadable with `from_pretrained`."""
    path = BUNDLED_DIR / name
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"no bundled model named {name!r}; bundled models: {', '.join(bundled_models()) or 'none'}")
    return str(path)


# The catalogue: why each bundled model ships and the operand lengths it trained on (docs/results.md has each
# figure and its file), and one default per task. Where its answers were measured exact, and what it accepts at
# most, each config records (`measured_max_digits`, `max_operand_digits`).
CATALOGUE = {
    "minimal-add10": {"trained": "10 digits",
                      "use_for": "default for addition: 10-digit sums from 720 parameters, the CLI's default model"},
    "minimal-add10-split-wide-arc": {"trained": "10 digits",
                                     "use_for": "the 54-parameter exact adder that the 35-parameter one is "
                                                "narrowed from"},
    "minimal-add10-split-narrow": {"trained": "10 digits",
                                   "use_for": "the smallest exact adder: 35 parameters, first on AdderBoard's "
                                              "trained table"},
    "abacus-gpt2-add": {"trained": "1-10 digits",
                        "use_for": "the abacus addition trunk the 100-digit adders start from; warm-start your own"},
    "abacus-gpt2-add-window-10-k2": {"trained": "1-10 digits",
                                     "use_for": "adding numbers of up to 100 digits, two answer digits per "
                                                "forward pass"},
    "abacus-gpt2-add-periodic": {"trained": "1-10 digits",
                                 "use_for": "adding numbers of 1,000 digits: a periodic abacus table, so no table "
                                            "bounds the length"},
    "looped-add-window": {"trained": "1-10 digits",
                          "use_for": "the smallest 100-digit adder: 2 layers looped, half the abacus adders' "
                                     "parameters"},
    "abacus-gpt2-sub": {"trained": "1-20 digits",
                        "use_for": "default for subtraction, negative results included"},
    "abacus-gpt2-sub-periodic": {"trained": "1-10 digits",
                                 "use_for": "subtracting numbers of 100 digits and more, negative results included "
                                            "(a periodic abacus table)"},
    "abacus-gpt2-mul-10": {"trained": "1-10 digits",
                           "use_for": "default for multiplication: products of up to 10 x 10 digits, writing its "
                                      "shifted sums"},
    "abacus-gpt2-mul-5-to-10": {"trained": "1-5 digits",
                                "use_for": "multiplication past its training lengths: 10 x 10-digit products "
                                           "(95.6 %, marked unsure) after training on at most 5 digits; "
                                           "abacus-gpt2-mul-10 is the exact one"},
    "abacus-gpt2-mul": {"trained": "1-5 digits",
                        "use_for": "multiplication of up to 5 digits writing whole running sums, the written form "
                                   "that shifted sums are measured against"},
    "abacus-gpt2-sort-10": {"trained": "2-10 numbers of 1-10 digits",
                            "use_for": "sorting lists of 6-10 numbers or numbers of 7-10 digits, nine relabelled "
                                       "views of each voting (lists of ten long numbers of one length: about half "
                                       "right, marked unsure)"},
    "abacus-gpt2-sort": {"trained": "2-5 numbers of 1-6 digits",
                         "use_for": "default for sorting: exact on lists of 2-5 numbers of 1-6 digits"},
}
DEFAULT_MODELS = {"add": "minimal-add10", "sub": "abacus-gpt2-sub", "mul": "abacus-gpt2-mul-10", "sort": "abacus-gpt2-sort"}


def catalogue_entry(name: str) -> dict:
    """A bundled model's catalogue line (trained, use_for); '-' for a model it does not list."""
    return CATALOGUE.get(name, {"trained": "-", "use_for": "-"})


def bundled_reach(name: str) -> dict | None:
    """What a bundled model's records say it holds: its task and base, the longest operands it was trained on
    or measured exact on (config.measured_max_digits), whichever is longer, and the list sizes its recipes
    drew (what a list task was trained on; other tasks ignore them); None where its records do not say."""
    reach = _folder_reach(BUNDLED_DIR / name)
    return dict(reach) if reach else None


@functools.lru_cache(maxsize=64)  # read once per process: the CLI asks per problem beyond a model's range
def _folder_reach(folder: Path) -> dict | None:
    summary = read_summary(folder) or {}
    fmt = (summary.get("recipe") or {}).get("format") or {}
    trained = summary.get("train_digits")
    if "task" not in fmt or not trained:
        return None
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    tokenizer = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    return {"task": fmt["task"], "base": fmt.get("base", 10),
            "digits": max(trained[1], config.get("measured_max_digits") or 0), "items": chain_items(summary),
            # What it accepts at most (its hard limits): beyond its reach it still answers, flagged, up to these.
            "max_digits": config.get("max_operand_digits") or 0,
            "max_items": tokenizer.get("number_format", {}).get("max_items") or 0}


def bundled_model_for(task: str, base: int, digits: int, items: int | None = None, exclude: str = "") -> str | None:
    """The bundled model (other than `exclude`) whose range (`bundled_reach`) holds a problem of `task` in
    `base` whose longest operand has `digits` digits and, for a list task, `items` items: the task's default
    where it holds it, else the one reaching least far (the closest fit); None where no bundled model does."""
    fits = []
    for name in bundled_models():
        reach = bundled_reach(name) if name != exclude else None
        if reach is None or (reach["task"], reach["base"]) != (task, base) or digits > reach["digits"]:
            continue
        if items is not None and (reach["items"] is None or not reach["items"][0] <= items <= reach["items"][1]):
            continue
        fits.append((name != DEFAULT_MODELS.get(task), reach["digits"], name))
    return min(fits)[2] if fits else None


def nearest_bundled_model(task: str, base: int, digits: int, items: int | None = None) -> str | None:
    """For a problem no bundled model holds (`bundled_model_for` is None): the bundled model of its task and
    base that accepts it (its hard limits) and whose reach it passes by the fewest digits and items, where it
    is answered with a note that it lies beyond that reach; where none accepts it, the one accepting most,
    whose refusal then names the largest limits there are. None where no bundled model does the task."""
    candidates = []
    for name in bundled_models():
        reach = bundled_reach(name)
        if reach is None or (reach["task"], reach["base"]) != (task, base):
            continue
        over_items = 0 if items is None or reach["items"] is None else max(items - reach["items"][1], 0)
        accepts = digits <= reach["max_digits"] and (items is None or items <= reach["max_items"])
        candidates.append((not accepts, max(digits - reach["digits"], 0) + over_items,
                           -reach["max_digits"] - reach["max_items"], name != DEFAULT_MODELS.get(task), name))
    if not candidates:
        return None
    best = min(candidates)
    if best[0]:  # none accepts it: rank by the limits alone, so the refusal names the largest
        best = min(candidates, key=lambda c: (c[2], c[3], c[4]))
    return best[4]
