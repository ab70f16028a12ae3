"""What the hook reads of one routed request before it chooses -- the text the router embeds, its context, what
it needs of a model and which models can take it, its conversation -- and the decision record it logs."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from regret_gateway.gateway.decisions import Choice
from regret_gateway.gateway.eligibility import NoEligibleModel
from regret_gateway.gateway.messages import app_key, routed_text, tool_names
from regret_gateway.gateway.sessions import Turn, conversation_of
from regret_gateway.limits import Needs, is_whole
from regret_gateway.store.records import DecisionRecord, prompt_hash, team_key
from regret_gateway.tokens import count_message_tokens

if TYPE_CHECKING:
    from regret_gateway.gateway.runtime import Gateway

log = logging.getLogger(__name__)

MAX_OUTPUT_TOKENS = 2**31 - 1  # the most max_tokens a request may ask for, whatever a model states


class BadRequestField(ValueError):
    """A field the gateway reads of a routed request has the wrong type or an impossible value (HTTP 400)."""


def check_fields(data: Mapping) -> None:
    """Refuse, before anything is routed or sent upstream, the fields the gateway reads whose JSON type or
    value is wrong: ``max_tokens`` / ``max_completion_tokens`` must be integers in [1, MAX_OUTPUT_TOKENS]
    (``1e12`` is a JSON float, ``"999999999"`` a string), ``stream`` a boolean (``"true"`` is a string: the
    gateway would not ask a stream's usage of the upstream, and its cost would be lost)."""
    for field in ("max_tokens", "max_completion_tokens"):
        value = data.get(field)
        if value is None:
            continue
        if not is_whole(value):
            raise BadRequestField(f"`{field}` must be an integer, got {type(value).__name__} {value!r:.40}")
        if not 1 <= value <= MAX_OUTPUT_TOKENS:
            raise BadRequestField(f"`{field}` must be between 1 and {MAX_OUTPUT_TOKENS}, got {value}")
    stream = data.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise BadRequestField(f"`stream` must be true or false, got {type(stream).__name__} {stream!r:.40}")


NO_EMBEDDING = "none"  # embedding_model of fallback decisions made before an embedding existed


@dataclass(frozen=True)
class RoutedRequest:
    text: str  # what the router reads of the conversation (embedder.reads), before the context template
    context: dict  # the fields a template or context code may name (context.CONTEXT_FIELDS)
    needs: Needs
    allowed: np.ndarray | None  # (T,) the models that can take it; None: all
    turn: Turn | None  # its conversation


def request_context(data: Mapping, metadata: Mapping, team: str | None, tier: str, key: bytes) -> dict:
    """The request context a template may name (context.CONTEXT_FIELDS): tags from the body's ``tags`` or
    ``metadata.tags`` (LiteLLM accepts both), the OpenAI ``user`` field, the caller's team and tier, the app
    (a keyed hash of the system prompt) and the names of the tools offered."""
    tags = data.get("tags") or metadata.get("tags") or ()
    tags = [tags] if isinstance(tags, str) else [str(t) for t in tags] if isinstance(tags, (list, tuple)) else []
    messages = data.get("messages") if isinstance(data.get("messages"), list) else None
    return {"team": team, "tier": tier, "tags": tags, "user": data.get("user"), "app": app_key(messages, key),
            "tools": tool_names(dict(data))}  # fmt: skip


def read_request(gw: Gateway, data: dict, metadata: dict, team: str | None, tier: str) -> RoutedRequest:
    """The request as the router reads it. Raises :class:`NoEligibleModel` where no routed model can take it."""
    s = gw.settings
    messages = data.get("messages")
    eligibility = gw.eligibility
    sized = s.cost_capped or eligibility.reads_size  # a cost cap or a known window reads the request's size
    needs = eligibility.needs(data, count_message_tokens(messages) if sized else None)
    allowed = eligibility.allowed(needs)
    if allowed is not None:
        gw.metrics.count("restricted", tier)
        if not allowed.any():
            raise NoEligibleModel(needs, eligibility.refusals(needs))
    return RoutedRequest(
        text=routed_text(messages, s.embedder.reads),
        context=request_context(data, metadata, team, tier, gw.hash_key),
        needs=needs,
        allowed=allowed,
        turn=conversation_of(data, metadata, team, gw.hash_key),
    )


def decision_record(gw: Gateway, request_id: str, tier: str, team: str | None, choice: Choice, x: np.ndarray | None,
                    text: str, lam: float, session_turn: str | None = None, app: str | None = None) -> DecisionRecord | None:  # fmt: skip
    """The decision as the store will hold it, or None (with a log line) where the store would refuse it:
    then the request falls back instead of failing (a router never fails a request)."""
    s = gw.settings
    try:
        return DecisionRecord(
            request_id=request_id,
            tier=tier,
            lam=lam,  # the tier's, or a budgeted team's steered lambda
            team=team_key(team),
            router_version=choice.router_version,
            embedding_model=s.embedder.embedding_id if x is not None else NO_EMBEDDING,
            embedding=x if x is not None else np.zeros(1, dtype=np.float32),
            chosen_model=choice.model,
            propensity=choice.propensity,
            mode=choice.mode,
            prompt_hash=prompt_hash(text, gw.hash_key),
            prompt_text=text if s.store.store_prompts else None,
            scores=choice.scores,
            created_at=gw.now(),
            mock=s.mock_upstream,
            session_turn=session_turn,
            app=app,
            greedy_model=choice.greedy,
            propensities=choice.propensities,
        )
    except (ValueError, TypeError) as exc:
        log.error("regret-gateway: decision %s cannot be logged (%s); tier %s falls back", request_id, exc, tier)
        return None
