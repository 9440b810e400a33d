"""Hub publishing: the exact upload folder, the model card, loading it without hf_arith, the upload.

The card's content (hf_arith.publishing.model_card) is tested through the folders hf_arith.publishing.hub_folder builds.

Nothing here reaches the Hub: the upload tests replace only `HfApi.create_repo` and
`HfApi.upload_folder`, and the "no network" test points a real HfApi at a closed local port.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from huggingface_hub import HfApi, ModelCard
from remote_code import BLOCK_HF_ARITH

import hf_arith
from hf_arith.bundled import BUNDLED_DIR
from hf_arith.cli import main
from hf_arith.data.problems import ProblemSpec, held_out_problems
from hf_arith.evaluation.held_out import verify_tiny_adder
from hf_arith.publishing.hub_folder import (
    PNG_MAGIC,
    PublishError,
    build_model_folder,
    check_repo_id,
    load_eval_results,
    push_model,
    upload_folder,
)
from hf_arith.publishing.model_card import (
    EVAL_FILE,
    GENERATED_DATASET_TYPE,
    GRID_FILE,
    HEATMAP_FILE,
    SUMMARY_FILE,
    training_details,
)
from hf_arith.runtime.limits import training_range
from hf_arith.runtime.loading import load_checkpoint
from hf_arith.runtime.solving import answer_budget

BUNDLED = hf_arith.bundled_models()
EVAL_SAMPLES = 100  # problems of each real `hf-arith eval --json` run here (small, to keep the suite quick)


def files_of(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*") if p.is_file())


def code_closure(folder: Path, roots: list[str]) -> set[str]:
    """The .py files `roots` need: themselves and, recursively, their `from .x import` siblings."""
    need, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in need:
            continue
        need.add(name)
        todo += [f"{m}.py" for m in re.findall(r"^\s*from \.(\w+) import", (folder / name).read_text(), re.M)]
    return need


def reference(problem: str) -> str:
    """The exact answer, computed here only to check the model's (decimal tasks)."""
    for op, fn in (("+", lambda a, b: a + b), ("*", lambda a, b: a * b), ("-", lambda a, b: a - b)):
        if op in problem:
            a, b = problem.split(op)
            return str(fn(int(a), int(b)))
    items = [item.split(":") for item in problem.split(",")]
    return "".join(label for label, _ in sorted(items, key=lambda kv: int(kv[1])))


@pytest.fixture(scope="module")
def eval_reports(tmp_path_factory):
    """A real `hf-arith eval --json` run for every bundled model."""
    folder = tmp_path_factory.mktemp("eval")
    reports = {}
    for name in BUNDLED:
        path = folder / f"{name}.json"
        assert main(["eval", name, "--samples", str(EVAL_SAMPLES), "--json", str(path)]) == 0
        reports[name] = path
    return reports


@pytest.fixture(scope="module")
def built(eval_reports, tmp_path_factory):
    """The upload folder of every bundled model, built once for the module."""
    root = tmp_path_factory.mktemp("publish")
    return {name: build_model_folder(name, root / name, repo_id=f"someone/{name}", eval_json=eval_reports[name])
            for name in BUNDLED}


def test_there_is_a_bundled_model_to_publish():
    assert "minimal-add10" in BUNDLED


