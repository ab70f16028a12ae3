"""The wheel ships every package of the source tree (pyproject lists its packages by hand), and no module or
function grows past what one reads whole."""

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


MAX_FUNCTION_LINES = 80


def test_no_function_is_over_80_lines():
    """A function a maintainer reads on one screen: past 80 lines (docstring included) it does more than one step."""
    import ast

    long = {}
    for path in (ROOT / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = n
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (split them into their steps): {long}"
