"""Export arithmetic problems as a Hub-ready Parquet dataset folder.

    out_dir/
      README.md                              dataset card, YAML `configs:` block pointing at data/
      data/train-00000-of-00001.parquet
      data/test-00000-of-00001.parquet

`datasets.load_dataset(str(out_dir))` loads both splits, and the folder can be uploaded as is
(`HfApi.upload_folder(repo_type="dataset")`). The rows are exactly those of
`ArithProblems` with the same settings (the same generator, chunk by chunk).

The card is rendered from the Jinja template `hub_cards/dataset_card.md` (linked into the package as data,
so it is found from any kind of install). `push_dataset` exports to a folder and uploads it as a
Hub dataset repo (`hf-arith data push`).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..hub import HUB_CARDS_DIR
from .dataset_builder import FEATURES, SPEC_KEYS, check_run_settings, check_work, iter_column_chunks, make_spec
from .errors import HfArithError

TEMPLATE_NAME = "dataset_card.md"
SPLIT_FILES = {"train": "data/train-00000-of-00001.parquet", "test": "data/test-00000-of-00001.parquet"}
# Files are written here first and moved into place only when the whole export is complete, so an
# interrupted export leaves no truncated Parquet file (a leftover of a killed one is removed next time).
PARTIAL_DIR = ".hf_arith_export_partial"
PROGRESS_ROWS = 500_000  # exports of at least this many rows show a progress bar (stderr)
_SIZE_CATEGORIES = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                    (10**7, "1M<n<10M"), (10**8, "10M<n<100M"), (10**9, "100M<n<1B"), (10**10, "1B<n<10B"),
                    (10**11, "10B<n<100B"), (10**12, "100B<n<1T")]


def template_path() -> Path:
    """The dataset card template: hub_cards/, linked into the package as hf_arith/hub_cards so wheels carry it."""
    path = HUB_CARDS_DIR / TEMPLATE_NAME
    if not path.is_file():
        raise FileNotFoundError(f"dataset card template not found at {path}; the installation is incomplete")
    return path


def export_parquet(out_dir: str | os.PathLike, task: str = "add", train_size: int = 10_000, test_size: int = 1_000,
                   seed: int = 0, *, test_fraction: float = 0.1, overwrite: bool = False,
                   pretty_name: str | None = None, license: str | None = "apache-2.0",
                   card_template: str | os.PathLike | None = None, repo_id: str | None = None,
                   progress: bool | None = None, **spec_kwargs) -> Path:
    """Write train/test Parquet files and a dataset card to `out_dir`; return its path.

    spec_kwargs: min_digits, max_digits, base, min_items, max_items (a None or missing value
    takes the task's default, as in the builder's named configs). repo_id: the Hub dataset the
    card's usage snippet loads (default: a placeholder). Raises a one-line ValueError
    for an unknown task or setting, sizes beyond 1..MAX_SPLIT_SIZE, operands beyond MAX_DIGITS, or an
    out_dir that is not writable or already holds files (unless overwrite=True, which replaces
    README.md and data/{train,test}-*.parquet and leaves other files alone). progress: a progress bar
    on stderr (default: for exports of PROGRESS_ROWS rows or more).

    The files are written under a hidden folder in out_dir and moved into place when all are complete:
    an interrupted export leaves no truncated file, and an earlier export stays as it was.
    """
    spec = make_spec(task, **spec_kwargs)
    check_run_settings(train_size, test_size, seed, test_fraction)
    check_work(spec, train_size, test_size, test_fraction)
    template = Path(card_template) if card_template is not None else template_path()
    if not template.is_file():
        raise HfArithError(f"card template {str(template)!r} is not a file")
    out = _prepare_dir(Path(out_dir).expanduser(), overwrite)
    partial = out / PARTIAL_DIR
    partial.mkdir()
    try:
        counts, examples = _write_splits(partial, spec, {"train": train_size, "test": test_size}, seed, test_fraction,
                                         progress)
        card = _dataset_card(spec, counts, seed, test_fraction, examples, pretty_name, license, template, repo_id)
        card.save(partial / "README.md")
        _clear_old_export(out)
        (out / "data").mkdir(exist_ok=True)
        for name in [*SPLIT_FILES.values(), "README.md"]:
            os.replace(partial / Path(name).name, out / name)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return out


def _write_splits(folder: Path, spec, sizes: dict[str, int], seed: int, test_fraction: float,
                  progress: bool | None) -> tuple[dict[str, int], list[dict]]:
    """Write each split's Parquet file into `folder` (flat), chunk by chunk; returns (row counts, examples)."""
    from tqdm import tqdm

    total = sum(sizes.values())
    show = total >= PROGRESS_ROWS if progress is None else progress
    counts, examples = {}, []
    schema = FEATURES.arrow_schema  # carries the `datasets` features (int32 lengths) in its metadata
    with tqdm(total=total, unit=" rows", unit_scale=True, desc="exporting", disable=not show, file=sys.stderr) as bar:
        for split, size in sizes.items():
            counts[split] = 0
            with pq.ParquetWriter(folder / Path(SPLIT_FILES[split]).name, schema) as writer:  # memory stays flat
                for chunk in iter_column_chunks(spec, size, seed, split, test_fraction):
                    table = pa.Table.from_pydict(chunk, schema=schema)
                    writer.write_table(table)
                    counts[split] += table.num_rows
                    bar.update(table.num_rows)
                    if split == "train" and not examples:
                        examples = table.slice(0, 5).to_pylist()
    return counts, examples


