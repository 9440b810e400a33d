"""The `arithmetic` pipeline: registered by `import hf_arith`, and written by `save_checkpoint` next
to every saved model as remote code that runs where hf_arith cannot be imported."""

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from remote_code import BLOCK_HF_ARITH, run_remote_code
from test_confidence import beyond_range_sums
from test_recurrences import LOOP_SENSITIVE
from transformers import pipeline

import hf_arith
from hf_arith.data.formatting import FormatError
from hf_arith.runtime.loading import load_checkpoint
from hf_arith.runtime.pipeline_arithmetic import DEFAULT_BATCH_SIZE, ArithmeticPipeline
from hf_arith.runtime.saving import save_checkpoint

RECORD = json.loads((Path(__file__).parent / "data" / "bundled_answers.json").read_text())
CUSTOM_PIPELINES = {"arithmetic": {"impl": "pipeline_arithmetic.ArithmeticPipeline", "pt": ["AutoModelForCausalLM"],
                                   "type": "text"}}


@pytest.fixture(scope="module")
def pipe():
    """The pipeline of a bundled model, built once per model."""
    built = {}

    def get(name):
        if name not in built:
            built[name] = pipeline("arithmetic", model=hf_arith.bundled_path(name))
        return built[name]

    return get


def true_sum(problem: str) -> str:
    left, right = problem.split("+")
    return str(int(left) + int(right))


def teacher_forced_probabilities(model, tokenizer, problem: str, written: list[int], **kwargs) -> list[float]:
    """The probability the model gives each written token, from one forward pass over prompt + answer."""
    enc = tokenizer([problem], return_tensors="pt")
    full = torch.cat([enc.input_ids, torch.tensor([written[:-1]], dtype=torch.long)], dim=1)
    with torch.no_grad():
        logits = model(input_ids=full, attention_mask=torch.ones_like(full), **kwargs).logits
    steps = logits[0, enc.input_ids.shape[1] - 1:].float().softmax(-1)
    return steps.gather(1, torch.tensor(written)[:, None])[:, 0].tolist()


def test_import_hf_arith_registers_the_task(pipe):
    p = pipe("minimal-add10")
    assert isinstance(p, ArithmeticPipeline) and p.task == "arithmetic"
    assert p("123+456") == {"problem": "123+456", "answer": "579"}
    assert p("1234567890+9876543210") == {"problem": "1234567890+9876543210", "answer": "11111111100"}


@pytest.mark.parametrize("name", ["minimal-add10", "looped-add-window"])
def test_the_pipeline_writes_what_solve_writes(pipe, name):
    """Every recorded answer, wrong ones included, for every loop count the record holds."""
    problems, runs = RECORD[name]["problems"], RECORD[name]["runs"]
    for run in runs:
        kwargs = run["setting"].get("model_kwargs", {})
        assert [out["answer"] for out in pipe(name)(problems, **kwargs)] == run["answers"], run["setting"]
    if name == "looped-add-window":  # the loop count reaches the model: one loop answers differently
        assert runs[0]["setting"] == {} and runs[1]["setting"] == {"model_kwargs": {"num_recurrences": 1}}
        model, tok = pipe(name).model, pipe(name).tokenizer
        default = [out["answer"] for out in pipe(name)(LOOP_SENSITIVE)]
        one = [out["answer"] for out in pipe(name)(LOOP_SENSITIVE, num_recurrences=1)]
        assert default == hf_arith.solve(model, tok, LOOP_SENSITIVE) != one
        assert one == hf_arith.solve(model, tok, LOOP_SENSITIVE, model_kwargs={"num_recurrences": 1})


def test_a_list_is_decoded_in_batches(pipe, monkeypatch):
    p = pipe("abacus-gpt2-add")
    calls = []
    import hf_arith.runtime.pipeline_arithmetic as module

    decode = module.greedy_decode
    monkeypatch.setattr(module, "greedy_decode", lambda model, ids, *a, **kw: calls.append(ids.shape[0]) or
                        decode(model, ids, *a, **kw))
    problems = [f"{i}+{i * 7919}" for i in range(DEFAULT_BATCH_SIZE + 6)]
    answers = [out["answer"] for out in p(problems)]
    assert calls == [DEFAULT_BATCH_SIZE, 6]
    assert answers == [str(i + i * 7919) for i in range(len(problems))]
    calls.clear()
    assert [out["answer"] for out in p(problems[:5], batch_size=2)] == answers[:5]
    assert calls == [2, 2, 1]


