"""hf_arith playground: try every bundled arithmetic transformer in the browser.

    python spaces/arith-playground/app.py          # http://127.0.0.1:7860, offline, bundled models
    HF_ARITH_SPACE_MODELS="org/a,org/b" python spaces/arith-playground/app.py   # plus these Hub models

Pick a model, type a problem, and see the model's answer, whether it is right, and how sure it
was of every token it wrote; move the recurrences slider of a looped model; look at the
attention maps; and compare the models' length-generalization grids and cards.

Safety: the model name must be one of a fixed list, the bundled names plus the Hub repo ids the
Space's operator lists (HUB_MODELS below, or the HF_ARITH_SPACE_MODELS environment variable), never
a path and never text a visitor typed; the problem text is only ever parsed by the tokenizer's
number format after a length and character check. Nothing a user types reaches the filesystem, the
Hub or a shell.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import threading
from pathlib import Path

# Run from a source checkout without installing: the package is two folders up. On a Hub Space,
# the hf_arith/ package folder is uploaded next to this file instead.
try:
    import hf_arith  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import gradio as gr
import torch

import hf_arith
from hf_arith.decoding import greedy_decode
from hf_arith.formatting import EOS_TOKEN, PAD_TOKEN, TASK_NAMES, FormatError
from hf_arith.limits import answer_budget, model_limits
from hf_arith.loading import CheckpointError, check_repo_id, checkpoint_folder, load_checkpoint, one_line
from hf_arith.model_card import EVAL_FILE, GRID_FILE, length_heatmap, load_grid
from hf_arith.problems import example_problem, reference_answer
from hf_arith.publishing import PublishError, load_eval_results

# Hub models offered next to the bundled ones: repo ids (ORG/NAME) chosen by the Space's operator,
# here or in the HF_ARITH_SPACE_MODELS environment variable (comma-separated). Visitors only pick
# from the list. Each loads through hf_arith's own classes (no remote code runs).
HUB_MODELS: list[str] = []
MODELS_ENV = "HF_ARITH_SPACE_MODELS"


def hub_models(text: str | None = None) -> list[str]:
    """HUB_MODELS plus the repo ids in HF_ARITH_SPACE_MODELS (or `text`), each a valid repo id."""
    listed = os.environ.get(MODELS_ENV, "") if text is None else text
    ids = [*HUB_MODELS, *(part.strip() for part in listed.split(",") if part.strip())]
    for repo_id in ids:
        if "/" not in repo_id:
            raise CheckpointError(f"{MODELS_ENV}: {repo_id!r} is not a Hub repo id (ORG/NAME)")
        check_repo_id(repo_id)
    return list(dict.fromkeys(ids))


try:
    MODELS = [*hf_arith.bundled_models(), *(m for m in hub_models() if m not in hf_arith.bundled_models())]
except CheckpointError as err:  # the operator's list: the Space does not start, and says why in one line
    raise SystemExit(f"arith-playground: {one_line(err)}") from None
MAX_CHARS = 200  # far above any problem a bundled model can take; longer text is refused unread
ALLOWED = re.compile(r"[0-9a-z+\-*:, ]*")
GRID_SAMPLES = 10  # problems per cell of the Models tab's grid: quick on a CPU Space
GRID_MAX_DIGITS = 12  # a grid drawn here (no length_grid.json shipped) stops there: 144 cells at most
SLIDER_MAX_RECURRENCES = 64  # the slider's ceiling (a UI choice), below the models' own limit

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


class InputError(ValueError):
    """Something the user typed or picked that the app refuses, with a friendly message."""


# -- models ----------------------------------------------------------------------------------------
# Gradio runs events in worker threads. Loading one checkpoint in two threads at once fails (the
# tied lm_head comes out "missing"), and the attention tab switches a model's attention backend
# while it runs: so models are loaded, and run, one call at a time (they are tiny).
MODEL_LOCK = threading.RLock()


def serialized(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with MODEL_LOCK:
            return fn(*args, **kwargs)
    return wrapper


@serialized
@functools.cache
def load(name: str):
    """(model, tokenizer) of a listed model (bundled, or a repo id from the operator's list, from the
    Hugging Face cache or the Hub); names outside MODELS are refused, never opened."""
    if name not in MODELS:
        raise InputError(f"unknown model {name!r}; pick one of: {', '.join(MODELS)}")
    try:
        return load_checkpoint(name)
    except CheckpointError as err:
        raise InputError(f"model {name} cannot be loaded: {one_line(err)}") from None


def recurrence_range(model, tokenizer) -> tuple[int, int] | None:
    """The slider's range for a looped model (None for others): the model's loops range
    (hf_arith.limits), narrowed to twice its default (at least 8) and SLIDER_MAX_RECURRENCES."""
    loops = model_limits(model, tokenizer).loops
    if loops is None:
        return None
    lo, hi = loops
    return lo, min(hi, SLIDER_MAX_RECURRENCES, max(2 * int(model.config.num_recurrences), 8))


def model_kwargs(model, tokenizer, recurrences) -> dict | None:
    """{"num_recurrences": n} for a looped model; an InputError for a value outside the slider."""
    span = recurrence_range(model, tokenizer)
    if span is None or recurrences is None:
        return None
    lo, hi = span
    try:
        value = float(recurrences)
    except (TypeError, ValueError):
        value = float("nan")
    if not (lo <= value <= hi) or value != int(value):
        raise InputError(f"recurrences must be a whole number from {lo} to {hi}, got {recurrences!r}")
    return {"num_recurrences": int(value)}


_DIGITS: dict[str, int] = {}


def max_digits(model, tokenizer, name: str | None = None) -> int:
    """The longest operands the model takes (hf_arith.limits), at most what MAX_CHARS holds;
    remembered per bundled model."""
    if name in _DIGITS:
        return _DIGITS[name]
    best = min(model_limits(model, tokenizer).max_digits, MAX_CHARS // 2)
    if name in MODELS:
        _DIGITS[name] = best
    return best


# -- solving one problem -----------------------------------------------------------------------------
def check_problem(text, tokenizer, model) -> str:
    """The problem as the tokenizer will read it, or an InputError that says what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise InputError("type a problem, for example " + example_problem(tokenizer.arith_format, 3))
    if len(text) > MAX_CHARS:
        raise InputError(f"that is {len(text)} characters; problems are at most {MAX_CHARS}")
    problem = text.strip().replace(" ", "")
    if problem.startswith("-") or re.search(r"[+*,:]-", problem):
        raise InputError("negative numbers are not supported: operands are whole numbers from 0 up")
    if not ALLOWED.fullmatch(problem):
        bad = next(c for c in problem if not ALLOWED.fullmatch(c))
        raise InputError(f"{bad!r} is not allowed: use digits 0-9 and {operator_help(tokenizer)}")
    try:  # the number format, then the model's limits (context, abacus range)
        model_limits(model, tokenizer).check_problems([problem])
    except FormatError as err:
        raise InputError(str(err)) from None
    return problem