@pytest.mark.parametrize("name", BUNDLED)
def test_upload_folder_holds_exactly_the_publishable_files(built, name):
    folder = built[name]
    files = files_of(folder)
    model, _ = load_checkpoint(name)
    modeling = f"{type(model).__module__.rsplit('.', 1)[-1]}.py"
    configuration = f"{type(model.config).__module__.rsplit('.', 1)[-1]}.py"
    # The remote code: the model's, config's, tokenizer's and pipeline's modules and their relative
    # imports, no more.
    code = code_closure(folder, [modeling, configuration, "tokenization_arith.py", "pipeline_arithmetic.py"])
    assert {"formatting.py"} <= code and {f for f in files if f.endswith(".py")} == code
    expected = {"README.md", "config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                "tokenizer_config.json", EVAL_FILE, HEATMAP_FILE} | code
    assert expected <= set(files)
    assert set(files) - expected <= {"training_summary.json", "notes.json", GRID_FILE, "dtype_check.json",
                                     "loops.json", "images/loops.png"}  # no pickles, no caches
    assert not [f for f in files if f.endswith((".bin", ".pt", ".pth", ".pkl"))]
    assert (folder / HEATMAP_FILE).read_bytes()[:8] == PNG_MAGIC
    for name in code:
        assert not re.search(r"^\s*(from|import) hf_arith", (folder / name).read_text(), re.M), name
    config = json.loads((folder / "config.json").read_text())
    assert config["auto_map"]["AutoModelForCausalLM"].split(".")[0] + ".py" == modeling
    card = (folder / "README.md").read_text()
    assert all(f"`{name}`" in card for name in code)  # the card lists every remote-code file


@pytest.mark.parametrize("name", BUNDLED)
def test_card_parses_back_with_the_eval_numbers(built, eval_reports, name):
    report = json.loads(eval_reports[name].read_text())
    card = ModelCard.load(built[name] / "README.md")
    data = card.data
    assert data.library_name == "transformers" and data.license == "apache-2.0"
    assert {"custom_code", "arithmetic"} <= set(data.tags)
    results = {r.metric_config: r for r in data.eval_results}
    assert results[None].metric_value == report["exact_match"]
    per_length = {int(k.split("=")[1]): r.metric_value for k, r in results.items() if k}
    assert per_length == {int(k): v for k, v in report["by_max_operand_length"].items()}
    assert all(r.dataset_split == "test" and r.metric_type == "exact_match" for r in data.eval_results)
    assert results[None].dataset_args["n"] == report["n"] == EVAL_SAMPLES
    # The dataset the numbers come from: task, base and digit range of the eval run.
    assert results[None].dataset_config == report["task"]
    assert {k: results[None].dataset_args[k] for k in ("min_digits", "max_digits", "base", "seed")} == \
        {k: report[k] for k in ("min_digits", "max_digits", "base", "seed")}
    assert f"{report['min_digits']}-{report['max_digits']} digits, base {report['base']}" in results[None].dataset_name
    # The card's prose tells the same story as its metadata.
    model, _ = load_checkpoint(name)
    assert f"**{model.num_parameters():,} unique parameters" in card.text
    assert f"{100 * report['exact_match']:.2f} %" in card.text
    assert "trust_remote_code=True" in card.text and HEATMAP_FILE in card.text
    assert "{{" not in card.content and "{%" not in card.content
    assert json.loads((built[name] / EVAL_FILE).read_text()) == report
    assert (built[name] / GRID_FILE).is_file() == ("Length generalization" in card.text)
    if (built[name] / GRID_FILE).is_file():  # the grid picture and its numbers go together
        grid = json.loads((built[name] / GRID_FILE).read_text())
        shipped = Path(hf_arith.bundled_path(name)) / GRID_FILE
        if shipped.is_file():  # the checkpoint's own grid run, published as is (but for its local path)
            assert grid == {**json.loads(shipped.read_text()), "model": name}
        else:  # drawn while building, over the evaluated lengths
            assert grid["lengths"] == [1, report["max_digits"]] and grid["samples_per_cell"] == 20
        assert f"{grid['summary']['n']:,} in all" in card.text
        assert f"from {grid['lengths'][0]} to {grid['lengths'][1]} digits" in card.text


@pytest.mark.parametrize("name", BUNDLED)
def test_card_describes_format_architecture_and_training_of_every_bundled_model(built, name):
    model, tokenizer = load_checkpoint(name)
    fmt = tokenizer.arith_format
    text = (built[name] / "README.md").read_text()
    order = {True: "least significant digit first (reversed)", False: "most significant digit first"}
    for fragment in [f"| base | {fmt.base} |", f"| operand digit order | {order[fmt.reverse_operands]} |",
                     f"| answer digit order | {order[fmt.reverse_answer]} |",
                     f"`{type(model).__name__}` (`model_type: {model.config.model_type}`)",
                     f"**{model.num_parameters():,} unique parameters** (tied"]:
        assert fragment in text, fragment
    for key in ("hidden_size", "num_hidden_layers", "num_recurrences", "abacus_max_digits"):
        if hasattr(model.config, key):
            assert f"| `{key}` | `{getattr(model.config, key)}` |" in text, key
    assert ("This is a looped model" in text) == hasattr(model.config, "num_recurrences")
    heads = getattr(model.config, "num_future_tokens", 1)
    assert (f"This model has {heads} output heads" in text) == (heads > 1)
    if heads > 1:  # the opt-in unverified mode's error rate, recounted here from the same problems
        from hf_arith.data.problems import held_out_problems
        from hf_arith.publishing.model_card import UNVERIFIED_SAMPLES
        from hf_arith.runtime.limits import problem_spec
        report = json.loads((built[name] / EVAL_FILE).read_text())
        n = min(UNVERIFIED_SAMPLES, report["n"])
        problems = held_out_problems(problem_spec(fmt, report["min_digits"], report["max_digits"]), n, report["seed"])
        raw = hf_arith.solve(model, tokenizer, problems.to_text(), confirm=False, warn_beyond_training=False)
        right = sum(a == b for a, b in zip(raw, problems.answer_text()))
        digits = f"{report['min_digits']}-{report['max_digits']}"
        assert f"| {digits} | {n:,} | {100 * right / n:.2f} % | {n - right:,} (" in text
    summary_path = Path(hf_arith.bundled_path(name)) / SUMMARY_FILE
    training = card_training(built[name])
    if summary_path.is_file():  # the Training section says what the summary records, and only that
        summary = json.loads(summary_path.read_text())
        assert f"| steps | {summary['steps']:,} |" in training
        assert f"| training time | {summary['train_seconds']:,.0f} s" in training
        notes = json.loads(notes_path.read_text()) if (notes_path := summary_path.with_name("notes.json")).is_file() else {}
        hardware = training.split("| hardware |")[1].split("\n")[0]
        recorded = isinstance(summary.get("machine"), dict)
        assert ("not recorded" in hardware) == (not recorded and not isinstance(notes.get("machine"), dict))
        assert ("(from the run's benchmark record, notes.json)" in hardware) == (not recorded and "machine" in notes)
        recipe = summary.get("recipe")
        assert ("Recipe (as recorded by the training run)" in training and "```yaml" in training) == isinstance(recipe, dict)
        start = (summary.get("recipe") or {}).get("init_from")  # a warm start says where its weights came from
        stages = summary.get("earlier_stages") or notes.get("earlier_stages") or []
        # A run that recorded its warm start names it (`init_from` in the summary); an older one only
        # when no earlier stages explain where its weights came from.
        recorded_start = isinstance(summary.get("init_from"), dict)
        assert (f"| initialised from | `{start}`" in training) == bool(start and (recorded_start or not stages))
        assert ("| training time, all stages |" in training) == bool(stages)
    else:
        assert "No training record" in training


@pytest.mark.parametrize("name", BUNDLED)
def test_cards_a_hub_visitor_can_trust(built, name):
    """Intended use and Limitations with the hard limit and the measured range as two numbers (the same in
    the published config), the minimum transformers, citations of the work the model reproduces, the one
    command that reproduces it, numbers with thousands separators and no '1 digits'."""
    from hf_arith.models.configuration_common import MIN_TRANSFORMERS_VERSION
    from hf_arith.runtime.limits import measured_max_digits, model_limits

    folder = built[name]
    text = (folder / "README.md").read_text()
    model, tok = load_checkpoint(name)
    config = json.loads((folder / "config.json").read_text())
    hard, measured = model_limits(model, tok).max_digits, config["measured_max_digits"]
    limitations = text.split("## Limitations")[1].split("\n## ")[0]
    # The measured range is what the model's own held-out report and grid give; a model whose grid has a
    # cell below 99 % at every length says it has none, and one measured at 1 digit says "1 digit".
    shipped = BUNDLED_DIR / name
    grid = json.loads((shipped / "length_grid.json").read_text()) if (shipped / "length_grid.json").is_file() else None
    assert measured == measured_max_digits(json.loads((shipped / "eval_results.json").read_text()), grid)
    assert config["max_operand_digits"] == hard and (measured is None or 1 <= measured <= hard)
    if measured is None:
        assert "**No measured range**" in limitations and "Measured range:" not in limitations
    else:
        span = f"1-{measured:,} digits" if measured > 1 else "1 digit"
        assert "## Intended use" in text and f"operands of {span}" in text.split("## Intended use")[1]
        assert f"**Measured range: operands of {span}.**" in limitations and "1-1 digit" not in text
    assert f"**Hard limit: {hard:,} digit" in limitations
    need = ".".join(map(str, MIN_TRANSFORMERS_VERSION))
    assert f"`transformers>={need},<6`" in text
    citation = text.split("## Citation")[1].split("\n## ")[0]
    if hasattr(model.config, "abacus_max_digits"):
        assert "arXiv:2405.17399" in citation and "Language Models are Unsupervised Multitask Learners" in citation
    else:
        assert "AdderBoard" in citation and "2405.17399" not in citation
    assert ("arXiv:2404.19737" in citation) == (getattr(model.config, "num_future_tokens", 1) > 1)
    assert f"`hf-arith train {name}`" in text  # every bundled model has the preset that trains it
    assert not re.search(r"\b1 (digits|problems|threads)\b", text)
    intro = text.split("---", 2)[2].split("```")[0]  # the prose before the first snippet
    assert re.search(r"\d,\d{3} unique parameters", intro) or model.num_parameters() < 1000
    assert not re.search(r"\b\d{4,}\b", intro)  # 10,000 problems, 203,840 parameters


def test_looped_cards_show_the_loops_curve_and_others_none(built):
    """A looped model's loops.json travels with it, and its card tables every loop count with the
    checkpoint's own numbers, the trained count marked; models without a curve get no such section."""
    looped = [name for name in BUNDLED if (BUNDLED_DIR / name / "loops.json").is_file()]
    assert "looped-add-window" in looped
    for name in looped:
        curve = json.loads((BUNDLED_DIR / name / "loops.json").read_text())
        folder = built[name]
        assert json.loads((folder / "loops.json").read_text()) == curve
        assert (folder / "images" / "loops.png").read_bytes()[:8] == PNG_MAGIC
        card = (folder / "README.md").read_text()
        trained = json.loads((folder / "config.json").read_text())["num_recurrences"]
        for loops, accuracy in zip(curve["loops"], curve["exact_match"]):
            mark = " (trained)" if loops == trained else ""
            assert f"| {loops}{mark} | {100 * accuracy:.2f} % |" in card
        assert "![Exact match by loop count](images/loops.png)" in card
    for name in set(BUNDLED) - set(looped):
        assert "Loops at test time" not in (built[name] / "README.md").read_text()
        assert not (built[name] / "loops.json").exists()


def test_dataset_id_goes_into_the_card_metadata(tmp_path):
    folder = build_model_folder("minimal-add10", tmp_path / "out", repo_id="me/x", dataset_id="me/sums",
                                grid_samples=0)
    data = ModelCard.load(folder / "README.md").data
    assert data.datasets == ["me/sums"]
    assert {r.dataset_type for r in data.eval_results} == {"me/sums"}
    plain = ModelCard.load(build_model_folder("minimal-add10", tmp_path / "plain", repo_id="me/x",
                                              grid_samples=0) / "README.md").data
    assert plain.datasets is None and {r.dataset_type for r in plain.eval_results} == {GENERATED_DATASET_TYPE}


def test_card_describes_format_training_and_hardware(built):
    text = (built["minimal-add10"] / "README.md").read_text()
    # The figures are the checkpoint's own (its training summary and config), whatever run is bundled.
    folder = Path(hf_arith.bundled_path("minimal-add10"))
    summary = json.loads((folder / SUMMARY_FILE).read_text())
    config = json.loads((folder / "config.json").read_text())
    verify = summary["verify"]
    for fragment in ["least significant digit first (reversed)", "zero-padded to 10 digits", "| base | 10 |",
                     f"| steps | {summary['steps']:,} |", f"training time | {summary['train_seconds']:,.0f} s",
                     f"| `rope_theta` | `{config['rope_theta']}` |", "`MinimalForCausalLM`",
                     f"| tiny-adder verify | {100 * verify['accuracy']:.2f} % of {verify['total']} (seed {verify['seed']}) |"]:
        assert fragment in text, fragment


# The bundled minimal-family models, each a 10-digit adder (a card without the section fails below).
ADDERS = [name for name in BUNDLED
          if json.loads((BUNDLED_DIR / name / "config.json").read_text())["model_type"] == "hf_arith_minimal"]


@pytest.mark.parametrize("name", ADDERS)
def test_adder_cards_say_where_the_model_would_rank_and_what_each_trick_saves(built, name):
    from hf_arith.publishing.leaderboard import TRAINED_TABLE, parameter_savings, trained_rank

    model, tokenizer = load_checkpoint(name)
    text = (built[name] / "README.md").read_text()
    section = text.split("## Tiny-adder leaderboard")[1].split("## Training")[0]
    verify = verify_tiny_adder(model, tokenizer)
    rank = trained_rank(model.num_parameters(), verify["accuracy"])
    assert rank == 1 + sum(1 for p, _ in TRAINED_TABLE if p < model.num_parameters())  # it qualifies: 100 %
    assert f"**{model.num_parameters()} unique parameters**" in section and f"**#{rank}** of" in section
    savings = parameter_savings(model)
    assert savings  # every bundled adder ties tensors the leaderboard would otherwise count
    for trick, saved in savings:
        assert f"| {trick} | {saved} |" in section


def test_only_the_10_digit_minimal_adders_get_the_leaderboard_section(built):
    assert len(ADDERS) >= 2
    for name in BUNDLED:
        if name not in ADDERS:
            assert "## Tiny-adder leaderboard" not in (built[name] / "README.md").read_text()


def card_training(folder: Path) -> str:
    """The Training section of the card in an upload folder."""
    return (folder / "README.md").read_text().split("## Training")[1].split("## Files")[0]


def test_the_card_is_built_from_the_checkpoint_folder_alone(tmp_path):
    """A copy of a bundled checkpoint in a bare folder: the Training section is its training_summary.json's,
    and what that summary does not record (hardware, recipe) the card does not claim."""
    checkpoint = tmp_path / "ckpt"
    shutil.copytree(hf_arith.bundled_path("minimal-add10"), checkpoint)
    (checkpoint / "notes.json").unlink(missing_ok=True)  # derived notes could fill in the hardware
    summary = json.loads((checkpoint / SUMMARY_FILE).read_text())
    bare = {k: v for k, v in summary.items() if k not in ("machine", "recipe")}
    (checkpoint / SUMMARY_FILE).write_text(json.dumps(bare))
    training = card_training(build_model_folder(checkpoint, tmp_path / "bare", repo_id="me/x", grid_samples=0))
    assert f"| run name | `{bare['name']}` |" in training and f"| steps | {bare['steps']:,} |" in training
    assert "| hardware | not recorded |" in training and "Recipe (" not in training
    machine = {"cuda": None, "cpu_count": 7, "machine": "arm64", "threads": 3, "torch": "9.9"}
    recorded = {**bare, "steps": 123, "train_seconds": 61.0, "machine": machine,
                "recipe": {"name": "minimal-add10", "optim": {"steps": 123}}}
    (checkpoint / SUMMARY_FILE).write_text(json.dumps(recorded))
    folder = build_model_folder(checkpoint, tmp_path / "recorded", repo_id="me/x", grid_samples=0)
    training = card_training(folder)
    for row in ["| steps | 123 |", "| training time | 61 s (1.0 min) |",
                "| hardware | 7-core arm64 CPU, 3 torch threads, torch 9.9 |"]:
        assert row in training, row
    assert "Recipe (as recorded by the training run)" in training and "steps: 123" in training
    assert json.loads((folder / SUMMARY_FILE).read_text()) == recorded  # the record behind the rows, published


@pytest.fixture(scope="module")
def hub_user(built, tmp_path_factory):
    """Each built folder used as a Hub user would, in one process where hf_arith cannot be imported
    (one interpreter start for every model): the card's "how to use" snippets, pointed at the folder
    instead of the Hub repo, then `generate` on held-out problems of the lengths the model was
    trained on (the report may reach far beyond them). {name: (problems, answers, snippet, stdout,
    error or None)}."""
    cases, runs = {}, {}
    for name in BUNDLED:
        folder = built[name]
        _, tokenizer = load_checkpoint(name)
        fmt = tokenizer.arith_format
        report = json.loads((folder / EVAL_FILE).read_text())
        trained = training_range(fmt, hf_arith.bundled_path(name))
        top = min(report["max_digits"], trained[1]) if trained else report["max_digits"]
        spec = ProblemSpec(task=fmt.task, base=fmt.base, min_digits=1, max_digits=top,
                           **({"min_items": 2, "max_items": min(5, fmt.max_items)} if fmt.task == "sort" else {}))
        held = held_out_problems(spec, 64, seed=99)
        problems, answers = held.to_text(), held.answer_text()
        card = (folder / "README.md").read_text()
        blocks = card.split("## How to use")[1].split("## ")[0].split("```python")
        snippet, pipeline_snippet = (b.split("```")[0].replace(f'"someone/{name}"', repr(str(folder))) for b in blocks[1:3])
        runs[name] = snippet + pipeline_snippet + textwrap.dedent(f"""
            import json
            assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
            enc = tok({problems!r}, padding=True, return_tensors="pt")
            out = model.generate(**enc, max_new_tokens={answer_budget(tokenizer, problems)}, do_sample=False)
            print(json.dumps({{"answers": tok.decode_answers(out[:, enc.input_ids.shape[1]:]),
                              "params": model.num_parameters()}}))
        """)
        cases[name] = (problems, answers, snippet)
    script = BLOCK_HF_ARITH + textwrap.dedent(f"""
        import contextlib, io, json, traceback
        results = {{}}
        for name, code in {runs!r}.items():
            printed = io.StringIO()
            try:
                with contextlib.redirect_stdout(printed):
                    exec(code, {{"__name__": "__main__"}})
                results[name] = [printed.getvalue(), None]
            except Exception:
                results[name] = [printed.getvalue(), traceback.format_exc()[-3000:]]
        print(json.dumps(results))
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path_factory.mktemp("hf_home"))}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    return {name: (*cases[name], *results[name]) for name in BUNDLED}


@pytest.mark.parametrize("name", BUNDLED)
def test_published_folder_works_without_hf_arith(hub_user, name):
    """The test that matters: a Hub user's process, where hf_arith cannot be imported."""
    problems, answers, snippet, printed, error = hub_user[name]
    assert error is None, error
    model, tokenizer = load_checkpoint(name)
    in_process = hf_arith.solve(model, tokenizer, problems)
    lines = printed.strip().splitlines()
    example = re.search(r'tok\(\["([^"]+)"\]', snippet).group(1)
    assert lines[0] == repr([reference(example)])  # the snippet prints the right answer
    assert lines[1] == repr({"problem": example, "answer": reference(example)})  # and so does the pipeline's
    loaded = json.loads(lines[-1])
    assert loaded["params"] == model.num_parameters()
    assert loaded["answers"] == in_process  # exactly what the package's own decoder says
    correct = sum(a == b for a, b in zip(loaded["answers"], answers))
    assert correct / len(answers) >= 0.9, f"{correct}/{len(answers)} correct"
    if name == "minimal-add10":
        assert loaded["answers"] == answers


# -- every model family, bundled or not yet ---------------------------------------------------------
def _family_presets() -> list[str]:
    """One preset per model family (so a family no bundled model uses yet is published too), plus a
    sorting one: sorting has no length grid and its answers are labels."""
    from hf_arith.families import FAMILIES
    from hf_arith.training.recipe import list_presets, load_recipe

    recipes = {name: load_recipe(name) for name in list_presets()}
    chosen = [next(n for n, r in sorted(recipes.items()) if r.family == family)
              for family in FAMILIES if any(r.family == family for r in recipes.values())]
    sort = [n for n, r in sorted(recipes.items()) if r.format.get("task") == "sort"]
    return sorted(set(chosen + sort[:1]))


FAMILY_PRESETS = _family_presets()


@pytest.fixture(scope="module")
def untrained(tmp_path_factory):
    """For each preset in FAMILY_PRESETS: (checkpoint, its upload folder, its eval report); tiny, untrained."""
    from hf_arith.data.streaming import worst_case_length
    from hf_arith.runtime.saving import save_checkpoint
    from hf_arith.training.recipe import load_recipe
    from hf_arith.training.run import build_model, build_tokenizer, check_recipe, recipe_spec

    root = tmp_path_factory.mktemp("untrained")
    out = {}
    for preset in FAMILY_PRESETS:
        recipe = load_recipe(preset, ["model.hidden_size=16", "model.intermediate_size=32",
                                      "model.num_hidden_layers=1", "model.num_attention_heads=2"])
        fmt = check_recipe(recipe)
        spec = recipe_spec(recipe, fmt)
        context = worst_case_length(spec, fmt)
        tokenizer = build_tokenizer(fmt, context)
        checkpoint = save_checkpoint(build_model(recipe, tokenizer, context), tokenizer, root / preset)
        report = root / f"{preset}.json"
        assert main(["eval", str(checkpoint), "--samples", "30", "--min-digits", str(spec.min_digits),
                     "--max-digits", str(spec.max_digits), "--json", str(report)]) == 0
        folder = build_model_folder(checkpoint, root / f"{preset}-upload", repo_id=f"someone/{preset}",
                                    eval_json=report, grid_samples=1)
        out[preset] = (Path(checkpoint), folder, json.loads(report.read_text()))
    return out


def test_every_family_has_a_preset_here():
    from hf_arith.families import FAMILIES
    from hf_arith.training.recipe import load_recipe

    assert {load_recipe(n).family for n in FAMILY_PRESETS} == set(FAMILIES)


def test_every_family_publishes_and_loads_without_hf_arith(untrained, tmp_path):
    """Families not bundled yet (or trained yet): the same folder, the same answers in a process
    without hf_arith as in this one (untrained models: the answers are equal, not right)."""
    script = BLOCK_HF_ARITH + "import json, torch\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\nout = {}\n"
    expected = {}
    for preset, (checkpoint, folder, report) in untrained.items():
        model, tokenizer = load_checkpoint(checkpoint)
        fmt = tokenizer.arith_format
        card = ModelCard.load(folder / "README.md")
        assert {"custom_code", "arithmetic"} <= set(card.data.tags)
        assert card.data.eval_results[0].metric_value == report["exact_match"]
        assert (folder / GRID_FILE).is_file()  # sorting too: list sizes by digits
        assert json.loads((folder / GRID_FILE).read_text())["axes"][0] == ("items" if fmt.task == "sort" else "len_a")
        assert (folder / HEATMAP_FILE).read_bytes()[:8] == PNG_MAGIC
        spec = ProblemSpec(task=fmt.task, base=fmt.base, min_digits=1, max_digits=report["max_digits"],
                           **({"min_items": 2, "max_items": min(4, fmt.max_items)} if fmt.task == "sort" else {}))
        problems = held_out_problems(spec, 8, seed=5).to_text()
        loops = [None] + ([1, 3] if hasattr(model.config, "num_recurrences") else [])
        enc = tokenizer(problems, padding=True, return_tensors="pt")
        budget = answer_budget(tokenizer, problems)
        for n in loops:
            kwargs = {} if n is None else {"num_recurrences": n}
            with torch.no_grad():  # untrained: compare the raw tokens and logits, not answers
                gen = model.generate(**enc, max_new_tokens=budget, do_sample=False, **kwargs)
                logits = model(**enc, **kwargs).logits
            expected[f"{preset}/{n}"] = {"ids": gen.tolist(), "logits": logits.flatten().tolist()}
            script += textwrap.dedent(f"""
                model = AutoModelForCausalLM.from_pretrained({str(folder)!r}, trust_remote_code=True).eval()
                tok = AutoTokenizer.from_pretrained({str(folder)!r}, trust_remote_code=True)
                assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
                enc = tok({problems!r}, padding=True, return_tensors="pt")
                with torch.no_grad():
                    gen = model.generate(**enc, max_new_tokens={budget}, do_sample=False, **{kwargs!r})
                    logits = model(**enc, **{kwargs!r}).logits
                out[{f"{preset}/{n}"!r}] = {{"ids": gen.tolist(), "logits": logits.flatten().tolist()}}
            """)
        if len(loops) > 1:  # the loop count reaches the model
            assert expected[f"{preset}/1"]["logits"] != expected[f"{preset}/3"]["logits"]
    script += "print(json.dumps(out))\n"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home")}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    remote = json.loads(result.stdout.strip().splitlines()[-1])
    assert remote.keys() == expected.keys()
    for key, want in expected.items():
        assert remote[key]["ids"] == want["ids"], key
        assert torch.allclose(torch.tensor(remote[key]["logits"]), torch.tensor(want["logits"]), atol=1e-5), key


# -- uploading, with the two network calls replaced ------------------------------------------------
@pytest.fixture
def online(monkeypatch):
    """As if online with a token; records what the stubbed create_repo/upload_folder were given."""
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    calls = []

    def create_repo(self, repo_id, **kwargs):
        calls.append(("create_repo", repo_id, kwargs.get("repo_type"), kwargs.get("private")))
        return f"https://huggingface.co/{repo_id}"

    def upload(self, *, repo_id, folder_path, repo_type=None, **kwargs):
        folder = Path(folder_path)
        calls.append(("upload_folder", repo_id, repo_type, files_of(folder),
                      {f: (folder / f).read_bytes() for f in files_of(folder)}, self.token))

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "upload_folder", upload)
    return calls


@pytest.fixture
def no_network_calls(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a network call was made")

    monkeypatch.setattr(HfApi, "create_repo", refuse)
    monkeypatch.setattr(HfApi, "upload_folder", refuse)


def test_push_uploads_exactly_the_built_folder(online, tmp_path, capsys):
    assert main(["push", "minimal-add10", "--repo-id", "me/tiny-adder"]) == 0
    assert "Pushed minimal-add10 to https://huggingface.co/me/tiny-adder" in capsys.readouterr().out
    assert [c[0] for c in online] == ["create_repo", "upload_folder"]
    assert online[0][1:3] == ("me/tiny-adder", "model")
    _, repo_id, repo_type, uploaded, contents, token = online[1]
    assert (repo_id, repo_type, token) == ("me/tiny-adder", "model", "hf_test_token")
    # Build-only gives the very same folder, byte for byte (but the grid's own timing).
    assert main(["push", "minimal-add10", "--repo-id", "me/tiny-adder", "--output-dir", str(tmp_path / "b")]) == 0
    assert len(online) == 2  # --output-dir builds only
    assert uploaded == files_of(tmp_path / "b")
    built = {f: (tmp_path / "b" / f).read_bytes() for f in uploaded}

    def untimed(data: bytes) -> dict:
        grid = json.loads(data)
        for key in ("seconds", "problems_per_second"):
            grid["summary"].pop(key)
        return grid

    if GRID_FILE in uploaded:
        assert untimed(contents.pop(GRID_FILE)) == untimed(built.pop(GRID_FILE))
    assert contents == built


def test_push_model_can_keep_the_folder_it_uploads(online, tmp_path):
    folder, url = push_model("minimal-add10", "me/kept", output_dir=tmp_path / "kept", private=True, grid_samples=0)
    assert url == "https://huggingface.co/me/kept" and folder == tmp_path / "kept"
    assert online[0] == ("create_repo", "me/kept", "model", True)
    assert online[1][3] == files_of(folder)


def test_push_model_makes_each_check_once(online, monkeypatch, tmp_path):
    import hf_arith.publishing.hub_folder as publishing

    checks = ["check_repo_id", "resolve_checkpoint", "find_eval_results", "_check_png", "hub_token", "_empty_out_dir"]
    calls = []

    def counted(name, real):
        def check(*args, **kwargs):
            calls.append(name)
            return real(*args, **kwargs)
        return check

    for name in checks:
        monkeypatch.setattr(publishing, name, counted(name, getattr(publishing, name)))
    picture = tmp_path / "grid.png"
    picture.write_bytes(PNG_MAGIC + b"grid heatmap")
    push_model("minimal-add10", "me/once", output_dir=tmp_path / "out", heatmap=picture)
    assert sorted(calls) == sorted(checks)
    assert [c[0] for c in online] == ["create_repo", "upload_folder"]


def test_data_push_uploads_a_loadable_dataset(online, tmp_path, capsys):
    import datasets

    assert main(["data", "push", "--repo-id", "me/sums", "--train-size", "30", "--test-size", "10",
                 "--max-digits", "3", "--output-dir", str(tmp_path / "ds")]) == 0
    assert "me/sums" in capsys.readouterr().out
    assert [c[:3] for c in online] == [("create_repo", "me/sums", "dataset"), ("upload_folder", "me/sums", "dataset")]
    uploaded, contents = online[1][3], online[1][4]
    assert uploaded == ["README.md", "data/test-00000-of-00001.parquet", "data/train-00000-of-00001.parquet"]
    card = contents["README.md"].decode()
    assert "configs:" in card.split("---")[1] and 'load_dataset("me/sums")' in card
    loaded = datasets.load_dataset(str(tmp_path / "ds"))
    assert (loaded["train"].num_rows, loaded["test"].num_rows) == (30, 10)


# -- bad input: one line, and no network call ------------------------------------------------------
@pytest.mark.parametrize("repo_id", ["noslash", "a/b/c", "/name", "org/", "a b/c", "org/na--me", "org/" + "x" * 97])
def test_malformed_repo_ids_are_refused(repo_id):
    with pytest.raises(PublishError, match="malformed") as info:
        check_repo_id(repo_id)
    assert "\n" not in str(info.value)


def test_valid_repo_id_passes():
    assert check_repo_id(" my-org/tiny_adder.v2 ") == "my-org/tiny_adder.v2"


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.err.strip().splitlines()


@pytest.fixture
def sub_report(tmp_path):
    """A well-formed eval report, but for subtraction."""
    data = json.loads((Path(hf_arith.bundled_path("minimal-add10")) / EVAL_FILE).read_text())
    data["task"] = "sub"
    path = tmp_path / "sub.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("case, message", [
    ("not_a_model", "no config.json in this folder, so it is not a saved model"),
    ("bad_repo", "repo id 'no-slash' is malformed"),
    ("no_eval", "no eval results for the model card; run `hf-arith eval"),
    ("eval_missing_keys", "not an `hf-arith eval --json` report (missing"),
    ("eval_for_other_task", "are for sub in base 10, but this model does add in base 10"),
    ("not_json", "not valid JSON"),
    ("bad_heatmap", "not a PNG image"),
    ("bad_grid_samples", "grid samples must be a whole number >= 0"),
    ("bad_dataset_id", "repo id 'no slash' is malformed"),
])
def test_bad_push_requests_fail_in_one_line_before_the_network(online, no_network_calls, capsys, tmp_path,
                                                               sub_report, case, message):
    model_dir = tmp_path / "ckpt"
    model_dir.mkdir()
    for f in Path(hf_arith.bundled_path("minimal-add10")).iterdir():
        if f.is_file() and f.name != EVAL_FILE:
            (model_dir / f.name).write_bytes(f.read_bytes())
    (tmp_path / "partial.json").write_text(json.dumps({"exact_match": 1.0}))
    (tmp_path / "junk.json").write_text("{not json")
    (tmp_path / "pic.png").write_text("not a picture")
    argv = {
        "not_a_model": [tmp_path, "--repo-id", "me/x"],
        "bad_repo": ["minimal-add10", "--repo-id", "no-slash"],
        "no_eval": [model_dir, "--repo-id", "me/x"],
        "eval_missing_keys": [model_dir, "--repo-id", "me/x", "--eval-json", tmp_path / "partial.json"],
        "eval_for_other_task": ["minimal-add10", "--repo-id", "me/x", "--eval-json", sub_report],
        "not_json": ["minimal-add10", "--repo-id", "me/x", "--eval-json", tmp_path / "junk.json"],
        "bad_heatmap": ["minimal-add10", "--repo-id", "me/x", "--heatmap", tmp_path / "pic.png"],
        "bad_grid_samples": ["minimal-add10", "--repo-id", "me/x", "--grid-samples", "-1"],
        "bad_dataset_id": ["minimal-add10", "--repo-id", "me/x", "--dataset-id", "no slash"],
    }[case]
    code, err = run_cli(capsys, "push", *argv)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("hf-arith: error: ") and message in err[0]
    assert online == []


