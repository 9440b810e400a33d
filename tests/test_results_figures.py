"""Every figure in the results tables of README.md and docs/results.md comes from the file its row
links, and that file records the machine and the command that produced it.

The rule, for each number written in a row's "measured" cell (code spans excluded):

- it must equal a number in one of the row's linked files after rounding that number to the
  precision written: "347.8" matches 347.8021, "2,591" matches 2591.02, "57.7" matches 57.68;
- a percentage matches as written or as a fraction: "99.85 %" matches 99.85 or 0.9985;
- a JSON file's numbers are its numeric values and its numeric keys ({"15": 0.01} holds 15); a
  Markdown file's numbers are those in its text (thousands separators removed).

Derived figures (sums, ratios of two measurements) that no file records are not quoted in the
tables. A linked JSON file must hold "machine" and "command" (a training summary: "machine" and
"recipe", what the run recorded); a linked Markdown file must be one written by
bench/machine.py's write_results (a "Machine:" and a "Command:" line).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "docs" / "results.md", ROOT / "docs" / "findings.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s#]+)[^)]*\)")
NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?!\d)(\s*%)?")
# Results files that record no machine or command: the looped-mul and looped-sort runs, whose
# scratch checkpoints are gone, so they cannot be re-measured. docs/results.md quotes them only
# under a heading that says so (checked below); the README quotes none of them.
UNRECORDED = {
    "bench/results/looped-mul-sort.md",
    "bench/results/looped-mul-sort.json",
}
UNRECORDED_HEADING = "no machine record"


def result_rows(page: Path) -> list[dict]:
    """The rows of every `| what | measured | file |` table of a page, with the heading above each."""
    rows, heading, columns = [], "", None
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            heading, columns = line.lstrip("#").strip(), None
            continue
        if not line.startswith("|"):
            columns = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if columns is None:
            columns = cells if len(cells) == 3 and cells[0].startswith("what") and cells[1:] == ["measured", "file"] \
                else []
        elif columns and not set(line) <= set("|-: "):
            links = [(page.parent / target).resolve() for target in LINK.findall(cells[2])]
            rows.append({"page": page.relative_to(ROOT).as_posix(), "heading": heading, "what": cells[0],
                         "measured": cells[1], "files": links})
    return rows


ROWS = [row for page in PAGES for row in result_rows(page)]


def figures(text: str) -> list[tuple[str, float, int, bool]]:
    """(as written, value, decimals written, is a percentage) for every number in the text."""
    text = re.sub(r"`[^`]*`", " ", text).replace("**", "")
    found = []
    for m in NUMBER.finditer(text):
        whole, decimals, percent = m.group(1).replace(",", ""), m.group(2) or "", m.group(3)
        value = float(f"{whole}.{decimals}" if decimals else whole)
        found.append((m.group(0).strip(), value, len(decimals), bool(percent)))
    return found


def file_numbers(path: Path) -> list[float]:
    text = path.read_text()
    if path.suffix != ".json":
        return [value for _, value, _, _ in figures(text)]
    numbers = []

    def walk(value):
        if isinstance(value, bool):
            return
        if isinstance(value, (int, float)):
            numbers.append(float(value))
        elif isinstance(value, dict):
            for key, item in value.items():
                if re.fullmatch(r"\d+(\.\d+)?", str(key)):
                    numbers.append(float(key))
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(json.loads(text))
    return numbers


def matches(value: float, decimals: int, percent: bool, numbers: list[float]) -> bool:
    tolerance = 0.5 * 10**-decimals + 1e-9
    return any(abs(x - value) <= tolerance or (percent and abs(100 * x - value) <= tolerance) for x in numbers)


def text_files(row: dict) -> list[Path]:
    return [p for p in row["files"] if p.suffix in (".json", ".md")]


def row_id(row: dict) -> str:
    return f"{row['page']}: {row['what'][:60]}"


def test_the_tables_are_found():
    assert {row["page"] for row in ROWS} == {"README.md", "docs/results.md"}
    assert len(ROWS) > 30


def test_the_matching_rule_by_hand():
    numbers = [0.9985, 57.68, 20000.0, 2591.0182]
    assert matches(99.85, 2, True, numbers) and not matches(99.85, 2, False, numbers)
    assert matches(57.7, 1, False, numbers) and not matches(57.8, 1, False, numbers)
    assert matches(20000, 0, False, numbers) and matches(2591, 0, False, numbers)
    assert not matches(2591.1, 1, False, numbers)  # written to a tenth: 2591.0 is not 2591.1
    assert [f[:2] for f in figures("20,000 steps in 347.8 s; 99.85 %, `solved_up_to_99`")] == [
        ("20,000", 20000.0), ("347.8", 347.8), ("99.85 %", 99.85)]


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_every_figure_is_in_the_rows_files(row):
    files = text_files(row)
    assert files, "the row links no results file"
    for path in files:
        assert path.is_file(), f"{path} is linked but missing"
    numbers = [x for path in files for x in file_numbers(path)]
    missing = [text for text, value, decimals, percent in figures(row["measured"])
               if not matches(value, decimals, percent, numbers)]
    assert not missing, f"not in {[p.name for p in files]}: {missing}"


def records_machine_and_command(path: Path) -> bool:
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        stages = data.get("earlier_stages") if path.name == "notes.json" else None
        if stages:  # a checkpoint's notes: stages copied from the training summaries of earlier runs
            return all(isinstance(s, dict) and isinstance(s.get("machine"), dict) for s in stages)
        return isinstance(data.get("machine"), dict) and ("command" in data or "recipe" in data)
    lines = path.read_text().splitlines()
    return any(line.startswith("Machine: ") for line in lines) and any(line.startswith("Command: ") for line in lines)


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_every_linked_file_records_its_machine_and_command(row):
    for path in text_files(row):
        name = path.relative_to(ROOT).as_posix()
        if name in UNRECORDED:
            assert row["page"] == "docs/results.md" and UNRECORDED_HEADING in row["heading"].lower(), \
                f"{name} records no machine or command: quote it only under a '{UNRECORDED_HEADING}' heading"
        else:
            assert records_machine_and_command(path), f"{name} records no machine and command"


def test_the_unrecorded_files_still_lack_a_record():
    # Once a file records its run, it leaves the allow-list.
    for name in sorted(UNRECORDED):
        assert not records_machine_and_command(ROOT / name), f"{name} records its run now: drop it from UNRECORDED"


def test_the_results_page_stays_short_enough_to_take_in():
    lines = (ROOT / "docs" / "results.md").read_text().splitlines()
    assert len(lines) <= 250
    assert [i + 1 for i, line in enumerate(lines) if len(line) > 300] == []


def test_the_results_folder_holds_current_figures_under_one_naming_rule():
    files = [p for p in (ROOT / "bench" / "results").rglob("*") if p.is_file()]
    assert len(files) <= 100
    assert all(p.parent.name == "results" for p in files), "no subfolders: superseded figures leave the tree"
    dated = re.compile(r"\d{4}-\d{2}-\d{2}|first|second|attempt|probe")
    assert [p.name for p in files if dated.search(p.name)] == []
