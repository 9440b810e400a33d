"""Every standard save path writes a repo that works alone (issue 54): plain `save_pretrained`,
`push_to_hub` and `Trainer.save_model` on an hf_arith model write the `arithmetic` pipeline's code
(named in the saved config's custom_pipelines), the generation defaults and the remote code; and the
models' own from_pretrained (Hub remote code included) refuses a dtype the checkpoint records as
changing answers. Checked in a process where hf_arith cannot be imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from remote_code import BLOCK_HF_ARITH
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

import hf_arith
from hf_arith.models.modeling_common import DtypeWarning, dtype_verdict
from hf_arith.runtime.loading import DTYPE_CHECK_FILE

PROBLEMS = ["123+456", "99999+1", "7+8"]
ANSWERS = ["579", "100000", "15"]


def run_without_hf_arith(body: str, tmp_path) -> dict:
    """Run `body` (it prints one JSON line last) in a fresh offline Python that cannot import hf_arith."""
    script = BLOCK_HF_ARITH + "import json, warnings\nimport torch\n" + textwrap.dedent(body)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home")}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


PIPELINE_BODY = """
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline
    folder = {folder!r}
    solver = pipeline("arithmetic", model=folder, trust_remote_code=True)
    assert type(solver.model).__module__.startswith("transformers_modules"), type(solver.model).__module__
    answers = [r["answer"] for r in solver({problems!r})]
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).eval()
    tok = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    enc = tok({problems!r}, padding=True, return_tensors="pt")
    with torch.no_grad():  # nothing but the saved generation config
        new = model.generate(**enc)[:, enc.input_ids.shape[1]:]
    print(json.dumps({{"pipeline": answers, "generate": tok.decode_answers(new)}}))
"""


def bundled_by_transformers(name: str):
    """A bundled model and tokenizer as transformers' Auto classes load them (no hf_arith.load)."""
    path = hf_arith.bundled_path(name)
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def test_plain_save_pretrained_gives_a_repo_that_answers_without_hf_arith(tmp_path):
    model, tok = bundled_by_transformers("abacus-gpt2-add")
    folder = tmp_path / "saved"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    assert config["custom_pipelines"]["arithmetic"]["impl"] == "pipeline_arithmetic.ArithmeticPipeline"
    assert (folder / "pipeline_arithmetic.py").is_file() and (folder / "decoding.py").is_file()
    assert config["auto_map"]["AutoModel"] == "modeling_abacus_gpt2.AbacusGPT2Model"
    generation = json.loads((folder / "generation_config.json").read_text())
    assert generation["max_new_tokens"] == config["max_answer_tokens"] == 40 and generation["do_sample"] is False
    # The model in memory is as it was: its config names no pipeline it has no remote code for.
    assert "custom_pipelines" not in model.config.to_dict() and "auto_map" not in model.config.to_dict()
    out = run_without_hf_arith(PIPELINE_BODY.format(folder=str(folder), problems=PROBLEMS), tmp_path)
    assert out == {"pipeline": ANSWERS, "generate": ANSWERS}


def test_a_model_built_from_its_config_saves_generation_defaults_for_its_longest_answer(tmp_path):
    """From the Auto classes' config alone (no tokenizer at hand): the config knows the answer budget."""
    config = AutoConfig.from_pretrained(hf_arith.bundled_path("abacus-gpt2-mul"))
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(tmp_path)
    generation = json.loads((tmp_path / "generation_config.json").read_text())
    assert generation["max_new_tokens"] == config.max_answer_tokens == 198
    assert (generation["eos_token_id"], generation["pad_token_id"]) == (config.eos_token_id, config.pad_token_id)


def test_trainer_save_model_gives_a_repo_that_answers_without_hf_arith(tmp_path):
    from transformers import Trainer, TrainingArguments

    model, tok = bundled_by_transformers("minimal-add10")
    trainer = Trainer(model=model, args=TrainingArguments(output_dir=str(tmp_path / "run"), report_to="none"),
                      processing_class=tok)
    model.config.use_cache = False  # as training leaves it
    trainer.save_model(str(tmp_path / "saved"))
    assert model.config.use_cache is False
    assert json.loads((tmp_path / "saved" / "config.json").read_text()).get("use_cache", True) is True
    problems = ["1234567890+9876543210", "5+5"]
    out = run_without_hf_arith(PIPELINE_BODY.format(folder=str(tmp_path / "saved"), problems=problems), tmp_path)
    assert out == {"pipeline": ["11111111100", "10"], "generate": ["11111111100", "10"]}