def test_offline_and_missing_token_fail_before_building(monkeypatch, no_network_calls, capsys, tmp_path):
    # conftest sets HF_HUB_OFFLINE=1 for every test
    code, err = run_cli(capsys, "push", "minimal-add10", "--repo-id", "me/x")
    assert code == 2 and err == ["hf-arith: error: HF_HUB_OFFLINE is set, so nothing can be uploaded; unset it to "
                                 "push, or give --output-dir DIR to build the folder only"]
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    code, err = run_cli(capsys, "push", "minimal-add10", "--repo-id", "me/x")
    assert code == 2 and len(err) == 1 and "no Hugging Face token: set HF_TOKEN" in err[0]
    code, err = run_cli(capsys, "data", "push", "--repo-id", "me/d", "--train-size", "5")
    assert code == 2 and len(err) == 1 and "no Hugging Face token" in err[0]
    # Building only needs neither.
    assert run_cli(capsys, "push", "minimal-add10", "--repo-id", "me/x", "--output-dir", tmp_path / "o",
                   "--grid-samples", 0)[0] == 0


@pytest.mark.parametrize("argv, message", [
    (["--repo-id", "no-slash"], "repo id 'no-slash' is malformed"),
    (["--repo-id", "me/d", "--task", "divide"], "unknown task 'divide'"),
    (["--repo-id", "me/d", "--min-digits", "5", "--max-digits", "3"], "digit range must satisfy 1 <= min <= max, got 5-3"),
])
def test_bad_data_push_requests_fail_in_one_line_before_the_network(online, no_network_calls, capsys, argv, message):
    code, err = run_cli(capsys, "data", "push", *argv)
    assert code == 2 and len(err) == 1 and err[0].startswith("hf-arith: error: ") and message in err[0], err
    assert online == []


