"""Every ```python block of README.md runs as written, in a fresh process, and prints what its comments say.

The rule for a block: each line that calls print() ends with a comment, `# <what it prints>`, and
the block's output is exactly those comments, in order, one line each. The block runs offline (the
test session's HF_HUB_OFFLINE=1 and a temporary HF_HOME) from an empty folder, so it can rely on
nothing but its own imports and the installed package.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks() -> list[str]:
    return BLOCK.findall((ROOT / "README.md").read_text())


def expected_output(code: str) -> list[str]:
    """The trailing comments of the lines that call print(), in order."""
    comments = {}
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string[1:].strip()
    expected = []
    for number, line in enumerate(code.splitlines(), start=1):
        if re.match(r"\s*print\(", line):
            assert number in comments, f"README block line {line!r} prints without saying what"
            expected.append(comments[number])
    return expected


def test_the_readme_has_python_blocks_and_each_prints_something():
    blocks = python_blocks()
    assert len(blocks) >= 2
    for code in blocks:
        assert expected_output(code), code


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_a_readme_block_prints_what_its_comments_say(index, tmp_path):
    code = python_blocks()[index]
    # PYTHONPATH as the session has it (the package under test); nothing else from the test process.
    env = {k: v for k, v in os.environ.items() if k.startswith(("HF_", "PYTHONPATH", "PATH", "HOME", "TMP"))}
    env["HF_HOME"] = str(tmp_path / "hf_home")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == expected_output(code)


def bash_block_after(heading: str) -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split(f"## {heading}\n", 1)[1]
    return re.search(r"^```bash\n(.*?)^```", section, re.S | re.M).group(1).strip()


def test_ci_runs_the_readmes_test_command_verbatim_and_it_installs_the_cpu_build():
    test_command = bash_block_after("Run the tests")
    assert test_command in (ROOT / ".ci" / "run").read_text().splitlines()
    train_command = bash_block_after("Train a tiny adder from scratch (the main job)")
    torch_line = train_command.split(" && ")[0]
    assert test_command.split(" && ")[0] == torch_line  # one install line for both
    assert re.fullmatch(r"pip install torch==\d+\.\d+\.\d+\+cpu --extra-index-url https://download\.pytorch\.org/whl/cpu",
                        torch_line), torch_line
