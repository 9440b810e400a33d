"""The number format: how an arithmetic problem is written as model tokens.

This file is shipped next to the tokenizer as Hub remote code, so it imports only numpy and
the standard library. Everything that turns problems into token ids (training data, prompts
typed by a user) goes through `render`, and every generated answer comes back through
`decode_answer`: one mechanism, whichever path the problem took.

Problems are held as digit arrays, least significant digit first, in the format's base. That
keeps 100-digit operands exact (no int64 overflow) and lets the data generator stay vectorized.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from .errors import HfArithError

DIGIT_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
SORT_LABELS = "abcdefghijklmnopqrstuvwxyz"
SORT_ITEMS = 5  # sorting lists drawn by default (eval, limits) hold 2 to this many items, fewer if max_items is lower
PAD_TOKEN, EOS_TOKEN = "<pad>", "<eos>"
PROMPT_END = "="
QUOTE_CHARS = 40  # an error message quotes at most this many characters of a problem


class FormatError(HfArithError):
    """A problem, answer or format setting that the number format cannot express.

    The message is always one line that names the offending input.
    """


# -- the task registry ---------------------------------------------------------------------
# Every task (the package's tasks/ folder: add, sub, mul, sort, and any registered later) is an
# object that the format asks for its syntax, answers and written forms. The built-in tasks register
# when their modules are imported: in the package by its `tasks` package; in a saved model's remote
# code by the import line that the tokenizer's `save_pretrained` appends to this file.
_TASKS: dict = {}


def register_task(task) -> None:
    """Make a `Task` instance known by its name (a later registration under the same name replaces it)."""
    if not isinstance(getattr(task, "name", None), str) or not task.name.isidentifier():
        raise FormatError(f"a task needs a name that is an identifier, got {getattr(task, 'name', None)!r}")
    clash = next((t for t in _TASKS.values() if t.hash_id == task.hash_id and t.name != task.name), None)
    if clash is not None:
        raise FormatError(f"task {task.name!r}: hash_id {task.hash_id} is already task {clash.name!r}'s")
    _TASKS[task.name] = task


def unregister_task(name: str) -> None:
    """Forget the task called `name` (a task registered for a while, as a test does)."""
    get_task(name)  # an unknown name: the one-line error
    del _TASKS[name]


def _load_builtin_tasks() -> None:
    if not _TASKS and __package__:
        try:
            importlib.import_module(".tasks", __package__)
        except ImportError:
            pass  # a saved model's folder: its task modules are imported at the end of this file


def get_task(name: str):
    """The registered task called `name`; an unknown name is a one-line FormatError naming the known ones."""
    _load_builtin_tasks()
    task = _TASKS.get(name) if isinstance(name, str) else None
    if task is None:
        raise FormatError(f"unknown task {name!r}; known tasks: {', '.join(task_names())}")
    return task


def task_names() -> tuple[str, ...]:
    """The registered tasks' names in order of their hash_id (the built-in ones: add, sub, mul, sort)."""
    _load_builtin_tasks()
    return tuple(sorted(_TASKS, key=lambda name: _TASKS[name].hash_id))


def __getattr__(name: str):
    """Tables derived from the registry: TASKS (names), TASK_NAMES (name -> title), OPERATORS
    (name -> operator, binary tasks), SCRATCHPADS (every written working, 'none' first),
    SCRATCHPAD_TASKS (scratchpad -> its task's name)."""
    tasks = [get_task(t) for t in task_names()]
    tables = {
        "TASKS": lambda: tuple(t.name for t in tasks),
        "TASK_NAMES": lambda: {t.name: t.title for t in tasks},
        "OPERATORS": lambda: {t.name: t.operator for t in tasks if t.operator},
        "SCRATCHPADS": lambda: ("none", *(s for t in tasks for s in t.scratchpads)),
        "SCRATCHPAD_TASKS": lambda: {s: t.name for t in tasks for s in t.scratchpads},
        "NEGATIVE_ANSWERS": lambda: tuple(dict.fromkeys(a for t in tasks for a in t.negative_answers)),
    }
    if name not in tables:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return tables[name]()


