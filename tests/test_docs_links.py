"""Every relative link of the README and docs/ leads somewhere: the file exists and, for
``file.md#anchor``, the page has a heading with that anchor (GitHub's rule: lower case, spaces to
hyphens, punctuation dropped)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"```.*?```", re.S)


def anchor(heading: str) -> str:
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set:
    body = FENCE.sub("", page.read_text())
    return {anchor(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", body, re.M)}


def links(page: Path) -> list:
    body = FENCE.sub("", page.read_text())
    return [t for t in LINK.findall(body) if not re.match(r"[a-z]+:", t)]


def test_the_anchor_rule():
    assert anchor("Real clusters: GPU types, speed, placement, failures") == "real-clusters-gpu-types-speed-placement-failures"
    assert anchor("Compat engine (Blox)") == "compat-engine-blox"
    assert anchor("`fastblox search`: the example") == "fastblox-search-the-example"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    bad = []
    for target in links(page):
        path, _, frag = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            bad.append(f"{target}: no heading #{frag} in {dest.name}")
    assert not bad, f"{page.name}: " + "; ".join(bad)