def operator_help(tokenizer) -> str:
    fmt = tokenizer.arith_format
    if fmt.task == "sort":
        return "labelled items such as a:31,b:7,c:120"
    return {"add": "'+'", "sub": "'-'", "mul": "'*'"}[fmt.task] + " between two numbers"


@torch.inference_mode()
def answer_with_confidence(model, tokenizer, problem: str, kwargs: dict | None):
    """The model's answer and, for every token it wrote, the probability it gave that token."""
    fmt = tokenizer.arith_format
    enc = tokenizer([problem], return_tensors="pt")
    ids, mask = enc["input_ids"], enc["attention_mask"]
    new = greedy_decode(model, ids, mask, answer_budget(tokenizer, [problem]),
                        eos_token_id=tokenizer.eos_token_id if fmt.end_token else None,
                        pad_token_id=tokenizer.pad_token_id, model_kwargs=kwargs)
    answer = tokenizer.decode_answers(new)[0]
    # One teacher-forced pass gives the distribution behind each token. The last written token is
    # not fed back (as in decoding), so an answer that ran to the budget without an end token still
    # fits the model's context and position range.
    full = torch.cat([ids, new[:, :-1]], dim=1)
    logits = model(input_ids=full, attention_mask=torch.ones_like(full), **(kwargs or {})).logits
    steps = logits[0, ids.shape[1] - 1 :].float().softmax(-1)
    probs = steps.gather(1, new[0][:, None])[:, 0].tolist()
    vocab = fmt.vocab()
    rows = []
    for i, (token_id, p) in enumerate(zip(new[0].tolist(), probs)):
        token = vocab[token_id] if token_id < len(vocab) else "?"
        rows.append([i + 1, token, round(p, 6)])
        if token in (EOS_TOKEN, PAD_TOKEN):
            break
    return answer, rows


