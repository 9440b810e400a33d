"""Arithmetic problems as a Hugging Face `datasets` builder, plus an endless streaming variant.

Rows are plain decimal text, whatever base the problems were drawn in, so they read the same
to people, to the Hub viewer and to any tokenizer:

    {"problem": "123+456", "answer": "579", "task": "add", "operand_lengths": [3, 3]}
    {"problem": "a:31,b:7,c:120", "answer": "bac", "task": "sort", "operand_lengths": [2, 1, 3]}

`operand_lengths` are digit counts in the config's base (the quantity the digit range and
length generalisation are about). Rows come from `problems.sample` in vectorized chunks, so a
split is a pure function of (config, seed), and train and test never share a problem: the
split of a problem is decided by a hash of (task, operand values), see `problems.split_of`.

datasets 5 has no loading scripts, so the builder is used directly:

    b = ArithProblems(config_name="add", cache_dir=..., max_digits=5)
    b.download_and_prepare()
    ds = b.as_dataset()                            # DatasetDict(train, test)
    it = b.as_streaming_dataset(split="train")     # same rows, generated on the fly
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields, make_dataclass
from pathlib import Path

import datasets
import numpy as np

from . import formatting, problems, tasks
from .errors import HfArithError
from .formatting import FormatError, get_task, task_names
from .problems import DEFAULT_TEST_FRACTION, SPLITS, ProblemSpec, sample

try:  # datasets >= 4 keys examples by (shard, index); older builders may yield plain ints
    from datasets.builder import Key
except ImportError:  # pragma: no cover
    Key = None

# Digit (and item) ranges per task: what each named config and `export_parquet` default to.


def task_defaults(task: str) -> dict[str, int]:
    """A task's default problem ranges (its `default_digits`; base 10; lists of 2 to 5 items)."""
    low, high = get_task(task).default_digits
    return {"min_digits": low, "max_digits": high, "base": 10, "min_items": 2, "max_items": 5}


SPEC_KEYS = tuple(f.name for f in fields(ProblemSpec) if f.name != "task")  # the ranges (min_digits, ..., max_items) and sample_by
DEFAULT_TRAIN_SIZE = 10_000
DEFAULT_TEST_SIZE = 1_000
# The longest operands a dataset may hold. Rows are decimal text and every chunk of CHUNK_SIZE problems is
# held as digit arrays, so longer operands cost memory and time (multiplication grows with digits squared:
# about 20 s per chunk at 1,000 digits); no model here reads more than 40 digits.
MAX_DIGITS = 1_000
# The most rows in one split: one Parquet file each; 10-digit addition writes about 160,000 rows/s on one
# core and 25 bytes per row, so this is about 10 minutes and 2.5 GB. For more, export several seeds.
MAX_SPLIT_SIZE = 100_000_000
# Rows drawn per `sample` call. Part of what the rows are (the rng is consumed chunk by chunk),
# so changing it changes every generated split; the cache hash covers this file.
CHUNK_SIZE = 4096

FEATURES = datasets.Features(
    {
        "problem": datasets.Value("string"),
        "answer": datasets.Value("string"),
        "task": datasets.Value("string"),
        "operand_lengths": datasets.List(datasets.Value("int32")),
    }
)


# -- validation shared by the builder, the endless stream and the Parquet export ----------
def make_spec(task: str = "add", **spec_kwargs) -> ProblemSpec:
    """The ProblemSpec for `task`, with the task's defaults for any range not given."""
    defaults = task_defaults(task)  # an unknown task: a FormatError naming the known ones
    unknown = sorted(set(spec_kwargs) - set(SPEC_KEYS))
    if unknown:
        raise HfArithError(f"unknown problem settings {unknown}; known settings: {list(SPEC_KEYS)}")
    values = {**defaults, **{k: v for k, v in spec_kwargs.items() if v is not None}}
    for key in defaults:  # the ranges; sample_by is a name, which ProblemSpec checks
        _check_int(key, values[key], minimum=None)
    if values["max_digits"] > MAX_DIGITS:
        raise HfArithError(f"max_digits must be at most {MAX_DIGITS:,}, got {values['max_digits']:,}: every problem is "
                         f"held as digits and written as decimal text, and longer operands take minutes and gigabytes "
                         f"per chunk of {CHUNK_SIZE:,} problems")
    try:
        return ProblemSpec(task=task, **values)
    except FormatError as err:
        raise HfArithError(str(err)) from None