def test_a_batch_answers_each_problem_as_it_would_alone(pipe):
    """Each problem keeps its own answer budget in a batch of longer ones: a model that writes
    too many digits gets None, alone or not (the k2 model sometimes does beyond its measured 100 digits)."""
    p = pipe("abacus-gpt2-add-window-10-k2")
    # 1-20 digits, then 105-115 (two of which it leaves unfinished)
    problems = RECORD["abacus-gpt2-add-window-10-k2"]["problems"][108:120] + beyond_range_sums(12, seed=0)
    batched = p(problems, batch_size=len(problems), return_confidence=True)
    alone = [p(problem, return_confidence=True) for problem in problems]
    for b, a in zip(batched, alone, strict=True):
        assert (b["problem"], b["answer"]) == (a["problem"], a["answer"])
        assert [t["token"] for t in b["tokens"]] == [t["token"] for t in a["tokens"]]
        assert b["confidence"] == pytest.approx(a["confidence"], abs=1e-4)  # padding moves the last bits
    answers = [out["answer"] for out in alone]
    assert None in answers and sum(a == true_sum(q) for q, a in zip(problems, answers)) >= 10


@pytest.mark.parametrize("name,kwargs", [("minimal-add10", {}), ("abacus-gpt2-add", {}),
                                         ("looped-add-window", {"num_recurrences": 1})])
def test_confidence_is_the_lowest_token_probability(pipe, name, kwargs):
    p = pipe(name)
    problem = "4825+99999" if name != "looped-add-window" else "98765432109876543210+1"
    out = p(problem, return_confidence=True, **kwargs)
    assert set(out) == {"problem", "answer", "confidence", "tokens"}
    assert p(problem, **kwargs)["answer"] == out["answer"]
    tokens = [t["token"] for t in out["tokens"]]
    written = p.tokenizer.convert_tokens_to_ids(tokens)
    end = p.tokenizer.arith_format.end_token
    assert (tokens[-1] == "<eos>") == end and "<eos>" not in tokens[:-1]
    if out["answer"] is not None:
        digits = [t for t in tokens if t != "<eos>"]
        assert "".join(reversed(digits)).lstrip("0") == out["answer"]  # the reversed format, lowest digit first
    expected = teacher_forced_probabilities(p.model, p.tokenizer, problem, written, **kwargs)
    assert [t["probability"] for t in out["tokens"]] == pytest.approx(expected, abs=1e-5)
    assert out["confidence"] == min(expected) == pytest.approx(min(t["probability"] for t in out["tokens"]))
    assert 0 < out["confidence"] <= 1


@pytest.mark.parametrize("name,call,error,words", [
    ("minimal-add10", lambda p: p(123), TypeError, ["string", "int"]),
    ("minimal-add10", lambda p: p("12-3"), FormatError, ["subtraction", "'+'"]),
    ("minimal-add10", lambda p: p("12345678901+1"), FormatError, ["12345678901+1", "10"]),
    ("minimal-add10", lambda p: p("1+1", num_recurrences=2), ValueError, ["num_recurrences", "no recurrence"]),
    ("minimal-add10", lambda p: p("1+1", temperature=0.5), TypeError, ["'temperature'", "return_confidence"]),
    ("abacus-gpt2-add", lambda p: p("9" * 39 + "+1"), ValueError, ["too long", "41", "40", "max_new_tokens"]),
    # Lopsided: 15 x 1 digits fits the context, but the card's hard limit is 14 digits for every operand.
    ("abacus-gpt2-mul-10", lambda p: p("9" * 15 + "*1"), ValueError, ["too long", "15 digits", "at most 14",
                                                                       "max_operand_digits"]),
    ("looped-add-window", lambda p: p("1+1", num_recurrences=0), ValueError, ["num_recurrences", "0"]),
])
def test_bad_input_is_a_one_line_error(pipe, name, call, error, words):
    with pytest.raises(error) as info:
        call(pipe(name))
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_a_saved_folder_names_the_pipeline_and_carries_its_file(tmp_path):
    model, tok = load_checkpoint("looped-add-window")
    folder = save_checkpoint(model, tok, tmp_path / "saved")
    config = json.loads((folder / "config.json").read_text())
    assert config["custom_pipelines"] == CUSTOM_PIPELINES
    assert "custom_pipelines" not in model.config.to_dict()  # only the saved config names remote code
    source = (folder / "pipeline_arithmetic.py").read_text()
    imported = {alias.name.split(".")[0] for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    assert imported == {"__future__", "numbers", "types", "torch", "transformers"}
    # Its siblings, the decoder and the views' vote `solve` uses, travel with it.
    siblings = {node.module for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom) and node.level}
    assert siblings == {"decoding", "answer_views"}
    assert all((folder / f"{name}.py").is_file() for name in siblings)
    # With hf_arith installed, the folder's pipeline runs as remote code or as the installed class.
    for p in (pipeline("arithmetic", model=str(folder), trust_remote_code=True),
              pipeline("arithmetic", model=str(folder), pipeline_class=ArithmeticPipeline)):
        assert p(["12345+67890", "5+5"], num_recurrences=4) == [
            {"problem": "12345+67890", "answer": "80235"}, {"problem": "5+5", "answer": "10"}]


