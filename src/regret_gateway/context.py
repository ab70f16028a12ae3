"""The request context the router reads besides the prompt: a template such as the paper's, with the
request's team, tier, tags, user (or a benchmark's task name) filled in. ``render`` is the one place the
formula lives: the hook, ``import-logs``, the offline bench and the demo's replay encoder all use it.
:class:`ContextCode` is the other way to read the context: a key (``"{tags}"``) coded as features appended
to the embedding, so the routers can learn per context without the text encoder having to notice a prefix."""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

PAPER_TEMPLATE = "The following prompt comes from the dataset {dataset}. The prompt is: {prompt}"

# What a template may name besides {prompt}: the request's context. Offline, {dataset} is the benchmark's
# task name; in the gateway the request's tags stand for it (``dataset`` = the tags when nothing else is
# given), {team} and {tier} are the caller's, {tags} the request's tags (comma-joined), {user} its
# OpenAI ``user`` field, {app} a keyed hash of its system prompt (gateway/messages.py ``app_key``), {tools} the
# names of the tools it offers (comma-joined). A field the request does not carry reads ``unknown``.
CONTEXT_FIELDS = ("prompt", "dataset", "team", "tier", "tags", "user", "app", "tools")
UNKNOWN = "unknown"


def _fields(template: str, what: str) -> set[str]:
    """The fields ``template`` names; a ValueError (saying it is a ``what``) if it is not a format string."""
    try:
        return {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        raise ValueError(f"{what} {template!r} is not a valid format string: {exc}") from None


def check_template(template: str) -> str:
    """``template`` if it names {prompt} and only :data:`CONTEXT_FIELDS`; else a ValueError saying why."""
    fields = _fields(template, "template")
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


def check_key_template(template: str) -> str:
    """``template`` if it names at least one context field, only :data:`CONTEXT_FIELDS` and not {prompt}
    (a context key says where a request comes from, not what it asks); else a ValueError saying why."""
    fields = _fields(template, "context")
    allowed = set(CONTEXT_FIELDS) - {"prompt"}
    if "prompt" in fields or not fields or fields - allowed:
        raise ValueError(f"context {template!r} must name one or more of {sorted(allowed)} (and not {{prompt}})")
    return template


@dataclass(frozen=True)
class ContextCode:
    """The request context as features beside the prompt's embedding: the key ``template`` renders from a
    request (for example ``"{tags}"``: the request's tags; offline ``"{dataset}"``: the benchmark's task)
    maps to a fixed random direction of ``dim`` values and length ``weight``, appended to the embedding.
    Distinct keys get nearly orthogonal codes, the same key the same code in every process (seeded by
    the key's sha256), so every router -- the networks, the outcome models, RM-Cluster's clusters --
    can tell requests of different contexts apart without a vocabulary to keep. A key never seen in
    training is a direction the routers have not learned: they answer from the prompt's embedding."""

    template: str
    dim: int = 16
    weight: float = 1.0

    def __post_init__(self) -> None:
        check_key_template(self.template)
        if self.dim < 2 or not self.weight > 0:
            raise ValueError(f"a context code needs dim >= 2 and weight > 0, got dim={self.dim}, weight={self.weight}")

    def key(self, context: Mapping[str, Any] | None) -> str:
        """The request's context key: the template with its fields filled in (:func:`render`'s rules)."""
        return render(self.template, "", context)

    def codes(self, keys: Sequence[str]) -> np.ndarray:
        """(n, dim) float32 codes of ``keys``."""
        out = np.empty((len(keys), self.dim), dtype=np.float32)
        for i, key in enumerate(keys):
            seed = int.from_bytes(hashlib.sha256(str(key).encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dim)
            out[i] = self.weight * v / np.linalg.norm(v)
        return out

    def append(self, X: np.ndarray, contexts: Sequence[Mapping[str, Any] | None]) -> np.ndarray:
        """``X`` (n, d) embeddings with the codes of their requests' ``contexts`` appended: (n, d + dim)."""
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2 or len(X) != len(contexts):
            raise ValueError(f"need one context per embedding row, got {len(contexts)} for shape {X.shape}")
        return np.concatenate([X, self.codes([self.key(c) for c in contexts])], axis=1)

    @property
    def id(self) -> str:
        """Part of the embedding id: another template, size or weight starts a fresh set of logs."""
        spec = f"{self.template}|{self.dim}|{self.weight:g}"
        return f"context-{hashlib.sha256(spec.encode()).hexdigest()[:10]}"


SIZE_SCALE_TOKENS = 100_000  # a prompt of this many tokens has the size feature's full weight


@dataclass(frozen=True)
class SizeFeature:
    """The prompt's size as one feature appended to its embedding: ``weight * log(1 + tokens) / log(1 +
    SIZE_SCALE_TOKENS)``. A request's cost grows with its prompt (input tokens at their price), which the
    embedding of the prompt's first tokens does not show; with the size beside it, the outcome networks and
    the routers can learn that a long prompt is dear on a dear model."""

    weight: float = 1.0

    def __post_init__(self) -> None:
        if not self.weight > 0:
            raise ValueError(f"the size feature needs weight > 0, got {self.weight}")

    def values(self, tokens: Sequence[float] | np.ndarray) -> np.ndarray:
        """(n, 1) float32 features of prompts of ``tokens``."""
        t = np.maximum(np.asarray(tokens, dtype=np.float64), 0.0)
        return (self.weight * np.log1p(t) / np.log1p(SIZE_SCALE_TOKENS)).astype(np.float32)[:, None]

    def tokens(self, X: np.ndarray) -> np.ndarray:
        """(n,) the prompt sizes in tokens that rows of ``X`` (n, d + 1; the feature last) were appended with."""
        f = np.asarray(X, dtype=np.float64)[:, -1]
        return np.maximum(np.expm1(f * np.log1p(SIZE_SCALE_TOKENS) / self.weight), 0.0)

    def append(self, X: np.ndarray, tokens: Sequence[float] | np.ndarray) -> np.ndarray:
        """``X`` (n, d) with the size feature of each row's prompt appended: (n, d + 1)."""
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2 or len(X) != len(tokens):
            raise ValueError(f"need one token count per embedding row, got {len(tokens)} for shape {X.shape}")
        return np.concatenate([X, self.values(tokens)], axis=1)

    @property
    def id(self) -> str:
        """Part of the embedding id: logs with and without the size feature are not mixed."""
        return f"size-{self.weight:g}"
