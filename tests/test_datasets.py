"""The `datasets` builder, the endless IterableDataset and the Parquet export for the Hub."""

from __future__ import annotations

import itertools

import datasets
import pytest
from huggingface_hub import DatasetCard

from hf_arith.data.dataset_builder import FEATURES, ArithProblems, ArithProblemsConfig, infinite_dataset
from hf_arith.data.dataset_export import export_parquet, template_path
from hf_arith.data.formatting import TASKS, int_to_digits, problems_from_ints
from hf_arith.data.problems import split_of

SMALL = dict(train_size=300, test_size=60)


def build(tmp_path, config_name="add", **overrides) -> datasets.DatasetDict:
    builder = ArithProblems(config_name=config_name, cache_dir=str(tmp_path / "cache"), **overrides)
    builder.download_and_prepare()
    return builder.as_dataset()


def rows(ds) -> list[dict]:
    return [dict(r) for r in ds]


def parse_row(row: dict) -> list[int]:
    text = row["problem"]
    if row["task"] == "sort":
        return [int(item.split(":")[1]) for item in text.split(",")]
    a, b = text.split({"add": "+", "sub": "-", "mul": "*"}[row["task"]])
    return [int(a), int(b)]


def expected_answer(task: str, values: list[int]) -> str:
    if task == "sort":
        return "".join("abcdefghijklmnopqrstuvwxyz"[i] for i in sorted(range(len(values)), key=lambda i: values[i]))
    a, b = values
    return str({"add": a + b, "sub": a - b, "mul": a * b}[task])


# -- the builder ------------------------------------------------------------------------------
def test_builder_configs():
    configs = {c.name: c for c in ArithProblems.BUILDER_CONFIGS}
    assert list(configs) == list(TASKS) == ["add", "sub", "mul", "sort"]
    assert ArithProblems.DEFAULT_CONFIG_NAME == "add"
    for name, config in configs.items():
        assert isinstance(config, ArithProblemsConfig)
        assert config.task == name
        assert (config.train_size, config.test_size, config.seed, config.test_fraction) == (10_000, 1_000, 0, 0.1)
        assert config.base == 10 and config.min_digits == 1 and config.description
    assert configs["add"].max_digits == configs["sub"].max_digits == 10
    assert configs["mul"].max_digits == 5
    assert (configs["sort"].max_digits, configs["sort"].min_items, configs["sort"].max_items) == (5, 2, 5)


@pytest.mark.parametrize("task", TASKS)
def test_builder_splits_features_and_correct_rows(tmp_path, task):
    ds = build(tmp_path, task, max_digits=4, **SMALL)
    assert set(ds) == {"train", "test"}
    assert (ds["train"].num_rows, ds["test"].num_rows) == (300, 60)
    for split in ds.values():
        assert split.features == FEATURES
        assert split.features["operand_lengths"] == datasets.List(datasets.Value("int32"))
        for row in rows(split):
            values = parse_row(row)
            assert row["task"] == task
            assert row["answer"] == expected_answer(task, values)
            assert row["operand_lengths"] == [len(str(v)) for v in values]
            assert all(1 <= n <= 4 for n in row["operand_lengths"])
            if task == "sort":
                assert 2 <= len(values) <= 5


def test_builder_default_config_and_task_keyword(tmp_path):
    assert ArithProblems(cache_dir=str(tmp_path)).config.name == "add"
    mul = ArithProblems(task="mul", cache_dir=str(tmp_path))
    assert (mul.config.name, mul.config.task, mul.config.max_digits) == ("mul", "mul", 5)


def test_operand_lengths_count_digits_in_the_configs_base(tmp_path):
    ds = build(tmp_path, "add", base=16, min_digits=3, max_digits=6, **SMALL)
    for row in rows(ds["train"]):
        values = parse_row(row)
        assert row["operand_lengths"] == [len(int_to_digits(v, 16)) for v in values]
        assert row["answer"] == str(sum(values))  # the text stays decimal


def test_builder_is_deterministic(tmp_path):
    first = build(tmp_path / "a", "sub", max_digits=6, **SMALL)
    again = build(tmp_path / "b", "sub", max_digits=6, **SMALL)
    other = build(tmp_path / "c", "sub", max_digits=6, seed=1, **SMALL)
    for split in ("train", "test"):
        assert rows(first[split]) == rows(again[split])
        assert first[split]["problem"][:] != other[split]["problem"][:]


