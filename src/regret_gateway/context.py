"""The request context the router reads besides the prompt: a template such as the paper's, with the
request's team, tier, tags, user (or a benchmark's task name) filled in. ``render`` is the one place the
formula lives: the hook, ``import-logs``, the offline bench and the demo's replay encoder all use it."""

from __future__ import annotations

import string
from typing import Any, Mapping

PAPER_TEMPLATE = "The following prompt comes from the dataset {dataset}. The prompt is: {prompt}"

# What a template may name besides {prompt}: the request's context. Offline, {dataset} is the benchmark's
# task name; in the gateway the request's tags stand for it (``dataset`` = the tags when nothing else is
# given), {team} and {tier} are the caller's, {tags} the request's tags (comma-joined), {user} its
# OpenAI ``user`` field. A field the request does not carry reads ``unknown``.
CONTEXT_FIELDS = ("prompt", "dataset", "team", "tier", "tags", "user")
UNKNOWN = "unknown"


def check_template(template: str) -> str:
    """``template`` if it names {prompt} and only :data:`CONTEXT_FIELDS`; else a ValueError saying why."""
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        raise ValueError(f"template {template!r} is not a valid format string: {exc}") from None
    if "prompt" not in fields:
        raise ValueError(f"template {template!r} must contain '{{prompt}}'")
    unknown = sorted(fields - set(CONTEXT_FIELDS))
    if unknown:
        raise ValueError(f"template {template!r} names unknown fields {unknown}; it may use {list(CONTEXT_FIELDS)}")
    return template


def render(template: str | None, prompt: str, context: Mapping[str, Any] | None = None) -> str:
    """The text the router embeds: ``prompt`` inside ``template`` with the request's context filled in
    (no template: the prompt itself). The one place the template formula lives."""
    if template is None:
        return str(prompt)
    values = dict.fromkeys(CONTEXT_FIELDS, UNKNOWN)
    for key, value in (context or {}).items():
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        if key in values and value is not None and str(value) != "":
            values[key] = str(value)
    if values["dataset"] == UNKNOWN:
        values["dataset"] = values["tags"]
    values["prompt"] = str(prompt)
    return template.format(**values)
