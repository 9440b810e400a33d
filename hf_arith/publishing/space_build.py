"""`hf-arith space build DIR --model ORG/NAME ...`: a Hugging Face Space folder that deploys as is.

The folder holds:

- `app.py`: the playground (`spaces/arith-playground/app.py`, shipped in the package as
  `hf_arith/publishing/space_app/app.py`). Without hf_arith it loads each listed model by repo id with
  transformers, through the repo's remote code and its `arithmetic` pipeline.
- `hf_arith_plots.py`: `hf_arith/evaluation/plots.py` as is (it imports only numpy and matplotlib), which
  draws the attention maps.
- `requirements.txt`: the packages the app imports, pinned to the versions installed here, the
  ones the tests ran with; torch from the CPU wheel index.
- `README.md`: the Space card (`huggingface_hub.SpaceCard`): `sdk: gradio`, `sdk_version` (the
  gradio installed here), `python_version`, `app_file: app.py`, `title`, `license` and `models:`
  (the repo ids), which is also where the app reads its model list.

Nothing is downloaded or uploaded: upload the folder with `hf upload ORG/SPACE DIR . --repo-type space`.
"""

from __future__ import annotations

import shutil
import sys
from importlib import metadata
from pathlib import Path

from .. import __version__
from ..bundled import bundled_models
from ..data.errors import HfArithError, one_line
from ..evaluation import plots
from ..runtime.loading import CheckpointError, check_repo_id

APP_TEMPLATE = Path(__file__).resolve().parent / "space_app" / "app.py"  # a link to spaces/arith-playground/
PLOTS_MODULE = Path(plots.__file__)
PLOTS_NAME = "hf_arith_plots.py"  # the name app.py imports it by when hf_arith is not installed
# What the built app imports, directly or through the models' remote code (pinned in this order).
REQUIREMENTS = ("gradio", "transformers", "torch", "huggingface_hub", "tokenizers", "numpy", "matplotlib")
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"  # the CPU wheels: a CPU Space needs no CUDA packages
DEFAULT_TITLE = "hf_arith playground"


class SpaceError(HfArithError):
    """A Space folder that cannot be built, with a one-line reason."""


def installed_version(package: str) -> str:
    """The installed version of `package`, without a local label (torch's '+cpu')."""
    try:
        return metadata.version(package).split("+", 1)[0]
    except metadata.PackageNotFoundError:
        raise SpaceError(f"{package} is not installed, so the Space cannot be pinned to a tested version of it") from None


def requirements_text() -> str:
    """requirements.txt: every package the app needs, pinned to the version installed here."""
    lines = ["# Pinned to the versions installed where `hf-arith space build` wrote this folder.",
             f"--extra-index-url {TORCH_INDEX}"]
    lines += [f"{package}=={installed_version(package)}" for package in REQUIREMENTS]
    return "\n".join(lines) + "\n"


def check_models(models) -> list[str]:
    """The repo ids, each valid (ORG/NAME) and listed once; a bundled name or a path is refused."""
    if isinstance(models, str) or not models:
        raise SpaceError("name at least one model by its Hub repo id (--model ORG/NAME)")
    ids = []
    for model in models:
        text = str(model)
        if text in bundled_models() or "/" not in text:
            raise SpaceError(f"{text!r} is not a Hub repo id (ORG/NAME): a built Space loads its models from the Hub; "
                             f"publish a bundled model or a checkpoint first with `hf-arith push MODEL --repo-id ORG/NAME`")
        try:
            check_repo_id(text)
        except CheckpointError as err:
            raise SpaceError(one_line(err)) from None
        ids.append(text)
    return list(dict.fromkeys(ids))


def space_card(models: list[str], title: str = DEFAULT_TITLE, license: str = "apache-2.0"):
    """The Space's README.md (a huggingface_hub.SpaceCard)."""
    from huggingface_hub import SpaceCard, SpaceCardData

    data = SpaceCardData(title=title, sdk="gradio", sdk_version=installed_version("gradio"),
                         python_version=f"{sys.version_info.major}.{sys.version_info.minor}", app_file="app.py",
                         license=license, models=models, pinned=False,
                         short_description="Tiny transformers that do exact integer arithmetic")
    listed = "\n".join(f"- [{m}](https://huggingface.co/{m})" for m in models)
    command = "hf-arith space build DIR " + " ".join(f"--model {m}" for m in models)
    body = f"""
# {title}

Tiny transformers that do exact integer arithmetic: each digit of the answer is written by the
model itself, one token at a time. Type a problem or click an example; every digit of the final answer
is checked against the exact answer (green right, red wrong), with how sure the model was of it; written
working (the running sums of a multiplication, the radix passes of a sort) is shown as working.
Looped models get a recurrences slider, every model its attention maps and, in the Models tab, what
it is and how far beyond its training lengths it still answers right.

Models (the `models:` list above is what the app loads):

{listed}

Each loads by its repo id with `transformers` and `trust_remote_code=True`: the repo's own model
code, tokenizer and `arithmetic` pipeline (`pipeline("arithmetic", model=ID, trust_remote_code=True)`).
The app does not need the hf_arith package.

## Run it locally

```bash
pip install -r requirements.txt
python app.py        # http://127.0.0.1:7860
```

## How this folder was made

`{command}` (hf_arith {__version__}) wrote `app.py` (hf_arith's playground), `hf_arith_plots.py`
(hf_arith's plotting module, for the attention maps), `requirements.txt` (the versions hf_arith was
tested with) and this card.
"""
    return SpaceCard(f"---\n{data.to_yaml()}\n---\n{body}")


def build_space(out_dir: str | Path, models, *, title: str | None = None, license: str = "apache-2.0") -> Path:
    """Write the Space folder for `models` (Hub repo ids) into `out_dir` (new or empty); returns it."""
    models = check_models(models)
    title = " ".join(str(title or DEFAULT_TITLE).split())
    if not title:
        raise SpaceError("the title is empty")
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SpaceError(f"{out} is not an empty folder; give a new or empty one")
    if not APP_TEMPLATE.is_file():
        raise SpaceError(f"the playground app is missing from this installation ({APP_TEMPLATE})")
    requirements = requirements_text()  # checked before anything is written
    card = space_card(models, title=title, license=license)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(APP_TEMPLATE, out / "app.py")
    shutil.copyfile(PLOTS_MODULE, out / PLOTS_NAME)
    (out / "requirements.txt").write_text(requirements, encoding="utf-8")
    card.save(out / "README.md")
    return out


__all__ = ["REQUIREMENTS", "SpaceError", "build_space", "check_models", "requirements_text", "space_card"]