def write_task_code(folder, name: str) -> list[str]:
    """Write task `name`'s module and the modules it imports beside a saved `formatting.py` in `folder`,
    flattened (`from ..formatting import` becomes `from .formatting import`), and import it at the
    end of that file, so a saved tokenizer's remote code knows its task. A task whose module lives
    outside the built-in tasks' folder is left out (it travels only where its module does).
    Returns the files written."""
    folder, here = Path(folder), Path(__file__).parent
    target = folder / "formatting.py"
    module = sys.modules[type(get_task(name)).__module__]
    source = Path(module.__file__)
    if not target.is_file() or source.parent not in (here, here / "tasks"):
        return []
    written, todo = [], [source.stem]
    while todo:
        stem = todo.pop()
        if stem in written:
            continue
        text = (source.parent / f"{stem}.py").read_text(encoding="utf-8")
        text = text.replace("from ..formatting import", "from .formatting import")
        (folder / f"{stem}.py").write_text(text, encoding="utf-8")
        written.append(stem)
        todo += [m for m in re.findall(r"^from \.(\w+) import", text, flags=re.MULTILINE) if m != "formatting"]
    line = f"from .{source.stem} import {type(get_task(name)).__name__}  # noqa: E402,F401  (this model's task)\n"
    text = target.read_text(encoding="utf-8")
    if line not in text:
        target.write_text(text + "\n\n# The task this tokenizer writes, saved beside this file (write_task_code).\n" + line,
                          encoding="utf-8")
    return [f"{stem}.py" for stem in written]


def _titles(names) -> str:
    return " and ".join(get_task(n).title for n in names)


def quote(text) -> str:
    """A problem as an error message quotes it: its repr, cut to the first QUOTE_CHARS characters
    (a longer one ends in '...' and says how long it is), so one line stays one short line."""
    text = str(text)
    if len(text) <= QUOTE_CHARS:
        return repr(text)
    return f"{text[:QUOTE_CHARS]!r}... ({len(text):,} characters)"


