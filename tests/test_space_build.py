"""`hf-arith space build`: a Space folder that deploys as is, and its app running without hf_arith.

The models are `hf-arith push`'s exact Hub folders of two bundled models, put into an offline
Hugging Face cache under repo ids; the built app.py runs in a process where `import hf_arith` fails,
with HF_HUB_OFFLINE=1, and is queried through gradio_client.
"""

from __future__ import annotations

import ast
import json
import re
from importlib import metadata
from pathlib import Path

import pytest
from cli_contract import fails
from space_helpers import SPACE, BuiltSpace, published_cache

import hf_arith
from hf_arith.cli import main
from hf_arith.publishing.space_build import PLOTS_NAME, REQUIREMENTS, TORCH_INDEX, SpaceError, build_space

ROOT = Path(__file__).resolve().parent.parent
REPOS = {"org/looped-add-window": "looped-add-window", "org/minimal-add10": "minimal-add10"}
LONG_SUM = "3141592653589793238462643+2718281828459045235360287"


def verdict_kind(verdict: str) -> str:
    match = re.search(r'data-verdict="([a-z]+)"', verdict)
    assert match, verdict
    return match.group(1)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_space(tmp_path_factory.mktemp("space") / "my-space", list(REPOS))


# -- the folder ---------------------------------------------------------------------------------------------
def test_the_folder_holds_the_app_its_plots_requirements_and_card(built):
    assert sorted(p.name for p in built.iterdir()) == ["README.md", "app.py", PLOTS_NAME, "requirements.txt"]
    assert (built / "app.py").read_bytes() == (SPACE / "app.py").read_bytes()  # the one app, as is
    assert (built / PLOTS_NAME).read_bytes() == (ROOT / "hf_arith" / "evaluation" / "plots.py").read_bytes()