def test_push_to_hub_uploads_the_pipeline_and_the_defaults(tmp_path, monkeypatch):
    """push_to_hub saves through the same save_pretrained; only the network calls are stubbed."""
    import transformers.utils.hub as hub

    model, _ = bundled_by_transformers("minimal-add10")
    uploaded = tmp_path / "uploaded"

    class Api:
        def create_repo(self, repo_id, **_):
            return type("Url", (), {"repo_id": repo_id})()

    def upload(self, folder, repo_id, files_timestamps, **_):
        shutil.copytree(folder, uploaded)

    monkeypatch.setattr(hub, "hf_api", lambda: Api())
    monkeypatch.setattr(hub, "create_and_tag_model_card", lambda *a, **k: type("Card", (), {"save": lambda s, p: None})())
    monkeypatch.setattr(type(model), "_upload_modified_files", upload)
    model.push_to_hub("someone/adder")
    config = json.loads((uploaded / "config.json").read_text())
    assert "arithmetic" in config["custom_pipelines"] and (uploaded / "pipeline_arithmetic.py").is_file()
    assert json.loads((uploaded / "generation_config.json").read_text())["max_new_tokens"] == 11


# -- dtypes ------------------------------------------------------------------------------------------------
def test_the_dtype_rule_refuses_what_changed_answers_and_warns_for_what_was_never_checked():
    record = json.loads((Path(hf_arith.bundled_path("minimal-add10-split-wide-arc")) / DTYPE_CHECK_FILE).read_text())
    level, why = dtype_verdict(record, "bfloat16")
    assert level == "refuse" and "40.28 %" in why and "10,000" in why
    assert dtype_verdict(record, "float32") is None
    assert dtype_verdict(None, "float16")[0] == "warn"


def test_transformers_from_pretrained_refuses_a_recorded_unsafe_dtype_here_too():
    path = hf_arith.bundled_path("minimal-add10-split-wide-arc")
    with pytest.raises(ValueError, match="refused dtype bfloat16.*ignore_dtype_check=True"):
        AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, ignore_dtype_check=True)
    assert model.dtype == torch.bfloat16


def test_a_dtype_never_checked_warns(tmp_path):
    model, _ = bundled_by_transformers("minimal-add10")
    model.save_pretrained(tmp_path)  # no dtype_check.json goes along: the saved weights were never checked
    with pytest.warns(DtypeWarning, match="bfloat16 was never checked"):
        AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16)


def test_remote_code_refuses_bfloat16_for_the_wide_arc_adder_without_hf_arith(tmp_path):
    name = "minimal-add10-split-wide-arc"
    model, tok = bundled_by_transformers(name)
    folder = tmp_path / "saved"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    shutil.copyfile(Path(hf_arith.bundled_path(name)) / DTYPE_CHECK_FILE, folder / DTYPE_CHECK_FILE)
    out = run_without_hf_arith(f"""
        from transformers import AutoModelForCausalLM
        folder = {str(folder)!r}
        try:
            AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True, dtype=torch.bfloat16)
            refused = None
        except ValueError as err:
            refused = str(err)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fine = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True).dtype
        forced = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True, dtype=torch.bfloat16,
                                                      ignore_dtype_check=True)
        print(json.dumps({{"refused": refused, "fine": str(fine), "forced": str(forced.dtype),
                           "remote": type(forced).__module__}}))
    """, tmp_path)
    assert out["remote"].startswith("transformers_modules")
    assert "refused dtype bfloat16" in out["refused"] and "ignore_dtype_check=True" in out["refused"]
    assert "\n" not in out["refused"]
    assert (out["fine"], out["forced"]) == ("torch.float32", "torch.bfloat16")


def test_remote_code_names_the_transformers_it_needs(tmp_path):
    """Under a transformers older than the code's (4.57 lacks PreTrainedConfig), one line says which to install."""
    model, _ = bundled_by_transformers("minimal-add10")
    model.save_pretrained(tmp_path / "saved")
    out = run_without_hf_arith(f"""
        import transformers
        transformers.__version__ = "4.57.1"  # as an old installation reports itself
        from transformers import AutoConfig
        try:
            AutoConfig.from_pretrained({str(tmp_path / "saved")!r}, trust_remote_code=True)
            error = None
        except ImportError as err:
            error = str(err)
        print(json.dumps({{"error": error}}))
    """, tmp_path)
    assert out["error"] and "transformers>=5.23" in out["error"] and "4.57.1" in out["error"]
