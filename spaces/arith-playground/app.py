"""hf_arith playground: tiny transformers that do exact integer arithmetic, in the browser.

    python spaces/arith-playground/app.py          # http://127.0.0.1:7860: the bundled models, offline
    hf-arith space build DIR --model ORG/NAME      # a Space folder holding this file, deployable as is

Pick a model, type a problem or click an example, and see the model's answer digit by digit (green
right, red wrong), how sure it was of each token, what the recurrences slider of a looped model
changes, its attention maps, and what each model is and how far it generalizes.

One app, two ways of finding models; everything else is the same code:
- with hf_arith importable (a checkout, or the package installed): the bundled checkpoints plus the
  listed repo ids, loaded with hf_arith's own classes (`hf_arith.load`);
- without hf_arith (a Space built by `hf-arith space build`): the listed repo ids, each loaded from
  its own files with transformers: the repo's remote code (`trust_remote_code=True`) and its
  `arithmetic` pipeline.
Answers come from the model's `arithmetic` pipeline (`return_confidence=True`); the longest operands
are those the pipeline accepts, the loop range comes from the config; the Models tab shows the
repo's own files (config, eval_results.json, length_grid.json, training_summary.json, loops.json,
images/). Attention maps are drawn by hf_arith's plots module (copied next to this file as
hf_arith_plots.py in a built Space).

Listed repo ids: `models:` in the README.md next to this file (the Space card, which `hf-arith
space build` writes) and the HF_ARITH_SPACE_MODELS environment variable ("org/a,org/b").

Safety: the model name must be one of that fixed list, never a path and never text a visitor
typed; the listed repos' code runs in the Space (list only repos you trust). The problem text is
only parsed by the model's number format after a length and character check; nothing a visitor
types reaches the filesystem, the Hub or a shell, and every page text built from it is escaped.
"""

from __future__ import annotations

import base64
import functools
import html
import importlib
import itertools
import json
import os
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import gradio as gr
import torch
from huggingface_hub import SpaceCard
from huggingface_hub.utils import HFValidationError, validate_repo_id

HERE = Path(__file__).resolve().parent
try:
    import hf_arith
except ImportError:
    hf_arith = None
    _checkout = HERE.parents[1] if len(HERE.parents) > 1 else HERE
    if (_checkout / "hf_arith" / "__init__.py").is_file():  # a source checkout, not installed
        sys.path.insert(0, str(_checkout))
        try:
            import hf_arith
        except ImportError:
            hf_arith = None

if hf_arith is not None:
    from hf_arith.evaluation import plots
    from hf_arith.runtime.loading import checkpoint_folder
else:
    try:
        import hf_arith_plots as plots  # hf_arith/evaluation/plots.py, copied here by `hf-arith space build`
    except ImportError:
        raise SystemExit("arith-playground: neither hf_arith nor hf_arith_plots.py (next to app.py) can be "
                         "imported; build the Space folder with `hf-arith space build`") from None

MODELS_ENV = "HF_ARITH_SPACE_MODELS"
CARD_FILE = HERE / "README.md"
MAX_CHARS = 8200  # above any problem a model here takes (two 4,094-digit operands: 8,189); longer text is refused unread
ALLOWED = re.compile(r"[0-9a-z+\-*:, ]*")
# The slider's ceiling: the models take up to MAX_RECURRENCES (256), but answers must stay well under
# a second, and the measured loops curves (loops.json) stop at 32.
SLIDER_MAX_RECURRENCES = 32
TEN_DIGITS = "1234567890+9876543210"
LONG_SUM = "3141592653589793238462643+2718281828459045235360287"  # 25 digits of pi plus 25 of e
HUNDRED_DIGITS = 100  # operand length of the long example for models that take it (sample_problem writes it)
THOUSAND_DIGITS = 1000  # the same for models that take 1,000-digit operands
ABACUS_PAPER = "https://arxiv.org/abs/2405.17399"  # McLeish et al. 2024, abacus embeddings and looped models
MULTI_TOKEN_PAPER = "https://arxiv.org/abs/2404.19737"  # Gloeckle et al. 2024, multi-token prediction
END_TOKENS = ("<eos>", "<pad>")

# One thread: these models are tiny, so each step is per-op overhead that more threads only slow down.
torch.set_num_threads(1)


class InputError(ValueError):
    """Something a visitor typed or picked that the app refuses, with a message in plain words."""


def count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def one_line(err: BaseException | str) -> str:
    return " ".join(str(err).split()) or type(err).__name__


# -- the model list ----------------------------------------------------------------------------------
def listed_models(text: str | None = None, card: Path = CARD_FILE) -> list[str]:
    """The repo ids under `models:` in the Space card next to this file, then those in
    HF_ARITH_SPACE_MODELS (or `text`); each must be a valid Hub repo id (ORG/NAME)."""
    sources = []
    if card.is_file() and card.read_text(encoding="utf-8").startswith("---"):  # a card with front matter
        try:
            sources += [(f"{card.name} models:", str(m)) for m in (SpaceCard.load(card).data.models or [])]
        except ValueError as err:
            raise ValueError(f"{card.name}: unreadable front matter ({one_line(err)})") from None
    listed = os.environ.get(MODELS_ENV, "") if text is None else text
    sources += [(MODELS_ENV, part.strip()) for part in listed.split(",") if part.strip()]
    for where, repo_id in sources:
        if "/" not in repo_id:
            raise ValueError(f"{where} {repo_id!r} is not a Hub repo id (ORG/NAME)")
        try:
            validate_repo_id(repo_id)
        except HFValidationError as err:
            raise ValueError(f"{where} {repo_id!r} is not a valid Hub repo id (ORG/NAME): {one_line(err)}") from None
    return list(dict.fromkeys(repo_id for _, repo_id in sources))


try:
    _bundled = list(hf_arith.bundled_models()) if hf_arith is not None else []
    MODELS = [*_bundled, *(m for m in listed_models() if m not in _bundled)]
except ValueError as err:  # the operator's list: the Space does not start, and says why in one line
    raise SystemExit(f"arith-playground: {one_line(err)}") from None
if not MODELS:
    raise SystemExit(f"arith-playground: no models to show: list Hub repo ids under models: in {CARD_FILE.name} "
                     f"or in {MODELS_ENV}")

# Gradio runs events in worker threads. Loading one checkpoint in two threads at once fails, and the
# attention maps switch a model's attention backend while they run: so models are loaded, and run,
# one call at a time (they are tiny).
MODEL_LOCK = threading.RLock()