@serialized
def solve_problem(model_name: str, problem: str, recurrences=None):
    """The Solve button: (answer, verdict markdown, confidence rows)."""
    try:
        model, tokenizer = load(model_name)
        clean = check_problem(problem, tokenizer, model)
        loops = model_kwargs(model, tokenizer, recurrences)
    except InputError as err:
        return "", f"⚠️ {err}", []
    try:
        answer, rows = answer_with_confidence(model, tokenizer, clean, loops)
    except ValueError as err:  # a limit the checks above missed: still a message, not an error page
        return "", f"⚠️ this model cannot take that problem: {str(err).splitlines()[0]}", []
    truth = reference_answer(clean, tokenizer.arith_format)
    lowest = min((r[2] for r in rows), default=1.0)
    if answer is None:
        verdict = f"❌ the model did not write a well-formed answer (the exact answer is {truth})"
    elif answer == truth:
        verdict = f"✅ correct (lowest token confidence {100 * lowest:.1f} %)"
    else:
        verdict = f"❌ wrong: the exact answer is {truth} (lowest token confidence {100 * lowest:.1f} %)"
    if loops:
        verdict += f" · {loops['num_recurrences']} recurrences"
    return answer if answer is not None else "(malformed)", verdict, rows


@serialized
def attention_figure(model_name: str, problem: str):
    """The Attention tab: (figure or None, message)."""
    try:
        model, tokenizer = load(model_name)
        clean = check_problem(problem, tokenizer, model)
    except InputError as err:
        return None, f"⚠️ {err}"
    try:  # another part of the package; the Space works without it
        from hf_arith.attention_maps import attention_maps, plot_attention
    except ImportError:
        return None, "Attention maps need hf_arith.attention_maps, which this installation lacks."
    try:
        tokens, maps = attention_maps(model, tokenizer, clean)
    except ValueError as err:
        return None, f"⚠️ this model cannot take that problem: {str(err).splitlines()[0]}"
    return plot_attention(tokens, maps), f"{len(maps)} layer(s) × {maps[0].shape[0]} head(s) for `{' '.join(tokens)}`"


@serialized
def on_model_change(model_name: str):
    """Show the recurrences slider only for looped models; suggest a problem the model can take."""
    model, tokenizer = load(model_name)
    example = example_problem(tokenizer.arith_format, min(5, max_digits(model, tokenizer, model_name)))
    span = recurrence_range(model, tokenizer)
    if span is not None:
        lo, hi = span
        default = min(hi, int(model.config.num_recurrences))
        slider = gr.Slider(minimum=lo, maximum=hi, step=1, value=default, visible=True)
    else:
        slider = gr.Slider(visible=False)
    return slider, gr.Textbox(placeholder=f"e.g. {example}")


# -- the Models tab ------------------------------------------------------------------------------------
@functools.cache
@serialized
def model_overview(model_name: str):
    """(card summary markdown, length-generalization figure) of a listed model."""
    model, tokenizer = load(model_name)
    fmt = tokenizer.arith_format
    folder = checkpoint_folder(model)  # the bundled folder, or the repo's snapshot in the cache
    try:
        report = load_eval_results(folder / EVAL_FILE) if (folder / EVAL_FILE).is_file() else None
    except PublishError:
        report = None
    digits = max_digits(model, tokenizer, model_name)
    order = "reversed (least significant digit first)" if fmt.reverse_answer else "most significant digit first"
    lines = [
        f"### {model_name}",
        f"- **task**: {TASK_NAMES[fmt.task]} in base {fmt.base}, operands up to {digits} digits",
        f"- **architecture**: `{type(model).__name__}`, {model.num_parameters()} unique parameters",
        f"- **number format**: answers {order}"
        + (f", operands zero-padded to {fmt.operand_width} digits" if fmt.operand_width else ""),
    ]
    if model_limits(model, tokenizer).loops is not None:
        lines.append(f"- **recurrences**: {model.config.num_recurrences} by default")
    if report:
        lines.append(f"- **held-out exact match**: {100 * report['exact_match']:.2f} % of {report['n']} problems "
                     f"({report['min_digits']}-{report['max_digits']} digits)")
    return "\n".join(lines), overview_figure(model_name, model, tokenizer, folder, report, digits)


