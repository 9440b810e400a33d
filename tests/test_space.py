"""The Gradio Space with hf_arith installed (the local playground on the bundled models): launched on
localhost and driven through its API with gradio_client, and its pieces checked against hf_arith."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from space_helpers import SPACE, free_port, load_app

import hf_arith
from hf_arith.data.problems import example_problem, reference_answer
from hf_arith.data.tasks import get_task, task_names
from hf_arith.runtime.limits import model_limits
from hf_arith.runtime.loading import load_checkpoint

LOOPED = "looped-add-window"


@pytest.fixture(scope="module")
def app():
    return load_app()


@pytest.fixture(scope="module")
def client(app):
    from gradio_client import Client

    port = free_port()
    app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield Client(f"http://127.0.0.1:{port}/", verbose=False)
    finally:
        app.demo.close()


def verdict_kind(verdict: str) -> str:
    match = re.search(r'data-verdict="([a-z]+)"', verdict)
    assert match, verdict
    return match.group(1)


def strip_cells(verdict: str) -> list[tuple[str, str, str, str]]:
    """(status, model digit, exact digit, confidence) of every cell of the digit strip but the legend."""
    cells = re.findall(r'<div class="cell (ok|bad|pad|end|work)"[^>]*><span class="d">([^<]*)</span>'
                       r'<span class="x">([^<]*)</span><span class="p">([^<]*)</span></div>', verdict)
    return cells


EMOJI = re.compile("[\u2600-\u27bf\U0001f300-\U0001faff\ufe0f]")


# -- the app's own pieces agree with hf_arith ------------------------------------------------------------
@pytest.mark.parametrize("name", hf_arith.bundled_models())
def test_limits_are_hf_ariths(app, name):
    """What the app finds from the pipeline and the config is what hf_arith.runtime.limits says."""
    entry = app.load(name)
    model, tok = load_checkpoint(name)
    limits = model_limits(model, tok, hf_arith.bundled_path(name))
    assert entry.max_digits == limits.max_digits
    assert entry.trained == limits.training_range
    if limits.loops is None:
        assert entry.loops is None
    else:
        assert entry.loops == (1, min(limits.loops[1], app.SLIDER_MAX_RECURRENCES)) and limits.loops[1] > 32
    fmt = tok.arith_format
    for digits in (1, 3, 10, 25):
        if digits <= entry.max_digits:
            assert app.sample_problem(entry, digits) == example_problem(fmt, digits)
    problems = json.loads((Path(__file__).parent / "data" / "bundled_answers.json").read_text())[name]["problems"]
    for problem in problems[::7]:
        assert app.exact_answer(entry, problem) == reference_answer(problem, fmt)


def test_the_app_answers_through_the_arithmetic_pipeline(app):
    entry = app.load("minimal-add10")
    assert isinstance(entry.pipe, hf_arith.ArithmeticPipeline)
    assert type(entry.model) is hf_arith.MinimalForCausalLM  # hf_arith's own classes when it is installed


# -- through the API, as a browser would ----------------------------------------------------------------
def test_correct_answer_with_confidence(client):
    answer, verdict, confidence = client.predict("minimal-add10", "1234567890+9876543210", 1, api_name="/solve")
    assert answer == "11111111100"
    assert verdict_kind(verdict) == "correct" and ">Correct<" in verdict
    rows = confidence["data"]
    assert [r[1] for r in rows] == list("00111111111")  # the 11 answer tokens, reversed as written
    assert all(0.5 < r[2] <= 1.0 for r in rows)
    cells = strip_cells(verdict)
    assert "".join(c[1] for c in cells) == answer  # the strip reads in normal order
    assert {c[0] for c in cells} == {"ok"} and all(c[1] == c[2] for c in cells)
    assert not EMOJI.search(verdict)


def test_wrong_digits_are_marked_in_the_strip(client, app):
    """looped-add-window with 16 loops on the 25-digit example: the strip marks exactly the digits that differ
    from the exact sum, in normal order, each with the probability of the token the model wrote."""
    answer, verdict, rows = client.predict(LOOPED, app.LONG_SUM, 16, api_name="/solve")
    truth = str(sum(int(v) for v in app.LONG_SUM.split("+")))
    assert answer != truth and verdict_kind(verdict) == "wrong" and ">Wrong<" in verdict and truth in verdict
    cells = [c for c in strip_cells(verdict) if c[0] != "end"]
    width = max(len(answer), len(truth))
    expected = ["ok" if a == b else "bad" for a, b in zip(answer.rjust(width), truth.rjust(width))]
    assert [c[0] for c in cells] == expected and "bad" in expected
    assert "".join(c[1] for c in cells) == answer and "".join(c[2] for c in cells) == truth
    written = [r for r in rows["data"] if r[1] != "<eos>"][::-1]  # written lowest digit first
    assert [c[3] for c in cells] == [app.percent(r[2]) for r in written]
    assert f"{sum(e == 'bad' for e in expected)} of {width} digits differ" in verdict
    assert "16 recurrences (trained with 2)" in verdict and "longer than any it was trained on (1-10 digits)" in verdict


def test_an_extra_leading_digit_is_wrong_and_padding_zeros_are_not(app):
    entry = app.load("minimal-add10")
    tokens = [{"token": t, "probability": 0.9} for t in "24000000000"]  # 42 written reversed at width 11
    cells, end = app.answer_cells(entry, tokens, "40+2")
    assert [c["status"] for c in cells] == ["pad"] * 9 + ["ok", "ok"] and end is None
    looped = app.load(LOOPED)
    tokens = [{"token": t, "probability": 0.5} for t in [*"0001", "<eos>"]]  # 1000 for 999+1... plus a 1
    cells, end = app.answer_cells(looped, [*tokens[:4], {"token": "1", "probability": 0.987}, tokens[4]], "999+1")
    assert [c["model"] for c in cells] == list("11000") and [c["status"] for c in cells] == ["bad"] + ["ok"] * 4
    assert end["status"] == "end"


def assert_strip_matches_verdict(app, name, problem, verdict):
    """The strip agrees with the verdict: its written working is shown as working (as many tokens as
    the task's `split_working` gives the exact answer's working), never judged; only the final answer
    is, all of it right when the verdict is Correct, some of it red when Wrong."""
    entry = app.load(name)
    cells = [c for c in strip_cells(verdict) if c[0] != "end"]
    exact = app.written_answer(entry, problem)
    working, _ = entry.fmt.task_rules.split_working(exact, entry.fmt)
    final = entry.fmt.task_rules.answer_places(exact, entry.fmt)  # after the working, or read off it
    kinds = [c[0] for c in cells]
    judged = [c for c in cells if c[0] != "work"]
    assert kinds == ["work"] * kinds.count("work") + [c[0] for c in judged]  # the working first
    if verdict_kind(verdict) == "correct":
        assert kinds.count("work") == len(working) and all(c[2] == "" for c in cells if c[0] == "work")
        assert {c[0] for c in judged} <= {"ok", "pad"} and "ok" in kinds
        assert len(judged) == len(final)
    else:
        assert verdict_kind(verdict) == "wrong" and "bad" in kinds


TASK_PROBLEMS = {  # one bundled model of every task, with a problem at its longest trained length
    "abacus-gpt2-add": "1234567890+9876543210",
    "abacus-gpt2-sub": "123-456",  # below zero
    "abacus-gpt2-mul": "12345*6789",  # the 29 red cells under "Correct"
    "abacus-gpt2-mul-10": "1234567890*987654321",  # shifted sums: the product read off the working
    "abacus-gpt2-sort": "a:31,b:7,c:120",
}


def test_task_problems_cover_every_task():
    assert {load_checkpoint(name)[1].arith_format.task for name in TASK_PROBLEMS} == set(task_names())


@pytest.mark.parametrize("name", TASK_PROBLEMS)
def test_the_strip_judges_only_the_final_answer(client, app, name):
    problem = TASK_PROBLEMS[name]
    answer, verdict, rows = client.predict(name, problem, 1, api_name="/solve")
    entry = app.load(name)
    assert answer == app.exact_answer(entry, problem) and verdict_kind(verdict) == "correct"
    assert_strip_matches_verdict(app, name, problem, verdict)
    working = [c for c in strip_cells(verdict) if c[0] == "work"]
    if entry.fmt.scratchpad != "none":
        assert working and "are its written working" in verdict
        assert entry.fmt.task_rules.working_note(entry.fmt) in verdict
        assert [c[1] for c in working] == [r[1] for r in rows["data"][:len(working)]]  # as written
        # Shifted sums' product is read off the working (its lines' lowest digits, then the last line).
        assert ("final answer read off them" in verdict) == (entry.fmt.scratchpad == "shifted_sums")
    else:
        assert not working and "written working" not in verdict


def test_wrong_working_is_not_red_and_a_wrong_product_is(app):
    """Running sums: a slip in the working with the right product is not marked; a wrong product is."""
    entry = app.load("abacus-gpt2-mul")
    written = app.written_answer(entry, "12*34")  # 2 sums, reversed: 12*4 = 48 -> '840', 12*34 = 408 -> '8040'
    assert written == "840=8040"
    def tokens(text):
        return [*({"token": c, "probability": 0.9} for c in text), {"token": "<eos>", "probability": 0.9}]
    cells, end = app.answer_cells(entry, tokens("940=8040"), "12*34")
    assert [c["status"] for c in cells] == ["work"] * 4 + ["pad", "ok", "ok", "ok"] and end["status"] == "end"
    assert "".join(c["exact"] for c in cells) == "408"
    cells, _ = app.answer_cells(entry, tokens("840=8050"), "12*34")
    assert [c["status"] for c in cells] == ["work"] * 4 + ["pad", "bad", "ok", "ok"]
    assert [c["model"] for c in cells if c["status"] != "work"] == list("0508")


def test_a_complement_answer_is_compared_as_written(app):
    """Subtraction below zero, written as the base complement: the strip compares the written digits and
    says how they read."""
    entry = app.load("abacus-gpt2-sub")
    _, verdict, _ = app.solve_problem("abacus-gpt2-sub", "123-456", 1)
    cells = [c for c in strip_cells(verdict) if c[0] != "end"]
    if entry.fmt.negative_answers == "complement":
        assert "".join(c[2] for c in cells) == "-667" and "(-667), which reads -333" in verdict
    else:
        assert "".join(c[2] for c in cells) == "-333" and "which reads" not in verdict


@pytest.mark.parametrize("name", hf_arith.bundled_models())
def test_placeholder_examples_and_description_follow_the_model(app, name):
    """Placeholders and examples stay inside the model's measured range, three or more per model, all
    answered right; the description names the model's task and claims no other."""
    entry = app.load(name)
    model, tok = load_checkpoint(name)
    limits = model_limits(model, tok, hf_arith.bundled_path(name))
    lo, hi = entry.measured
    if model.config.measured_max_digits is not None:
        assert (lo, hi) == (1, model.config.measured_max_digits)  # recorded with the model: >= 99 % on each length
    else:  # none recorded (a grid cell short at every length): the trained lengths its held-out report has at >= 99 %
        report = json.loads((Path(hf_arith.bundled_path(name)) / "eval_results.json").read_text())
        assert (lo, hi) == (1, limits.training_range[1])
        assert all(report["by_max_operand_length"][str(n)] >= app.MEASURED_EXACT for n in range(lo, hi + 1))
    assert hi <= entry.max_digits == limits.max_digits
    fmt = entry.fmt
    longest = max(app.digits_of(entry, v) for v in entry.formatting.parse_problem(
        app.placeholder(entry).removeprefix("e.g. "), fmt))
    assert longest == hi
    rows, labels = app.examples()
    mine = [r for r, label in zip(rows, labels) if r[0] == name and label == f"{name}: {r[1]}"]
    assert len(mine) >= 3
    for _, problem, loops in mine:
        operands = entry.formatting.parse_problem(problem, fmt)
        assert lo <= max(app.digits_of(entry, v) for v in operands) <= hi
        assert app.solve_problem(name, problem, loops)[0] == app.exact_answer(entry, problem)
    text = app.describe(entry)
    # Two numbers: where it was measured to answer, and what it accepts at most.
    assert f"answers 1-{hi} digits (measured at >= 99 %)" in text
    assert f"accepts up to {limits.max_digits:,} digits (its hard limit)" in text
    task = fmt.task_rules
    assert f"**{task.title.capitalize()}**" in text
    others = [t.title for t in map(get_task, task_names()) if t.name != task.name]
    assert not any(other in text.lower() for other in others)
    if task.operator != "+":
        assert " add" not in text


