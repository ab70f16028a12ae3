"""The code's cross-references name what exists: every Sphinx role in a docstring or comment (``:func:`x```,
``:class:`~pkg.mod.X```, ``:mod:`.sibling```, ...) resolves to a module, or to a name of one, and every source
path a docstring or comment names (``store/rows.py``, ``experiments/x.py``) is a file. A module that
moves, or a function renamed, turns this red where its old name is still cited."""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "regret_gateway"
ROLE = re.compile(r":(?:mod|func|class|data|meth|attr|obj):`(?:[^`<]*<)?~?([^`<>]+?)>?`")
PATH = re.compile(r"(?<![\w/.-])((?:[a-z_]+/)+[a-z_0-9]+\.py)\b")
FILE = re.compile(r"(?<![\w/.-])([a-z_0-9]+\.py)\b")  # a bare file name: some file of the project has it


def _modules() -> list[tuple[str, Path]]:
    return [
        (".".join(f.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__"), f)
        for f in sorted(SRC.rglob("*.py"))
    ]


@functools.cache
def _file_names() -> set[str]:
    return {f.name for folder in ("src", "tests", "docs", "migrations") for f in (ROOT / folder).rglob("*.py")}


def _chain(obj, parts: list[str]) -> bool:
    for i, part in enumerate(parts):
        if hasattr(obj, part):
            obj = getattr(obj, part)
        elif inspect.isclass(obj) and i == len(parts) - 1:  # a field without a default, or set in __init__
            source = inspect.getsource(obj)
            return part in getattr(obj, "__annotations__", {}) or f"self.{part} " in source or f"self.{part}:" in source
        else:
            return False
    return True


def _resolves(target: str, module: str, source: str) -> bool:
    target = target.strip().removesuffix("()")
    if target.startswith("."):  # a sibling module of the citing one's package
        package = module if source.endswith("__init__.py") else module.rsplit(".", 1)[0]
        target = f"{package}{target}"
    parts = target.split(".")
    for k in range(len(parts), 0, -1):  # the longest importable prefix, then names in it
        try:
            found = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        return _chain(found, parts[k:])
    citing = importlib.import_module(module)
    text = Path(source).read_text()
    if _chain(citing, parts):
        return True
    if any(_chain(c, parts) for _, c in inspect.getmembers(citing, inspect.isclass) if c.__module__ == module):
        return True
    # a name imported for type checking only, or an instance attribute of a class of the module
    return bool(re.search(rf"import .*\b{re.escape(parts[0])}\b", text)) or f"self.{parts[-1]} =" in text


@pytest.mark.parametrize("module,path", _modules(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_cross_reference_names_what_exists(module, path):
    text = path.read_text()
    missing = [t for t in ROLE.findall(text) if not _resolves(t, module, str(path))]
    missing += [
        p for p in PATH.findall(text) if not any((base / p).exists() for base in (ROOT, SRC, ROOT / "src", ROOT / "docs"))
    ]
    missing += [f for f in FILE.findall(text) if f not in _file_names()]
    assert not missing, f"{path.relative_to(ROOT)} cites what does not exist: {missing}"
