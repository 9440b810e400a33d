"""The Gradio Space: launched on localhost and driven through its API with gradio_client."""

from __future__ import annotations

import importlib.util
import socket
import sys
from pathlib import Path

import pytest
import torch

import hf_arith
from hf_arith.loading import load_checkpoint

SPACE = Path(__file__).resolve().parent.parent / "spaces" / "arith-playground"


def load_app():
    if "arith_space_app" in sys.modules:
        return sys.modules["arith_space_app"]
    spec = importlib.util.spec_from_file_location("arith_space_app", SPACE / "app.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["arith_space_app"] = module
    spec.loader.exec_module(module)
    return module


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app():
    return load_app()


@pytest.fixture(scope="module")
def client(app):
    from gradio_client import Client

    port = free_port()
    app.demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield Client(f"http://127.0.0.1:{port}/", verbose=False)
    finally:
        app.demo.close()


# -- the Space's files --------------------------------------------------------------------------
def test_space_front_matter_matches_the_gradio_in_use():
    import gradio
    from huggingface_hub import SpaceCard

    card = SpaceCard.load(SPACE / "README.md")
    assert card.data.sdk == "gradio"
    assert card.data.sdk_version == gradio.__version__
    assert card.data.app_file == "app.py" and (SPACE / card.data.app_file).is_file()
    requirements = (SPACE / "requirements.txt").read_text()
    for package in ("torch", "transformers", "matplotlib"):
        assert package in requirements
    assert "python spaces/arith-playground/app.py" in card.text


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
        assert answer == "1000" and verdict.startswith("✅")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# -- through the API, as a browser would ----------------------------------------------------------
def test_correct_answer_with_confidence(client):
    answer, verdict, confidence = client.predict("minimal-add10", "1234567890+9876543210", 1, api_name="/solve")
    assert answer == "11111111100"
    assert verdict.startswith("✅ correct")
    rows = confidence["data"]
    assert [r[1] for r in rows] == list("00111111111")  # the 11 answer tokens, reversed as generated
    assert all(0.5 < r[2] <= 1.0 for r in rows)


@pytest.mark.parametrize("problem, message", [
    ("12a+3", "'a' is not a decimal digit"),
    ("-5+3", "negative numbers are not supported"),
    ("5+-3", "negative numbers are not supported"),
    ("12345678901+1", "an operand has more than 10 base-10 digits"),
    ("9" * 250, "problems are at most 200"),
    ("1;rm -rf /", "';' is not allowed"),
    ("", "type a problem"),
    ("7-2", "is subtraction, but this model does addition"),
])
def test_bad_input_gets_a_friendly_message(client, problem, message):
    answer, verdict, confidence = client.predict("minimal-add10", problem, 1, api_name="/solve")
    assert answer == "" and verdict.startswith("⚠️") and message in verdict
    assert confidence["data"] in ([], [[None, None, None]], [["", "", ""]])


@pytest.mark.parametrize("name", hf_arith.bundled_models())
def test_every_bundled_model_answers_and_is_checked(client, app, name):
    """Whatever is bundled: an example the model can take is answered as the package answers it and
    judged against the exact answer; one digit more than the model takes gets a friendly message."""
    from hf_arith.problems import example_problem, reference_answer

    model, tok = load_checkpoint(name)
    fmt = tok.arith_format
    longest = app.max_digits(model, tok, name)
    assert 1 <= longest <= app.MAX_CHARS
    problem = example_problem(fmt, min(5, longest))
    answer, verdict, confidence = client.predict(name, problem, 1, api_name="/solve")
    assert answer == hf_arith.solve(model, tok, [problem])[0]
    assert verdict.startswith("✅ correct") == (answer == reference_answer(problem, fmt))
    assert verdict.startswith("✅ correct")  # a trained model gets a short problem right
    assert confidence["data"] and all(0 < row[2] <= 1 for row in confidence["data"])
    # The longest problem it takes is answered; one digit more is refused in words.
    _, verdict, _ = client.predict(name, example_problem(fmt, longest), 1, api_name="/solve")
    assert not verdict.startswith("⚠️"), verdict
    too_long = example_problem(fmt, longest + 1)
    if len(too_long) <= app.MAX_CHARS:
        answer, verdict, _ = client.predict(name, too_long, 1, api_name="/solve")
        assert answer == "" and verdict.startswith("⚠️") and "\n" not in verdict, verdict
    _, note = client.predict(name, too_long, api_name="/attention")
    assert note.startswith("⚠️")


def test_only_listed_models_can_be_picked(client, app):
    from gradio_client.exceptions import AppError

    with pytest.raises((AppError, ValueError)):  # gradio refuses a value outside the dropdown's choices
        client.predict("../../etc/passwd", "1+1", 1, api_name="/solve")
    answer, verdict, _ = app.solve_problem("../../etc/passwd", "1+1", 1)  # and so does the app itself
    assert answer == "" and "unknown model" in verdict


def test_attention_tab(client, app):
    plot, note = client.predict("minimal-add10", "12+34", api_name="/attention")
    try:
        import hf_arith.attention_maps  # noqa: F401
    except ImportError:
        assert plot is None and "lacks" in note
        return
    assert plot["type"] == "matplotlib" and plot["plot"].startswith("data:image/")
    assert "1 layer(s) × 2 head(s)" in note
    _, bad = client.predict("minimal-add10", "1x1", api_name="/attention")
    assert bad.startswith("⚠️")


def test_models_tab_uses_the_grid_a_checkpoint_ships(app, monkeypatch):
    """A checkpoint's length_grid.json is drawn as is: no grid is computed for it."""
    import hf_arith.grid
    from hf_arith.model_card import GRID_FILE

    def no_grid(*args, **kwargs):
        raise AssertionError("computed a grid although the checkpoint ships one")

    monkeypatch.setattr(hf_arith.grid, "length_grid", no_grid)
    shipping = [n for n in hf_arith.bundled_models() if (Path(hf_arith.bundled_path(n)) / GRID_FILE).is_file()]
    assert shipping  # the abacus and looped bundles ship their grid
    for name in shipping:
        model, tok = load_checkpoint(name)
        figure = app.overview_figure(name, model, tok, Path(hf_arith.bundled_path(name)), None, 10)
        assert type(figure).__name__ == "Figure" and len(figure.axes) >= 2  # the grid's two panels


def test_models_tab_shows_card_summary_and_heatmap(client):
    import json

    from hf_arith.model_card import EVAL_FILE

    for name in hf_arith.bundled_models():
        text, plot = client.predict(name, api_name="/overview")
        # The figures are the checkpoint's own: its parameter count and its eval_results.json.
        report = json.loads((Path(hf_arith.bundled_path(name)) / EVAL_FILE).read_text())
        assert f"### {name}" in text and f"{load_checkpoint(name)[0].num_parameters()} unique parameters" in text
        assert f"{100 * report['exact_match']:.2f} % of {report['n']} problems" in text
        assert plot["type"] == "matplotlib" and plot["plot"].startswith("data:image/")


def test_slider_hidden_for_models_without_loops(client):
    slider, _ = client.predict("minimal-add10", api_name="/model_options")
    assert slider["visible"] is False


# -- the recurrences slider --------------------------------------------------------------------------
def test_slider_changes_the_answer_as_the_model_does(client):
    """The Solve handler with the slider at n answers as the bundled looped model's own
    `generate(..., num_recurrences=n)` does, on problems whose answers depend on n."""
    from test_recurrences import LOOP_SENSITIVE, LOOPED, direct_answers

    slider, _ = client.predict(LOOPED, api_name="/model_options")
    assert slider["visible"] is True
    model, tok = load_checkpoint(LOOPED)
    answers = {}
    for n in (1, 4):
        answers[n] = []
        for problem in LOOP_SENSITIVE:
            answer, verdict, _ = client.predict(LOOPED, problem, n, api_name="/solve")
            assert verdict.endswith(f" · {n} recurrences"), verdict
            answers[n].append(None if answer == "(malformed)" else answer)
        assert answers[n] == direct_answers(model, tok, LOOP_SENSITIVE, n)
    assert answers[1] != answers[4]


class RecordingLoop(torch.nn.Module):
    """The bundled adder behind a looped model's interface (config.num_recurrences): with one
    recurrence it answers wrongly on purpose, so the slider visibly changes the answer."""

    def __init__(self, model):
        super().__init__()
        self.inner = model
        self.config = model.config
        self.seen = []

    def forward(self, input_ids, num_recurrences=None, **kwargs):
        self.seen.append(num_recurrences)
        out = self.inner(input_ids=input_ids, **kwargs)
        if num_recurrences == 1:  # too few loops: always predict the digit 7
            out.logits = torch.full_like(out.logits, -10.0)
            out.logits[..., 7] = 10.0
        return out


@pytest.mark.parametrize("value", [0, 9, 1000, -3, 2.5, "many", float("nan")])
def test_recurrences_outside_the_slider_are_refused(app, monkeypatch, value):
    from copy import deepcopy

    model, tok = load_checkpoint("minimal-add10")
    looped = RecordingLoop(model)
    looped.config = deepcopy(model.config)
    looped.config.num_recurrences = 4
    monkeypatch.setattr(app, "load", lambda name: (looped, tok))
    answer, verdict, rows = app.solve_problem("minimal-add10", "12+30", value)
    assert (answer, rows) == ("", []) and verdict.startswith("⚠️ recurrences must be a whole number from 1 to 8")
    assert looped.seen == []  # refused before the model ran


def test_slider_reaches_the_model_and_changes_the_answer(app, monkeypatch):
    from copy import deepcopy

    model, tok = load_checkpoint("minimal-add10")
    looped = RecordingLoop(model)
    looped.config = deepcopy(model.config)
    looped.config.num_recurrences = 4
    monkeypatch.setattr(app, "load", lambda name: (looped, tok))
    slider, _ = app.on_model_change("minimal-add10")
    assert slider.visible is True and slider.value == 4 and slider.maximum == 8
    good = app.solve_problem("minimal-add10", "12+30", 4)
    bad = app.solve_problem("minimal-add10", "12+30", 1)
    assert good[0] == "42" and good[1].startswith("✅") and "4 recurrences" in good[1]
    assert bad[0] != "42" and bad[1].startswith("❌")
    assert set(looped.seen) == {4, 1}