@pytest.mark.parametrize("problem, message", [
    ("12a+3", "'a' is not a decimal digit"),
    ("-5+3", "negative numbers are not supported"),
    ("5+-3", "negative numbers are not supported"),
    ("12345678901+1", "the longest number you typed has 11 digits; minimal-add10 takes numbers of up to 10 digits"),
    ("9" * 8300, "problems are at most 8200"),
    ("1;rm -rf /", "';' is not allowed"),
    ("", "type a problem"),
    ("7-2", "is subtraction, but this model does addition"),
])
def test_bad_input_gets_a_friendly_message(client, problem, message):
    answer, verdict, confidence = client.predict("minimal-add10", problem, 1, api_name="/solve")
    assert answer == "" and verdict_kind(verdict) == "refused" and message in verdict, verdict
    assert "config." not in verdict and not EMOJI.search(verdict)
    assert confidence["data"] in ([], [[None, None, None]], [["", "", ""]])


@pytest.mark.parametrize("name", hf_arith.bundled_models())
def test_every_bundled_model_answers_and_is_checked(client, app, name):
    """Whatever is bundled: an example the model can take is answered as the package answers it and
    judged against the exact answer; one digit more than the model takes is refused in digits."""
    model, tok = load_checkpoint(name)
    fmt = tok.arith_format
    longest = model_limits(model, tok).max_digits
    problem = example_problem(fmt, min(5, longest))
    answer, verdict, confidence = client.predict(name, problem, 1, api_name="/solve")
    assert answer == hf_arith.solve(model, tok, [problem])[0] == reference_answer(problem, fmt)
    assert verdict_kind(verdict) == "correct"  # a trained model gets a short problem right
    assert_strip_matches_verdict(app, name, problem, verdict)
    assert confidence["data"] and all(0 < row[2] <= 1 for row in confidence["data"])
    # The longest problem it takes is answered; one digit more is refused in the visitor's terms.
    _, verdict, _ = client.predict(name, example_problem(fmt, longest), 1, api_name="/solve")
    assert verdict_kind(verdict) != "refused", verdict
    too_long = example_problem(fmt, longest + 1)
    answer, verdict, _ = client.predict(name, too_long, 1, api_name="/solve")
    assert answer == "" and verdict_kind(verdict) == "refused" and "\n" not in verdict
    assert f"has {longest + 1} digits; {name} takes numbers of up to {longest} digits" in verdict
    _, note, _ = client.predict(name, too_long, 1, None, api_name="/attention")
    assert note.startswith("Cannot draw") and f"up to {longest} digits" in note


