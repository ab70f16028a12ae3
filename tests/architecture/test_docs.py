"""The docs a newcomer reads stay true and short: every module docs/architecture.md names exists, and no prose
paragraph of the README or of a page a maintainer lives in runs past 120 words."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "regret_gateway"


def _named_paths(text: str) -> set[str]:
    """Every `path.py` or `package/` (in backticks) the text names, relative to the package or the repository."""
    return {m for m in re.findall(r"`([\w./]+(?:\.py|/))`", text) if not m.startswith(("http", "."))}


def test_every_module_the_architecture_page_names_exists():
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = _named_paths(text)
    assert len(named) > 30  # the page names the modules, not just packages
    # a bare name inside a package's row (`specs.py` in the `config/` row) is looked up in every package
    everywhere = {p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py")} | {
        p.relative_to(SRC).as_posix() + "/" for p in SRC.rglob("*") if p.is_dir() and p.name != "__pycache__"
    }
    missing = [
        name
        for name in sorted(named)
        if not (SRC / name).exists()
        and not (ROOT / name).exists()
        and not any(f == name or f.endswith("/" + name) for f in everywhere)
    ]
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def _prose_paragraphs(text: str) -> list[str]:
    paragraphs, current, fenced = [], [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if not line.strip() or line.startswith(("|", "#", "<!--")):
            if current:
                paragraphs.append(" ".join(current))
            current = []
            continue
        current.append(line)
    if current:
        paragraphs.append(" ".join(current))
    return paragraphs


# the pages a maintainer lives in: the README, the how-to pages, the map, the results, the glossary and the
# experiments (their index and every page)
HELD = ("README.md", "docs/operations.md", "docs/operations/*.md", "docs/architecture.md", "docs/results.md",
        "docs/glossary.md", "docs/experiments/*.md")  # fmt: skip


@pytest.mark.parametrize("pattern", HELD)
def test_no_prose_paragraph_of_a_maintainer_s_page_runs_past_120_words(pattern):
    pages = sorted(ROOT.glob(pattern))
    assert pages, pattern
    long = [f"{page.relative_to(ROOT)}: {len(p.split())} words: {p[:80]}..."
            for page in pages for p in _prose_paragraphs(page.read_text()) if len(p.split()) > 120]  # fmt: skip
    assert not long, "paragraphs over 120 words:\n" + "\n".join(long)


def test_the_readme_is_prose_a_newcomer_reads():
    assert len(_prose_paragraphs((ROOT / "README.md").read_text())) >= 5
