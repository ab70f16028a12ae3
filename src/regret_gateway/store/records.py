"""What the gateway writes: validated, frozen records, checked before anything touches the database.

A bad record raises :class:`StoreInputError` (a ``ValueError``) naming the rule and the request id, so a
batch with one bad record is refused whole and changes nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

from regret_gateway.store.schema import DECISION_MODES, OUTCOME_STATUSES, SESSION_TURNS


class StoreInputError(ValueError):
    """A record breaks a rule of the store; nothing was written."""


class UnknownRequestError(StoreInputError):
    """Outcome or feedback for a request id that has no routing decision."""

    def __init__(self, request_ids: list[str]):
        self.request_ids = request_ids
        shown = ", ".join(repr(r) for r in request_ids[:5]) + (" ..." if len(request_ids) > 5 else "")
        super().__init__(f"unknown request id(s) (no routing decision recorded): {shown}")


def prompt_hash(text: str, key: bytes) -> str:
    """HMAC-SHA256 of the routed text under the deployment's key (hex): equal prompts share a hash within a
    deployment, and a dictionary of likely prompts cannot reverse it without the key."""
    return hmac.new(key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def _require(cond: bool | np.bool_, request_id: str, message: str) -> None:
    if not cond:
        raise StoreInputError(f"request {request_id!r}: {message}")


def valid_request_id(rid: object) -> bool:
    """A request id the store can hold: a non-empty string of at most 128 characters without NUL (which
    PostgreSQL can neither store nor compare)."""
    return isinstance(rid, str) and 0 < len(rid) <= 128 and "\x00" not in rid


def _require_request_id(rid) -> None:
    _require(valid_request_id(rid), repr(rid), "`request_id` must be a non-empty string of <= 128 chars without NUL")


MAX_TEXT = {"prompt_text": 100_000, "error": 2_000}  # free-text fields are cut to these many characters
MAX_NAME = {
    "team": 128,
    "tier": 64,
    "router_version": 64,
    "embedding_model": 256,
    "chosen_model": 256,
    "answered_model": 256,
    "source": 32,
}


def team_key(team: str | None) -> str | None:
    """A team as the store holds it (and feedback and the audit compare it): the name itself where it fits the
    column (<= 128 characters, no NUL); else its first 111 characters, ``~`` and 16 hex digits of its
    SHA-256 -- one name a team, never a refused record. LiteLLM does not bound team ids."""
    if team is None or (len(team) <= MAX_NAME["team"] and "\x00" not in team):
        return team
    digest = hashlib.sha256(team.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return team.replace("\x00", "\ufffd")[: MAX_NAME["team"] - 17] + "~" + digest


def clean_text(value: str | None, limit: int) -> str | None:
    """Text a database accepts: NUL (PostgreSQL refuses it) becomes U+FFFD, and at most ``limit`` characters."""
    if value is None:
        return None
    value = str(value).replace("\x00", "\ufffd")
    return value if len(value) <= limit else value[: limit - 1] + "\u2026"


def _clean_fields(record: Any) -> None:
    """Sanitise a frozen record's text fields in place: free text is cleaned and cut; a name with a NUL is
    cleaned, a name longer than its column is refused (it would be cut into another name)."""
    for name, limit in MAX_TEXT.items():
        if hasattr(record, name):
            object.__setattr__(record, name, clean_text(getattr(record, name), limit))
    for name, limit in MAX_NAME.items():
        value = getattr(record, name, None)
        if value is not None:
            _require(isinstance(value, str) and len(value) <= limit, record.request_id,
                     f"`{name}` must be a string of <= {limit} chars")  # fmt: skip
            object.__setattr__(record, name, clean_text(value, limit))


def _finite_number(value: Any) -> bool:
    return (
        isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool) and math.isfinite(float(value))
    )


def _aware(ts: datetime | None) -> datetime:
    if ts is None:
        return datetime.now(timezone.utc)
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class OutcomeRecord:
    """What happened upstream: cost in USD (LiteLLM's ``response_cost``), tokens, latency, status."""

    request_id: str
    cost_usd: float
    status: str = "success"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float | None = None
    error: str | None = None
    created_at: datetime | None = None
    retries: int | None = None  # failed upstream attempts (LiteLLM's retries) before the one the client got
    answered_model: str | None = None  # the model group whose answer the client got (a LiteLLM fallback's)

    def __post_init__(self) -> None:
        rid = self.request_id
        _require_request_id(rid)
        _require(
            _finite_number(self.cost_usd) and float(self.cost_usd) >= 0,
            rid,
            f"`cost_usd` must be a finite number >= 0, got {self.cost_usd!r}",
        )
        _require(self.status in OUTCOME_STATUSES, rid, f"`status` must be one of {OUTCOME_STATUSES}, got {self.status!r}")
        for name in ("prompt_tokens", "completion_tokens", "retries"):
            v = getattr(self, name)
            _require(
                v is None or (isinstance(v, (int, np.integer)) and v >= 0), rid, f"`{name}` must be an integer >= 0, got {v!r}"
            )
        _require(
            self.latency_ms is None or (_finite_number(self.latency_ms) and self.latency_ms >= 0),
            rid,
            f"`latency_ms` must be a finite number >= 0, got {self.latency_ms!r}",
        )
        object.__setattr__(self, "cost_usd", float(self.cost_usd))
        object.__setattr__(self, "created_at", _aware(self.created_at))
        _clean_fields(self)

    def row(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "created_at": self.created_at,
            "cost_usd": self.cost_usd,
            "prompt_tokens": None if self.prompt_tokens is None else int(self.prompt_tokens),
            "completion_tokens": None if self.completion_tokens is None else int(self.completion_tokens),
            "latency_ms": None if self.latency_ms is None else float(self.latency_ms),
            "status": self.status,
            "error": self.error,
            "retries": None if self.retries is None else int(self.retries),
            "answered_model": self.answered_model,
        }


@dataclass(frozen=True)
class DecisionRecord:
    """One routing decision. ``embedding`` is the (d,) vector the router saw; ``propensity`` the exact
    probability with which the gateway's sampling picked ``chosen_model``. ``outcome`` may ride along
    (the gateway writes both at the end of the request)."""

    request_id: str
    tier: str
    lam: float
    embedding_model: str
    embedding: np.ndarray
    chosen_model: str
    propensity: float | None
    mode: str = "policy"
    team: str | None = None
    router_version: str | None = None
    prompt_hash: str = ""
    prompt_text: str | None = None
    scores: dict[str, float] | None = None
    created_at: datetime | None = None
    outcome: OutcomeRecord | None = field(default=None)
    mock: bool = False  # answered by `serve --mock-upstream`'s mock: kept out of retrain and budgets
    session_turn: str | None = None  # first | kept | rerouted (schema.SESSION_TURNS); None: not a conversation's turn
    app: str | None = None  # the app the request came from (gateway/messages.py app_key); None: no system prompt
    greedy_model: str | None = None  # the router's choice before exploration; None: no router chose
    # every model's probability at this request under the distribution drawn from (non-zero entries); None: not
    # logged (the uniform cold start, one model, imported or older logs)
    propensities: dict[str, float] | None = None

    def __post_init__(self) -> None:
        rid = self.request_id
        _require_request_id(rid)
        _require(bool(self.tier), rid, "`tier` must be non-empty")
        _require(self.session_turn in (None, *SESSION_TURNS), rid,
                 f"`session_turn` must be one of {SESSION_TURNS} or None, got {self.session_turn!r}")  # fmt: skip
        _require(bool(self.chosen_model), rid, "`chosen_model` must be non-empty")
        _require(bool(self.embedding_model), rid, "`embedding_model` must be non-empty")
        _require(_finite_number(self.lam) and float(self.lam) >= 0, rid, f"`lam` must be a finite number >= 0, got {self.lam!r}")
        _require(self.mode in DECISION_MODES, rid, f"`mode` must be one of {DECISION_MODES}, got {self.mode!r}")
        if not (self.propensity is None and self.mode == "imported"):
            _require(
                self.propensity is not None and _finite_number(self.propensity) and 0 < float(self.propensity) <= 1,
                rid,
                f"`propensity` must be in (0, 1], got {self.propensity!r} (only imported logs may lack it)",
            )
        if self.propensities is not None:
            spread = self.propensities
            _require(isinstance(spread, dict) and all(_finite_number(v) and 0 < float(v) <= 1 for v in spread.values()), rid,
                     f"`propensities` must map models to probabilities in (0, 1], got {spread!r}")  # fmt: skip
            # to the six significant digits it is stored with (below)
            _require(abs(sum(float(v) for v in spread.values()) - 1.0) < 1e-4, rid, "`propensities` must sum to 1")
            _require(self.chosen_model in spread and math.isclose(float(spread[self.chosen_model]), float(self.propensity or 0),
                     rel_tol=1e-5), rid, "`propensities` must give the chosen model its `propensity`")  # fmt: skip
            # six significant digits (the chosen model's exact one is ``propensity``): ~25 bytes a model, not ~40
            object.__setattr__(self, "propensities", {str(k): float(f"{float(v):.6g}") for k, v in spread.items()})
        emb = np.asarray(self.embedding, dtype=np.float32)
        _require(emb.ndim == 1 and emb.size > 0, rid, f"`embedding` must be a non-empty 1-d vector, got shape {emb.shape}")
        _require(bool(np.isfinite(emb).all()), rid, "`embedding` must be finite")
        if self.outcome is not None:
            _require(self.outcome.request_id == rid, rid, f"outcome belongs to {self.outcome.request_id!r}")
        emb.setflags(write=False)
        object.__setattr__(self, "embedding", emb)
        object.__setattr__(self, "lam", float(self.lam))
        object.__setattr__(self, "propensity", None if self.propensity is None else float(self.propensity))
        object.__setattr__(self, "created_at", _aware(self.created_at))
        _clean_fields(self)

    def row(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "created_at": self.created_at,
            "team": self.team,
            "tier": self.tier,
            "lam": self.lam,
            "router_version": self.router_version,
            "embedding_model": self.embedding_model,
            "embedding_dim": int(self.embedding.size),
            "embedding": self.embedding.astype("<f4").tobytes(),
            "chosen_model": self.chosen_model,
            "propensity": self.propensity,
            "mode": self.mode,
            "prompt_hash": self.prompt_hash,
            "prompt_text": self.prompt_text,
            "scores": None if self.scores is None else {k: float(v) for k, v in self.scores.items()},
            "mock": bool(self.mock),
            "session_turn": self.session_turn,
            "app": self.app,
            "greedy_model": self.greedy_model,
            "propensities": self.propensities,
        }

    # The spill file is JSON lines: one record per line, embedding as base64 float32.
    def to_json(self) -> dict[str, Any]:
        d = self.row()
        d["embedding"] = base64.b64encode(d["embedding"]).decode("ascii")
        d["created_at"] = _aware(self.created_at).isoformat()
        if self.outcome is not None:
            o = self.outcome.row()
            o["created_at"] = _aware(self.outcome.created_at).isoformat()
            d["outcome"] = o
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "DecisionRecord":
        d = dict(d)
        dim = d.pop("embedding_dim")
        emb = np.frombuffer(base64.b64decode(d.pop("embedding")), dtype="<f4")
        if emb.size != dim:
            raise StoreInputError(f"request {d.get('request_id')!r}: spilled embedding has {emb.size} values, expected {dim}")
        outcome = d.pop("outcome", None)
        d["created_at"] = datetime.fromisoformat(d["created_at"])
        if outcome is not None:
            outcome["created_at"] = datetime.fromisoformat(outcome["created_at"])
            outcome = OutcomeRecord(**outcome)
        return cls(embedding=emb, outcome=outcome, **d)


@dataclass(frozen=True)
class FeedbackRecord:
    """A quality score in [0, 1] for one request (user thumbs, an LLM judge, an import)."""

    request_id: str
    score: float
    source: str = "user"
    created_at: datetime | None = None
    cost_usd: float | None = None  # what producing the score cost (the judge's call), if known

    def __post_init__(self) -> None:
        rid = self.request_id
        _require_request_id(rid)
        _require(
            _finite_number(self.score) and 0.0 <= float(self.score) <= 1.0, rid, f"`score` must be in [0, 1], got {self.score!r}"
        )
        _require(
            isinstance(self.source, str) and 0 < len(self.source) <= 32,
            rid,
            f"`source` must be a non-empty string of <= 32 chars, got {self.source!r}",
        )
        _require(
            self.cost_usd is None or (_finite_number(self.cost_usd) and float(self.cost_usd) >= 0.0),
            rid,
            f"`cost_usd` must be a finite number >= 0, got {self.cost_usd!r}",
        )
        object.__setattr__(self, "score", float(self.score))
        object.__setattr__(self, "cost_usd", None if self.cost_usd is None else float(self.cost_usd))
        object.__setattr__(self, "created_at", _aware(self.created_at))
        _clean_fields(self)

    # A spill-file line (the writer queues judge scores beside decisions): tagged so replay knows the kind.
    def to_json(self) -> dict[str, Any]:
        return {"kind": "feedback", "request_id": self.request_id, "score": self.score, "source": self.source,
                "cost_usd": self.cost_usd, "created_at": _aware(self.created_at).isoformat()}  # fmt: skip

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "FeedbackRecord":
        d = {k: v for k, v in d.items() if k != "kind"}
        return cls(**{**d, "created_at": datetime.fromisoformat(d["created_at"])})


def record_from_json(d: dict[str, Any]) -> "DecisionRecord | FeedbackRecord":
    """A spilled record of either kind (decision lines carry no kind)."""
    return FeedbackRecord.from_json(d) if d.get("kind") == "feedback" else DecisionRecord.from_json(d)