def test_only_listed_models_can_be_picked(client, app):
    from gradio_client.exceptions import AppError

    with pytest.raises((AppError, ValueError)):  # gradio refuses a value outside the dropdown's choices
        client.predict("../../etc/passwd", "1+1", 1, api_name="/solve")
    answer, verdict, _ = app.solve_problem("../../etc/passwd", "1+1", 1)  # and so does the app itself
    assert answer == "" and "unknown model '../../etc/passwd'" in verdict


def test_the_model_list_is_checked(app, tmp_path):
    card = tmp_path / "README.md"
    card.write_text("---\ntitle: t\nsdk: gradio\nmodels:\n- org/a\n- org/b\n---\n# t\n")
    assert app.listed_models("org/c, org/a", card=card) == ["org/a", "org/b", "org/c"]
    assert app.listed_models("", card=tmp_path / "missing.md") == []
    for bad, words in [("minimal-add10", "not a Hub repo id"), ("org/a..b", "not a valid Hub repo id")]:
        with pytest.raises(ValueError, match=words):
            app.listed_models(bad, card=card)
    card.write_text("---\nmodels:\n- org/x y\n---\n")
    with pytest.raises(ValueError, match="README.md models: 'org/x y' is not a valid Hub repo id"):
        app.listed_models("", card=card)