def test_cache_dirs_differ_by_settings(tmp_path):
    def cache_dir(**kw):
        return ArithProblems(config_name="add", cache_dir=str(tmp_path), **kw)._cache_dir

    assert cache_dir(max_digits=5) != cache_dir(max_digits=6)
    assert cache_dir(seed=1) != cache_dir(seed=2)
    assert cache_dir(max_digits=5) == cache_dir(max_digits=5)


def test_built_train_and_test_are_disjoint(tmp_path):
    # A 1-2 digit range has 10,000 additions: 2,000 train rows would hit test problems often.
    ds = build(tmp_path, "add", max_digits=2, train_size=2000, test_size=300)
    train, test = set(ds["train"]["problem"]), set(ds["test"]["problem"])
    assert not train & test
    assert len(train) > 1000 and len(test) > 100
    test_problems = problems_from_ints("add", [parse_row(r) for r in rows(ds["test"])], 10)
    train_problems = problems_from_ints("add", [parse_row(r) for r in rows(ds["train"])], 10)
    assert split_of(test_problems).all() and not split_of(train_problems).any()


def test_streaming_gives_the_same_rows(tmp_path):
    builder = ArithProblems(config_name="sort", cache_dir=str(tmp_path / "cache"), **SMALL)
    builder.download_and_prepare()
    built = builder.as_dataset()
    streamed = builder.as_streaming_dataset(split="train")
    assert isinstance(streamed, datasets.IterableDataset)
    assert rows(streamed) == rows(built["train"])
    both = ArithProblems(config_name="sort", cache_dir=str(tmp_path / "other"), **SMALL).as_streaming_dataset()
    assert set(both) == {"train", "test"}
    assert rows(both["test"]) == rows(built["test"])


def test_infinite_dataset_extends_the_builder_rows(tmp_path):
    ds = build(tmp_path, "mul", max_digits=3, **SMALL)
    endless = infinite_dataset("mul", max_digits=3)
    assert isinstance(endless, datasets.IterableDataset)
    assert endless.features == FEATURES
    assert rows(endless.take(300)) == rows(ds["train"])
    # Endless: well past one generation chunk, and all rows well formed.
    many = list(itertools.islice(iter(endless), 4200))
    assert len(many) == 4200
    assert all(r["answer"] == expected_answer("mul", parse_row(r)) for r in many[4090:4110])
    test_rows = rows(infinite_dataset("add", split="test", max_digits=2).take(200))
    assert split_of(problems_from_ints("add", [parse_row(r) for r in test_rows], 10)).all()


@pytest.mark.parametrize("config_name,overrides,message", [
    ("div", {}, "not found"),
    ("add", dict(task="mul"), "config 'add' is for task 'add'"),
    ("add", dict(train_size=0), "train_size must be at least 1"),
    ("add", dict(test_size=-5), "test_size must be at least 1"),
    ("add", dict(train_size="10"), "train_size must be an integer"),
    ("add", dict(seed=-1), "seed must be at least 0"),
    ("add", dict(test_fraction=1.5), "test_fraction must be"),
    ("add", dict(min_digits=4, max_digits=3), "digit range"),
    ("add", dict(base=40), "base must be"),
    ("sort", dict(max_items=30), "sort item range"),
])
def test_builder_errors(tmp_path, config_name, overrides, message):
    with pytest.raises(ValueError, match=message) as info:
        ArithProblems(config_name=config_name, cache_dir=str(tmp_path), **overrides)
    if config_name != "div":  # datasets' own message for an unknown config name spans lines
        assert "\n" not in str(info.value)


def test_infinite_dataset_errors():
    with pytest.raises(ValueError, match="unknown task 'div'"):
        infinite_dataset("div")
    with pytest.raises(ValueError, match="unknown split"):
        infinite_dataset("add", split="validation")
    with pytest.raises(ValueError, match="unknown problem settings"):
        infinite_dataset("add", digits=3)


# -- Parquet export ---------------------------------------------------------------------------
def test_export_round_trip_with_load_dataset(tmp_path):
    out = export_parquet(tmp_path / "export", task="sub", seed=3, max_digits=6, **SMALL)
    assert out == (tmp_path / "export").resolve()
    assert (out / "data" / "train-00000-of-00001.parquet").is_file()
    assert (out / "data" / "test-00000-of-00001.parquet").is_file()
    loaded = datasets.load_dataset(str(out))
    assert set(loaded) == {"train", "test"}
    assert loaded["train"].features == FEATURES
    # Exactly the builder's rows for the same settings.
    built = build(tmp_path, "sub", seed=3, max_digits=6, **SMALL)
    for split in ("train", "test"):
        assert rows(loaded[split]) == rows(built[split])
    streamed = datasets.load_dataset(str(out), split="test", streaming=True)
    assert rows(streamed) == rows(built["test"])


