"""Every benchmark script under bench/ imports: a renamed module breaks a benchmark nobody reruns for weeks."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if p.stem not in ("common", "machine"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_bench_script_imports_and_has_an_entry_point(script, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))  # the scripts import their siblings `common` and `machine`
    spec = importlib.util.spec_from_file_location(f"bench_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    assert callable(getattr(module, "main", None)), f"{script.name} has no main()"


RECIPES = sorted((BENCH / "recipes").glob("*.yaml"))


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_bench_recipe_loads_and_is_named_as_its_file(recipe):
    """A result names the recipe it ran; a preset it extends may change, and the recipe must still load."""
    from hf_arith.training.recipe import check_recipe, load_recipe

    loaded = load_recipe(str(recipe))
    check_recipe(loaded)
    assert loaded.name == recipe.stem