# -- attention ------------------------------------------------------------------------------------------------
def test_attention_tab(client, app):
    plot, note, selector = client.predict("minimal-add10", "12+34", 1, None, api_name="/attention")
    assert plot["type"] == "matplotlib" and plot["plot"].startswith("data:image/")
    assert note.startswith("1 layer × 2 heads") and "sees `123+987` as `3210000000+7890000000=`" in note
    assert selector["visible"] is False
    _, bad, _ = client.predict("minimal-add10", "1x1", 1, None, api_name="/attention")
    assert bad.startswith("Cannot draw")


def test_looped_attention_is_labelled_by_pass_with_a_colour_bar(app):
    figure, note, selector = app.attention_figure(LOOPED, "123+456", 4, None)
    panels = [ax for ax in figure.axes if ax.images]
    assert [ax.get_title() for ax in panels[:4]] == [f"pass 4, layer 1, head {h}" for h in range(1, 5)]
    assert len(panels) == 2 * 4  # one pass (the last of 4) of 2 layers x 4 heads
    bars = [ax for ax in figure.axes if "attention weight" in ax.get_ylabel()]
    assert len(bars) == 1
    assert selector.visible and selector.choices[0][0] == app.ALL_PASSES and len(selector.choices) == 5
    assert note.startswith("4 passes of 2 layers × 4 heads")
    figure, _, selector = app.attention_figure(LOOPED, "123+456", 4, "pass 2")
    assert [ax.get_title() for ax in figure.axes if ax.images][0] == "pass 2, layer 1, head 1"
    figure, _, _ = app.attention_figure(LOOPED, "123+456", 2, app.ALL_PASSES)
    titles = [ax.get_title() for ax in figure.axes if ax.images]
    assert len(titles) == 16 and titles[-1] == "pass 2, layer 2, head 4"


