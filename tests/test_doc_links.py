"""Every relative link in README.md and docs/ points at a file that is in the tree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    missing = [link for link in LINK.findall(page.read_text(encoding="utf-8"))
               if "://" not in link and not link.startswith("mailto:")
               and not (page.parent / link).exists()]
    assert not missing, f"{page.name} links files that are not there: {missing}"