def serialized(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with MODEL_LOCK:
            return fn(*args, **kwargs)
    return wrapper


# -- a loaded model and what it can take ------------------------------------------------------------
@dataclass(eq=False)
class Entry:
    """A listed model: its `arithmetic` pipeline, its files and its limits."""

    name: str
    pipe: object  # the arithmetic pipeline (its .model and .tokenizer)
    folder: Path | None  # the checkpoint's files (a bundled folder, or the repo's snapshot)
    max_digits: int  # the longest operands the pipeline accepts (in the model's base)
    loops: tuple[int, int] | None  # the slider's range, for a looped model
    trained: tuple[int, int] | None  # operand lengths it was trained on, where known
    measured: tuple[int, int]  # operand lengths it answers (placeholders and examples stay inside)

    @property
    def model(self):
        return self.pipe.model

    @property
    def tokenizer(self):
        return self.pipe.tokenizer

    @property
    def fmt(self):
        return self.tokenizer.arith_format

    @property
    def formatting(self):
        """The number format's module (hf_arith.data.formatting, or the repo's remote-code copy)."""
        name = type(self.fmt).__module__
        return sys.modules.get(name) or importlib.import_module(name)

    @property
    def default_loops(self) -> int | None:
        return int(self.model.config.num_recurrences) if self.loops is not None else None

    @property
    def hub_url(self) -> str | None:
        return None if hf_arith is not None and self.name in _bundled else f"https://huggingface.co/{self.name}"


def open_pipeline(name: str):
    """(arithmetic pipeline, checkpoint folder) of a listed model."""
    if hf_arith is not None:  # bundled names and repo ids, with hf_arith's own classes
        model, tokenizer = hf_arith.load(name)
        return hf_arith.ArithmeticPipeline(model=model, tokenizer=tokenizer), checkpoint_folder(model)
    from huggingface_hub import snapshot_download
    from transformers import pipeline

    folder = Path(snapshot_download(name))  # from the cache when there (offline too), else from the Hub
    return pipeline("arithmetic", model=name, trust_remote_code=True), folder


def worst_problem(fmt, formatting, digits: int) -> str:
    """The longest problem with operands of `digits` digits: every digit the base's largest."""
    number, task = str(fmt.base**digits - 1), fmt.task_rules
    if task.item_list:  # as many items as hf_arith's limits assume (SORT_ITEMS); longer lists are refused as typed
        return task.problem_text([number] * min(formatting.SORT_ITEMS, fmt.max_items))
    return task.problem_text([number, number])


def accepted_digits(pipe, fmt, formatting) -> int:
    """The longest operands the pipeline accepts (its tokenizer's width, its answer budget, its
    context): found by asking its preprocess step, which refuses longer problems."""

    def fits(digits: int) -> bool:
        try:
            pipe.preprocess(worst_problem(fmt, formatting, digits))
        except ValueError:
            return False
        return True

    low, high = 0, MAX_CHARS // 2
    if fits(high):
        return high
    while low < high - 1:  # operands of `low` digits fit (0: none checked yet), of `high` do not
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def loop_range(model) -> tuple[int, int] | None:
    """1 up to the model's own limit (MAX_RECURRENCES of its config module), capped for speed."""
    if not hasattr(model.config, "num_recurrences"):
        return None
    module = sys.modules.get(type(model.config).__module__)
    return 1, min(int(getattr(module, "MAX_RECURRENCES", SLIDER_MAX_RECURRENCES)), SLIDER_MAX_RECURRENCES)


def read_json(folder: Path | None, name: str):
    if folder is None or not (folder / name).is_file():
        return None
    try:
        return json.loads((folder / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def trained_range(folder: Path | None, fmt) -> tuple[int, int] | None:
    """`train_digits` of training_summary.json, else a fixed-width format's 1..width."""
    digits = (read_json(folder, "training_summary.json") or {}).get("train_digits")
    if isinstance(digits, list) and len(digits) == 2 and all(isinstance(d, int) for d in digits):
        return digits[0], digits[1]
    return (1, fmt.operand_width) if fmt.operand_width else None


MEASURED_EXACT = 0.99  # a length counts as measured when the held-out exact match there is at least this


def measured_range(folder: Path | None, trained: tuple[int, int] | None, max_digits: int,
                   config=None) -> tuple[int, int]:
    """The operand lengths the model is known to answer: 1 to its config's `measured_max_digits` (every length
    measured at >= MEASURED_EXACT on held-out problems, what hf_arith records with the model); for a model
    whose config records none, its training range (else 1 to 10 digits) extended by each further length its
    eval_results.json measured at >= MEASURED_EXACT. Capped at what it takes."""
    lo, hi = trained or (1, 10)
    recorded = getattr(config, "measured_max_digits", None)
    if isinstance(recorded, int) and recorded > 0:
        lo, hi = 1, recorded
    else:
        per = (read_json(folder, "eval_results.json") or {}).get("by_max_operand_length")
        if isinstance(per, dict):
            scores = {}
            for key, value in per.items():
                try:
                    scores[int(key)] = float(value)
                except (TypeError, ValueError):
                    continue
            while scores.get(hi + 1, 0.0) >= MEASURED_EXACT:
                hi += 1
    hi = max(1, min(hi, max_digits))
    return min(lo, hi), hi


@serialized
@functools.cache
def _open(name: str) -> Entry:
    try:
        pipe, folder = open_pipeline(name)
        fmt = pipe.tokenizer.arith_format
        formatting = sys.modules.get(type(fmt).__module__) or importlib.import_module(type(fmt).__module__)
        longest, trained = accepted_digits(pipe, fmt, formatting), trained_range(folder, fmt)
        return Entry(name, pipe, folder, longest, loop_range(pipe.model), trained,
                     measured_range(folder, trained, longest, pipe.model.config))
    except Exception as err:  # whatever a listed repo holds: a message in the page, not an error page
        raise InputError(f"model {name} cannot be loaded: {one_line(err)}") from None


def load(name: str) -> Entry:
    """A listed model; names outside MODELS are refused, never opened."""
    if name not in MODELS:
        raise InputError(f"unknown model {name!r}; pick one of: {', '.join(MODELS)}")
    return _open(name)


def available() -> list[Entry]:
    """The listed models that load (each one that does not is named on stderr, once)."""
    entries = []
    for name in MODELS:
        try:
            entries.append(load(name))
        except InputError as err:
            if name not in _REPORTED:
                _REPORTED.add(name)
                print(f"arith-playground: {err}", file=sys.stderr)
    return entries


_REPORTED: set[str] = set()


# -- checking and answering one problem ---------------------------------------------------------------
def sample_problem(entry: Entry, digits: int) -> str:
    """A fixed problem with operands of `digits` digits (at most what the model takes)."""
    fmt, n = entry.fmt, max(1, min(digits, entry.max_digits))
    if fmt.base == 10:
        reps = -(-n // 10)
        a, b = int(("1234567890" * reps)[:n]), int(("9876543210" * reps)[:n])
    else:  # two n-digit numbers in the model's base, written in decimal as visitors type them
        low, high = fmt.base ** (n - 1) if n > 1 else 0, fmt.base**n - 1
        a, b = low + (high - low) // 3, max(low, high - high // 7)
    return fmt.task_rules.example(a, b, fmt.max_items)


def operator_help(fmt) -> str:
    if fmt.task_rules.item_list:
        return "labelled items such as a:31,b:7,c:120"
    return f"'{fmt.task_rules.operator}' between two numbers"


def digits_of(entry: Entry, decimal: str) -> int:
    """How many digits a typed (decimal) operand has in the model's base."""
    if entry.fmt.base == 10:
        return len(decimal)
    return len(entry.formatting.int_to_digits(int(decimal), entry.fmt.base))


def check_problem(entry: Entry, text) -> str:
    """The problem as the tokenizer will read it, or an InputError that says what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise InputError("type a problem, for example " + sample_problem(entry, 3))
    if len(text) > MAX_CHARS:
        raise InputError(f"that is {len(text)} characters; problems are at most {MAX_CHARS}")
    problem = text.strip().replace(" ", "")
    if problem.startswith("-") or re.search(r"[+*,:]-", problem):
        raise InputError("negative numbers are not supported: operands are whole numbers from 0 up")
    if not ALLOWED.fullmatch(problem):
        bad = next(c for c in problem if not ALLOWED.fullmatch(c))
        raise InputError(f"{bad!r} is not allowed: use digits 0-9 and {operator_help(entry.fmt)}")
    try:
        operands = entry.formatting.parse_problem(problem, entry.fmt)
    except ValueError as err:
        raise InputError(one_line(err)) from None
    longest = max(digits_of(entry, v) for v in operands)
    if longest > entry.max_digits:
        raise InputError(too_long(entry, longest))
    return problem


def too_long(entry: Entry, typed: int | None = None) -> str:
    base = "" if entry.fmt.base == 10 else f" (in base {entry.fmt.base})"
    said = f"the longest number you typed has {typed} digits{base}; " if typed else "that problem is too long: "
    return f"{said}{entry.name} takes numbers of up to {entry.max_digits} digits"


def recurrences_for(entry: Entry, value) -> int | None:
    """The loop count for a looped model (None for others); an InputError outside the slider."""
    if entry.loops is None or value is None:
        return None
    lo, hi = entry.loops
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not (lo <= number <= hi) or number != int(number):
        raise InputError(f"recurrences must be a whole number from {lo} to {hi} here, got {value!r} "
                         "(more would make the answers slow)")
    return int(number)


def run(entry: Entry, problem: str, loops: int | None) -> dict:
    """The pipeline's answer, with the probability of every token it wrote."""
    kwargs = {} if loops is None else {"num_recurrences": loops}
    try:
        return entry.pipe(problem, return_confidence=True, **kwargs)
    except ValueError as err:  # a limit the checks above missed: still words, never config names
        raise InputError(too_long(entry) if "too long" in str(err) else f"{entry.name} cannot take that problem: "
                         f"{one_line(err).split(': ', 1)[-1]}") from None


def exact_answer(entry: Entry, problem: str) -> str:
    """The exact answer, from Python integers (to judge the model's answer, never to make one)."""
    return entry.fmt.task_rules.reference([int(v) for v in entry.formatting.parse_problem(problem, entry.fmt)])


def written_answer(entry: Entry, problem: str) -> str:
    """The exact answer as the model's format writes it (written working included, <eos> left out):
    the tokens the model was trained to write for `problem`."""
    formatting = entry.formatting
    ids, lengths, prompt = formatting.render(formatting.parse_problems([problem], entry.fmt).with_answers(),
                                             entry.fmt, with_answer=True)
    vocab = entry.fmt.vocab()
    tokens = [vocab[i] for i in ids[0][int(prompt[0]): int(lengths[0])].tolist()]
    return "".join(t for t in tokens if t not in END_TOKENS)


def normal_order(entry: Entry, written: list) -> list:
    """A final answer's tokens as written to normal order: a reversed number is turned around (its
    leading sign stays first; a trailing complement sign comes first); a list of labels stays as is."""
    fmt = entry.fmt
    if fmt.task_rules.item_list or not fmt.reverse_answer:
        return written
    sign = written[:1] if written[:1] and written[0][0] == "-" else []
    return sign + written[len(sign):][::-1]


def written_problem(problem: str, out: dict) -> str:
    """The problem as the tokens of the pipeline's answer `out` follow it: with several views, the view
    they come from (the pipeline's `views`), else the problem itself."""
    return (out.get("views") or {}).get("problem", problem)


def answer_cells(entry: Entry, tokens: list[dict], problem: str) -> tuple[list[dict], dict | None]:
    """The tokens the model wrote, as cells: (cells, the end token's cell or None). The written
    working (running sums, radix passes: what the task's `split_working` says comes before the final
    answer) comes first, as written, with status 'work' and judged by nothing. Then the final answer (the
    tokens the task's `answer_places` names: for shifted sums, read off the working) in normal order,
    each token against the exact answer's token in the same place, as the format writes it. A cell: the
    model's token, the exact one, the probability the model gave its token, and a status: work, ok, bad
    (wrong, missing or extra) or pad (a leading zero of a fixed-width answer)."""
    written, end = [], None
    for t in tokens:
        if t["token"] in END_TOKENS:
            end = {"model": "end", "exact": "", "p": t["probability"], "status": "end"}
            break
        written.append((t["token"], t["probability"]))
    task = entry.fmt.task_rules
    text = "".join(t for t, _ in written)
    working, _ = task.split_working(text, entry.fmt)
    cells = [{"model": t, "exact": "", "p": p, "status": "work"} for t, p in written[:len(working)]]
    # The final answer's tokens: those after the working, or (shifted sums) the ones it is read off.
    final = normal_order(entry, [written[i] for i in task.answer_places(text, entry.fmt)])
    exact_text = written_answer(entry, problem)
    exact = normal_order(entry, [exact_text[i] for i in task.answer_places(exact_text, entry.fmt)])
    listed = task.item_list
    if not listed:  # leading zeros of a fixed width are padding, not digits of the answer
        sign = exact[:1] if exact[:1] == ["-"] else []
        digits = exact[len(sign):]
        while len(digits) > 1 and digits[0] == "0":
            digits = digits[1:]
        exact = sign + digits
    width = max(len(final), len(exact))
    if listed:
        mine, theirs = final + [None] * (width - len(final)), exact + [""] * (width - len(exact))
    else:
        mine, theirs = [None] * (width - len(final)) + final, [""] * (width - len(exact)) + exact
    leading = True
    for got, want in zip(mine, theirs):
        digit, p = got if got is not None else ("", None)
        leading = leading and digit == "0" and not want
        status = "ok" if digit == want else ("pad" if leading else "bad")
        cells.append({"model": digit or "-", "exact": want, "p": p, "status": status})
    return cells, end


def percent(p: float | None) -> str:
    if p is None:
        return ""
    value = 100 * p
    return f"{value:.0f}" if value >= 99.95 or value < 10 else f"{value:.1f}".rstrip("0").rstrip(".")


def strip_html(cells: list[dict], end: dict | None) -> str:
    """The coloured digit strip: one column per digit (model, exact, confidence %)."""
    head = ('<div class="cell legend" aria-hidden="true"><span class="d">model</span><span class="x">exact</span>'
            '<span class="p">sure %</span></div>')
    parts = [head]
    for cell in [*cells, *([end] if end else [])]:
        title = {"ok": "right digit", "bad": "wrong digit", "pad": "padding zero", "end": "end token",
                 "work": "written working (not judged)"}[cell["status"]]
        parts.append(f'<div class="cell {cell["status"]}" title="{title}"><span class="d">{html.escape(cell["model"])}</span>'
                     f'<span class="x">{html.escape(cell["exact"])}</span><span class="p">{percent(cell["p"])}</span></div>')
    return f'<div class="strip" role="img" aria-label="the answer digit by digit">{"".join(parts)}</div>'


def notice_html(message: str) -> str:
    return (f'<div class="verdict refused" data-verdict="refused"><span class="head">Cannot answer</span> '
            f'{html.escape(message, quote=False)}</div>')


def verdict_html(entry: Entry, problem: str, out: dict, truth: str, loops: int | None) -> str:
    """The verdict in words and colour, then the digit strip, then what is worth knowing about it."""
    answer = out["answer"]
    views = out.get("views")  # a model that answers several views of each problem: the tokens are one view's
    cells, end = answer_cells(entry, out["tokens"], written_problem(problem, out))
    wrong = [c for c in cells if c["status"] == "bad"]
    judged = [c for c in cells if c["status"] != "work"]
    if answer == truth:
        kind, head, text = "correct", "Correct", f"{answer} is the exact answer."
    elif answer is None:
        why = ("it kept writing digits and never wrote its end token" if entry.fmt.end_token and end is None
               else "what it wrote is not a well-formed number")
        kind, head, text = "malformed", "No answer", f"The model gave no answer: {why}. The exact answer is {truth}."
    else:
        kind, head = "wrong", "Wrong"
        text = (f"{len(wrong)} of {len(judged)} digits differ (red). The exact answer is {truth}." if not entry.fmt.task_rules.item_list
                else f"The exact answer is {truth}.")
    notes = []
    working = sum(c["status"] == "work" for c in cells)
    if working:
        # Shifted sums: every written token is working, and the final answer is read off it.
        text = "".join(itertools.takewhile(lambda t: t not in END_TOKENS, (t["token"] for t in out["tokens"])))
        read_off = not entry.fmt.task_rules.split_working(text, entry.fmt)[1]
        notes.append(f"the first {count(working, 'token')} (grey) are its written working, as written, not judged: "
                     f"{entry.fmt.task_rules.working_note(entry.fmt) or 'how it got there'}; only the final answer "
                     f"{'read off' if read_off and judged else 'after'} them is checked")
    shown = "".join(c["exact"] for c in judged)
    if not entry.fmt.task_rules.item_list and shown != truth:
        notes.append(f"the strip's exact row is the answer as this model writes it ({shown}), which reads {truth}")
    if views:
        notes.append(f"the answer {views['agreeing']} of {views['count']} relabelled views of the list gave, at "
                     f"confidence {percent(out['confidence'])} % (the share that agree times their lowest); the "
                     f"strip shows the tokens of the view {views['problem']}")
    probabilities = [c["p"] for c in [*cells, *([end] if end else [])] if c["p"] is not None]
    if probabilities and not views:
        lowest = min(probabilities)
        notes.append(f"lowest confidence {percent(lowest)} %" + (" (the end token)" if end and end["p"] == lowest else ""))
    operands = [digits_of(entry, v) for v in entry.formatting.parse_problem(problem, entry.fmt)]
    if entry.trained and max(operands) > entry.trained[1]:
        notes.append(f"numbers of {max(operands)} digits: longer than any it was trained on "
                     f"({entry.trained[0]}-{entry.trained[1]} digits)")
    if loops is not None:
        notes.append(f"{loops} recurrences (trained with {entry.default_loops})")
    return (f'<div class="verdict {kind}" data-verdict="{kind}"><span class="head">{head}</span> '
            f'{html.escape(text, quote=False)}</div>{strip_html(cells, end)}'
            f'<p class="notes">{html.escape("; ".join(notes), quote=False)}</p>')


def checked_run(model_name: str, problem: str, recurrences):
    """The model, the problem as checked, the loop count and the run: what Solve and Attention both start
    from. Every check raises InputError with the reason to show."""
    entry = load(model_name)
    clean = check_problem(entry, problem)
    loops = recurrences_for(entry, recurrences)
    return entry, clean, loops, run(entry, clean, loops)


@serialized
def solve_problem(model_name: str, problem: str, recurrences=None):
    """The Solve button: (answer in normal order, verdict HTML, [#, token, probability] rows in the
    order the model wrote them)."""
    try:
        entry, clean, loops, out = checked_run(model_name, problem, recurrences)
    except InputError as err:
        return "", notice_html(str(err)), []
    rows = [[i + 1, t["token"], round(t["probability"], 6)] for i, t in enumerate(out["tokens"])]
    answer = out["answer"] if out["answer"] is not None else "(no answer)"
    return answer, verdict_html(entry, clean, out, exact_answer(entry, clean), loops), rows


# -- how the model writes numbers ----------------------------------------------------------------------
def format_note(entry: Entry) -> str:
    """The model's number format in words, with the example the tokenizer itself writes."""
    fmt, example = entry.fmt, sample_problem(entry, 3)
    digits = not fmt.task_rules.item_list  # the answer is a number, not a list of labels
    prompt = entry.tokenizer.format_problem(example)
    order = []
    if fmt.reverse_operands:
        order.append("reads each number lowest digit first")
    if fmt.reverse_answer and digits:
        order.append("writes its answer lowest digit first")
    if fmt.operand_width:
        order.append(f"pads every number with zeros to {fmt.operand_width} digits")
    how = (", ".join(order[:-1]) + " and " + order[-1]) if len(order) > 1 else (order[0] if order else "reads "
                                                                                 "and writes numbers as typed")
    answer = exact_answer(entry, example)
    shown = answer.zfill(fmt.answer_width) if fmt.answer_width and digits else answer
    shown = shown[::-1] if fmt.reverse_answer and digits else shown
    end = " then `<eos>`" if fmt.end_token else ""
    return (f"This model {how}: it sees `{example}` as `{prompt}` and writes {answer} as `{shown}`{end}. "
            "The answer box and the digit strip show the normal order.")


# -- attention ----------------------------------------------------------------------------------------
@torch.inference_mode()
def attention_weights(model, ids: list[int], loops: int | None) -> list:
    """One [heads, T, T] array per layer (per pass and layer for a looped model), with eager
    attention, the only backend that returns the weights."""
    before = getattr(model.config, "_attn_implementation", None)
    switch = before not in (None, "eager")
    if switch:
        model.set_attn_implementation("eager")
    try:
        kwargs = {} if loops is None else {"num_recurrences": loops}
        out = model(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False, **kwargs)
    finally:
        if switch:
            model.set_attn_implementation(before)
    return [a[0].float().cpu().numpy() for a in out.attentions or []]


ALL_PASSES = "all passes"


@serialized
def attention_figure(model_name: str, problem: str, recurrences=None, which: str | None = None):
    """The Attention tab: (figure or None, note, pass selector)."""
    hidden = gr.Dropdown(visible=False)
    try:
        entry, clean, loops, out = checked_run(model_name, problem, recurrences)
    except InputError as err:
        return None, f"Cannot draw: {err}", hidden
    tok = entry.tokenizer
    ids = tok([written_problem(clean, out)])["input_ids"][0] + tok.convert_tokens_to_ids([t["token"] for t in out["tokens"]])
    maps = attention_weights(entry.model, ids, loops)
    if not maps:
        return None, f"{type(entry.model).__name__} returns no attention weights.", hidden
    tokens = tok.convert_ids_to_tokens(ids)
    layers = getattr(entry.model.config, "num_hidden_layers", None) or len(maps)
    labels = plots.attention_labels(len(maps), layers)
    passes = len(maps) // layers if len(maps) % layers == 0 else 1
    selector = hidden
    if passes > 1:
        choices = [ALL_PASSES, *(f"pass {p}" for p in range(1, passes + 1))]
        if which not in choices:
            which = ALL_PASSES if len(maps) <= 4 else f"pass {passes}"
        if which != ALL_PASSES:
            p = int(which.split()[1])
            maps, labels = maps[(p - 1) * layers: p * layers], labels[(p - 1) * layers: p * layers]
        selector = gr.Dropdown(choices=choices, value=which, visible=True)
    title = f"{model_name}: attention for {written_problem(clean, out)} (the model's tokens: {' '.join(tokens)})"
    figure = plots.plot_attention(tokens, maps, labels, title=title)
    what = f"{passes} passes of {count(layers, 'layer')}" if passes > 1 else count(len(maps), "layer")
    note = (f"{what} × {count(maps[0].shape[0], 'head')}. Each row is a token attending to earlier tokens "
            f"(columns); darker is more attention (on a small screen, scroll the picture sideways). "
            f"{format_note(entry)}")
    return figure, note, selector


# -- the models: what they are, and how far they generalize -----------------------------------------------
def describe(entry: Entry, named: bool = True) -> str:
    """What the model is, in words a first-time visitor can follow (from its config)."""
    config, params = entry.model.config, entry.model.num_parameters()
    parts = []
    if "minimal" in str(getattr(config, "model_type", "")):
        parts.append(f"**A {params:,}-parameter model**: the whole network is {params:,} numbers (chat models have "
                     f"billions), {count(config.num_hidden_layers, 'transformer layer')} whose weights are tied and "
                     f"shared wherever possible (a \"tiny adder\"). It pads every number to {entry.fmt.operand_width} "
                     "digits, so that is also the longest it takes.")
    if hasattr(config, "abacus_max_digits"):
        parts.append("**Abacus** positions: every digit is told its place inside its own number (units 1, tens 2, "
                     "...), so digits of the same place line up at any length, which lets a model trained on short "
                     f"numbers work on longer ones ([McLeish et al. 2024]({ABACUS_PAPER})).")
    if entry.loops is not None:
        parts.append(f"**Looped**: the same {count(config.num_hidden_layers, 'layer')} run again and again for every "
                     f"token it writes; how many times is the *recurrences* slider (trained with "
                     f"{entry.default_loops}). Try other counts on a long sum and watch the answer change.")
    heads = int(getattr(config, "num_future_tokens", 1) or 1)
    if heads > 1:
        extra = count(heads - 1, "extra output head")
        verb = "predicts" if heads == 2 else "predict"
        parts.append(f"**k{heads}**: {extra} also {verb} what comes after the next token, so it can write {heads} "
                     f"answer tokens per step ([Gloeckle et al. 2024]({MULTI_TOKEN_PAPER})); this Space writes one "
                     "token per step, with the first head.")
    if not parts:
        parts.append(f"`{type(entry.model).__name__}`, {params:,} parameters.")
    parts.insert(0, task_sentence(entry))
    facts = f"{params:,} parameters"
    if entry.trained:
        facts += f"; trained on numbers of {entry.trained[0]}-{entry.trained[1]} digits"
    lo, hi = entry.measured
    facts += f"; answers {lo}-{hi} digits (measured at >= {100 * MEASURED_EXACT:g} %)"
    facts += f"; accepts up to {entry.max_digits:,} digits (its hard limit)"
    link = f" · [model card]({entry.hub_url})" if entry.hub_url else " · bundled with hf_arith (docs/models.md)"
    return (f"**{entry.name}** ({facts}{link}). " if named else f"{facts[0].upper()}{facts[1:]}{link}. ") + " ".join(parts)


def task_sentence(entry: Entry) -> str:
    """What the model does, from its task and number format."""
    fmt = entry.fmt
    task = fmt.task_rules
    what = (f"sorts lists of up to {fmt.max_items} labelled numbers and answers with the labels in ascending order"
            if task.item_list else f"does {task.title} ('{task.operator}') of two whole numbers")
    base = "" if fmt.base == 10 else f", computing in base {fmt.base}"
    working = task.working_note(fmt)
    return f"**{task.title.capitalize()}**: it {what}{base}" + (f"; {working}." if working else ".")


def glossary() -> str:
    lines = ["Every model here was trained only to write the digits of the answer, one token at a time: no "
             "calculator runs inside. What the names mean:"]
    lines += [f"- {describe(entry)}" for entry in available()]
    return "\n".join(lines)


def image_html(path: Path, caption: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure class="wide"><div class="scroll"><img src="data:image/png;base64,{data}" '
            f'alt="{html.escape(caption)}"></div><figcaption>{html.escape(caption, quote=False)}</figcaption></figure>')


def grid_caption(grid: dict | None, report: dict | None, trained) -> str:
    if grid and isinstance(grid.get("summary"), dict):
        s, (lo, hi) = grid["summary"], grid["lengths"]
        items, trained_items = grid.get("items"), grid.get("train_items")
        if items:  # sorting: rows are list sizes, columns the digits of every number in the list
            text = (f"Each cell: lists of the row's count of numbers ({items[0]}-{items[1]}), every number with the "
                    f"column's number of digits ({lo}-{hi}), {grid['samples_per_cell']} lists per cell.")
            box = (f"the red box (trained on lists of {trained_items[0]}-{trained_items[1]} numbers of "
                   f"{trained[0]}-{trained[1]} digits)" if trained and trained_items else None)
        else:
            text = (f"Each cell: problems whose two numbers have the row's and the column's number of digits "
                    f"({lo}-{hi}, {grid['samples_per_cell']} problems per cell).")
            box = f"the red square (trained on {trained[0]}-{trained[1]} digits)" if trained else None
        text += (" Left: the share answered exactly (yellow = all right); right: how surprised the model is by "
                 "the right answer (1 = certain).")
        if box and s.get("in_training_range_exact_match") is not None:
            text += f" Inside {box}: {s['in_training_range_exact_match']:.1%} exact"
            if s.get("beyond_training_range_exact_match") is not None:  # None: the grid is all inside
                text += f"; beyond it, lengths it never saw: {s['beyond_training_range_exact_match']:.1%}"
            text += "."
        return text + f" Overall {s['exact_match']:.1%} of {s['n']:,} problems."
    if report:
        return (f"Exact match by the length of the longer number, on {report['n']:,} held-out problems of "
                f"{report['min_digits']}-{report['max_digits']} digits.")
    return "Exact match by operand length."


def loops_caption(curve: dict | None, default: int | None) -> str:
    if not curve or not isinstance(curve.get("loops"), list):
        return "Exact match against the number of recurrences."
    points = list(zip(curve["loops"], curve["exact_match"]))
    best = max(points, key=lambda point: point[1])
    listed = ", ".join(f"{n}: {v:.1%}" for n, v in points)
    return (f"Exact match against the number of recurrences (trained with {default}) on {curve.get('n', 0):,} "
            f"problems: {listed}. Best at {best[0]}; at {points[-1][0]} loops, {points[-1][1]:.1%}.")


def length_strip(report: dict | None) -> str:
    """Held-out exact match per longest-operand length, as coloured cells."""
    per = (report or {}).get("by_max_operand_length")
    if not isinstance(per, dict) or not per:
        return ""
    cells = []
    for digits, value in sorted(per.items(), key=lambda kv: int(kv[0])):
        hue = int(120 * max(0.0, min(1.0, float(value))))  # red (0 %) to green (100 %)
        cells.append(f'<div class="cell" style="background: hsl({hue} 70% 85%)"><span class="d">{int(digits)}</span>'
                     f'<span class="p">{percent(float(value))}</span></div>')
    legend = ('<div class="cell legend" aria-hidden="true"><span class="d">digits</span>'
              '<span class="p">exact %</span></div>')
    return (f'<figure><div class="strip">{legend}{"".join(cells)}</div><figcaption>Held-out exact match by the '
            f'length of the longer number ({report["n"]:,} problems).</figcaption></figure>')


@serialized
def model_overview(model_name: str):
    """The Models tab: (card summary markdown, figures with captions as HTML), from the model's files."""
    try:
        return _overview(load(model_name))
    except (InputError, KeyError, TypeError, ValueError) as err:  # (a repo file not as hf-arith push writes it)
        return f"Cannot show {model_name}: {one_line(err)}", ""


@functools.cache
def _overview(entry: Entry):
    fmt, folder = entry.fmt, entry.folder
    report = read_json(folder, "eval_results.json")
    lines = [f"### {entry.name}", describe(entry, named=False), "",
             f"- **task**: {fmt.task_rules.title} in base {fmt.base}, numbers of up to "
             f"{entry.max_digits} digits",
             f"- **architecture**: `{type(entry.model).__name__}`, {entry.model.num_parameters():,} parameters",
             f"- **number format**: {format_note(entry)}"]
    if entry.loops is not None:
        lines.append(f"- **recurrences**: {entry.default_loops} by default; the slider goes from {entry.loops[0]} "
                     f"to {entry.loops[1]}")
    if isinstance(report, dict) and "exact_match" in report:
        lines.append(f"- **held-out exact match**: {report['exact_match']:.2%} of {report['n']:,} problems "
                     f"({report['min_digits']}-{report['max_digits']} digits)")
    figures = [length_strip(report)]
    images = sorted(folder.glob("images/*.png")) if folder is not None else []
    for image in images:
        if image.stem == "length_heatmap":
            caption = grid_caption(read_json(folder, "length_grid.json"), report, entry.trained)
        elif image.stem == "loops":
            caption = loops_caption(read_json(folder, "loops.json"), entry.default_loops)
        else:
            caption = image.stem.replace("_", " ")
        figures.append(image_html(image, caption))
    return "\n".join(lines), "".join(figures)


# -- the page -----------------------------------------------------------------------------------------
def model_options(entry: Entry, recurrences=None):
    """The slider (shown only for a looped model, at `recurrences` or its default) and the problem
    box's placeholder for a model."""
    if entry.loops is None:
        slider = gr.Slider(visible=False)
    else:
        lo, hi = entry.loops
        value = entry.default_loops if recurrences is None else recurrences
        layers = count(entry.model.config.num_hidden_layers, "layer")
        slider = gr.Slider(minimum=lo, maximum=hi, step=1, value=value, visible=True,
                           info=f"How many times the model runs its {layers} for each token. Trained with "
                                f"{entry.default_loops}; try {hi} on a long sum. {lo}-{hi} here.")
    return slider, gr.Textbox(placeholder=placeholder(entry))


@serialized
def on_model_change(model_name: str):
    """Another model picked: its slider (at its default), placeholder and description."""
    try:
        entry = load(model_name)
    except InputError as err:
        return gr.Slider(visible=False), gr.Textbox(placeholder=""), f"Cannot use {model_name}: {err}"
    slider, box = model_options(entry)
    return slider, box, describe(entry)


@serialized
def run_example(model_name: str, problem: str, recurrences):
    """An example clicked: the model's options at the example's recurrences, then its answer."""
    try:
        entry = load(model_name)
    except InputError as err:
        return gr.Slider(visible=False), f"Cannot use {model_name}: {err}", "", notice_html(str(err)), []
    slider, _ = model_options(entry, recurrences if entry.loops is not None else None)
    return slider, describe(entry), *solve_problem(model_name, problem, recurrences)


def placeholder(entry: Entry) -> str:
    """The problem box's hint for a model: a problem at the longest length it is known to answer."""
    return f"e.g. {sample_problem(entry, entry.measured[1])}"


def trained_list_sizes(entry: Entry) -> tuple[int, int] | None:
    """The list sizes a sorting model's last training stage drew (training_summary.json), where known."""
    data = ((read_json(entry.folder, "training_summary.json") or {}).get("recipe") or {}).get("data") or {}
    sizes = data.get("min_items"), data.get("max_items")
    return sizes if all(isinstance(n, int) and n >= 2 for n in sizes) and sizes[0] <= sizes[1] else None


def list_problem(entry: Entry, digits: int, items: int) -> str:
    """A fixed list of `items` decimal numbers of `digits` digits each, cut from LONG_SUM's digits (pi's,
    then e's), so values repeat and tie as they do in real lists."""
    numbers = []
    for i in range(items):
        text = (LONG_SUM.replace("+", "") * (1 + digits))[i * digits:(i + 1) * digits]
        numbers.append(text if digits == 1 or text[0] != "0" else "1" + text[1:])
    return entry.fmt.task_rules.problem_text(numbers)


def range_examples(entry: Entry, shown=()) -> list[str]:
    """Three problems inside the model's measured range: short, middle and its longest, or the next
    lengths for any of those already `shown`; where the range has fewer lengths, a sorting model's
    longer lists of its longest measured numbers (up to the list sizes it was trained on)."""
    lo, hi = entry.measured
    short = max(lo, min(3, hi))
    lengths = dict.fromkeys([short, (short + hi) // 2, hi, *range(lo, hi + 1)])
    problems = [sample_problem(entry, n) for n in lengths]
    sizes = trained_list_sizes(entry) if entry.fmt.task_rules.item_list and entry.fmt.base == 10 else None
    if sizes:
        problems += [list_problem(entry, hi, k) for k in (sizes[1], (sizes[0] + sizes[1]) // 2)]
    fresh = (p for p in dict.fromkeys(problems) if p not in shown)
    return list(itertools.islice(fresh, 3))


def examples() -> tuple[list[list], list[str]]:
    """Clickable examples for the models that loaded: for decimal adders, a 25-digit sum far past the
    training length (a 100-digit one for models that take it, a 1,000-digit one for those that take that) and the 25-digit sum with many more
    loops than a looped model was trained with; then three problems inside each model's measured range."""
    rows, labels = [], []
    entries = available()
    adders = [e for e in entries if e.fmt.task_rules.operator == "+" and e.fmt.base == 10]
    for entry in adders:
        if entry.max_digits >= THOUSAND_DIGITS and entry.trained and entry.trained[1] < HUNDRED_DIGITS:
            rows.append([entry.name, sample_problem(entry, THOUSAND_DIGITS), entry.default_loops or 1])
            labels.append(f"{entry.name}: a 1,000-digit sum (trained on {entry.trained[0]}-{entry.trained[1]} digits)")
        elif entry.max_digits >= HUNDRED_DIGITS and entry.trained and entry.trained[1] < HUNDRED_DIGITS:
            rows.append([entry.name, sample_problem(entry, HUNDRED_DIGITS), entry.default_loops or 1])
            labels.append(f"{entry.name}: a 100-digit sum (trained on {entry.trained[0]}-{entry.trained[1]} digits)")
        elif entry.max_digits >= 25 and entry.trained and entry.trained[1] < 25:
            rows.append([entry.name, LONG_SUM, entry.default_loops or 1])
            labels.append(f"{entry.name}: a 25-digit sum (trained on {entry.trained[0]}-{entry.trained[1]} digits)")
    for entry in adders:
        if entry.loops is not None and entry.max_digits >= 25:
            many = min(entry.loops[1], 8 * entry.default_loops)
            rows.append([entry.name, LONG_SUM, many])
            truth = exact_answer(entry, LONG_SUM)
            breaks = (run(entry, LONG_SUM, entry.default_loops)["answer"] == truth
                      and run(entry, LONG_SUM, many)["answer"] != truth)  # (checked, for whatever model is listed)
            labels.append(f"{entry.name} at {many} loops" + (": more loops break long sums" if breaks else ""))
    for entry in entries:  # (after the few long ones above, which show what the models are about)
        shown = {r[1] for r in rows if r[0] == entry.name}  # a range up to 100 digits holds the 100-digit sum
        for problem in range_examples(entry, shown):
            rows.append([entry.name, problem, entry.default_loops or 1])
            labels.append(f"{entry.name}: {problem}")
    return rows, labels


CSS = """
.verdict { padding: 0.6em 0.8em; border-radius: 8px; font-size: 1.05em; border: 2px solid; }
.verdict .head { font-weight: 700; font-size: 1.2em; margin-right: 0.3em; }
.verdict.correct { background: #e3f5e1; border-color: #2e7d32; color: #1b4d1e; }
.verdict.wrong, .verdict.malformed { background: #fde4e1; border-color: #c62828; color: #6d1111; }
.verdict.refused { background: #fff4d6; border-color: #b7791f; color: #5c3d06; }
.strip { display: flex; flex-wrap: wrap; gap: 3px; margin: 0.6em 0; font-family: ui-monospace, monospace; }
.strip .cell { display: flex; flex-direction: column; align-items: center; min-width: 1.9em; padding: 2px 1px;
               border-radius: 4px; background: #f0f0f0; color: #111; }
.strip .cell span { line-height: 1.3; }
.strip .cell .d { font-size: 1.25em; font-weight: 700; }
.strip .cell .x { color: #555; min-height: 1.3em; }
.strip .cell .p { font-size: 0.75em; color: #333; }
.strip .cell.ok { background: #c8ecc4; }
.strip .cell.bad { background: #f7b9b2; outline: 2px solid #c62828; }
.strip .cell.pad { background: #ececec; color: #888; }
.strip .cell.end { background: #dde6f5; }
.strip .cell.work { background: #ebe7f3; color: #444; }
.strip .cell.legend { background: none; align-items: flex-end; color: #555; font-size: 0.8em; }
.strip .cell.legend .d { font-size: 1em; font-weight: 400; line-height: 1.56; }
.notes { color: #444; font-size: 0.9em; margin: 0; }
figure { margin: 0.8em 0; }
figure .scroll { overflow-x: auto; }
figure img { width: 100%; height: auto; }
figcaption { font-size: 0.9em; color: #333; margin-top: 0.3em; }
/* Gradio centres the plot in a flex box inside a block that hides overflow: a picture wider than the
   screen would spill off its left edge, out of reach. Start it at the left and scroll its own box. */
#attention_plot .matplotlib { justify-content: flex-start !important; align-items: flex-start !important;
                             overflow-x: auto !important; }
@media (max-width: 700px) {
  figure.wide img { width: 900px; max-width: none; }
  #attention_plot img { width: 1400px !important; max-width: none !important; flex-shrink: 0; }
}
"""


def build_demo() -> gr.Blocks:
    first = MODELS[0]
    rows, labels = examples()
    try:
        first_hint = placeholder(load(first))
    except InputError:
        first_hint = ""
    with gr.Blocks(title="hf_arith playground") as demo:
        gr.Markdown("# hf_arith playground\nTiny transformers that do exact integer arithmetic: each digit of the "
                    "answer is written by the model itself, one token at a time. Pick a model, type a problem or "
                    "click an example, and see every digit checked against the exact answer.")
        with gr.Accordion("What are these models?", open=False):
            gr.Markdown(glossary())
        with gr.Row():
            model_box = gr.Dropdown(choices=MODELS, value=first, label="model", elem_id="model", min_width=200)
            recurrences = gr.Slider(minimum=1, maximum=SLIDER_MAX_RECURRENCES, step=1, value=1, label="recurrences",
                                    visible=False, elem_id="recurrences", min_width=200)
        model_info = gr.Markdown(elem_id="model_info")
        with gr.Tabs():
            with gr.Tab("Solve"):
                problem = gr.Textbox(label="problem", max_length=MAX_CHARS, elem_id="problem",
                                     placeholder=first_hint)
                answer = gr.Textbox(label="the model's answer", interactive=False, elem_id="answer", render=False)
                verdict = gr.HTML(elem_id="verdict", render=False)
                confidence = gr.Dataframe(headers=["#", "token", "probability"], interactive=False,
                                          elem_id="confidence", wrap=True, render=False)
                if rows:
                    gr.Examples(rows, [model_box, problem, recurrences], example_labels=labels, fn=run_example,
                                outputs=[recurrences, model_info, answer, verdict, confidence], run_on_click=True,
                                cache_examples=False, label="Examples (click one)", elem_id="examples")
                solve_button = gr.Button("Solve", variant="primary", elem_id="solve")
                answer.render()
                verdict.render()
                with gr.Accordion("Tokens in the order the model wrote them", open=False, elem_id="tokens_box"):
                    gr.Markdown("Many of these models write the answer lowest digit first (reversed), as a person "
                                "adding with carries would; the answer box and the strip above turn it around. "
                                "Probability: how sure the model was of each token.")
                    confidence.render()
            with gr.Tab("Attention"):
                attention_button = gr.Button("Show attention maps for this problem", elem_id="attention")
                attention_pass = gr.Dropdown(label="which pass of the loop", visible=False, elem_id="attention_pass")
                attention_note = gr.Markdown(elem_id="attention_note")
                attention_plot = gr.Plot(label="attention: rows are queries, columns are keys", elem_id="attention_plot")
            with gr.Tab("Models"):
                overview_box = gr.Dropdown(choices=MODELS, value=first, label="model", elem_id="overview_model")
                overview_text = gr.Markdown(elem_id="overview_text")
                overview_figures = gr.HTML(elem_id="overview_figures")

        inputs = [model_box, problem, recurrences]
        outputs = [answer, verdict, confidence]
        solve_button.click(solve_problem, inputs, outputs, api_name="solve")
        problem.submit(solve_problem, inputs, outputs, api_name=False)
        recurrences.release(solve_problem, inputs, outputs, api_name=False)  # watch the answer change
        # A model picked by hand starts at its own default loop count; an example sets its own.
        model_box.input(on_model_change, model_box, [recurrences, problem, model_info], api_name="model_options")
        model_box.change(lambda name: name, model_box, overview_box, api_name=False)  # the Models tab follows
        attention_inputs = [model_box, problem, recurrences, attention_pass]
        attention_outputs = [attention_plot, attention_note, attention_pass]
        attention_button.click(attention_figure, attention_inputs, attention_outputs, api_name="attention")
        attention_pass.input(attention_figure, attention_inputs, attention_outputs, api_name=False)
        overview_box.change(model_overview, overview_box, [overview_text, overview_figures], api_name="overview")
        demo.load(model_overview, overview_box, [overview_text, overview_figures], api_name=False)
        demo.load(on_model_change, model_box, [recurrences, problem, model_info], api_name=False)
    return demo


demo = build_demo()


def launch(**kwargs):
    """`demo.launch` with the page's stylesheet (Gradio 6 takes css at launch)."""
    return demo.launch(css=CSS, **kwargs)


if __name__ == "__main__":
    launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