# -- the Models tab -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", hf_arith.bundled_models())
def test_models_tab_reads_the_checkpoints_own_files(client, name):
    text, figures = client.predict(name, api_name="/overview")
    folder = Path(hf_arith.bundled_path(name))
    report = json.loads((folder / "eval_results.json").read_text())
    model = load_checkpoint(name)[0]
    assert f"### {name}" in text and f"`{type(model).__name__}`, {model.num_parameters():,} parameters" in text
    assert f"{report['exact_match']:.2%} of {report['n']:,} problems" in text
    assert "lowest digit first" in text  # the number format, explained
    images = sorted(folder.glob("images/*.png"))
    assert figures.count("<img") == len(images) and figures.count("<figcaption>") == len(images) + 1
    per_length = report["by_max_operand_length"]
    assert figures.count('<div class="cell" style=') == len(per_length)  # the per-length strip
    if (folder / "length_grid.json").is_file():
        whole = json.loads((folder / "length_grid.json").read_text())
        grid = whole["summary"]
        low, high = json.loads((folder / "training_summary.json").read_text())["train_digits"]
        box = (f"red box (trained on lists of {whole['train_items'][0]}-{whole['train_items'][1]} numbers of "
               f"{low}-{high} digits)" if whole.get("items") else f"red square (trained on {low}-{high} digits)")
        assert f"Inside the {box}: {grid['in_training_range_exact_match']:.1%}" in figures
        beyond = grid["beyond_training_range_exact_match"]  # None: every length of the grid was trained on
        assert (beyond is None) == ("lengths it never saw" not in figures)
        assert beyond is None or f"beyond it, lengths it never saw: {beyond:.1%}" in figures
    if (folder / "loops.json").is_file():
        curve = json.loads((folder / "loops.json").read_text())
        assert f"{curve['loops'][-1]}: {curve['exact_match'][-1]:.1%}" in figures


