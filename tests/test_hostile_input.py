"""Issue 20: what a careless or hostile user tried, each case ending in one clear line (exit status 2),
a right answer, or a warning; one test per case. Checkpoints are trained for a few steps only."""

from __future__ import annotations

import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_contract import fails
from transformers import AutoModelForCausalLM, AutoTokenizer

import hf_arith
from hf_arith.cli import main
from hf_arith.data import dataset_export as export
from hf_arith.data.formatting import FormatError, NumberFormat
from hf_arith.runtime.limits import FINGERPRINT_KEY, BeyondTrainingWarning
from hf_arith.runtime.loading import CheckpointError, load_checkpoint
from hf_arith.training.recipe import RecipeError, load_recipe
from hf_arith.training.run import (
    LOSS_FILE,
    RECIPE_FILE,
    check_resume,
    checkpoint_problem,
    last_checkpoint,
    read_loss_record,
    train,
)

MINIMAL, ABACUS = (hf_arith.bundled_path(n) for n in ("minimal-add10", "abacus-gpt2-add"))
K2 = "abacus-gpt2-add-window-10-k2"
# A confidently wrong answer beyond the measured 100 digits (decoded unchecked at 0.99): a 110-digit
# number plus a 112-digit one.
K2_WRONG = ("37835413554816415552133115754833871612858670604245775518431139493546577042670091134299356646639517671635805188"
            "+5726460025223283445523086319054576139620060306410619512463097608711851581670641347532917043092727315470450641826")
