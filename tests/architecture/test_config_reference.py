"""The configuration reference (docs/operations/config-reference.md) lists every key the config accepts,
and no other; the links of the operations pages, the results page and the experiments' index land on a page
and a heading that exist."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from pydantic import BaseModel

from regret_gateway.config.settings import Settings

DOCS = Path(__file__).resolve().parents[2] / "docs"
REFERENCE = DOCS / "operations" / "config-reference.md"


def _model_in(annotation) -> type[BaseModel] | None:
    """The settings model an annotation holds (a model, ``Model | None``, ``dict[str, Model]``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if (inner := _model_in(arg)) is not None:
            return inner
    return None


def _keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every leaf key of ``model``, dotted; a dict of models (tiers, teams, model_info) adds no name level."""
    out = set()
    for name, field in model.model_fields.items():
        inner = _model_in(field.annotation)
        if inner is None:
            out.add(prefix + name)
        else:
            out |= _keys(inner, f"{prefix}{name}.")
    return out


def _documented() -> set[str]:
    """The keys of the reference's tables, each with its section's prefix (``tiers.<name>.`` -> ``tiers.``)."""
    out, prefix = set(), ""
    for line in REFERENCE.read_text().splitlines():
        if line.startswith("## "):
            found = re.search(r"`([a-z_]+)\.", line)
            prefix = found.group(1) + "." if found else ""
        elif (cell := re.match(r"\| `([a-z_.]+)` \|", line)) is not None:
            out.add(prefix + cell.group(1))
    return out


def test_the_reference_lists_every_config_key_and_no_other():
    keys, documented = _keys(Settings), _documented()
    assert len(keys) > 80
    assert not keys - documented, f"config keys missing from {REFERENCE.name}: {sorted(keys - documented)}"
    assert not documented - keys, f"{REFERENCE.name} lists keys the config does not have: {sorted(documented - keys)}"


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a page: lower case, punctuation dropped, spaces to hyphens."""
    heads = re.findall(r"(?m)^#{1,6} (.+)$", page.read_text())
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_the_operations_results_and_index_pages_links_land_on_a_page_and_heading_that_exist():
    pages = [DOCS / "operations.md", DOCS / "results.md", DOCS / "experiments" / "README.md",
             *sorted((DOCS / "operations").glob("*.md"))]  # fmt: skip
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"https?:|mailto:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = page if not path else (page.parent / path).resolve()
            if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in _anchors(dest)):
                broken.append(f"{page.relative_to(DOCS)}: {target}")
    assert not broken, "broken links:\n" + "\n".join(broken)