def test_every_model_is_explained(app):
    text = app.glossary()
    for name, words in [("minimal-add10", "**A 720-parameter model**"), ("abacus-gpt2-add", "**Abacus** positions"),
                        ("abacus-gpt2-add-window-10-k2", "**k2**: 1 extra output head also predicts"), (LOOPED, "**Looped**: the same 2 layers")]:
        line = next(line for line in text.splitlines() if line.startswith(f"- **{name}**"))
        assert words in line, line
    assert app.ABACUS_PAPER in text and app.MULTI_TOKEN_PAPER in text


def test_a_repo_id_gets_its_model_card_link(app, monkeypatch):
    entry = app.load("minimal-add10")
    assert entry.hub_url is None and "bundled with hf_arith" in app.describe(entry)
    monkeypatch.setattr(entry, "name", "org/adder")
    assert "[model card](https://huggingface.co/org/adder)" in app.describe(entry)


# -- examples ---------------------------------------------------------------------------------------------------
def test_examples_show_a_long_sum_and_loops_breaking_it(app):
    """The 25-digit sum past the training length is answered right at the trained loop count, and the
    loops example's count breaks it: each example shows what its label says."""
    rows, labels = app.examples()
    assert len(rows) == len(labels) and len({tuple(r) for r in rows}) == len(rows)
    assert ["minimal-add10", app.TEN_DIGITS, 1] in rows
    long_rows = {r[0]: r for r, label in zip(rows, labels) if "25-digit sum (trained on 1-10 digits)" in label}
    assert set(long_rows) == {"abacus-gpt2-add"}
    hundred = {r[0]: r for r, label in zip(rows, labels) if "100-digit sum (trained on 1-10 digits)" in label}
    assert set(hundred) == {"abacus-gpt2-add-window-10-k2", "looped-add-window"}
    thousand = {r[0]: r for r, label in zip(rows, labels) if "1,000-digit sum (trained on 1-10 digits)" in label}
    assert set(thousand) == {"abacus-gpt2-add-periodic"}
    for name, problem, loops in [*hundred.values(), *thousand.values()]:
        assert len(problem.split("+")[0]) == (1000 if name in thousand else 100)
        assert app.solve_problem(name, problem, loops)[0] == str(sum(int(v) for v in problem.split("+")))
    loops = [(r, label) for r, label in zip(rows, labels) if "more loops break long sums" in label and r[0] == LOOPED]
    assert len(loops) == 1 and loops[0][0] == [LOOPED, app.LONG_SUM, 16]
    truth = str(sum(int(v) for v in app.LONG_SUM.split("+")))
    assert app.solve_problem(LOOPED, app.LONG_SUM, 2)[0] == truth
    assert app.solve_problem("abacus-gpt2-add", app.LONG_SUM, 1)[0] == truth
    assert app.solve_problem(LOOPED, app.LONG_SUM, 16)[0] != truth
    # Clicking the loops example keeps its loop count on the slider (no reset to the default).
    slider, info, answer, verdict, _ = app.run_example(*loops[0][0])
    assert slider.value == 16 and slider.visible and answer != truth and "Looped" in info
    assert verdict_kind(verdict) == "wrong"