def test_the_copied_plots_module_needs_only_numpy_and_matplotlib(built):
    tree = ast.parse((built / PLOTS_NAME).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= {"__future__", "pathlib", "numpy", "matplotlib"}, imported
    assert not any(isinstance(node, ast.ImportFrom) and node.level for node in ast.walk(tree))  # no relative imports


def test_requirements_pin_the_installed_versions(built):
    from packaging.requirements import Requirement

    lines = [line for line in (built / "requirements.txt").read_text().splitlines() if line and not line.startswith("#")]
    assert lines[0] == f"--extra-index-url {TORCH_INDEX}"
    pins = dict(line.split("==") for line in lines[1:])
    assert list(pins) == list(REQUIREMENTS)
    for package, version in pins.items():
        assert version == metadata.version(package).split("+")[0], package  # torch: '2.13.0', not '2.13.0+cpu'
    # The pins lie inside the package's own ranges: one transformers for pyproject and the Space.
    declared = {r.name: r for r in map(Requirement, metadata.requires("hf_arith")) if r.marker is None}
    for package, version in pins.items():
        if package in declared:
            assert declared[package].specifier.contains(version), (package, version, declared[package])
    assert {"transformers", "torch", "gradio", "tokenizers"} <= set(declared)


def test_the_space_card(built):
    import gradio
    from huggingface_hub import SpaceCard

    card = SpaceCard.load(built / "README.md")
    assert card.data.sdk == "gradio" and card.data.sdk_version == gradio.__version__
    assert card.data.app_file == "app.py" and (built / card.data.app_file).is_file()
    assert card.data.title == "hf_arith playground" and card.data.license == "apache-2.0"
    assert card.data.models == list(REPOS)
    assert "pip install -r requirements.txt" in card.text and "https://huggingface.co/org/looped-add-window" in card.text


@pytest.fixture
def cached(tmp_path, monkeypatch):
    """A Hugging Face cache that holds org/a and org/b (a ref and a snapshot each)."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    for name in ("a", "b"):
        (cache / f"models--org--{name}" / "refs").mkdir(parents=True)
        (cache / f"models--org--{name}" / "refs" / "main").write_text("0" * 40)
        (cache / f"models--org--{name}" / "snapshots" / ("0" * 40)).mkdir(parents=True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def test_cli_refuses_a_repo_id_that_is_not_in_the_cache(cached, tmp_path, capsys):
    message = fails(capsys, "space", "build", tmp_path / "space", "--model", "org/a", "--model", "org/missing")
    assert message.startswith("--model org/missing: not in the local Hugging Face cache")
    assert not (tmp_path / "space").exists()


def test_cli_builds_the_folder(cached, tmp_path, capsys):
    out = tmp_path / "space"
    assert main(["space", "build", str(out), "--model", "org/a", "--model", "org/b", "--model", "org/a",
                 "--title", "My  adders"]) == 0
    printed = capsys.readouterr().out
    assert f"Built the Space folder for org/a, org/b in {out}: 4 files" in printed and "requirements.txt" in printed
    from huggingface_hub import SpaceCard

    card = SpaceCard.load(out / "README.md")
    assert card.data.models == ["org/a", "org/b"] and card.data.title == "My adders"


@pytest.mark.parametrize("args, words", [
    (["--model", "minimal-add10"], ["'minimal-add10' is not a Hub repo id", "hf-arith push"]),
    (["--model", "runs/x/final"], ["'runs/x/final'", "not a valid Hub repo id"]),
    (["--model", "org/a..b"], ["'org/a..b' is not a valid Hub repo id"]),
    ([], ["--model"]),
])
def test_cli_bad_input_is_one_line(tmp_path, capsys, args, words):
    message = fails(capsys, "space", "build", tmp_path / "space", *args)
    for word in words:
        assert word in message, message
    assert not (tmp_path / "space").exists()  # refused before anything is written


def test_a_folder_in_use_is_refused(cached, tmp_path, capsys):
    (tmp_path / "space").mkdir()
    (tmp_path / "space" / "notes.txt").write_text("mine")
    assert "is not an empty folder" in fails(capsys, "space", "build", tmp_path / "space", "--model", "org/a")
    assert sorted(p.name for p in (tmp_path / "space").iterdir()) == ["notes.txt"]
    with pytest.raises(SpaceError, match="at least one model"):
        build_space(tmp_path / "other", [])


# -- the built app, without hf_arith ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(built, tmp_path_factory):
    hf_home = published_cache(tmp_path_factory.mktemp("published"), REPOS)
    space = BuiltSpace(built, hf_home, tmp_path_factory.mktemp("log") / "app.log")
    try:
        yield space.wait()
    finally:
        space.stop()


@pytest.fixture(scope="module")
def client(served):
    from gradio_client import Client

    return Client(served.url, verbose=False)


def test_the_built_app_answers_without_hf_arith(client):
    answer, verdict, rows = client.predict("org/minimal-add10", "1234567890+9876543210", 1, api_name="/solve")
    assert answer == "11111111100" and verdict_kind(verdict) == "correct"
    assert [r[1] for r in rows["data"]] == list("00111111111")
    truth = str(sum(int(v) for v in LONG_SUM.split("+")))
    answer, verdict, _ = client.predict("org/looped-add-window", LONG_SUM, 2, api_name="/solve")
    assert answer == truth and verdict_kind(verdict) == "correct"
    # The loop count reaches the repo's own model code: as hf_arith's installed pipeline answers.
    model, tokenizer = hf_arith.load("looped-add-window")
    expected = hf_arith.ArithmeticPipeline(model=model, tokenizer=tokenizer)(LONG_SUM, num_recurrences=16)["answer"]
    answer, verdict, _ = client.predict("org/looped-add-window", LONG_SUM, 16, api_name="/solve")
    assert answer == expected != truth and verdict_kind(verdict) == "wrong"


def test_the_built_app_refuses_in_plain_words(client):
    answer, verdict, _ = client.predict("org/minimal-add10", "12345678901+1", 1, api_name="/solve")
    assert answer == "" and verdict_kind(verdict) == "refused"
    assert "the longest number you typed has 11 digits; org/minimal-add10 takes numbers of up to 10 digits" in verdict
    _, verdict, _ = client.predict("org/looped-add-window", "9" * 127 + "+1", 2, api_name="/solve")
    assert "has 127 digits; org/looped-add-window takes numbers of up to 126 digits" in verdict and "config." not in verdict
    from gradio_client.exceptions import AppError

    with pytest.raises((AppError, ValueError)):  # only the listed repo ids
        client.predict("minimal-add10", "1+1", 1, api_name="/solve")


def test_the_built_app_shows_the_repos_own_files(client):
    text, figures = client.predict("org/looped-add-window", api_name="/overview")
    assert "[model card](https://huggingface.co/org/looped-add-window)" in text and "`LoopedForCausalLM`" in text
    assert "**Looped**" in text and "**Abacus**" in text
    # The repo's own pictures: its length heatmap, and its loops plot with the curve from its loops.json.
    assert figures.count("<img") == 2 and "Inside the red square (trained on 1-10 digits)" in figures
    curve = json.loads((Path(hf_arith.bundled_path("looped-add-window")) / "loops.json").read_text())
    assert ", ".join(f"{n}: {v:.1%}" for n, v in zip(curve["loops"], curve["exact_match"])) in figures
    slider, _, info = client.predict("org/looped-add-window", api_name="/model_options")
    assert slider["visible"] and (slider["minimum"], slider["maximum"], slider["value"]) == (1, 32, 2)
    plot, note, selector = client.predict("org/looped-add-window", "12+34", 2, None, api_name="/attention")
    assert plot["type"] == "matplotlib" and note.startswith("2 passes of 2 layers × 4 heads")
    assert selector["visible"] is True
