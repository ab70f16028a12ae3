"""Conversations keep their model: a later turn stays on the model its conversation's first routed turn got,
unless the router's utility for another model beats the kept one's by more than switching costs -- the
prompt cache the switch loses (priced: the history's tokens x (input price - cached input price) of the kept
model, x the tier's lambda) plus a penalty in quality points (``sessions.switch_penalty``).

A conversation is named by the client (``litellm_session_id``: LiteLLM's ``x-litellm-session-id`` header or
body field; or ``metadata.session_id``), else by a keyed hash of its team and first messages (its system
prompt and first user turn), which every later turn of it repeats. Only a request that carries history (an
assistant turn) or a client's session id is a turn of a conversation. Each worker keeps its conversations in
memory (least recently used first out, ``ttl_s`` after the last turn); a conversation whose turns land on
other workers is kept by each of them on its own.

A kept turn is logged with propensity 1 (``session_turn = kept``: no draw, so retrain leaves it out); a turn
routed afresh is the router's draw, its propensity exact (``rerouted``); the first turn is the routed decision
that carries the conversation's learning (``first``; a lone request is remembered too, and logged as no turn:
only a later turn tells that it opened a conversation).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from regret_gateway.config.specs import SessionSpec
from regret_gateway.gateway.decisions import Choice
from regret_gateway.gateway.messages import message_text, system_text
from regret_gateway.limits import ModelInfo


@dataclass(frozen=True)
class Turn:
    """Where a request stands in its conversation: the conversation's key, whether the client named it, and
    whether the request is a later turn of it."""

    key: str
    named: bool  # the client's session id
    later: bool  # it carries history (an assistant turn)
    team: str | None = None  # whose conversation it is (each team's conversations share the worker's memory fairly)

    @property
    def opens(self) -> bool:
        """Whether, routed afresh, it is logged as a conversation's first turn: a named conversation, or a later
        turn this worker did not see begin (a lone request may open one: only its later turns will tell)."""
        return self.named or self.later


def conversation_of(data: Mapping, metadata: Mapping, team: str | None, key: bytes) -> Turn | None:
    """The request's conversation: the client's session id, else the keyed hash of its team, its OpenAI ``user``
    (where the client sends one), system prompt and first user turn (None: a request without a user turn and
    without a session id). Two users of one app who open with the same words are one conversation unless the
    client names them apart: ``x-litellm-session-id`` (or ``user``)."""
    given = data.get("messages")
    messages: list = given if isinstance(given, list) else []
    later = any(isinstance(m, Mapping) and m.get("role") == "assistant" for m in messages)
    named = data.get("litellm_session_id") or metadata.get("session_id")
    if isinstance(named, str) and named:
        return Turn("id:" + hmac.new(key, f"{team}\x00{named}".encode(), hashlib.sha256).hexdigest()[:32], True, later, team)
    users = [message_text(m) for m in messages if isinstance(m, Mapping) and m.get("role") == "user"]
    if not users:
        return None
    user = data.get("user")
    text = f"{team}\x00{system_text(messages)}\x00{users[0]}" + (f"\x00user\x00{user}" if isinstance(user, str) and user else "")
    return Turn("h:" + hmac.new(key, text.encode(), hashlib.sha256).hexdigest()[:32], False, later, team)


def lost_cache_usd(info: ModelInfo, history_tokens: int | None) -> float:
    """What a switch away from a model of ``info`` loses of its prompt cache: the history's tokens, billed at
    the input price instead of the cached one (0 where either price is unknown)."""
    if not history_tokens or info.input_cost_per_token is None or info.cached_input_cost_per_token is None:
        return 0.0
    return history_tokens * max(0.0, info.input_cost_per_token - info.cached_input_cost_per_token)


def worth_switching(gain: float, lam: float, lost_usd: float, penalty: float) -> bool:
    """Whether a utility ``gain`` (quality points at the tier's ``lam``) pays for the switch: the lost cache
    in utility (``lam`` x ``lost_usd``) and the ``penalty``."""
    return gain > lam * lost_usd + penalty


class Sessions:
    """Each live conversation's model, in this worker's memory: at most ``max_sessions``; past that the team
    holding the most conversations loses its least recently used one, so one team's burst of new
    conversations evicts its own, never another team's."""

    def __init__(self, spec: SessionSpec, clock: Callable[[], float] = time.monotonic) -> None:
        self.spec = spec
        self._clock = clock
        self._models: dict[str, tuple[str, float, str | None]] = {}
        self._by_team: dict[str | None, OrderedDict[str, None]] = {}  # each team's conversations, least recent first

    def model(self, key: str) -> str | None:
        """The conversation's model, None where it is unknown or has expired."""
        entry = self._models.get(key)
        if entry is None:
            return None
        if self._clock() - entry[1] > self.spec.ttl_s:
            self._forget(key)
            return None
        return entry[0]

    def remember(self, key: str, model: str, team: str | None = None) -> None:
        """``team``'s conversation is on ``model`` as of now."""
        old = self._models.get(key)
        if old is not None and old[2] != team:
            self._forget(key)
        self._models[key] = (model, self._clock(), team)
        keys = self._by_team.setdefault(team, OrderedDict())
        keys[key] = None
        keys.move_to_end(key)
        while len(self._models) > self.spec.max_sessions:
            largest = max(self._by_team.values(), key=len)
            self._forget(next(iter(largest)))

    def _forget(self, key: str) -> None:
        _, _, team = self._models.pop(key)
        keys = self._by_team[team]
        del keys[key]
        if not keys:
            del self._by_team[team]

    def step(self, turn: Turn | None, choice: Choice, *, models: tuple[str, ...], allowed: np.ndarray | None,
             utilities: Callable[[], np.ndarray | None], lam: float, lost_usd: Callable[[str], float],
             permitted: Callable[[], np.ndarray | None] = lambda: None) -> tuple[Choice, str | None]:  # fmt: skip
        """The turn's decision and how it is logged (``session_turn``). ``choice``: the router's draw for the
        request, among the ``allowed`` models (T,) of ``models``; ``utilities()`` (T,): the router's estimates at
        the decision's ``lam`` (None: none, so no switch is shown worth it; asked only of a later turn); ``lost_usd(model)``: what leaving
        ``model`` loses of its cache; ``permitted()`` (T,): the models the tier's cap and the team's budget allow
        now (None: all; asked only of a later turn). The turn is kept on its conversation's model unless that model cannot
        take it, or the best allowed estimate beats the kept one's by more than the switch costs: whether to
        switch does not depend on the draw, so a switch's propensity is the draw's, exact."""
        if turn is None or not self.spec.keep:
            return choice, None
        kept = self.model(turn.key) if turn.later else None
        if kept is None:
            if choice.mode != "fallback":
                self.remember(turn.key, choice.model, turn.team)
            return choice, "first" if turn.opens else None
        bound = permitted()  # (T,) what the tier's cap and the team's budget allow now; None: every model
        if bound is not None:
            allowed = bound if allowed is None else allowed & bound
        k = models.index(kept) if kept in models else None
        switch = k is None or (allowed is not None and not allowed[k])
        u = None if switch else utilities()
        if u is not None and k is not None and np.isfinite(u[k]):
            among = np.isfinite(u) & (True if allowed is None else allowed)
            gain = float(np.max(u[among])) - float(u[k])
            switch = worth_switching(gain, lam, lost_usd(kept), self.spec.switch_penalty)
        if not switch:
            self.remember(turn.key, kept, turn.team)
            return Choice(kept, 1.0, "policy", choice.router_version, choice.scores, choice.greedy), "kept"
        if choice.mode != "fallback":
            self.remember(turn.key, choice.model, turn.team)
        return choice, "rerouted"

    def __len__(self) -> int:
        return len(self._models)
