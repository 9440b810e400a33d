"""Hub repo ids wherever a model is named: `hf_arith.load`, the CLI and the Space, offline.

Each test gets a fresh, empty HF_HOME with HF_HUB_OFFLINE=1 (tests/conftest.py). A "published"
model is put into that cache exactly as huggingface_hub lays out a download: the saved folder in
`hub/models--ORG--NAME/snapshots/<commit>/` and the commit in `refs/main`. No network, no mocks of
the loading path.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
from cli_contract import fails

import hf_arith
from hf_arith.cli import main
from hf_arith.runtime.loading import CheckpointError, checkpoint_folder, load_checkpoint
from hf_arith.runtime.saving import save_checkpoint

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"
PROBLEM, ANSWER = "1234567890+9876543210", "11111111100"
SPACE_APP = Path(__file__).resolve().parent.parent / "spaces" / "arith-playground" / "app.py"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Saved folders (weights, config, tokenizer and remote code) of two bundled models."""
    root = tmp_path_factory.mktemp("saved")
    folders = {}
    for name in ("minimal-add10", "abacus-gpt2-add"):
        model, tokenizer = load_checkpoint(name)
        folders[name] = save_checkpoint(model, tokenizer, root / name)
    return folders


def cache_repo(hf_home: Path, repo_id: str, folder: Path, commit: str = COMMIT, ref: str | None = "main") -> Path:
    """Put `folder` into the Hugging Face cache as `repo_id` at `commit` (and `ref` -> commit)."""
    storage = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = storage / "snapshots" / commit
    shutil.copytree(folder, snapshot)
    if ref is not None:
        (storage / "refs").mkdir(parents=True, exist_ok=True)
        (storage / "refs" / ref).write_text(commit)
    return snapshot


# -- hf_arith.load -----------------------------------------------------------------------------------
def test_load_a_cached_repo_id_answers_with_the_registered_classes(hf_offline_tmp_home, saved):
    snapshot = cache_repo(hf_offline_tmp_home, "org/adder", saved["minimal-add10"])
    assert "auto_map" in json.loads((snapshot / "config.json").read_text())  # it carries remote code...
    model, tokenizer = hf_arith.load("org/adder")
    assert hf_arith.solve(model, tokenizer, [PROBLEM, "0+0"]) == [ANSWER, "0"]
    assert checkpoint_folder(model) == snapshot
    assert type(model) is hf_arith.MinimalForCausalLM  # ...but hf_arith's own class is used
    assert type(tokenizer) is hf_arith.ArithTokenizer
    # Even when remote code is allowed, the installed, registered classes win.
    model, tokenizer = hf_arith.load("org/adder", trust_remote_code=True)
    assert type(model) is hf_arith.MinimalForCausalLM and type(tokenizer) is hf_arith.ArithTokenizer


def test_revision_picks_the_commit(hf_offline_tmp_home, saved):
    """main -> the adder; another cached commit holds a different model, loaded by its hash."""
    cache_repo(hf_offline_tmp_home, "org/adder", saved["minimal-add10"], COMMIT)
    cache_repo(hf_offline_tmp_home, "org/adder", saved["abacus-gpt2-add"], OTHER_COMMIT, ref=None)
    assert type(hf_arith.load("org/adder")[0]) is hf_arith.MinimalForCausalLM
    assert type(hf_arith.load("org/adder", revision="main")[0]) is hf_arith.MinimalForCausalLM
    model, tokenizer = hf_arith.load("org/adder", revision=OTHER_COMMIT)
    assert type(model) is hf_arith.AbacusGPT2ForCausalLM
    assert hf_arith.solve(model, tokenizer, PROBLEM) == ANSWER


