"""The wheel ships every package of the source tree (pyproject lists its packages by hand), and no module grows past what one reads whole."""

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_of_the_source_tree_is_in_the_wheel():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    src = ROOT / "src"
    found = {".".join(init.parent.relative_to(src).parts) for init in src.rglob("__init__.py")}
    assert found - listed == set(), "packages pyproject.toml does not ship (add them to [tool.setuptools] packages)"


MAX_LINES = 400


def test_no_module_is_over_400_lines():
    """A module a maintainer reads whole: past 400 lines it holds more than one thing."""
    long = {
        str(p.relative_to(ROOT)): n for p in (ROOT / "src").rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them along what they hold): {long}"