def test_the_pipeline_runs_as_remote_code_without_hf_arith(tmp_path, pipe):
    folders = {}
    for name in ("minimal-add10", "looped-add-window"):
        model, tok = load_checkpoint(name)
        folders[name] = str(save_checkpoint(model, tok, tmp_path / name))
    problems = ["1234567890+9876543210", "7+5", "0+0"]
    long_sums = LOOP_SENSITIVE  # sums that one loop answers differently (asserted below)
    expected = {
        "minimal": pipe("minimal-add10")(problems),
        "minimal_confidence": pipe("minimal-add10")("4825+99999", return_confidence=True),
        "looped": pipe("looped-add-window")(long_sums),
        "looped_1": pipe("looped-add-window")(long_sums, num_recurrences=1),
        "looped_confidence": pipe("looped-add-window")(long_sums[:2], return_confidence=True, batch_size=2),
    }
    assert expected["looped"] != expected["looped_1"]
    script = BLOCK_HF_ARITH + textwrap.dedent(f"""
        import json
        from transformers import pipeline
        minimal = pipeline("arithmetic", model={folders["minimal-add10"]!r}, trust_remote_code=True)
        looped = pipeline(model={folders["looped-add-window"]!r}, trust_remote_code=True)  # the task from the config
        for p in (minimal, looped):
            assert type(p).__module__.startswith("transformers_modules"), type(p).__module__
            assert type(p.model).__module__.startswith("transformers_modules"), type(p.model).__module__
        long_sums = {long_sums!r}
        print(json.dumps({{
            "task": looped.task,
            "single": minimal({problems[0]!r}),
            "minimal": minimal({problems!r}),
            "minimal_confidence": minimal("4825+99999", return_confidence=True),
            "looped": looped(long_sums),
            "looped_1": looped(long_sums, num_recurrences=1),
            "looped_confidence": looped(long_sums[:2], return_confidence=True, batch_size=2),
        }}))
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home")}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    remote = json.loads(result.stdout.strip().splitlines()[-1])
    assert remote.pop("task") == "arithmetic"
    assert remote.pop("single") == {"problem": problems[0], "answer": "11111111100"}
    for key in ("minimal", "looped", "looped_1"):
        assert remote[key] == expected[key], key
    for key in ("minimal_confidence", "looped_confidence"):
        got, want = remote[key], expected[key]
        if isinstance(want, dict):
            got, want = [got], [want]
        for g, w in zip(got, want, strict=True):
            assert g["answer"] == w["answer"]
            assert g["confidence"] == pytest.approx(w["confidence"], abs=1e-6)
            assert [t["token"] for t in g["tokens"]] == [t["token"] for t in w["tokens"]]


def test_text_generation_and_the_tokenizer_without_hf_arith(tmp_path):
    """Where hf_arith cannot be imported: `pipeline("text-generation")` prints the plain decimal answer,
    `tok.decode` reads a whole generated sequence so, `text_target` gives labels, and `truncation=True`
    keeps the longest problem the model takes whole (model_max_length covers it)."""
    from hf_arith.runtime.limits import model_limits

    model, tok = load_checkpoint("abacus-gpt2-mul")
    folder = save_checkpoint(model, tok, tmp_path / "mul")
    longest = model_limits(model, tok).longest_problem()
    answer = hf_arith.solve(model, tok, ["12345*6789"])[0]
    body = f"""
        from transformers import pipeline
        generate = pipeline("text-generation", model=model, tokenizer=tok)
        text = generate("12345*6789")[0]["generated_text"]
        out = model.generate(**enc)
        example = tok("12*34", text_target="408")
        print(json.dumps({{"text": text, "decoded": tok.decode(out[0]), "raw": tok.decode(out[0], raw=True),
                          "labels": example["labels"], "ids": example["input_ids"],
                          "longest": tok({longest!r}, truncation=True)["input_ids"] == tok({longest!r})["input_ids"],
                          "max": tok.model_max_length}}))
    """
    got = run_remote_code(folder, ["12345*6789"], body, tmp_path / "hf_home")
    assert got["text"] == f"12345*6789={answer}" == got["decoded"]
    assert got["raw"].startswith(tok.format_problem("12345*6789")) and "<eos>" in got["raw"]
    local = tok("12*34", text_target="408")
    assert got["labels"] == local["labels"] and got["ids"] == local["input_ids"] and -100 in got["labels"]
    assert got["longest"] and got["max"] == model.config.max_position_embeddings