def overview_figure(model_name, model, tokenizer, folder: Path, report: dict | None, digits: int):
    """The checkpoint's own length grid (length_grid.json) when it ships one; else a small grid
    drawn now, up to the evaluated lengths; else (sorting, no grid module) the report's
    per-length accuracy; None when there is nothing to show."""
    title = f"{model_name}: exact match per operand-length pair"
    try:
        from hf_arith.grid import length_grid
        from hf_arith.plots import plot_grid
    except ImportError:
        plot_grid = None
    shipped = load_grid(folder / GRID_FILE, tokenizer.arith_format)
    if plot_grid is not None and shipped is not None:
        return plot_grid(shipped, title=title + f" ({shipped['samples_per_cell']} problems per cell)")
    if plot_grid is not None:
        top = min(digits, GRID_MAX_DIGITS, report["max_digits"] if report else GRID_MAX_DIGITS)
        try:
            result = length_grid(model, tokenizer, (1, top), samples_per_cell=GRID_SAMPLES,
                                 train_range=model_limits(model, tokenizer, folder).training_range)
            return plot_grid(result, title=title)
        except FormatError:  # no grid for this task (sorting) or these lengths
            pass
    if report:
        return length_heatmap(report, title=f"{model_name}: exact match (%) by operand length")
    return None


# -- the page ------------------------------------------------------------------------------------------
def build_demo() -> gr.Blocks:
    first = MODELS[0] if MODELS else None
    with gr.Blocks(title="hf_arith playground") as demo:
        gr.Markdown("# hf_arith playground\nTiny transformers that do exact integer arithmetic, digit by digit. "
                    "Pick a model and type a problem such as `1234567890+9876543210`.")
        with gr.Row():
            model_box = gr.Dropdown(choices=MODELS, value=first, label="model", elem_id="model")
            recurrences = gr.Slider(minimum=1, maximum=16, step=1, value=1, label="recurrences", visible=False,
                                    elem_id="recurrences")
        with gr.Tabs():
            with gr.Tab("Solve"):
                problem = gr.Textbox(label="problem", max_length=MAX_CHARS, elem_id="problem",
                                     placeholder="e.g. 1234567890+9876543210")
                solve_button = gr.Button("Solve", variant="primary", elem_id="solve")
                answer = gr.Textbox(label="answer", interactive=False, elem_id="answer")
                verdict = gr.Markdown(elem_id="verdict")
                confidence = gr.Dataframe(headers=["token #", "token (as generated)", "confidence"],
                                          label="per-token confidence (probability of the token the model wrote)",
                                          interactive=False, elem_id="confidence")
            with gr.Tab("Attention"):
                attention_button = gr.Button("Show attention maps for this problem", elem_id="attention")
                attention_note = gr.Markdown()
                attention_plot = gr.Plot(label="attention (rows: queries, columns: keys)")
            with gr.Tab("Models"):
                overview_box = gr.Dropdown(choices=MODELS, value=first, label="model card", elem_id="overview_model")
                overview_text = gr.Markdown()
                overview_plot = gr.Plot(label="length generalization")

        inputs = [model_box, problem, recurrences]
        outputs = [answer, verdict, confidence]
        solve_button.click(solve_problem, inputs, outputs, api_name="solve")
        problem.submit(solve_problem, inputs, outputs, api_name=False)
        recurrences.release(solve_problem, inputs, outputs, api_name=False)  # watch the answer change
        model_box.change(on_model_change, model_box, [recurrences, problem], api_name="model_options")
        attention_button.click(attention_figure, [model_box, problem], [attention_plot, attention_note],
                               api_name="attention")
        overview_box.change(model_overview, overview_box, [overview_text, overview_plot], api_name="overview")
        if first is not None:
            demo.load(model_overview, overview_box, [overview_text, overview_plot], api_name=False)
            demo.load(on_model_change, model_box, [recurrences, problem], api_name=False)
    return demo


demo = build_demo()

if __name__ == "__main__":
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