# -- the recurrences slider ---------------------------------------------------------------------------------------
def test_slider_shown_for_looped_models_only(client):
    slider, box, info = client.predict("minimal-add10", api_name="/model_options")
    assert slider["visible"] is False and "720 parameters" in info
    slider, box, info = client.predict(LOOPED, api_name="/model_options")
    assert slider["visible"] is True and (slider["minimum"], slider["maximum"], slider["value"]) == (1, 32, 2)
    assert "Trained with 2" in slider["info"] and "1-32" in slider["info"]


def test_slider_changes_the_answer_as_the_model_does(client):
    """The Solve handler with the slider at n answers as the bundled looped model's own
    `generate(..., num_recurrences=n)` does, on problems whose answers depend on n."""
    from test_recurrences import LOOP_SENSITIVE, direct_answers

    model, tok = load_checkpoint(LOOPED)
    answers = {}
    for n in (1, 4, 16):
        answers[n] = []
        for problem in LOOP_SENSITIVE:
            answer, verdict, _ = client.predict(LOOPED, problem, n, api_name="/solve")
            assert f"{n} recurrences (trained with 2)" in verdict, verdict
            answers[n].append(None if answer == "(no answer)" else answer)
        assert answers[n] == direct_answers(model, tok, LOOP_SENSITIVE, n)
    assert answers[1] != answers[4]


@pytest.mark.parametrize("value", [0, 33, 1000, -3, 2.5, "many", float("nan")])
def test_recurrences_outside_the_slider_are_refused(app, monkeypatch, value):
    entry = app.load(LOOPED)
    calls = []
    monkeypatch.setattr(entry, "pipe", type("Spy", (), {"__call__": lambda self, *a, **k: calls.append(k),
                                                        "model": entry.model, "tokenizer": entry.tokenizer})())
    answer, verdict, rows = app.solve_problem(LOOPED, "12+30", value)
    assert (answer, rows) == ("", []) and "recurrences must be a whole number from 1 to 32 here" in verdict
    assert calls == []  # refused before the model ran


def test_the_source_folder_is_the_app_and_its_readme(app):
    """The source folder holds the one app.py (a built Space copies it) and its README; the pinned
    requirements and the Space card are written by `hf-arith space build` (tests/test_space_build.py)."""
    assert sorted(p.name for p in SPACE.iterdir() if not p.name.startswith((".", "__"))) == ["README.md", "app.py"]
    readme = (SPACE / "README.md").read_text()
    assert "python spaces/arith-playground/app.py" in readme and "hf-arith space build" in readme
    from hf_arith.evaluation import plots

    assert app.hf_arith is hf_arith and app.plots is plots


@pytest.mark.slow  # a second Python that imports the whole stack and serves the app
def test_the_readme_command_serves_the_app_offline(tmp_path):
    """`python spaces/arith-playground/app.py` from the repository root, offline, answers on its port."""
    import os
    import subprocess
    import time
    import urllib.request

    from gradio_client import Client

    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_SERVER_PORT": str(port), "GRADIO_ANALYTICS_ENABLED": "False",
           "HF_HOME": str(tmp_path / "hf_home")}
    root = SPACE.parent.parent
    proc = subprocess.Popen([sys.executable, "spaces/arith-playground/app.py"], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as page:
                    assert page.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "the app did not start"
                time.sleep(1)
        answer, verdict, _ = Client(f"http://127.0.0.1:{port}/", verbose=False).predict(
            "minimal-add10", "999+1", 1, api_name="/solve")
        assert answer == "1000" and verdict_kind(verdict) == "correct"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