@dataclass(frozen=True)
class NumberFormat:
    """How numbers are written for one task. Saved inside the tokenizer's config.

    operand_width / answer_width: zero-pad to this many digits (0 = no padding).
    reverse_*: True writes the least significant digit first (what carries want).
    end_token: append <eos> after the answer. Fixed-width answers do not need it.
    negative_answers (subtraction): "sign" writes '-' and then the digits of |a - b|; "complement"
      writes the base complement of a - b over the longer operand's digits, (a - b) mod base**L
      with leading zeros kept, then '-' after the digits when a < b. Every answer digit then
      depends only on its own column and the borrow from the one below, as in addition, so the
      sign need not be known before the first digit; `decode_answer` gives the plain number.
    scratchpad (multiplication): "running_sums" writes, for k = 0 .. len(b) - 1, the running sum
      a * (b mod base**(k+1)) in len(a) + k + 1 digits (leading zeros kept), the sums joined by
      '='; the last sum is the product. Each digit of a sum then needs one digit product, the digit
      of the sum before it and a carry, as an addition does, instead of up to len(b) products at
      once. `decode_answer` returns the last sum only, and None unless every sum is well formed.
      "shifted_sums" writes the same sums without the digits already final: sum k from place k
      up, len(a) + 1 digits each. Each digit then meets the digit of a at its own index and the
      digit of the line before one index up, at every k, and no index exceeds len(a) + 1. The
      product is each line's lowest digit, then the last line; `decode_answer` reads it so.
    scratchpad (sorting): "radix_passes" writes the labels once per digit place p = 0 .. longest
      item - 1, each time ordered by digit p (0 beyond an item's length), ties in the order of the
      line before (the first: label order), the lines joined by '='; the last line is the sorted
      order (a least-significant-digit radix sort). Each label then needs one digit and the rank of
      its label in the line before, instead of a comparison of whole numbers.
      "radix_keys" writes the sort keys as well: for p = 0 .. longest item - 1 a line of the
      labels in the order so far (label order, then the order after places 0 .. p - 1), each
      followed by its item's digit p, then the sorted labels ("a:31,b:7,c:120" is answered
      a1b7c0=c2a3b0=b0c1a0=bac). The order of each line is then a stable sort of the line before
      by the digits written in that line, and each written digit is one look-up in the prompt.
      "transposition_rounds" sorts each digit place (lowest first) by an odd-even transposition
      sort: as many rounds as items, round r swapping the neighbours at places (i, i + 1), i of r's
      parity, whose digit p is out of order, one line of labels per round ("a:31,b:7,c:120" is
      answered abc=acb=cab=cab=cba=bca=bca=bac=bac). Each label then needs two labels of the line before
      (its place's and a neighbour's) and one comparison of two digits, never a count over the line.
      "transposition_marked" writes the same rounds with round r's label at slot r in upper case
      (Abc=aCb=caB=Cab=cBa=bcA=Bca=bAc=baC): a place's last round is the one that marks its line's last
      slot, which a token that sees only its neighbours can tell without counting lines (base <= 10).
      "transposition_keys" writes the marked rounds with each label followed by its item's digit at
      the line's place (A1b7c0=a1C0b7=c0a1B7=C2a3b0=...): a round's comparisons then read two digits
      written in the line before instead of looking each label's item up in the prompt.
      "transposition_next_keys" writes each place's last round with the next place's digits instead
      (A1b7c0=a1C0b7=c2a3B0=C2a3b0=...; the last line's are 0s), so every round compares two digits of
      the line before, the first round of a place too, and each written digit is one look-up in the prompt.
      "transposition_next_unmarked" writes the same lines in lower case (a1b7c0=a1c0b7=c2a3b0=...), for
      models that tell a place's rounds apart by role (abacus_digit_places) rather than by a marker.
      "transposition_flags" writes the same rounds with each label's digit, but counts the rounds over
      every line written (so a place may start with an odd round), writes a label in upper case from its
      round's first swap on, and ends a place after two rounds in a row that swapped nothing
      (a1b7c0=a1C0B7=C0A1B7=c0a1b7=c0a1b7=c2B0A3=...): no marker moves along the line, so every label
      depends on its neighbours in the line before and the label before it alone (base <= 10).
    """

    task: str = "add"
    base: int = 10
    reverse_operands: bool = True
    reverse_answer: bool = True
    operand_width: int = 0
    answer_width: int = 0
    end_token: bool = True
    max_items: int = 8  # sort: the largest number of labelled items a prompt may hold
    negative_answers: str = "sign"
    scratchpad: str = "none"

    def __post_init__(self):
        task = get_task(self.task)
        if not isinstance(self.base, int) or not 2 <= self.base <= 36:
            raise FormatError(f"base must be an integer from 2 to 36, got {self.base!r}")
        for name in ("operand_width", "answer_width"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise FormatError(f"{name} must be a non-negative integer, got {value!r}")
        if not isinstance(self.max_items, int) or not 2 <= self.max_items <= len(SORT_LABELS):
            raise FormatError(f"max_items must be from 2 to {len(SORT_LABELS)}, got {self.max_items!r}")
        known = __getattr__("NEGATIVE_ANSWERS")
        if self.negative_answers not in known:
            raise FormatError(f"negative_answers must be one of {known}, got {self.negative_answers!r}")
        if self.negative_answers not in task.negative_answers:
            owners = [t for t in task_names() if self.negative_answers in get_task(t).negative_answers]
            raise FormatError(f"negative_answers {self.negative_answers!r} applies to {_titles(owners)} only, "
                              f"not {task.title}")
        known = __getattr__("SCRATCHPADS")
        if self.scratchpad not in known:
            raise FormatError(f"scratchpad must be one of {known}, got {self.scratchpad!r}")
        if self.scratchpad != "none" and self.scratchpad not in task.scratchpads:
            owners = [t for t in task_names() if self.scratchpad in get_task(t).scratchpads]
            raise FormatError(f"scratchpad {self.scratchpad!r} applies to {_titles(owners)} only, not {task.title}")
        task.check_format(self)

    @property
    def task_rules(self):
        """The `Task` object of this format's task (its syntax, answers and written forms)."""
        return get_task(self.task)

    # -- serialization -------------------------------------------------------------------
    def to_dict(self) -> dict:
        return asdict(self)

    def fingerprint(self) -> str:
        """A short hash of the format, saved in a checkpoint's config.json and tokenizer_config.json
        (`number_format_fingerprint`) so that a tokenizer that writes problems differently from the
        model's training data is refused at load. The fields below always count; a field added to
        NumberFormat later counts only when it differs from its default, so saved fingerprints stay valid."""
        defaults = {f.name: f.default for f in fields(self)}
        data = {k: v for k, v in self.to_dict().items() if k in _FINGERPRINT_FIELDS or v != defaults[k]}
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: dict) -> NumberFormat:
        if not isinstance(data, dict):
            raise FormatError(f"number_format must be a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise FormatError(f"unknown number_format keys {unknown}; known keys: {sorted(known)}")
        return cls(**data)

    # -- vocabulary ----------------------------------------------------------------------
    def vocab(self) -> list[str]:
        """Token strings in id order. Digits come first so that a digit's id is its value."""
        return list(DIGIT_CHARS[: self.base]) + self.task_rules.symbols(self) + [PROMPT_END, PAD_TOKEN, EOS_TOKEN]

    def token_id(self, token: str) -> int:
        return self.vocab().index(token)

    def max_answer_digits(self, lengths: np.ndarray) -> np.ndarray:
        """Upper bound on answer digits for operands of the given lengths ([n, k] array)."""
        return np.maximum(self.task_rules.answer_digits(lengths), self.answer_width)

    def answer_tokens(self, lengths: np.ndarray) -> np.ndarray:
        """Per problem ([n, k] operand lengths): the tokens its answer may take, sign, running sums
        and <eos> included."""
        return self.task_rules.answer_tokens(self, lengths)

    def answer_run_tokens(self, lengths: np.ndarray) -> np.ndarray:
        """Per problem: the longest run of answer tokens between separators, which an abacus model
        indexes as one number (a sign counts: a model may write a digit in its place)."""
        return self.task_rules.answer_run_tokens(self, lengths)

    def max_answer_tokens(self, problems: Problems) -> int:
        """Tokens a decoder may need for the longest answer in the batch (sign and <eos> included)."""
        return int(self.answer_tokens(problems.lengths).max())


_FINGERPRINT_FIELDS = ("task", "base", "reverse_operands", "reverse_answer", "operand_width", "answer_width",
                       "end_token", "max_items")


@dataclass
class Problems:
    """A batch of problems of one task as digit arrays (least significant digit first).

    operands: [n, k, L] digits in `base`; lengths: [n, k] digit counts (0 = no such item,
    which only sorting uses). answer / answer_lengths / negative are None for prompts whose
    answer is unknown (user input). For sorting, `answer` holds item indices in sorted order.
    """

    task: str
    base: int
    operands: np.ndarray
    lengths: np.ndarray
    answer: np.ndarray | None = None
    answer_lengths: np.ndarray | None = None
    negative: np.ndarray | None = None

    def __len__(self) -> int:
        return self.operands.shape[0]

    def select(self, index) -> Problems:
        def pick(a):
            return None if a is None else a[index]

        return Problems(self.task, self.base, self.operands[index], self.lengths[index],
                        pick(self.answer), pick(self.answer_lengths), pick(self.negative))

    def with_answers(self) -> Problems:
        """The same problems carrying their exact answers (the task's `solve` on the digit arrays)."""
        answer, answer_lengths, negative = get_task(self.task).solve(self.operands, self.lengths, self.base)
        return Problems(self.task, self.base, self.operands, self.lengths, answer, answer_lengths, negative)

    # -- conversion to and from plain decimal text ---------------------------------------
    def operand_values(self) -> list[list[int]]:
        """Operands as Python ints (exact for any length)."""
        out = []
        for row_digits, row_lengths in zip(self.operands, self.lengths):
            out.append([digits_to_int(d[:n], self.base) for d, n in zip(row_digits, row_lengths) if n > 0])
        return out

    def _operand_texts(self) -> list[list[str]]:
        """Operands as decimal strings per problem (base 10: straight from the digits, any length)."""
        if self.base != 10:
            return [[str(v) for v in row] for row in self.operand_values()]
        n, k, _ = self.operands.shape
        if n == 0:
            return []
        texts = decimal_strings(self.operands.reshape(n * k, -1), self.lengths.reshape(-1))
        return [[t for t, m in zip(texts[i * k:(i + 1) * k], self.lengths[i]) if m > 0] for i in range(n)]

    def to_text(self) -> list[str]:
        """Plain decimal problem text, e.g. '123+456' or 'a:31,b:7,c:120'."""
        task = get_task(self.task)
        return [task.problem_text(r) for r in self._operand_texts()]

    def answer_text(self) -> list[str]:
        """Plain decimal answers ('579', '-12') or sorted labels ('bac')."""
        if self.answer is None:
            raise FormatError("these problems carry no answers (they were parsed from prompts)")
        return get_task(self.task).answer_text(self)


def decimal_strings(digits: np.ndarray, lengths: np.ndarray) -> list[str]:
    """Base-10 digit rows ([m, L], least significant first) to decimal strings without Python ints:
    exact and fast for any length (Python refuses int-to-text conversions beyond 4,300 digits)."""
    if digits.shape[1] == 0:
        return ["0"] * len(lengths)
    width = digits.shape[1]
    text = (digits[:, ::-1].astype(np.uint8) + ord("0")).tobytes().decode("ascii")
    out = []
    for i, n in enumerate(lengths.tolist()):
        row = text[i * width + width - min(int(n), width):(i + 1) * width]
        out.append(row.lstrip("0") or "0")
    return out


def digits_to_int(digits, base: int) -> int:
    """Least-significant-first digits to a Python int."""
    value = 0
    for d in reversed([int(x) for x in digits]):
        value = value * base + d
    return value


def int_to_digits(value: int, base: int) -> list[int]:
    """A non-negative Python int to least-significant-first digits (at least one digit)."""
    digits = []
    while True:
        value, d = divmod(value, base)
        digits.append(d)
        if value == 0:
            return digits


def problems_from_ints(task: str, rows: list[list[int]], base: int) -> Problems:
    """Operand tuples (Python ints, any size) to a `Problems` batch without answers."""
    if not rows:
        raise FormatError("no problems given")
    if any(v < 0 for row in rows for v in row):
        raise FormatError("negative numbers are not supported")
    digit_rows = [[int_to_digits(v, base) for v in row] for row in rows]
    k = max(len(r) for r in rows)
    width = max(len(d) for r in digit_rows for d in r)
    operands = np.zeros((len(rows), k, width), dtype=np.int8)
    lengths = np.zeros((len(rows), k), dtype=np.int64)
    for i, row in enumerate(digit_rows):
        for j, digits in enumerate(row):
            operands[i, j, : len(digits)] = digits
            lengths[i, j] = len(digits)
    return Problems(task, base, operands, lengths)


# -- parsing what a user types ------------------------------------------------------------
_NUMBER = re.compile(r"[0-9]+")


def check_number(token: str, problem: str) -> str:
    """A validated decimal operand of `problem`, leading zeros dropped ('007' -> '7')."""
    if token == "":
        raise FormatError(f"{quote(problem)}: missing operand")
    if token.startswith("-"):
        raise FormatError(f"{quote(problem)}: negative numbers are not supported")
    if not _NUMBER.fullmatch(token):
        bad = next(c for c in token if not c.isdigit() or not c.isascii())
        if bad == PROMPT_END:  # '12+3=': the model writes the '=' itself
            raise FormatError(f"{quote(problem)}: type the problem without {PROMPT_END!r}, as the operands and their sign")
        raise FormatError(f"{quote(problem)}: {bad!r} is not a decimal digit")
    return token.lstrip("0") or "0"


def parse_problem(text: str, fmt: NumberFormat) -> list[str]:
    """'123+456' -> ['123', '456'] (or the sort items), with one-line errors for anything else."""
    if not isinstance(text, str):
        raise FormatError(f"a problem must be a string, got {type(text).__name__}")
    problem = text.strip().replace(" ", "")
    if not problem:
        raise FormatError("empty problem")
    return fmt.task_rules.parse(problem, fmt)


def task_of(text: str) -> tuple[str, list[str]]:
    """The registered task whose syntax reads a typed problem, and its decimal operands ('12*34' ->
    ('mul', ['12', '34']); a list task reads up to len(SORT_LABELS) items). A problem no task reads is
    one FormatError: the error of the task whose sign it carries first (its operator after the first
    character, or a list's ':'), else the syntaxes there are."""
    errors = {}
    for name in task_names():
        task = get_task(name)
        fmt = NumberFormat(task=name, max_items=len(SORT_LABELS)) if task.item_list else NumberFormat(task=name)
        try:
            return name, parse_problem(text, fmt)
        except FormatError as err:
            errors[name] = err
    problem = text.strip().replace(" ", "") if isinstance(text, str) else ""

    def sign_at(task) -> int:  # where the problem first shows the task's sign (-1: nowhere)
        if task.operator:
            return problem.find(task.operator, 1)  # a '-' in front is a negative number, not subtraction
        return problem.find(":") if task.item_list else -1

    # The sign typed first names the task meant: '3*-2' is a product with a negative operand.
    signed = [(sign_at(get_task(name)), name) for name in errors if sign_at(get_task(name)) >= 0]
    if signed:
        raise errors[min(signed)[1]]
    if not problem:
        raise next(iter(errors.values()))  # not a string, or empty: said the same by every task
    shapes = [f"A{get_task(n).operator}B" if get_task(n).operator else "a:31,b:7,c:120" for n in errors]
    raise FormatError(f"{quote(problem)} is not a problem: type {', '.join(shapes)}")


def problems_from_decimal(task: str, rows: list[list[str]], base: int) -> Problems:
    """Decimal operand strings to digit arrays; base 10 skips big-int conversion entirely."""
    if base != 10:
        limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
        longest = max(len(v) for row in rows for v in row)
        if limit and longest > limit:
            raise FormatError(f"an operand of {longest:,} decimal digits is longer than the {limit:,} digits Python "
                              f"converts to base {base} (sys.get_int_max_str_digits)")
        return problems_from_ints(task, [[int(v) for v in row] for row in rows], base)
    k = max(len(r) for r in rows)
    width = max(len(v) for r in rows for v in r)
    cells = [row[j] if j < len(row) else "" for row in rows for j in range(k)]
    lengths = np.array([len(v) for v in cells], dtype=np.int64).reshape(len(rows), k)
    text = "".join(v[::-1].ljust(width, "0") for v in cells)  # least significant digit first
    digits = (np.frombuffer(text.encode("ascii"), dtype=np.uint8) - ord("0")).astype(np.int8)
    return Problems(task, base, digits.reshape(len(rows), k, width), lengths)


def parse_problems(texts: list[str], fmt: NumberFormat) -> Problems:
    if isinstance(texts, str) or not len(texts):
        raise FormatError("expected a non-empty list of problems")
    rows = [parse_problem(t, fmt) for t in texts]
    problems = problems_from_decimal(fmt.task, rows, fmt.base)
    check_fits(problems, fmt)
    return problems


def check_fits(problems: Problems, fmt: NumberFormat) -> None:
    """Operands wider than a fixed-width format cannot be written: say which one."""
    if fmt.operand_width and (problems.lengths > fmt.operand_width).any():
        i = int(np.argwhere(problems.lengths > fmt.operand_width)[0][0])
        raise FormatError(
            f"{quote(problems.select([i]).to_text()[0])}: an operand has more than {fmt.operand_width} "
            f"base-{fmt.base} digits, the width this model was trained on"
        )
    if fmt.answer_width and (fmt.max_answer_digits(problems.lengths) > fmt.answer_width).any():
        i = int(np.argmax(fmt.max_answer_digits(problems.lengths) > fmt.answer_width))
        raise FormatError(
            f"{quote(problems.select([i]).to_text()[0])}: the answer may need more than {fmt.answer_width} digits"
        )


# -- rendering to token ids ---------------------------------------------------------------
def digit_segment(digits: np.ndarray, lengths: np.ndarray, width: int, reverse: bool):
    """Digits of one number per row as a [n, W] block in print order, with per-row lengths."""
    shown = np.full_like(lengths, width) if width else lengths
    cols = int(shown.max()) if len(shown) else 0
    if digits.shape[1] < cols:
        digits = np.pad(digits, ((0, 0), (0, cols - digits.shape[1])))
    if reverse:
        return digits[:, :cols].astype(np.int64), shown
    index = np.clip(shown[:, None] - 1 - np.arange(cols)[None, :], 0, None)
    return np.take_along_axis(digits, index, axis=1).astype(np.int64), shown


def _concat(segments, n: int, pad_id: int):
    """Lay out per-row variable-length segments side by side, right-padded with pad_id."""
    total = sum(lens for _, lens in segments) if segments else np.zeros(n, dtype=np.int64)
    out = np.full((n, int(total.max())), pad_id, dtype=np.int64)
    start = np.zeros(n, dtype=np.int64)
    for block, lens in segments:
        width = block.shape[1]
        cols = start[:, None] + np.arange(width)[None, :]
        mask = np.arange(width)[None, :] < lens[:, None]
        out[np.nonzero(mask)[0], cols[mask]] = block[mask]
        start = start + lens
    return out, total


def const_segment(token_id: int, present: np.ndarray):
    """A one-token segment that appears where `present` is true."""
    return np.full((len(present), 1), token_id, dtype=np.int64), present.astype(np.int64)


def render(problems: Problems, fmt: NumberFormat, with_answer: bool):
    """Token ids for a batch. Returns (ids [n, T] right-padded, lengths [n], prompt_lengths [n]).

    The prompt ends with '='; with_answer appends the answer (and <eos> if the format has one).
    """
    if problems.task != fmt.task:
        raise FormatError(f"problems are {problems.task!r} but the format is for {fmt.task!r}")
    if problems.base != fmt.base:
        raise FormatError(f"problems are in base {problems.base} but the format uses base {fmt.base}")
    check_fits(problems, fmt)
    vocab = {t: i for i, t in enumerate(fmt.vocab())}
    n = len(problems)
    ones = np.ones(n, dtype=bool)
    task = fmt.task_rules
    segments = task.prompt_segments(problems, fmt, vocab)
    segments.append(const_segment(vocab[PROMPT_END], ones))
    prompt_lengths = sum(lens for _, lens in segments)
    if with_answer:
        if problems.answer is None:
            raise FormatError("cannot render answers for problems parsed from prompts")
        segments += task.answer_segments(problems, fmt, vocab)
        if fmt.end_token:
            segments.append(const_segment(vocab[EOS_TOKEN], ones))
    ids, lengths = _concat(segments, n, vocab[PAD_TOKEN])
    return ids, lengths, prompt_lengths


def render_answers(problems: Problems, fmt: NumberFormat):
    """What training learns from: (ids [n, T] right-padded, lengths [n], answer [n, T]), `answer`
    True on the tokens the model writes (the answer, its written working and <eos>), which carry the
    loss; the prompt and the padding do not."""
    ids, lengths, prompt_lengths = render(problems, fmt, with_answer=True)
    cols = np.arange(ids.shape[1])[None, :]
    return ids, lengths, (cols >= prompt_lengths[:, None]) & (cols < lengths[:, None])


# -- reading answers back -----------------------------------------------------------------
def decode_answer(tokens: list[str], fmt: NumberFormat, operand_lengths=None) -> str | None:
    """Generated answer tokens to plain decimal text.

    The answer is the tokens before the first <eos> (or <pad>). A format with an end token
    writes <eos> after every answer, so tokens without one (an answer cut off by the token
    budget, or ended by <pad>) are not an answer. Returns None when the tokens are not a
    well-formed answer in this format. `operand_lengths` (the problem's operand digit counts),
    when given, also holds written working to the problem's shape: running sums, one per digit
    of b, the first len(a) + 1 digits wide (shifted sums: every one); radix passes, one line of every item's label per
    digit place of the longest item.
    """
    chars, ended = [], False
    for t in tokens:
        if t in (EOS_TOKEN, PAD_TOKEN):
            ended = t == EOS_TOKEN
            break
        chars.append(t)
    if fmt.end_token and not ended:
        return None
    return fmt.task_rules.read_answer("".join(chars), fmt, operand_lengths)


def plain_text(tokens: list[str], fmt: NumberFormat) -> str:
    """A token sequence (a prompt, an answer, or both, padding anywhere) in plain decimal, as a person
    writes it: 'problem=answer', the problem alone for a prompt, '=answer' for answer tokens alone.
    An answer that is not well-formed (`decode_answer` gives None) stays as written after the '='."""
    body = [t for t in tokens if t != PAD_TOKEN]
    task = fmt.task_rules
    problem, operands, answer = "", None, body
    if PROMPT_END in body:
        cut = body.index(PROMPT_END)
        operands = task.read_prompt("".join(body[:cut]), fmt)
        if operands is not None:
            problem, answer = task.problem_text(operands), body[cut + 1:]
    if not answer:
        return problem
    lengths = None if operands is None else parse_problems([problem], fmt).lengths[0]
    value = decode_answer(answer, fmt, lengths)
    return f"{problem}={value if value is not None else ''.join(t for t in answer if t != EOS_TOKEN)}"