def test_no_network_is_a_clear_error(monkeypatch, tmp_path):
    """A real HfApi against a closed local port: the connection is refused at once."""
    import socket

    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(PublishError, match=rf"no network: cannot reach http://127.0.0.1:{port}") as info:
        upload_folder(tmp_path, "me/x", token="hf_x", endpoint=f"http://127.0.0.1:{port}")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("status, message", [(401, "rejected the token"), (403, "may not write to me/x"),
                                             (500, "refused the upload")])
def test_hub_http_errors_become_one_line(online, monkeypatch, tmp_path, status, message):
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    def fail(self, repo_id, **kwargs):
        request = httpx2.Request("POST", "https://huggingface.co/api/repos/create")
        raise HfHubHTTPError(f"{status} error\nwith details", response=httpx2.Response(status, request=request))

    monkeypatch.setattr(HfApi, "create_repo", fail)
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(PublishError, match=message) as info:
        upload_folder(tmp_path, "me/x")
    assert "\n" not in str(info.value)


def test_eval_report_checks(tmp_path):
    good = json.loads((Path(hf_arith.bundled_path("minimal-add10")) / EVAL_FILE).read_text())
    path = tmp_path / "r.json"
    path.write_text(json.dumps(good))
    assert load_eval_results(path) == good
    for broken, message in [({"exact_match": 1.5}, "between 0 and 1"), ({"n": "many"}, "n has the wrong type"),
                            ({"by_max_operand_length": {"ten": 1.0}}, "operand lengths")]:
        path.write_text(json.dumps({**good, **broken}))
        with pytest.raises(PublishError, match=message):
            load_eval_results(path)