HUGE = "1" * 10_000 + "+1"  # a 10,000-digit operand
TINY = ["--set", "optim.steps=2", "--set", "optim.compile=false", "--set", "eval.samples=10"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A finished 4-step run with checkpoint-2 and checkpoint-4 (each with every file a resume reads)."""
    out = tmp_path_factory.mktemp("run")
    train(load_recipe("minimal-add10", [*RUN, f"output_dir={out}"]), overwrite=True, evaluate=False)
    return out


RUN = ["optim.steps=4", "optim.save_steps=2", "optim.logging_steps=1", "optim.compile=false", "optim.batch_size=16",
       "eval.verify=false"]


def _copy_run(run_dir, tmp_path) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / "run"))


def _run_args(out) -> list[str]:
    return ["train", "--output-dir", str(out), *[x for item in RUN for x in ("--set", item)]]


# -- 2. a tokenizer that does not belong to its model -------------------------------------------------
def _mixed(tmp_path, fingerprints: bool = True) -> Path:
    """minimal-add10's weights and config with abacus-gpt2-add's tokenizer (the same 14 tokens)."""
    folder = Path(shutil.copytree(MINIMAL, tmp_path / "mixed"))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(Path(ABACUS) / name, folder / name)
    if not fingerprints:
        for name in ("config.json", "tokenizer_config.json"):
            data = json.loads((folder / name).read_text())
            data.pop(FINGERPRINT_KEY, None)
            (folder / name).write_text(json.dumps(data))
    return folder


def test_minimal_weights_with_the_abacus_tokenizer_are_refused_in_one_line(tmp_path, capsys):
    folder = _mixed(tmp_path)
    message = fails(capsys, "solve", "1+1", "--model", folder)
    assert str(folder) in message and FINGERPRINT_KEY in message and "tokenizer" in message
    with pytest.raises(CheckpointError, match=FINGERPRINT_KEY):
        load_checkpoint(folder)


def test_a_mismatched_pair_loaded_by_transformers_itself_is_refused_by_solve(tmp_path):
    model = AutoModelForCausalLM.from_pretrained(MINIMAL)
    tokenizer = AutoTokenizer.from_pretrained(ABACUS)
    with pytest.raises(FormatError, match="another number format"):
        hf_arith.solve(model, tokenizer, "1+1")


def test_checkpoints_without_a_fingerprint_are_checked_on_the_fields_they_have(tmp_path, capsys):
    folder = _mixed(tmp_path, fingerprints=False)
    config = json.loads((folder / "config.json").read_text())
    config["num_digit_tokens"] = 16  # a hexadecimal model's digits
    (folder / "config.json").write_text(json.dumps(config))
    message = fails(capsys, "solve", "1+1", "--model", folder)
    assert "num_digit_tokens is 16" in message and "10" in message


@pytest.mark.parametrize("name", hf_arith.bundled_models())
def test_every_bundled_config_and_tokenizer_config_carry_the_formats_fingerprint(name):
    folder = Path(hf_arith.bundled_path(name))
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    own = NumberFormat.from_dict(tokenizer_config["number_format"]).fingerprint()
    assert json.loads((folder / "config.json").read_text())[FINGERPRINT_KEY] == own
    assert tokenizer_config[FINGERPRINT_KEY] == own


def test_trained_and_saved_checkpoints_record_the_fingerprint_in_both_files(add10):
    config = json.loads((add10 / "config.json").read_text())
    tokenizer_config = json.loads((add10 / "tokenizer_config.json").read_text())
    assert config[FINGERPRINT_KEY] == tokenizer_config[FINGERPRINT_KEY]
    assert config[FINGERPRINT_KEY] == NumberFormat.from_dict(tokenizer_config["number_format"]).fingerprint()


def test_the_fingerprint_changes_with_every_format_field_and_only_with_them():
    base = NumberFormat()
    changed = [NumberFormat(task="sub"), NumberFormat(base=16), NumberFormat(reverse_operands=False),
               NumberFormat(reverse_answer=False), NumberFormat(operand_width=10), NumberFormat(answer_width=11),
               NumberFormat(end_token=False), NumberFormat(max_items=5)]
    prints = {f.fingerprint() for f in changed}
    assert len(prints) == len(changed) and base.fingerprint() not in prints
    assert NumberFormat().fingerprint() == base.fingerprint()


# -- 3. lost work ---------------------------------------------------------------------------------------
def test_training_into_a_finished_folder_without_resume_is_refused(run_dir, tmp_path, capsys):
    out = _copy_run(run_dir, tmp_path)
    before = (out / "final" / "model.safetensors").read_bytes()
    message = fails(capsys, *_run_args(out))
    assert str(out) in message and "not empty" in message and "--overwrite" in message and "--resume" in message
    assert (out / "final" / "model.safetensors").read_bytes() == before


def test_overwrite_deletes_the_old_checkpoints_so_resume_cannot_pick_a_stale_one(run_dir, tmp_path, capsys):
    out = _copy_run(run_dir, tmp_path)
    stale = out / "checkpoint-2000"
    shutil.copytree(out / "checkpoint-4", stale)
    state = json.loads((stale / "trainer_state.json").read_text())
    (stale / "trainer_state.json").write_text(json.dumps({**state, "global_step": 2000}))
    (out / "notes.txt").write_text("mine")
    assert last_checkpoint(out).endswith("checkpoint-2000")
    argv = [*_run_args(out), "--set", "optim.steps=3", "--set", "optim.save_steps=3", "--set", "eval.samples=10",
            "--overwrite"]
    assert main(argv) == 0, capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-3", "final", "notes.txt"]
    assert last_checkpoint(out).endswith("checkpoint-3")


@pytest.mark.parametrize("missing", ["model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth",
                                     "trainer_state.json", RECIPE_FILE])
def test_a_checkpoint_is_complete_only_with_every_file_resume_reads(run_dir, tmp_path, missing):
    out = _copy_run(run_dir, tmp_path)
    (out / "checkpoint-4" / missing).unlink()
    assert checkpoint_problem(out / "checkpoint-4") is not None
    assert checkpoint_problem(out / "checkpoint-2") is None
    assert last_checkpoint(out).endswith("checkpoint-2")


# -- 4. --resume never skips its recipe check ----------------------------------------------------------
@pytest.mark.parametrize("damage", ["missing", "unreadable"])
def test_resume_refuses_a_checkpoint_whose_recipe_cannot_be_read(run_dir, tmp_path, capsys, damage):
    out = _copy_run(run_dir, tmp_path)
    shutil.rmtree(out / "checkpoint-2")
    recipe = out / "checkpoint-4" / RECIPE_FILE
    recipe.unlink() if damage == "missing" else recipe.write_text("{not json")
    message = fails(capsys, *_run_args(out), "--set", "optim.steps=6", "--set", "optim.learning_rate=0.5", "--resume")
    assert "--resume" in message and "checkpoint-4" in message and RECIPE_FILE in message
    # Called directly (as a race with the completeness check would), the recipe check refuses as well.
    recipe_obj = load_recipe("minimal-add10", [*RUN, f"output_dir={out}"])
    model = AutoModelForCausalLM.from_pretrained(out / "checkpoint-4")
    with pytest.raises(RecipeError, match=RECIPE_FILE):
        check_resume(recipe_obj, model, str(out / "checkpoint-4"))


# -- 5, 6. crashes and tracebacks ------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["solve", "1+1"], ["verify", "minimal-add10"], ["models"]])
def test_threads_is_bounded_at_the_entry(capsys, command):
    message = fails(capsys, *command, "--threads", "100000")
    assert "--threads" in message and "100000" in message and "per CPU core" in message


@pytest.mark.parametrize("threads", ["0", "-1"])
def test_train_optim_threads_out_of_range_is_one_line(tmp_path, capsys, threads):
    message = fails(capsys, "train", *TINY, "--set", f"optim.threads={threads}", "--output-dir", tmp_path / "o")
    assert "optim.threads" in message and threads in message


def test_a_yaml_recipe_that_is_a_list_with_set_is_one_line(tmp_path, capsys):
    recipe = tmp_path / "list.yaml"
    recipe.write_text("- 1\n")
    message = fails(capsys, "train", recipe, *TINY, "--output-dir", tmp_path / "o")
    assert str(recipe) in message and "mapping" in message and "list" in message


# -- 7. exports that do not end or do not say ------------------------------------------------------------
def test_export_refuses_operands_beyond_its_digit_bound(tmp_path, capsys):
    message = fails(capsys, "data", "export", tmp_path / "d", "--max-digits", "100000")
    assert "max_digits" in message and "1,000" in message and "100,000" in message
    assert not (tmp_path / "d").exists()


def test_export_refuses_splits_beyond_its_size_bound(tmp_path, capsys):
    message = fails(capsys, "data", "export", tmp_path / "d", "--train-size", "1000000000000")
    assert "train_size" in message and "100,000,000" in message


def test_large_exports_show_progress(tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(export, "PROGRESS_ROWS", 50)
    export.export_parquet(tmp_path / "big", train_size=100, test_size=10)
    assert "100%" in capfd.readouterr().err
    export.export_parquet(tmp_path / "small", train_size=10, test_size=10)
    assert capfd.readouterr().err == ""


def test_an_interrupted_export_leaves_no_truncated_parquet_and_keeps_the_old_one(tmp_path, monkeypatch):
    out = export.export_parquet(tmp_path / "d", train_size=50, test_size=10)
    old = {p.name: p.read_bytes() for p in (out / "data").iterdir()}
    real = export.iter_column_chunks

    def interrupted(*args, **kwargs):
        for i, chunk in enumerate(real(*args, **kwargs)):
            if i == 1:
                raise KeyboardInterrupt
            yield chunk

    monkeypatch.setattr(export, "iter_column_chunks", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export.export_parquet(out, train_size=10_000, test_size=10, overwrite=True)
    assert {p.name: p.read_bytes() for p in (out / "data").iterdir()} == old
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "data"]
    with pytest.raises(KeyboardInterrupt):
        export.export_parquet(tmp_path / "fresh", train_size=10_000, test_size=10)
    assert not list((tmp_path / "fresh").rglob("*.parquet"))


# -- 8. errors that name the problem ---------------------------------------------------------------------
@pytest.mark.parametrize("model", ["add10", "abacus-gpt2-add"])
def test_a_10000_digit_operand_is_quoted_in_at_most_40_characters(add10, capsys, model):
    message = fails(capsys, "solve", HUGE, "--model", add10 if model == "add10" else model)
    assert f"'{'1' * 40}'... (10,002 characters)" in message
    assert len(message) < 300 and "integer string conversion" not in message
    assert ("more than 10" if model == "add10" else "context") in message


def test_eval_seed_out_of_range_names_the_option(capsys):
    message = fails(capsys, "eval", "minimal-add10", "--seed", "-1")
    assert "--seed" in message and "'-1'" in message


def test_train_eval_samples_zero_is_refused_before_training(tmp_path, capsys):
    message = fails(capsys, "train", *TINY, "--set", "eval.samples=0", "--output-dir", tmp_path / "o")
    assert "eval.samples" in message and "got 0" in message
    assert not (tmp_path / "o").exists()


def test_eval_max_digits_beyond_the_abacus_range_names_the_option(capsys):
    message = fails(capsys, "eval", "abacus-gpt2-add", "--max-digits", "39")
    assert message.startswith("--max-digits 39: ") and "abacus range of 40 digits" in message


# -- 9. push --eval-json with another model's report ---------------------------------------------------
@pytest.fixture(scope="module")
def abacus_report(tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "abacus.json"
    assert main(["eval", "abacus-gpt2-add", "--samples", "20", "--max-digits", "10", "--json", str(path)]) == 0
    return path


@pytest.mark.parametrize("model, expected", [
    ("minimal-add10", "another number format"),  # another format
    (K2, "other weights"),  # the same format, other weights
])
def test_push_refuses_another_models_eval_report(abacus_report, tmp_path, capsys, model, expected):
    message = fails(capsys, "push", model, "--repo-id", "me/x", "--eval-json", abacus_report, "--output-dir", tmp_path / "o")
    assert str(abacus_report) in message and expected in message and f"hf-arith eval {model}" in message
    assert not (tmp_path / "o").exists()


def test_push_refuses_an_older_report_that_names_another_model(abacus_report, tmp_path, capsys):
    report = json.loads(abacus_report.read_text())
    for key in ("number_format_fingerprint", "weights_fingerprint"):
        del report[key]
    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps(report))
    message = fails(capsys, "push", K2, "--repo-id", "me/x", "--eval-json", legacy,
                    "--output-dir", tmp_path / "o")
    assert "'abacus-gpt2-add'" in message and f"not {K2}" in message


# -- 10. the Python API ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def abacus():
    return load_checkpoint("abacus-gpt2-add")


@pytest.mark.parametrize("batch_size", [-3, 0, 2.5, True])
def test_solve_refuses_a_batch_size_that_is_not_a_positive_integer(abacus, batch_size):
    with pytest.raises(FormatError, match="batch_size must be a positive integer"):
        hf_arith.solve(*abacus, ["1+1", "2+2"], batch_size=batch_size)


@pytest.mark.parametrize("problems, name", [(None, "NoneType"), (5, "int"), (b"1+1", "bytes")])
def test_solve_refuses_problems_that_are_not_text(abacus, problems, name):
    with pytest.raises(FormatError, match=f"problems must be .* got {name}$"):
        hf_arith.solve(*abacus, problems)


def test_the_tokenizer_refuses_a_number(abacus):
    with pytest.raises(FormatError, match="text must be a problem .* got int"):
        abacus[1](7)


@pytest.mark.parametrize("generated, expected", [
    (torch.zeros(3, dtype=torch.long), "2-D"),
    (torch.zeros(2, 3, 4, dtype=torch.long), "2-D"),
    (torch.zeros(2, 3), "integer token ids, got dtype torch.float32"),
    (np.zeros((2, 3), dtype=np.float64), "dtype float64"),
    ([[1.5, 2]], "non-integer"),
    ([1, 2], "got int"),
    ("abc", "got str"),
    (None, "got NoneType"),
])
def test_decode_answers_names_the_wrong_shape_or_dtype(abacus, generated, expected):
    with pytest.raises(FormatError, match="^generated must") as info:
        abacus[1].decode_answers(generated)
    assert expected in str(info.value)


def test_decode_answers_still_takes_tensors_and_lists(abacus):
    tok = abacus[1]
    ids = tok.convert_tokens_to_ids(["9", "7", "<eos>"])
    assert tok.decode_answers(torch.tensor([ids])) == ["79"] == tok.decode_answers([ids])


@pytest.mark.parametrize("kwargs, expected", [
    ({"num_recurrence": 4}, "takes no argument 'num_recurrence'"),
    ({"use_cache": False}, "the decoder sets use_cache itself"),
    ({"num_recurrences": 0}, "between 1 and"),
])
def test_solve_refuses_model_kwargs_the_model_does_not_take(kwargs, expected):
    model, tokenizer = load_checkpoint("looped-add-window")
    with pytest.raises(FormatError, match=expected):
        hf_arith.solve(model, tokenizer, "1+1", model_kwargs=kwargs)
    assert hf_arith.solve(model, tokenizer, "12+34", model_kwargs={"num_recurrences": 2}) == "46"


def test_mean_training_loss_after_a_resume_covers_the_whole_run(run_dir, tmp_path):
    out = _copy_run(run_dir, tmp_path)
    shutil.rmtree(out / "final")
    summary = train(load_recipe("minimal-add10", [*RUN, "optim.steps=6", f"output_dir={out}"]), resume=True,
                    evaluate=False)
    logged = [e["loss"] for e in json.loads((out / "checkpoint-6" / "trainer_state.json").read_text())["log_history"]
              if "loss" in e]
    assert len(logged) == 6  # logging_steps=1: the loss of every step, 1-4 from the first session
    assert summary["train_loss_steps"] == [1, 6]
    assert summary["train_loss"] == pytest.approx(sum(logged) / 6, rel=1e-6)
    assert read_loss_record(out / "checkpoint-6")["first_step"] == 1


def test_without_a_loss_record_the_mean_says_which_steps_it_covers(run_dir, tmp_path, capsys):
    out = _copy_run(run_dir, tmp_path)
    (out / "checkpoint-4" / LOSS_FILE).unlink()  # as a checkpoint of an older version
    assert main([*_run_args(out), "--set", "optim.steps=6", "--set", "eval.samples=10", "--resume"]) == 0
    stdout = capsys.readouterr().out
    assert "mean training loss" in stdout and "over steps 5-6 only" in stdout


# -- 11. operands beyond the trained range -------------------------------------------------------------
def test_solve_warns_once_per_call_beyond_the_trained_range(abacus):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hf_arith.solve(*abacus, ["1" * 20 + "+1", "2" * 15 + "+3", "1+1"])
        beyond = [w for w in caught if issubclass(w.category, BeyondTrainingWarning)]
        assert len(beyond) == 1 and "2 of 3" in str(beyond[0].message) and "1-10 digits" in str(beyond[0].message)
        caught.clear()
        hf_arith.solve(*abacus, ["1234567890+1", "0000000000001+1"])
        assert not [w for w in caught if issubclass(w.category, BeyondTrainingWarning)]


def test_the_cli_note_counts_digits_without_leading_zeros(capsys):
    assert main(["solve", "09999999999+1", "12345678901+1", "--model", "abacus-gpt2-add"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("09999999999+1 = ") and "beyond" not in lines[0]  # 10 digits, trained on 1-10
    # Beyond the trained range the confidence is capped (limits.calibrated), so the answer is flagged too.
    # (and names a bundled adder measured on longer sums)
    assert re.search(r"\?  \(operands beyond the 10 digits this model was trained on; bundled (\S+) holds it: "
                     r"--model \1; low confidence: 50\.0 %, below 90 %\)$", lines[1]), lines[1]
    assert "Warning" not in err


# -- found while probing -------------------------------------------------------------------------------
@pytest.mark.parametrize("override, expected", [
    ("optim.learning_rate=.nan", "optim.learning_rate must be a finite number"),
    ("optim.adam_beta2=2", "optim.adam_beta2 must be in [0, 1)"),
    ("optim.save_steps=0", "optim.save_steps must be >= 1"),
    ("optim.warmup_steps=-1", "optim.warmup_steps must be >= 0"),
    ("optim.batch_size=100000000000", "optim.batch_size must be from 1 to 1,000,000"),
    ("data.chunk_size=0", "data.chunk_size must be from 1"),
    ("data.length_buckets=-2", "data.length_buckets must be an integer in 0..256"),
    ("data.length_buckets=300", "data.length_buckets must be an integer in 0..256"),
    ("data.hard_fraction=1.5", "data.hard_fraction must be from 0 to 1"),
    ("data.hard_fraction_fade=[5,2]", "data.hard_fraction_fade must be [start, end] steps with 0 <= start < end"),
    ("data.hard_fraction_fade=7", "data.hard_fraction_fade must be [start, end] steps"),
    ("data.hard_fraction_fade=[1,2]", "data.hard_fraction_fade needs data.hard_fraction > 0"),
    ("data.hard_kind=easy", "data.hard_kind must be one of ('repeated', 'chains', 'hard', 'carries', 'tie_heavy', 'near_ties', "
                              "'ties', 'carried_ties'), got 'easy'"),
    ("data.sample_by=digit", "data.sample_by must be one of ('length', 'value', 'mixed', 'longest', 'length_longest'), got 'digit'"),
    ("optim.wd_drop_exact=0.01", "optim.wd_drop_exact (0.01) lowers the weight decay, but optim.weight_decay is"),
    ("eval.samples=100000000000", "eval.samples must be from 1 to 1,000,000"),
    ("model.max_position_embeddings=20", "model.max_position_embeddings 20 is shorter than the longest training example"),
    ("model.hidden_size=10000000000", "parameters need"),
])
def test_recipe_values_the_run_cannot_take_are_refused_before_training(tmp_path, capsys, override, expected):
    message = fails(capsys, "train", *TINY, "--set", override, "--output-dir", tmp_path / "o")
    assert expected in message
    assert not (tmp_path / "o").exists()


def test_carry_patterns_are_refused_for_another_task(tmp_path, capsys):
    message = fails(capsys, "train", "abacus-gpt2-sub", *TINY, "--set", "data.hard_fraction=0.5",
                    "--set", "data.hard_kind=carries", "--output-dir", tmp_path / "o")
    assert message == "data.hard_kind 'carries' applies to addition, not subtraction"
    assert not (tmp_path / "o").exists()


def test_tie_lists_are_refused_for_another_task(tmp_path, capsys):
    message = fails(capsys, "train", "abacus-gpt2-sub", *TINY, "--set", "data.hard_fraction=0.5",
                    "--set", "data.hard_kind=near_ties", "--output-dir", tmp_path / "o")
    assert message == "data.hard_kind 'near_ties' applies to sorting, not subtraction"
    assert not (tmp_path / "o").exists()


def test_random_prefix_filler_beyond_the_context_is_refused_before_training(tmp_path, capsys):
    message = fails(capsys, "train", *TINY, "--set", "data.random_prefix=5", "--output-dir", tmp_path / "o")
    assert "data.random_prefix 5" in message and "set it to at least 38" in message
    assert not (tmp_path / "o").exists()
    argv = ["train", *TINY, "--set", "data.random_prefix=5", "--set", "model.max_position_embeddings=38",
            "--output-dir", str(tmp_path / "o")]
    assert main(argv) == 0, capsys.readouterr().err


def test_packed_problems_need_a_model_with_an_offset_per_problem(tmp_path, capsys):
    message = fails(capsys, "train", *TINY, "--set", "data.context_problems=1", "--output-dir", tmp_path / "o")
    assert "data.context_problems packs problems closed by <eos>" in message and "abacus_offset_per_problem" in message
    message = fails(capsys, "train", *TINY, "--set", "data.context_problems=17", "--output-dir", tmp_path / "o")
    assert "data.context_problems must be an integer in 0..16, got 17" in message
    assert not (tmp_path / "o").exists()


def test_an_abacus_model_trains_on_packed_problems(tmp_path, capsys):
    argv = ["train", "abacus-gpt2-add", *TINY, "--set", "data.context_problems=2", "--set", "data.max_digits=4",
            "--set", "model.abacus_offset_per_problem=true", "--output-dir", str(tmp_path / "o")]
    assert main(argv) == 0, capsys.readouterr().err
    config = json.loads((tmp_path / "o" / "final" / "config.json").read_text())
    assert config["abacus_offset_per_problem"] is True


@pytest.mark.parametrize("argv, option", [
    (["eval", "minimal-add10", "--samples", "100000000000"], "--samples"),
    (["eval", "abacus-gpt2-add", "--grid", "1:3", "--samples-per-cell", "100000000"], "--samples-per-cell"),
])
def test_sample_counts_are_bounded_at_the_entry(capsys, argv, option):
    assert option in fails(capsys, *argv)


def test_a_huge_grid_or_digit_range_is_refused_without_building_it(capsys):
    message = fails(capsys, "eval", "abacus-gpt2-add", "--grid", "1:99999999999999999999")
    assert message.startswith("grid up to 99999999999999999999 digits:") and "context of 256" in message


def test_error_lines_are_capped_in_length(capsys):
    message = fails(capsys, "train", "--set", "model." + "x" * 5000 + "=1", "--output-dir", "/nonexistent/never")
    assert len(message) <= 700 and "more characters" in message


# == Issue 57: runs that cannot be lost ==================================================================
# Runs the CLI with the training step blocked at BLOCK_AT (after its checkpoint there), so a test can
# act while it holds the output folder, then kill it.
BLOCKING = r'''
import os, sys, time
import hf_arith.training.run as training
from hf_arith.cli import main

block_at, marker = int(os.environ["BLOCK_AT"]), os.environ["MARKER"]
original = training.ArithTrainer.training_step

def training_step(self, model, inputs, num_items_in_batch=None):
    if self.state.global_step == block_at:
        open(marker, "w").close()
        while True:
            time.sleep(1)
    return original(self, model, inputs, num_items_in_batch)

training.ArithTrainer.training_step = training_step
sys.exit(main(sys.argv[1:]))
'''


def _blocked_run(tmp_path, out, block_at: int = 2):
    import subprocess
    import sys
    import time

    script, marker = tmp_path / "blocking.py", tmp_path / "blocked"
    script.write_text(BLOCKING)
    proc = subprocess.Popen([sys.executable, str(script), *_run_args(out)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            env={**__import__("os").environ, "BLOCK_AT": str(block_at), "MARKER": str(marker)})
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), proc.stderr.read()[-2000:] if proc.poll() is not None else "timed out"
    return proc


def test_resume_of_a_finished_run_does_nothing_and_says_so_in_one_line(run_dir, tmp_path, capsys):
    out = _copy_run(run_dir, tmp_path)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert main([*_run_args(out), "--resume"]) == 0
    stdout, stderr = capsys.readouterr()
    lines = stderr.splitlines()
    assert len(lines) == 1 and "finished run (4 steps" in lines[0] and "nothing to resume" in lines[0], stderr
    assert "Trained" not in stdout
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_two_concurrent_runs_into_one_folder_the_second_refuses_and_a_killed_run_resumes(tmp_path, capsys):
    import signal

    out = tmp_path / "run"
    proc = _blocked_run(tmp_path, out, block_at=2)  # checkpoint-2 written, holding the folder's lock
    try:
        for extra in ([], ["--resume"], ["--overwrite"]):
            message = fails(capsys, *_run_args(out), *extra)
            assert f"output folder {out} is in use: process {proc.pid} on " in message, message
        assert last_checkpoint(out).endswith("checkpoint-2") and not (out / "final").exists()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert (out / ".hf-arith.lock").is_file()  # the killed run's lock file stays behind
    assert main([*_run_args(out), "--resume"]) == 0
    stdout, stderr = capsys.readouterr()
    assert f"Resuming from {out / 'checkpoint-2'}" in stdout
    assert f"took over the lock of an earlier run that is no longer running (process {proc.pid} on" in stderr
    assert json.loads((out / "final" / "training_summary.json").read_text())["steps"] == 4
    assert not (out / ".hf-arith.lock").exists()  # released when the run ended


def test_a_stale_lock_of_a_dead_process_is_taken_over():
    import subprocess
    import sys

    from hf_arith.training.run_lock import LOCK_FILE, lock_output

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    with pytest.raises(ProcessLookupError):
        __import__("os").kill(pid, 0)
    folder = Path(__import__("tempfile").mkdtemp())
    (folder / LOCK_FILE).write_text(json.dumps({"pid": pid, "host": "h"}))
    lock = lock_output(folder)
    assert lock.taken_over == {"pid": pid, "host": "h"}
    assert json.loads((folder / LOCK_FILE).read_text())["pid"] == __import__("os").getpid()
    again = lock_output(folder)  # a second run prepared in this process takes the lock over
    assert again.taken_over is None
    lock.release()  # the first no longer holds it: releasing it changes nothing
    assert (folder / LOCK_FILE).is_file()
    again.release()
    assert not (folder / LOCK_FILE).exists()
    lock_output(folder).release()


def test_a_full_disk_while_writing_final_leaves_no_partial_final_and_resume_writes_it(run_dir, tmp_path, capsys,
                                                                                      monkeypatch):
    import errno

    from safetensors.torch import load_file

    import hf_arith.training.run as training

    out = tmp_path / "run"
    saved = training.save_checkpoint

    def full_disk(model, tokenizer, folder):
        saved(model, tokenizer, folder)  # most of the folder is written, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(training, "save_checkpoint", full_disk)
    assert main(_run_args(out)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.endswith("\n") and err.count("hf-arith: error:") == 1
    message = err.splitlines()[-1].removeprefix("hf-arith: error: ")  # after the progress bar of training
    assert message == (f"cannot write {out / 'final'}: No space left on device; no partial final/ was left "
                       "(checkpoint-4 is complete: free space, then the same train command with --resume writes "
                       "final/ from it)")
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-2", "checkpoint-4"]
    monkeypatch.setattr(training, "save_checkpoint", saved)
    assert main([*_run_args(out), "--resume"]) == 0, capsys.readouterr().err  # the advice works
    summary = json.loads((out / "final" / "training_summary.json").read_text())
    assert summary["steps"] == 4 and summary["train_loss_steps"] == [1, 4]
    assert not (out / "checkpoint-5").exists()  # no step trained beyond the run's 4
    final, checkpoint = load_file(out / "final" / "model.safetensors"), load_file(out / "checkpoint-4" / "model.safetensors")
    assert final.keys() == checkpoint.keys()
    for name, tensor in final.items():
        assert torch.equal(tensor, checkpoint[name]), name


def test_a_kill_during_the_first_save_says_in_one_line_what_works(run_dir, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    shutil.copytree(run_dir / "checkpoint-2", out / "checkpoint-2")
    (out / "checkpoint-2" / "optimizer.pt").unlink()  # killed while the first checkpoint was being written
    message = fails(capsys, *_run_args(out), "--resume")
    assert "no complete checkpoint-* folder" in message and "train again with --overwrite" in message
    assert "--overwrite" in fails(capsys, *_run_args(out))  # a plain train refuses the folder, and says so
    assert main([*_run_args(out), "--overwrite"]) == 0, capsys.readouterr().err  # the advice works
    assert (out / "final" / "model.safetensors").is_file()


def test_eval_json_is_written_atomically_through_the_shared_helper(tmp_path, capsys, monkeypatch):
    import hf_arith.records as records

    target = tmp_path / "report.json"
    target.write_text('{"old": true}\n')

    def crash(src, dst):
        raise OSError("killed mid-write")

    monkeypatch.setattr(records.os, "replace", crash)
    fails(capsys, "eval", "minimal-add10", "--samples", "5", "--json", target)
    assert target.read_text() == '{"old": true}\n'  # the old report whole, never a cut one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]  # and no temporary file left
    monkeypatch.undo()
    assert main(["eval", "minimal-add10", "--samples", "5", "--json", str(target)]) == 0
    assert json.loads(target.read_text())["n"] == 5


def test_the_package_writes_json_only_through_the_shared_helper():
    import re

    package = Path(hf_arith.__file__).parent
    offenders = [f"{p.relative_to(package)}:{n}" for p in package.rglob("*.py") if p.name != "records.py"
                 for n, line in enumerate(p.read_text().splitlines(), 1)
                 if re.search(r"json\.dump\(|write_text\(json\.dumps|\.write\(json\.dumps", line)]
    assert offenders == []


# == Issue 57: one check of model and tokenizer on every path ============================================
SUB = hf_arith.bundled_path("abacus-gpt2-sub")


def _sub_with_the_add_tokenizer(tmp_path) -> Path:
    """abacus-gpt2-sub's weights with abacus-gpt2-add's tokenizer files (the same token ids), and no
    fingerprint anywhere: only the format its training summary records says it subtracts."""
    folder = Path(shutil.copytree(SUB, tmp_path / "sub-add"))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(Path(ABACUS) / name, folder / name)
    for name in ("config.json", "tokenizer_config.json"):
        data = json.loads((folder / name).read_text())
        data.pop(FINGERPRINT_KEY, None)
        (folder / name).write_text(json.dumps(data))
    return folder


def test_the_pipeline_refuses_the_sub_model_with_the_add_tokenizer():
    from transformers import pipeline

    model, _ = load_checkpoint("abacus-gpt2-sub")
    _, add_tokenizer = load_checkpoint("abacus-gpt2-add")
    with pytest.raises(FormatError, match=f"another number format .*config.{FINGERPRINT_KEY}"):
        pipeline("arithmetic", model=model, tokenizer=add_tokenizer)
    with pytest.raises(FormatError, match="another number format"):
        hf_arith.ArithmeticPipeline(model=model, tokenizer=add_tokenizer)
    with pytest.raises(FormatError, match="another number format"):
        hf_arith.solve(model, add_tokenizer, "5+3")


def test_a_folder_without_fingerprint_with_another_tasks_tokenizer_is_refused(tmp_path, capsys):
    from transformers import pipeline

    folder = _sub_with_the_add_tokenizer(tmp_path)
    expected = ("the tokenizer writes addition '+', base 10, digits reversed, but this model was trained on "
                "subtraction '-', base 10, digits reversed (training_summary.json's recipe format)")
    with pytest.raises(CheckpointError, match=re.escape(expected)):
        load_checkpoint(folder)
    assert expected in fails(capsys, "solve", "5-3", "--model", folder)
    with pytest.raises(FormatError, match=re.escape(expected)):
        pipeline("arithmetic", model=str(folder))
    # The transformers Auto classes load the pair unchecked; solve still checks it.
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    with pytest.raises(FormatError, match=re.escape(expected)):
        hf_arith.solve(model, tokenizer, "5+3")


def test_a_folder_without_fingerprint_is_checked_against_its_own_tokenizer_config(tmp_path):
    from transformers import pipeline

    folder = Path(shutil.copytree(SUB, tmp_path / "sub"))
    (folder / "training_summary.json").unlink()
    for name in ("config.json", "tokenizer_config.json"):
        data = json.loads((folder / name).read_text())
        data.pop(FINGERPRINT_KEY, None)
        (folder / name).write_text(json.dumps(data))
    model = AutoModelForCausalLM.from_pretrained(folder)
    add_tokenizer = AutoTokenizer.from_pretrained(ABACUS)
    with pytest.raises(FormatError, match=r"trained on subtraction .*\(the model folder's tokenizer_config.json\)"):
        pipeline("arithmetic", model=model, tokenizer=add_tokenizer)
    assert pipeline("arithmetic", model=model, tokenizer=AutoTokenizer.from_pretrained(folder))("5-3")["answer"] == "2"


# == Issue 57: Python API types ==========================================================================
@pytest.mark.parametrize("args, error, expected", [
    ((None, "tok", "1+1"), TypeError, "model must be a transformers model .* got NoneType"),
    (("model", None, "1+1"), TypeError, "tokenizer must be the model's hf_arith tokenizer .* got NoneType"),
    (("model", "tok", {"1+1", "2+2"}), FormatError, "problems must be .* got set$"),
])
def test_solve_names_the_argument_of_the_wrong_type(abacus, args, error, expected):
    pair = {"model": abacus[0], "tok": abacus[1]}
    with pytest.raises(error, match=expected):
        hf_arith.solve(*[pair.get(a, a) if isinstance(a, str) else a for a in args])


def test_an_empty_list_to_the_pipeline_is_one_clear_error(abacus):
    pipe = hf_arith.ArithmeticPipeline(model=abacus[0], tokenizer=abacus[1])
    with pytest.raises(ValueError, match="^inputs: an empty list of problems"):
        pipe([])
    with pytest.raises(TypeError, match="^inputs must be a problem .* got set$"):
        pipe({"1+1"})


@pytest.mark.parametrize("batch_size, error", [(0, ValueError), (-1, ValueError), ("x", TypeError), (2.0, TypeError)])
def test_the_pipeline_refuses_a_batch_size_that_is_not_a_positive_integer(abacus, batch_size, error):
    from transformers import pipeline

    pipe = hf_arith.ArithmeticPipeline(model=abacus[0], tokenizer=abacus[1])
    with pytest.raises(error, match="^batch_size must be a positive integer, got"):
        pipe(["1+1", "2+2"], batch_size=batch_size)
    with pytest.raises(error, match="^batch_size must be a positive integer, got"):
        pipeline("arithmetic", model=abacus[0], tokenizer=abacus[1], batch_size=batch_size)


@pytest.mark.parametrize("samples", ["٣", "３", "1٣"])
def test_eval_samples_in_other_scripts_digits_are_refused(capsys, samples):
    assert "expected an integer from 1 to" in fails(capsys, "eval", "minimal-add10", "--samples", samples)


def test_a_corrupt_training_summary_is_an_error_naming_the_file(tmp_path, capsys):
    folder = Path(shutil.copytree(ABACUS, tmp_path / "m"))
    summary = folder / "training_summary.json"
    record = json.loads(summary.read_text())
    for damage in ("{not json", json.dumps({**record, "train_digits": [1, -1]}), "[1, 2]"):
        summary.write_text(damage)
        with pytest.raises(CheckpointError, match=f"^{re.escape(str(folder))}: {re.escape(str(summary))}: corrupt file"):
            load_checkpoint(folder)
        message = fails(capsys, "solve", "1+1", "--model", folder)
        assert str(summary) in message and "corrupt file" in message and "-1 digits" not in message


# == Issue 57: the pipeline decodes as solve does ========================================================
def test_the_pipeline_and_solve_give_identical_answers_on_a_batch(abacus):
    """The same batched, cached decoder (its speed against solve's: bench/pipeline_speed.py)."""
    model, tokenizer = abacus
    rng = np.random.default_rng(57)
    problems = [f"{rng.integers(0, 10**rng.integers(1, 13))}+{rng.integers(0, 10**rng.integers(1, 13))}"
                for _ in range(128)]  # 1-12 digits, beyond the trained 10 too
    pipe = hf_arith.ArithmeticPipeline(model=model, tokenizer=tokenizer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BeyondTrainingWarning)
        solved = hf_arith.solve(model, tokenizer, problems, batch_size=64)
        piped = [out["answer"] for out in pipe(problems, batch_size=64)]
    assert piped == solved
    right = [a == str(sum(map(int, p.split("+")))) for p, a in zip(problems, solved)]
    assert sum(right) >= 0.9 * len(problems)  # answers, not a shared failure (which would also be identical)


# == Issue 57: bounds before work ========================================================================
def _abacus_with_config(tmp_path, **changes) -> Path:
    folder = Path(shutil.copytree(ABACUS, tmp_path / "edited"))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return folder


@pytest.mark.parametrize("argv", [["solve", "1+1", "--model", "{m}"], ["eval", "{m}", "--samples", "5"], ["summary", "{m}"],
                                  ["attention", "{m}", "1+1", "--output", "{o}/a.png"], ["verify", "{m}"],
                                  ["adderboard", "{m}", "--output", "{o}/s.py"]])
def test_a_config_abacus_range_of_ten_million_is_refused_before_loading(tmp_path, capsys, argv):
    import time

    folder = _abacus_with_config(tmp_path, abacus_max_digits=10**7)
    start = time.monotonic()
    message = fails(capsys, *[a.format(m=folder, o=tmp_path) for a in argv])
    assert time.monotonic() - start < 20  # building the 10-million-row table took minutes
    assert "config.json's abacus_max_digits is 10,000,000, beyond the 1,000,000 hf_arith works with" in message


def test_a_config_that_does_not_match_its_weights_is_refused_before_loading(tmp_path):
    folder = _abacus_with_config(tmp_path, abacus_max_digits=500_000)
    with pytest.raises(CheckpointError, match=r"config.json does not match the weights: it makes "
                                              r"transformer.abacus.weight of shape \(500001, 64\), but model.safetensors "
                                              r"holds \(41, 64\)"):
        load_checkpoint(folder)


def test_attention_refuses_a_problem_beyond_the_tokens_it_draws(capsys, tmp_path):
    from hf_arith.evaluation.attention_maps import MAX_ATTENTION_TOKENS

    problem = "9" * 50 + "+" + "9" * 50  # within the window model's range (it adds 100-digit numbers)
    message = fails(capsys, "attention", "abacus-gpt2-add-window-10-k2", problem, "--output", tmp_path / "a.png")
    assert message.endswith(f": 102 prompt + up to 52 answer tokens; attention maps are drawn for at most "
                            f"{MAX_ATTENTION_TOKENS} tokens, so give a shorter problem")
    assert not (tmp_path / "a.png").exists()


def test_export_refuses_multiplication_too_long_to_finish(tmp_path, capsys):
    import time

    start = time.monotonic()
    message = fails(capsys, "data", "export", tmp_path / "d", "--task", "mul", "--min-digits", "1000", "--max-digits", "1000")
    assert time.monotonic() - start < 10
    assert message.startswith("max_digits 1,000 with 16,384 rows") and "more than the 5,000,000,000" in message
    assert not (tmp_path / "d").exists()


def test_export_refuses_splits_larger_than_their_distinct_problems(tmp_path, capsys):
    from hf_arith.data.dataset_builder import distinct_in_splits, make_spec

    available = distinct_in_splits(make_spec("add", min_digits=1, max_digits=1), 0.1)
    assert sum(available.values()) == 100 and 0 < available["test"] < 30  # counted, not assumed
    message = fails(capsys, "data", "export", tmp_path / "d", "--train-size", "100000", "--test-size", "100000",
                    "--max-digits", "1")
    assert message == (f"train_size 100,000 is more than the {available['train']} distinct train problems with operands "
                       "of 1-1 digits (test_fraction 0.1); lower train_size or widen the digit range")
    argv = ["data", "export", str(tmp_path / "ok"), "--train-size", str(available["train"]), "--test-size",
            str(available["test"]), "--max-digits", "1"]
    assert main(argv) == 0, capsys.readouterr().err  # every distinct problem fits


# == Issue 57: confidence beyond the trained range =======================================================
def test_no_wrong_answer_beyond_the_trained_range_reports_confidence_of_a_checked_one():
    from hf_arith.runtime.limits import BEYOND_TRAINING_CONFIDENCE
    from hf_arith.runtime.solving import LOW_CONFIDENCE

    assert BEYOND_TRAINING_CONFIDENCE < LOW_CONFIDENCE
    model, tokenizer = load_checkpoint("abacus-gpt2-add")  # trained on 1-10 digits, exact on 1-20
    rng = np.random.default_rng(57)
    problems = [f"{rng.integers(10**(n - 1), 10**n)}+{rng.integers(0, 10**rng.integers(1, n + 1))}"
                for n in rng.integers(11, 19, size=300)]  # one to eight digits past the range
    problems += [f"{rng.integers(10**(n - 1), 10**n)}{rng.integers(10**(n - 1), 10**n)}"
                 f"+{rng.integers(10**(n - 1), 10**n)}{rng.integers(10**(n - 1), 10**n)}"
                 for n in rng.integers(16, 19, size=60)]  # 32-36 digits, where it fails
    problems.append("72243232874053592248184441421529506+72642957725228228543478500231960369")  # wrong at 0.998
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        answers = hf_arith.solve(model, tokenizer, problems, return_confidence=True)
    beyond = [w for w in caught if issubclass(w.category, BeyondTrainingWarning)]
    assert len(beyond) == 1 and f"capped at {BEYOND_TRAINING_CONFIDENCE:g}" in str(beyond[0].message)
    assert "; bundled abacus-gpt2-add-" in str(beyond[0].message)  # a 100-digit adder holds all 36 digits
    raw = hf_arith.solve(model, tokenizer, problems, return_confidence=True, checked=True)  # uncalibrated
    truth = [str(sum(map(int, p.split("+")))) for p in problems]
    wrong = [i for i, (a, t) in enumerate(zip(answers, truth)) if a.answer != t]
    assert [a.answer for a in answers] == [a.answer for a in raw]  # the cap changes confidences only
    assert any(raw[i].confidence >= LOW_CONFIDENCE for i in wrong)  # what the cap is for
    assert wrong and all(answers[i].confidence <= BEYOND_TRAINING_CONFIDENCE for i in wrong)
    inside = hf_arith.solve(model, tokenizer, ["1234567890+987654321"], return_confidence=True)[0]
    assert inside.confidence > LOW_CONFIDENCE  # answers inside the range keep theirs


def test_sorting_lists_longer_than_trained_are_warned_about_and_capped(capsys):
    from hf_arith.runtime.limits import BEYOND_TRAINING_CONFIDENCE

    model, tokenizer = load_checkpoint("abacus-gpt2-sort")  # lists of 2-5 items
    lists = ["a:12,b:7,c:30,d:1,e:9,f:4", "a:5,b:3,c:8,d:1,e:2,f:9,g:6,h:4", "a:31,b:7,c:120"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        answers = hf_arith.solve(model, tokenizer, lists, return_confidence=True)
    [warning] = [w for w in caught if issubclass(w.category, BeyondTrainingWarning)]
    assert str(warning.message).startswith("2 of 3 problem(s) have lists longer than the 2-5 items this model was "
                                           "trained on (first: 'a:12,b:7,c:30,d:1,e:9,f:4')")
    # sort-10 (2-10 items) holds both long lists, so the warning names it
    assert str(warning.message).endswith("; bundled abacus-gpt2-sort-10 holds them: hf_arith.load('abacus-gpt2-sort-10')")
    assert [a.confidence <= BEYOND_TRAINING_CONFIDENCE for a in answers] == [True, True, False]
    assert main(["solve", *lists, "--model", "abacus-gpt2-sort"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert ["(a list beyond the 5 items this model was trained on" in line for line in lines] == [True, True, False]


# == Issue 57: recipes and names ==========================================================================
def test_an_empty_recipe_is_refused(tmp_path, capsys):
    recipe = tmp_path / "empty.yaml"
    for text in ("", "# nothing yet\n", "{}\n"):
        recipe.write_text(text)
        message = fails(capsys, "train", recipe, "--output-dir", tmp_path / "o")
        assert message.startswith(f"{recipe}: an empty recipe (no sections)")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("option, value", [("--name", "a\x00b"), ("--name", "two\nlines"), ("--author", "\x1b[31m")])
def test_adderboard_refuses_control_characters_in_names(tmp_path, capsys, option, value):
    message = fails(capsys, "adderboard", "minimal-add10", option, value, "--output", tmp_path / "s.py")
    assert message.startswith(f"{option[2:]} must be printable text")
    assert not (tmp_path / "s.py").exists()


@pytest.mark.parametrize("name, problem, truth", [(K2, K2_WRONG, str(sum(map(int, K2_WRONG.split("+"))))),
                                                  ("abacus-gpt2-mul", "5233908*4", "20935632")])
def test_the_reported_confident_wrong_answers_beyond_the_range_are_capped(name, problem, truth):
    from hf_arith.runtime.limits import BEYOND_TRAINING_CONFIDENCE

    model, tokenizer = load_checkpoint(name)
    with pytest.warns(BeyondTrainingWarning):
        [answer] = hf_arith.solve(model, tokenizer, [problem], return_confidence=True)
    [raw] = hf_arith.solve(model, tokenizer, [problem], return_confidence=True, checked=True)
    assert answer.answer == raw.answer != truth and raw.confidence >= 0.9  # wrong, and sure of it
    assert answer.confidence == BEYOND_TRAINING_CONFIDENCE


def test_attention_on_a_multiplication_past_its_range_finishes(tmp_path, capsys):
    import time

    start = time.monotonic()
    assert main(["attention", "abacus-gpt2-mul", "123456*1", "--output", str(tmp_path / "a.png")]) == 0
    assert time.monotonic() - start < 100 and (tmp_path / "a.png").stat().st_size > 0
    assert "Attention maps (4 layer(s) x 4 head(s))" in capsys.readouterr().out