def test_export_dataset_card(tmp_path):
    out = export_parquet(tmp_path / "export", task="sort", train_size=123, test_size=45, seed=9, base=16,
                         min_items=3, max_items=4)
    text = (out / "README.md").read_text()
    assert text.startswith("---\n")
    assert "configs:" in text.split("---")[1]
    card = DatasetCard.load(out / "README.md")
    assert card.data.configs == [{
        "config_name": "default",
        "data_files": [{"split": "train", "path": "data/train-00000-of-00001.parquet"},
                       {"split": "test", "path": "data/test-00000-of-00001.parquet"}],
    }]
    assert card.data.license == "apache-2.0"
    assert card.data.size_categories == ["n<1K"]
    for fragment in ["sorting", "1 to 5 digits in base 16", "3 to 4", "| train rows | 123 |", "| test rows | 45 |",
                     "| seed | 9 |", "hash of (task, operand", "no problem appears in both splits",
                     "task='sort'", "seed=9", "base=16"]:
        assert fragment in text, fragment
    assert "{{" not in text and "{%" not in text
    first = datasets.load_dataset(str(out), split="train")[0]
    assert f"`{first['problem']}`" in text


def test_export_uses_the_task_defaults(tmp_path):
    out = export_parquet(tmp_path / "mul", task="mul", train_size=200, test_size=20)
    loaded = datasets.load_dataset(str(out))
    assert max(max(r) for r in loaded["train"]["operand_lengths"][:]) == 5
    assert "1 to 5 digits" in (out / "README.md").read_text()


def test_export_refuses_a_non_empty_dir_unless_overwrite(tmp_path):
    out = tmp_path / "export"
    export_parquet(out, train_size=50, test_size=10)
    with pytest.raises(ValueError, match="is not empty; pass overwrite=True") as info:
        export_parquet(out, train_size=50, test_size=10, seed=1)
    assert "\n" not in str(info.value)
    (out / "notes.txt").write_text("keep me")
    (out / "data" / "train-00000-of-00002.parquet").write_bytes(b"stale shard")
    export_parquet(out, train_size=70, test_size=10, seed=1, overwrite=True)
    assert (out / "notes.txt").read_text() == "keep me"
    assert not (out / "data" / "train-00000-of-00002.parquet").exists()
    assert datasets.load_dataset(str(out))["train"].num_rows == 70
    # An empty existing folder is fine without overwrite.
    (tmp_path / "empty").mkdir()
    export_parquet(tmp_path / "empty", train_size=5, test_size=5)


@pytest.mark.parametrize("kwargs,message", [
    (dict(task="div"), "unknown task 'div'"),
    (dict(train_size=0), "train_size must be at least 1"),
    (dict(test_size=-1), "test_size must be at least 1"),
    (dict(train_size=2.5), "train_size must be an integer"),
    (dict(train_size=True), "train_size must be an integer"),
    (dict(test_fraction=0), "test_fraction must be"),
    (dict(max_digits=0), "digit range"),
    (dict(digits=3), "unknown problem settings"),
    (dict(seed=-2), "seed must be at least 0"),
])
def test_export_argument_errors(tmp_path, kwargs, message):
    out = tmp_path / "never"
    with pytest.raises(ValueError, match=message) as info:
        export_parquet(out, **kwargs)
    assert "\n" not in str(info.value)
    assert not out.exists()


def test_export_unwritable_out_dir(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match="exists and is not a directory"):
        export_parquet(blocker, train_size=5, test_size=5)
    with pytest.raises(ValueError, match="is not writable") as info:
        export_parquet(blocker / "below", train_size=5, test_size=5)
    assert "\n" not in str(info.value)


def test_card_template_is_found_and_replaceable(tmp_path):
    assert template_path().is_file()
    assert "{{ card_data }}" in template_path().read_text()
    custom = tmp_path / "card.md"
    custom.write_text("---\n{{ card_data }}\n---\n\n# {{ pretty_name }}: {{ train_size }} rows\n")
    out = export_parquet(tmp_path / "export", train_size=8, test_size=4, card_template=custom, pretty_name="Tiny")
    card = DatasetCard.load(out / "README.md")
    assert card.text.strip() == "# Tiny: 8 rows"
    assert card.data.configs[0]["config_name"] == "default"
    with pytest.raises(ValueError, match="is not a file"):
        export_parquet(tmp_path / "other", card_template=tmp_path / "missing.md")