def test_metadata_is_checked_before_the_rest_is_fetched(hf_offline_tmp_home, saved, tmp_path, monkeypatch):
    """A repo that is not an hf_arith model is refused after its config alone: no weights are fetched."""
    import huggingface_hub
    from transformers import GPT2Config, GPT2LMHeadModel

    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=16, n_positions=16)).save_pretrained(
        tmp_path / "gpt2")
    cache_repo(hf_offline_tmp_home, "other/gpt2", tmp_path / "gpt2")
    cache_repo(hf_offline_tmp_home, "org/adder", saved["minimal-add10"])
    calls = []
    real = huggingface_hub.snapshot_download

    def spy(repo_id, **kwargs):
        calls.append((repo_id, kwargs.get("allow_patterns")))
        return real(repo_id, **kwargs)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", spy)
    with pytest.raises(CheckpointError, match="model_type 'gpt2', not an hf_arith model family"):
        hf_arith.load("other/gpt2")
    assert calls == [("other/gpt2", ["config.json", "tokenizer_config.json"])]
    calls.clear()
    hf_arith.load("org/adder")
    assert calls == [("org/adder", ["config.json", "tokenizer_config.json"]), ("org/adder", None)]


@pytest.mark.parametrize("repo_id, kwargs, expected", [
    ("org/missing", {}, ["org/missing", "not in the Hugging Face cache", "HF_HUB_OFFLINE"]),
    ("org/adder", {"revision": "v9"}, ["org/adder", "'v9'", "not in the Hugging Face cache", "main"]),
    ("org/adder", {"revision": "ab" * 20}, ["org/adder", "not in the Hugging Face cache"]),
    ("org/na me", {}, ["'org/na me'", "not a valid Hub repo id"]),
    ("org/x..y", {}, ["'org/x..y'", "not a valid Hub repo id", ".."]),
    ("minimal-add10", {"revision": "main"}, ["minimal-add10", "revision applies only to Hub repo ids", "bundled"]),
    ("org/adder", {"revision": " "}, ["empty revision"]),
])
def test_bad_repo_ids_are_one_line(hf_offline_tmp_home, saved, repo_id, kwargs, expected):
    cache_repo(hf_offline_tmp_home, "org/adder", saved["minimal-add10"])
    with pytest.raises(CheckpointError) as info:
        hf_arith.load(repo_id, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    for part in expected:
        assert part in message, message


def fork(saved_folder: Path, target: Path, model_type: str = "arith_fork") -> Path:
    """A copy whose model_type is no hf_arith family: it loads only through its own remote code."""
    shutil.copytree(saved_folder, target)
    config = json.loads((target / "config.json").read_text())
    config["model_type"] = model_type
    (target / "config.json").write_text(json.dumps(config))
    code = target / "configuration_minimal.py"
    code.write_text(code.read_text().replace('model_type = "hf_arith_minimal"', f'model_type = "{model_type}"'))
    return target


def test_remote_code_needs_trust_remote_code(hf_offline_tmp_home, saved, tmp_path, capsys):
    folder = fork(saved["minimal-add10"], tmp_path / "fork")
    with pytest.raises(CheckpointError, match="model_type 'arith_fork' is not an hf_arith model family.*--trust-remote-code"):
        hf_arith.load(folder)
    model, tokenizer = hf_arith.load(folder, trust_remote_code=True)
    assert type(model).__module__.startswith("transformers_modules")  # its own code, as asked
    assert hf_arith.solve(model, tokenizer, PROBLEM) == ANSWER
    # The same through a repo id and the CLI.
    cache_repo(hf_offline_tmp_home, "org/fork", folder)
    message = fails(capsys, "solve", PROBLEM, "--model", "org/fork")
    assert "org/fork" in message and "--trust-remote-code" in message
    assert main(["solve", PROBLEM, "--model", "org/fork", "--trust-remote-code"]) == 0
    assert capsys.readouterr().out.strip() == f"{PROBLEM} = {ANSWER}"


def test_another_librarys_folder_is_one_line(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=16, n_positions=16)).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match="model_type 'gpt2', not an hf_arith model family") as info:
        hf_arith.load(tmp_path, trust_remote_code=True)  # no auto_map: nothing to trust
    assert "\n" not in str(info.value)