def _clear_old_export(out: Path) -> None:
    """Remove an earlier export's card and split files (only once the new one is complete)."""
    for old in [out / "README.md", *(out / "data").glob("train-*.parquet"), *(out / "data").glob("test-*.parquet")]:
        if old.is_file():
            old.unlink()


# -- helpers ----------------------------------------------------------------------------------
def _prepare_dir(out: Path, overwrite: bool) -> Path:
    """Create (or check) out_dir, making sure we can write there; remove what a killed export left behind.
    An earlier export is replaced (with overwrite) only once the new one is complete."""
    try:
        if out.exists() and not out.is_dir():
            raise HfArithError(f"out_dir {str(out)!r} exists and is not a directory")
        shutil.rmtree(out / PARTIAL_DIR, ignore_errors=True)  # what a killed export left behind
        if out.is_dir() and any(out.iterdir()) and not overwrite:
            raise HfArithError(f"out_dir {str(out)!r} is not empty; pass overwrite=True to replace an export there")
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise HfArithError(f"out_dir {str(out)!r} is not writable: {reason}") from None
    return out.resolve()


def _size_category(n: int) -> str:
    for bound, name in _SIZE_CATEGORIES:
        if n < bound:
            return name
    return "n>1T"


def _dataset_card(spec, counts, seed, test_fraction, examples, pretty_name, license, template: Path,
                  repo_id: str | None = None):
    from huggingface_hub import DatasetCard, DatasetCardData

    from .. import __version__

    task_name = spec.task_rules.title
    if pretty_name is None:
        items = f", {spec.min_items}-{spec.max_items} items" if spec.task_rules.item_list else ""
        pretty_name = (f"Arithmetic: {task_name}, {spec.min_digits}-{spec.max_digits} digits"
                       f"{items} (base {spec.base})")
    card_data = DatasetCardData(
        pretty_name=pretty_name,
        license=license,
        task_categories=["text-generation"],
        tags=["arithmetic", "synthetic", "math", spec.task],
        size_categories=[_size_category(sum(counts.values()))],
        configs=[{
            "config_name": "default",
            "data_files": [{"split": split, "path": path} for split, path in SPLIT_FILES.items()],
        }],
    )
    settings = {"task": spec.task, **{k: getattr(spec, k) for k in SPEC_KEYS if spec.task_rules.item_list or "items" not in k},
                "train_size": counts["train"], "test_size": counts["test"], "seed": seed, "test_fraction": test_fraction}
    reproduce = ", ".join(f"{k}={v!r}" for k, v in settings.items())
    return DatasetCard.from_template(
        card_data,
        template_path=str(template),
        **{k: getattr(spec, k) for k in SPEC_KEYS},
        task=spec.task,
        task_name=task_name,
        operator=spec.task_rules.operator or "",
        train_size=counts["train"],
        test_size=counts["test"],
        seed=seed,
        test_fraction=test_fraction,
        examples=examples,
        reproduce=reproduce,
        version=__version__,
        repo_id=repo_id or "path/or/repo_id",
    )


def push_dataset(repo_id: str, *, output_dir: str | os.PathLike | None = None, private: bool = False,
                 **export_kwargs) -> tuple[Path | None, str]:
    """Export problems (export_parquet's options) and upload the folder as a Hub dataset repo.

    The repo id, the problem settings and the credentials are checked before anything is generated; the folder is
    kept in `output_dir` when given, else built in a temporary folder. Returns (kept folder or
    None, repo URL).
    """
    from ..hub import check_repo_id, hub_token, send_folder

    repo_id = check_repo_id(repo_id)
    spec = make_spec(export_kwargs.get("task", "add"), **{k: export_kwargs[k] for k in SPEC_KEYS if k in export_kwargs})
    sizes = export_kwargs.get("train_size", 10_000), export_kwargs.get("test_size", 1_000)
    check_run_settings(*sizes, export_kwargs.get("seed", 0), export_kwargs.get("test_fraction", 0.1))
    check_work(spec, *sizes, export_kwargs.get("test_fraction", 0.1))
    token = hub_token()
    if output_dir is not None:
        folder = export_parquet(output_dir, repo_id=repo_id, **export_kwargs)
        return folder, send_folder(folder, repo_id, token, repo_type="dataset", private=private)
    with tempfile.TemporaryDirectory(prefix="hf_arith_data_push_") as tmp:
        folder = export_parquet(Path(tmp) / "data", repo_id=repo_id, **export_kwargs)
        return None, send_folder(folder, repo_id, token, repo_type="dataset", private=private)


__all__ = ["export_parquet", "push_dataset", "template_path"]
