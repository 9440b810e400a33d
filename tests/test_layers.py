"""The folders show the data path: data -> models -> runtime -> evaluation / training -> publishing -> CLI.

Each module's imports (relative or absolute, at the top or inside a function) are resolved and checked
against what its layer may import, as each sub-package's `__init__` states it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "hf_arith"
HELPERS = {"bundled", "families", "hub", "records", "text"}  # top-level modules every layer may use
ALLOWED = {
    "helpers": {"helpers", "data.errors", "models"},
    "data": {"data", "helpers"},
    "models": {"models"},
    "runtime": {"data", "models", "runtime", "helpers"},
    "evaluation": {"data", "models", "runtime", "evaluation", "helpers"},
    "training": {"data", "models", "runtime", "evaluation", "training", "helpers"},
    "publishing": {"data", "models", "runtime", "evaluation", "training", "publishing", "helpers"},
    "cli": {"data", "models", "runtime", "evaluation", "training", "publishing", "cli", "helpers", "package"},
}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        if parts[0] in ("bundled",) or parts == ("__init__.py",) or "__pycache__" in parts:
            continue
        yield path, parts


def _layer(parts: tuple[str, ...]) -> str:
    """The layer of hf_arith.<parts>: a sub-package's name, or `helpers` for a top-level module."""
    if not parts:
        return "package"
    head = parts[0].removesuffix(".py")
    if len(parts) == 1 and head in HELPERS:
        return "helpers"
    return head


def _imported(path: Path, parts: tuple[str, ...]):
    """(line, hf_arith-relative parts) of every hf_arith module `path` imports."""
    package = list(parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = [*base, *(node.module.split(".") if node.module else [])]
            elif node.module and node.module.split(".")[0] == "hf_arith":
                target = node.module.split(".")[1:]
            else:
                continue
            names = [a.name for a in node.names]
            if names == ["__version__"]:  # the package's version, which every layer may print
                continue
            if not node.module or (target and (PACKAGE.joinpath(*target)).is_dir()):
                # `from . import x` / `from .pkg import module`: the names may be modules
                for name in names:
                    if (PACKAGE.joinpath(*target, name + ".py")).exists() or PACKAGE.joinpath(*target, name).is_dir():
                        yield node.lineno, (*target, name)
                    else:
                        yield node.lineno, tuple(target)
            else:
                yield node.lineno, tuple(target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "hf_arith":
                    yield node.lineno, tuple(alias.name.split(".")[1:])


def _target_layer(target: tuple[str, ...]) -> str:
    if target[:2] == ("data", "errors"):
        return "data.errors"
    if len(target) == 1 and target[0] in HELPERS:
        return "helpers"
    return target[0] if target else "package"


@pytest.mark.parametrize("path,parts", list(_modules()), ids=lambda v: "/".join(v) if isinstance(v, tuple) else "")
def test_a_module_imports_only_its_layer_and_those_below(path, parts):
    layer = _layer(parts)
    allowed = ALLOWED[layer] | ({"data"} if layer != "helpers" else set())
    wrong = [f"line {line}: hf_arith.{'.'.join(target)}" for line, target in _imported(path, parts)
             if _target_layer(target) not in allowed and not (_target_layer(target) == "data.errors" and "data" in allowed)]
    assert not wrong, f"{'/'.join(parts)} ({layer}) imports from a layer above it: {wrong}"


def test_the_top_level_holds_few_modules():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 12, top
    assert {p.removesuffix(".py") for p in top} - {"__init__"} == HELPERS


def test_every_layer_says_what_it_holds_and_may_import():
    for layer in ("data", "runtime", "training", "evaluation", "publishing", "models", "cli"):
        doc = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc.split()) >= 20, layer
        if layer not in ("models", "cli"):
            assert "May import" in doc, layer


REMOTE_CODE = ["data/errors.py", "data/formatting.py", "data/tokenization_arith.py", "runtime/pipeline_arithmetic.py",
               "runtime/decoding.py", "runtime/hardware.py", *sorted(f"models/{p.name}" for p in (PACKAGE / "models").glob("*.py")
                                                                   if p.name != "__init__.py")]


@pytest.mark.parametrize("name", REMOTE_CODE)
def test_remote_code_imports_only_its_siblings(name):
    """A saved folder holds these files flat: a `from ..x` (or `from .. import`) would name a file it lacks,
    and transformers' own copy step would fail on it."""
    source = (PACKAGE / name).read_text(encoding="utf-8")
    tree = ast.parse(source)
    far = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level > 1]
    assert not far, f"{name}: imports from outside its folder at lines {far}"