# -- the command line --------------------------------------------------------------------------------
def test_cli_solve_eval_and_summary_take_a_repo_id(hf_offline_tmp_home, saved, capsys, tmp_path):
    cache_repo(hf_offline_tmp_home, "org/adder", saved["minimal-add10"])
    assert main(["solve", PROBLEM, "--model", "org/adder"]) == 0
    assert capsys.readouterr().out.strip() == f"{PROBLEM} = {ANSWER}"
    assert main(["solve", PROBLEM, "--model", "org/adder", "--revision", COMMIT]) == 0
    assert capsys.readouterr().out.strip() == f"{PROBLEM} = {ANSWER}"
    assert main(["eval", "org/adder", "--samples", "50"]) == 0
    assert "Held-out exact match: 100.00% of 50 problems" in capsys.readouterr().out
    assert main(["summary", "org/adder"]) == 0
    assert "MinimalForCausalLM" in capsys.readouterr().out


def test_cli_repo_id_errors(hf_offline_tmp_home, saved, capsys):
    cache_repo(hf_offline_tmp_home, "org/adder", saved["minimal-add10"])
    message = fails(capsys, "solve", PROBLEM, "--model", "org/adder", "--revision", "nope")
    assert "'nope'" in message and "not in the Hugging Face cache" in message
    message = fails(capsys, "verify", "org/missing")
    assert "org/missing" in message and "not in the Hugging Face cache" in message
    message = fails(capsys, "eval", "org/na me")
    assert "not a valid Hub repo id" in message


def test_cli_push_builds_from_a_repo_id(hf_offline_tmp_home, saved, capsys, tmp_path):
    """push MODEL takes a repo id (here: re-publishing a cached model under another name)."""
    snapshot = cache_repo(hf_offline_tmp_home, "org/adder", saved["minimal-add10"])
    shutil.copy(Path(hf_arith.bundled_path("minimal-add10")) / "eval_results.json", snapshot)
    out = tmp_path / "upload"
    assert main(["push", "org/adder", "--repo-id", "me/adder", "--output-dir", str(out), "--grid-samples", "0",
                 "--revision", COMMIT]) == 0
    assert (out / "model.safetensors").is_file() and (out / "README.md").is_file()
    model, tokenizer = hf_arith.load(out)
    assert hf_arith.solve(model, tokenizer, PROBLEM) == ANSWER


def test_help_names_repo_ids_and_the_new_options(capsys):
    for command in ("solve", "eval", "verify", "attention", "summary", "push"):
        assert main([command, "--help"]) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "Hub repo id" in text and "--revision" in text and "--trust-remote-code" in text, command
        if command != "push":
            assert "--device" in text and "--dtype" in text, command


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"hf-arith {hf_arith.__version__}"


# -- the Space ---------------------------------------------------------------------------------------
def load_space(name: str):
    spec = importlib.util.spec_from_file_location(name, SPACE_APP)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def test_space_offers_the_operators_repo_ids_only(hf_offline_tmp_home, saved, monkeypatch):
    cache_repo(hf_offline_tmp_home, "org/adder", saved["minimal-add10"])
    monkeypatch.setenv("HF_ARITH_SPACE_MODELS", " org/adder , minimal-add10/../x ,org/adder")
    with pytest.raises(SystemExit, match="HF_ARITH_SPACE_MODELS|not a valid Hub repo id"):
        load_space("arith_space_app_bad_list")
    monkeypatch.setenv("HF_ARITH_SPACE_MODELS", " org/adder ,org/adder")
    app = load_space("arith_space_app_hub")
    assert app.MODELS == [*hf_arith.bundled_models(), "org/adder"]
    answer, verdict, rows = app.solve_problem("org/adder", PROBLEM)
    assert answer == ANSWER and "correct" in verdict and rows
    # A repo id a visitor sends that the operator did not list is refused, never looked up.
    cache_repo(hf_offline_tmp_home, "org/other", saved["minimal-add10"])
    answer, verdict, _ = app.solve_problem("org/other", PROBLEM)
    assert answer == "" and "unknown model 'org/other'" in verdict
    text, _ = app.model_overview("org/adder")
    assert "org/adder" in text and "MinimalForCausalLM" in text