def _check_int(name: str, value, minimum: int | None = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise HfArithError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise HfArithError(f"{name} must be at least {minimum}, got {value}")


# Digit operations an export may take: rows x operand digits, x operand digits again for multiplication (each
# product is quadratic in its digits). 100-digit products write about 8,500 rows/s on one core, so this is
# about 10 minutes of one core at any length.
MAX_EXPORT_WORK = 5 * 10**9
# Up to this many distinct problems, a split's share is counted exactly (each problem's split is a hash).
EXACT_COUNT_LIMIT = 200_000


def distinct_problems(spec: ProblemSpec) -> int:
    """How many distinct problems `spec` draws from: operand values in its digit range (0 is a one-digit
    number), two per problem, or min_items to max_items per sorting list."""
    from .problems import count_of_length

    values = sum(count_of_length(spec.base, n) for n in range(spec.min_digits, spec.max_digits + 1))
    if spec.task_rules.item_list:
        return sum(values**k for k in range(spec.min_items, spec.max_items + 1))
    return values**2


def distinct_in_splits(spec: ProblemSpec, test_fraction: float) -> dict[str, int]:
    """Distinct problems of `spec` in each split: counted for two-operand ranges of up to EXACT_COUNT_LIMIT
    problems, else the expected share (test_fraction of them are in the test split)."""
    total = distinct_problems(spec)
    if not spec.task_rules.item_list and total <= EXACT_COUNT_LIMIT:
        values = [v for n in range(spec.min_digits, spec.max_digits + 1)
                  for v in range(0 if n == 1 else spec.base ** (n - 1), spec.base**n)]
        rows = [[a, b] for a in values for b in values]
        test = int(problems.split_of(formatting.problems_from_ints(spec.task, rows, spec.base), test_fraction).sum())
    else:
        test = int(total * test_fraction)
    return {"train": total - test, "test": test}


def check_work(spec: ProblemSpec, train_size: int, test_size: int, test_fraction: float = DEFAULT_TEST_FRACTION) -> None:
    """Refuse, before any problem is drawn, an export (or builder run) whose work has no bound: more digit
    operations than MAX_EXPORT_WORK, or a split with more rows than its range has distinct problems
    (drawing them would repeat problems, and a split a range barely reaches would never fill)."""
    rows = sum(-(-size // CHUNK_SIZE) * CHUNK_SIZE for size in (train_size, test_size))  # whole chunks are drawn
    rules = spec.task_rules
    work = rows * spec.max_digits**rules.work_exponent * (spec.max_items if rules.item_list else 1)
    if work > MAX_EXPORT_WORK:
        what = "max_digits" if rules.work_exponent == 1 else f"max_digits^{rules.work_exponent}"
        raise HfArithError(f"max_digits {spec.max_digits:,} with {rows:,} rows (split sizes drawn in chunks of {CHUNK_SIZE:,}) "
                         f"takes about {work:,} digit operations (rows x {what}), more than the {MAX_EXPORT_WORK:,} an "
                         "export may take; lower max_digits or the split sizes")
    available = distinct_in_splits(spec, test_fraction)
    for split, size in (("train", train_size), ("test", test_size)):
        if size > available[split]:
            raise HfArithError(f"{split}_size {size:,} is more than the {available[split]:,} distinct {split} problems with "
                             f"operands of {spec.min_digits}-{spec.max_digits} digits (test_fraction {test_fraction}); lower "
                             f"{split}_size or widen the digit range")


def check_run_settings(train_size, test_size, seed, test_fraction) -> None:
    """One-line ValueErrors for split sizes (1 to MAX_SPLIT_SIZE), seed and test fraction."""
    for name, size in (("train_size", train_size), ("test_size", test_size)):
        _check_int(name, size, minimum=1)
        if size > MAX_SPLIT_SIZE:
            raise HfArithError(f"{name} must be at most {MAX_SPLIT_SIZE:,} problems (one Parquet file of about "
                             f"2.5 GB and 10 minutes for 10-digit addition; export several seeds for more), got {size:,}")
    _check_int("seed", seed, minimum=0)
    _check_fraction(test_fraction)


def _check_fraction(test_fraction) -> None:
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float)) or not 0 < test_fraction < 1:
        raise HfArithError(f"test_fraction must be a number strictly between 0 and 1, got {test_fraction!r}")


def _check_split(split) -> str:
    split = str(split)
    if split not in SPLITS:
        raise HfArithError(f"unknown split {split!r}; use one of {list(SPLITS)}")
    return split


# -- the rows -------------------------------------------------------------------------------
def split_rng(seed: int, split: str) -> np.random.Generator:
    """The random stream of one split: train and test of one seed are independent streams."""
    return np.random.default_rng([int(seed), SPLITS.index(split)])


def problem_columns(batch: problems.Problems) -> dict[str, list]:
    """Dataset columns for a batch of problems with answers."""
    return {
        "problem": batch.to_text(),
        "answer": batch.answer_text(),
        "task": [batch.task] * len(batch),
        "operand_lengths": [row[row > 0].astype(np.int32).tolist() for row in batch.lengths],
    }


def iter_column_chunks(spec: ProblemSpec, size: int | None, seed: int, split: str,
                       test_fraction: float = DEFAULT_TEST_FRACTION,
                       chunk_size: int = CHUNK_SIZE) -> Iterator[dict[str, list]]:
    """Column chunks of `split` rows: `size` rows in all, or endless for size=None.

    Deterministic for (spec, seed, split, test_fraction, chunk_size); a finite run is a
    prefix of the endless one with the same settings.
    """
    rng = split_rng(seed, split)
    left = size
    while left is None or left > 0:
        # Always draw whole chunks (the rng use depends on the count), then cut the last one.
        try:
            batch = sample(spec, chunk_size, rng, split=split, test_fraction=test_fraction)
        except FormatError as err:
            raise HfArithError(str(err)) from None
        if left is not None and left < chunk_size:
            batch = batch.select(slice(0, left))
        yield problem_columns(batch)
        if left is not None:
            left -= len(batch)


def iter_rows(spec: ProblemSpec, size: int | None, seed: int, split: str,
              test_fraction: float = DEFAULT_TEST_FRACTION) -> Iterator[dict]:
    """The rows of `iter_column_chunks`, one dict per problem."""
    for cols in iter_column_chunks(spec, size, seed, split, test_fraction):
        keys = list(cols)
        for values in zip(*(cols[k] for k in keys), strict=True):
            yield dict(zip(keys, values, strict=True))


def _code_hash() -> str:
    """Hash of the code that decides the rows, so a cached build never outlives a change to it."""
    h = hashlib.sha256()
    for path in (formatting.__file__, problems.__file__, *sorted(Path(tasks.__file__).parent.glob("*.py"))):
        h.update(Path(path).read_bytes())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()[:16]


# -- the builder ----------------------------------------------------------------------------
# A builder config's problem settings are ProblemSpec's fields (names, types, defaults), as plain
# attributes: datasets sets a config's attributes one by one, which a frozen ProblemSpec refuses.
_ProblemSettings = make_dataclass("_ProblemSettings", [(f.name, f.type, field(default=f.default))
                                                       for f in fields(ProblemSpec)])


@dataclass
class ArithProblemsConfig(_ProblemSettings, datasets.BuilderConfig):
    """One arithmetic dataset: the problem range (ProblemSpec's settings), split sizes, seed and test fraction."""

    train_size: int = DEFAULT_TRAIN_SIZE
    test_size: int = DEFAULT_TEST_SIZE
    seed: int = 0
    test_fraction: float = DEFAULT_TEST_FRACTION

    def __post_init__(self):
        super().__post_init__()
        self.validate()

    def spec(self) -> ProblemSpec:
        return make_spec(self.task, **{k: getattr(self, k) for k in SPEC_KEYS})

    def validate(self) -> None:
        """One-line ValueError for any bad setting (overrides bypass __post_init__, so the builder calls this too)."""
        spec = self.spec()
        check_run_settings(self.train_size, self.test_size, self.seed, self.test_fraction)
        check_work(spec, self.train_size, self.test_size, self.test_fraction)


def _named_config(task: str) -> ArithProblemsConfig:
    what = get_task(task).title
    d = task_defaults(task)
    items = f", {d['min_items']}-{d['max_items']} items" if get_task(task).item_list else ""
    return ArithProblemsConfig(
        name=task, version=datasets.Version("1.0.0"), task=task, **d,
        description=f"{what} of {d['min_digits']}-{d['max_digits']} digit numbers{items}, base {d['base']}",
    )


class ArithProblems(datasets.GeneratorBasedBuilder):
    """Seeded synthetic arithmetic problems (add, sub, mul, sort) with disjoint train/test splits."""

    BUILDER_CONFIG_CLASS = ArithProblemsConfig
    BUILDER_CONFIGS = [_named_config(t) for t in task_names()]
    DEFAULT_CONFIG_NAME = "add"
    VERSION = datasets.Version("1.0.0")
    config: ArithProblemsConfig

    def __init__(self, *args, **kwargs):
        # ArithProblems(task="mul") means the "mul" config (its digit range), not "add" with task=mul.
        if kwargs.get("config_name") is None and kwargs.get("task") in task_names():
            kwargs["config_name"] = kwargs["task"]
        kwargs.setdefault("dataset_name", "arith_problems")
        kwargs.setdefault("hash", _code_hash())
        super().__init__(*args, **kwargs)

    def _info(self) -> datasets.DatasetInfo:
        config = self.config
        if config.name in task_names() and config.name != config.task:
            raise HfArithError(f"config {config.name!r} is for task {config.name!r}, got task={config.task!r}; "
                             f"use config_name={config.task!r}")
        config.validate()
        spec = config.spec()
        items = f", {spec.min_items}-{spec.max_items} items" if spec.task_rules.item_list else ""
        return datasets.DatasetInfo(
            description=(f"Synthetic {spec.task} problems, {spec.min_digits}-{spec.max_digits} base-{spec.base} "
                         f"digits{items}, seed {config.seed}; train/test split by a hash of (task, operand values) "
                         f"with test fraction {config.test_fraction}."),
            features=FEATURES,
            license="apache-2.0",
        )

    def _split_generators(self, dl_manager):
        c = self.config
        return [
            datasets.SplitGenerator(name=datasets.Split.TRAIN, gen_kwargs={"split": "train", "size": c.train_size}),
            datasets.SplitGenerator(name=datasets.Split.TEST, gen_kwargs={"split": "test", "size": c.test_size}),
        ]

    def _generate_examples(self, split: str, size: int):
        c = self.config
        for i, row in enumerate(iter_rows(c.spec(), size, c.seed, split, c.test_fraction)):
            yield (Key(0, i) if Key is not None else i), row


# -- endless rows -----------------------------------------------------------------------------
def _endless_rows(spec: dict, seed: int, split: str, test_fraction: float):
    yield from iter_rows(ProblemSpec(**spec), None, seed, split, test_fraction)


def infinite_dataset(task: str = "add", *, seed: int = 0, split: str = "train",
                     test_fraction: float = DEFAULT_TEST_FRACTION, **spec_kwargs) -> datasets.IterableDataset:
    """An endless `datasets.IterableDataset` of the builder's rows (same features, same generator).

    Its first N rows are exactly the builder's `split` of size N for the same task, ranges, seed
    and test fraction. Use `.take(n)`, or `max_steps` with the Trainer.
    """
    spec = make_spec(task, **spec_kwargs)
    _check_int("seed", seed, minimum=0)
    _check_fraction(test_fraction)
    split = _check_split(split)
    return datasets.IterableDataset.from_generator(
        _endless_rows,
        features=FEATURES,
        gen_kwargs={"spec": asdict(spec), "seed": int(seed), "split": split, "test_fraction": float(test_fraction)},
        split=datasets.NamedSplit(split),
    )


__all__ = [
    "ArithProblems", "ArithProblemsConfig", "FEATURES", "task_defaults", "infinite_dataset", "iter_column_chunks",
    "iter_rows", "make_spec",
]