def test_build_refuses_a_non_empty_output_folder(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(PublishError, match="is not empty"):
        build_model_folder("minimal-add10", tmp_path, repo_id="me/x")
    assert files_of(tmp_path) == ["keep.txt"]


def test_a_given_heatmap_replaces_the_drawn_one(tmp_path):
    picture = tmp_path / "grid.png"
    picture.write_bytes(PNG_MAGIC + b"grid heatmap")
    folder = build_model_folder("minimal-add10", tmp_path / "out", repo_id="me/x", heatmap=picture)
    assert (folder / HEATMAP_FILE).read_bytes() == picture.read_bytes()
    assert not (folder / GRID_FILE).exists()


def test_without_a_grid_the_card_shows_the_reports_per_length_accuracy(tmp_path):
    folder = build_model_folder("minimal-add10", tmp_path / "out", repo_id="me/x", grid_samples=0)
    assert (folder / HEATMAP_FILE).read_bytes()[:8] == PNG_MAGIC
    assert not (folder / GRID_FILE).exists()
    assert "Length generalization" not in (folder / "README.md").read_text()


def test_a_sorting_models_card_has_its_grid_of_list_sizes_by_digits(tmp_path):
    folder = build_model_folder("abacus-gpt2-sort", tmp_path / "out", repo_id="me/s", grid_samples=2)
    grid = json.loads((folder / GRID_FILE).read_text())
    assert grid["axes"] == ["items", "digits"] and grid["items"][0] == 2 and grid["train_items"] == [2, 5]
    card = (folder / "README.md").read_text()
    assert (f"exact match for lists of {grid['items'][0]} to {grid['items'][1]} numbers (rows) whose numbers all\n"
            f"have the same number of digits, from {grid['lengths'][0]} to {grid['lengths'][1]} digits (columns)") in card
    assert "(lists of 2-5 numbers of 1-6 digits)" in card  # the trained range, outlined in red
    # Its shipped grid answered one view of each list; the card says so beside the five its answers vote over.
    assert grid.get("views", 1) == 1 and "% exact match, one view of each list where the model's answers vote over 5)" in card
    assert (folder / HEATMAP_FILE).read_bytes()[:8] == PNG_MAGIC


# -- the card templates ship inside the package ----------------------------------------------------
def test_card_templates_are_package_data():
    import tomllib

    package = Path(hf_arith.__file__).parent
    for name in ("model_card.md", "dataset_card.md"):
        assert "{{ card_data }}" in (package / "hub_cards" / name).read_text()
    pyproject = tomllib.loads((package.parent / "pyproject.toml").read_text())
    assert "hub_cards/*.md" in pyproject["tool"]["setuptools"]["package-data"]["hf_arith"]


@pytest.mark.slow
def test_wheel_carries_the_card_templates(tmp_path):
    """A non-editable install finds the templates: they are inside the built wheel."""
    import zipfile

    root = Path(hf_arith.__file__).parent.parent
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                             "-w", str(tmp_path), str(root)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    (wheel,) = tmp_path.glob("hf_arith-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "hf_arith/hub_cards/model_card.md" in names and "hf_arith/hub_cards/dataset_card.md" in names
    assert "hf_arith/bundled/minimal-add10/eval_results.json" in names


def test_a_model_trained_in_stages_lists_them_and_their_total_time():
    first = {"name": "looped-add", "steps": 7000, "train_seconds": 1950.0, "machine": {"cpu_count": 2}}
    summary = {"name": "looped-add-separated", "steps": 2000, "train_seconds": 650.0,
               "recipe": {"init_from": "runs/looped-add/final"}, "earlier_stages": [first], "machine": {"cpu_count": 2}}
    rows = dict(training_details(summary)["rows"])
    assert rows["stage 1 of 2"] == "`looped-add`, 7,000 steps, 1,950 s"
    assert rows["training time"] == "650 s (10.8 min)"
    assert rows["training time, all stages"] == "2,600 s (43.3 min)"
    assert "initialised from" not in rows
    del summary["earlier_stages"]  # a warm start without a record of how its checkpoint was made
    rows = dict(training_details(summary)["rows"])
    assert rows["initialised from"].startswith("`runs/looped-add/final`") and "training time, all stages" not in rows


def test_stages_on_a_cpu_and_a_gpu_get_one_time_total_per_machine():
    """CPU seconds and GPU seconds are not one figure: the card names each stage's machine and sums per machine."""
    cpu, gpu = {"cpu_count": 2, "cuda": None}, {"cpu_count": 16, "cuda": "NVIDIA H200"}
    stages = [{"name": "sort", "steps": 6000, "train_seconds": 1800.0, "machine": cpu},
              {"name": "sort", "steps": 1500, "train_seconds": 600.0, "machine": cpu}]
    summary = {"name": "sort", "steps": 3800, "train_seconds": 160.0, "recipe": {"init_from": "x"},
               "earlier_stages": stages, "machine": gpu}
    rows = dict(training_details(summary)["rows"])
    assert rows["stage 1 of 3"] == "`sort`, 6,000 steps, 1,800 s on the CPU"
    assert rows["stage 3 of 3"] == "this run, on NVIDIA H200"
    assert rows["training time, all stages"] == "2,400 s (40.0 min) on the CPU + 160 s (2.7 min) on NVIDIA H200"
    summary["machine"] = cpu  # all on one machine: one total, no machine named per stage
    rows = dict(training_details(summary)["rows"])
    assert rows["stage 1 of 3"] == "`sort`, 6,000 steps, 1,800 s" and rows["training time, all stages"] == "2,560 s (42.7 min)"


def test_a_mining_stage_says_what_it_mined_in_the_card():
    summary = {"name": "abacus-gpt2-sort", "steps": 1500, "train_seconds": 400.0,
               "mined": {"threshold": 0.99, "seed": 2, "pool": 1234, "seconds": 321.0,
                         "kinds": {"uniform": {"drawn": 200000, "wrong": 40, "right_below_threshold": 1000},
                                   "repeated": {"drawn": 20000, "wrong": 20, "right_below_threshold": 174}}}}
    row = dict(training_details(summary)["rows"])["hard-example mining"]
    assert row == ("the starting model answered 220,000 training problems, 60 wrong; the 1,234 wrong or below "
                   "confidence 0.99 were a pool for a share of the examples, 321 s")
    assert "hard-example mining" not in dict(training_details({"name": "x", "steps": 1})["rows"])
