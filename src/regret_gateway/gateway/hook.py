"""The LiteLLM ``CustomLogger`` that routes requests to the virtual model and logs every decision.

Register it in the proxy's config.yaml::

    litellm_settings:
      callbacks: ["regret_gateway.gateway.hook.handler"]

The hook serves a :class:`~regret_gateway.gateway.runtime.Gateway`: ``regret-gateway serve`` builds one
at start-up and attaches it (:meth:`RegretRouterHook.attach`); under a plain ``litellm --config`` the hook
is imported while the proxy loads that config, and builds, checks and starts the gateway from the same
file's ``regret_gateway:`` section there and then, and mounts the ``/regret/*`` routes on LiteLLM's app
(:func:`~regret_gateway.gateway.app.start_in_proxy`). Nothing heavy happens at any other import, but one
thing for LiteLLM itself: an import its proxy retries on every request is made to fail once
(``gateway/litellm_imports.py``).

Per request to ``virtual_model`` (``async_pre_call_hook``): team -> tier (403 if the request asks for a
tier its team may not use), read the request (``gateway/request.py``: what the router reads of it, its
context, which models can take it -- 400 where none can -- and its conversation), embed what it reads --
inside the configured context template (``embedder.template``: team, tier, tags, user, app) --
micro-batched with concurrent requests, choose among the models that can take it with the active router
for the tier's lambda plus epsilon exploration, keep a later turn of a conversation on its model unless a
switch pays for its lost cache (``gateway/sessions.py``), rewrite ``data["model"]``. Any
error or timeout there sends the request to the tier's fallback model (mode ``fallback``, counted): the
router never fails a request. Under overload a request whose embedding is predicted to wait longer than
``route_timeout_s`` is embedded from ``embedder.overload_max_length`` of its tokens (head and tail) if that fits the
budget, else not at all: it goes to its fallback at once (counted as ``shed``). The decision's key is the gateway's own id (``rg-t<time><random>``, :mod:`regret_gateway.request_ids`), returned to the
client as the ``x-regret-request-id`` header. The decision goes to the store's batched writer at once; with
the outcome the client received it is submitted again (LiteLLM's ``response_cost``, tokens, latency,
status, failed attempts before it) -- the decision insert is idempotent, the outcome is added. An upstream
attempt that fails is not an outcome yet: LiteLLM may retry it. The outcome is the success event (of a
retry, perhaps) or, when the proxy answers the client with an error, the post-call failure hook; it names
the model group that answered (a LiteLLM fallback's, where one answered for the routed model). A routed
stream asks the upstream for its usage (its cost), and its outcome waits for the stream's end as well:
``client_left`` where the client closed it first. With a ``judge:`` section,
the success event also offers the prompt and answer to the sampled LLM judge (``judge/sampled.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from fastapi import HTTPException
from litellm.integrations.custom_logger import CustomLogger
from litellm.proxy._types import LitellmUserRoles

from regret_gateway.config import load_settings
from regret_gateway.context import render
from regret_gateway.gateway import litellm_imports
from regret_gateway.gateway.app import proxy_config_path, start_in_proxy
from regret_gateway.gateway.batcher import Overloaded
from regret_gateway.gateway.decisions import Choice, fallback_model
from regret_gateway.gateway.eligibility import NoEligibleModel
from regret_gateway.gateway.messages import answer_text, answered_by, count_stream_usage, routed_text
from regret_gateway.gateway.request import BadRequestField, check_fields, decision_record, read_request
from regret_gateway.gateway.runtime import Gateway
from regret_gateway.gateway.tiers import BadTierRequest, TierNotAllowed, resolve_tier, team_of
from regret_gateway.request_ids import new_request_id
from regret_gateway.store.records import DecisionRecord, OutcomeRecord

log = logging.getLogger(__name__)

REQUEST_ID_HEADER = "x-regret-request-id"  # the response header with the gateway's id of a routed request
MODEL_HEADER = "x-regret-model"  # the response header with the model that answered (a LiteLLM fallback's, if one did)
CHOSEN_HEADER = "x-regret-chosen-model"  # the response header with the model the router chose
TIER_HEADER = "x-regret-tier"  # the response header with the tier it was routed for
GREEDY_HEADER = "x-regret-greedy-model"  # the router's choice before exploration (none: no router chose)
VERSION_HEADER = "x-regret-router-version"  # the response header with the router version that chose (none: no router did)
JUDGE_READS = "system-and-last-user"  # what the LLM judge is shown of the request: the instructions and the question
_MAX_PENDING = 100_000  # decisions waiting for their success/failure event
_MAX_ANSWERED = 10_000  # answered requests kept in case the proxy still fails them (their outcome is then corrected)


@dataclass
class _Stream:
    """Where a routed stream stands: its outcome is logged once both the stream has ended (to its last chunk,
    or with the client gone) and LiteLLM's success event has brought its cost and tokens."""

    ended: bool = False
    left: bool = False  # the client closed it before the last chunk
    success: tuple | None = None  # the success event's (slo, response_cost, messages, response_obj), if it came first


@dataclass
class _Pending:
    record: DecisionRecord
    started: float
    failures: int = 0  # upstream attempts that failed so far (LiteLLM may retry them)
    error: str | None = None  # the last one's error
    stream: _Stream | None = None  # set when the answer is streamed (the streaming iterator hook)


STREAM_GRACE_S = 30.0  # how long a stream the client left waits for LiteLLM's success event (its cost) before it is logged


class RegretRouterHook(CustomLogger):
    """The LiteLLM callback; all state lives in its :class:`Gateway`."""

    def __init__(self, gateway: Gateway | None = None) -> None:
        super().__init__()
        self._gateway = gateway
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._answered: OrderedDict[str, DecisionRecord] = OrderedDict()  # logged answers, newest last

    def attach(self, gateway: Gateway) -> None:
        """Serve ``gateway`` from now on (the proxy registers this very instance, so it is swapped, not replaced)."""
        self._gateway = gateway
        self._pending.clear()
        self._answered.clear()

    def awaiting_outcome(self, request_id: str) -> DecisionRecord | None:
        """The logged decision of a routed request whose outcome (success or failure event) has not come yet."""
        pending = self._pending.get(request_id)
        return None if pending is None else pending.record

    @property
    def has_gateway(self) -> bool:
        return self._gateway is not None

    @property
    def gateway(self) -> Gateway:
        """The gateway this hook serves: the one attached (``serve``, or the proxy's start-up under plain
        ``litellm``: :func:`~regret_gateway.gateway.app.start_in_proxy`), else one built now from the proxy's
        config (:func:`~regret_gateway.gateway.app.proxy_config_path`)."""
        if self._gateway is None:
            path = proxy_config_path()
            if path is None:
                raise RuntimeError("regret-gateway: no config to serve: set REGRET_GATEWAY_CONFIG to the proxy's config.yaml")
            self._gateway = Gateway(load_settings(path))
        return self._gateway

    async def async_pre_call_hook(self, user_api_key_dict, cache, data: dict, call_type):
        gw = self.gateway
        s = gw.settings
        if isinstance(data, dict) and self._request_id(data) is not None:
            return data  # routed already (the hook is registered twice when a process loads the config twice)
        if not isinstance(data, dict) or data.get("model") != s.virtual_model:
            is_admin = getattr(user_api_key_dict, "user_role", None) == LitellmUserRoles.PROXY_ADMIN
            if isinstance(data, dict) and not s.allow_direct_models and data.get("model") in s.models and not is_admin:
                gw.metrics.count("forbidden")
                raise HTTPException(status_code=403, detail=f"call {s.virtual_model!r}: this deployment routes "
                                    f"{data.get('model')!r} by tier, it may not be named directly")  # fmt: skip
            gw.metrics.count("passthrough")
            return data
        if not gw.started:
            await asyncio.get_running_loop().run_in_executor(None, gw.start)
        began = time.perf_counter()
        metadata: dict = data["metadata"] if isinstance(data.get("metadata"), dict) else {}
        requested = data.pop("regret_tier", None) or metadata.get("regret_tier")
        team = team_of(s, user_api_key_dict)
        try:
            tier = resolve_tier(s, team, getattr(user_api_key_dict, "team_metadata", None), requested)
        except TierNotAllowed as exc:
            gw.metrics.count("forbidden")
            raise HTTPException(status_code=403, detail=str(exc)) from None
        except BadTierRequest as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from None
        # The decision's key is the gateway's own id, returned as the `x-regret-request-id` header: a client
        # may choose LiteLLM's call id (x-litellm-call-id), so that id can neither fail a request, merge
        # two requests nor reach another team's decision.
        request_id = new_request_id()
        try:
            check_fields(data)
        except BadRequestField as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from None
        try:
            req = read_request(gw, data, metadata, team, tier)
        except NoEligibleModel as exc:  # no call that is bound to fail: the client is told why
            gw.metrics.count("ineligible", tier)
            raise HTTPException(status_code=400, detail=str(exc)) from None
        text, allowed = req.text, req.allowed
        choice, x, position = await _route(gw, req, team, tier)
        lam = s.tiers[tier].lam if position is None or choice.mode == "fallback" else gw.steerer.lam(team, position)
        choice, turn = gw.session_step(req.turn, allowed, choice, x, tier, lam, data.get("messages"), team=team,
                                       position=position, prompt_tokens=req.needs.prompt_tokens)  # fmt: skip
        record = decision_record(gw, request_id, tier, team, choice, x, text, lam, turn, req.context["app"])
        if record is None:  # the store would refuse this decision (e.g. a bad router version): fall back, log that
            choice = Choice(fallback_model(s, tier, allowed), 1.0, "fallback", None)
            x, lam = None, s.tiers[tier].lam
            record = decision_record(gw, request_id, tier, team, choice, x, text, lam, app=req.context["app"])
        _count(gw, tier, choice, turn)
        data["model"] = choice.model
        if data.get("stream") is True:
            count_stream_usage(data)
        metadata["regret_gateway"] = {
            "request_id": request_id, "tier": tier, "lam": lam, "model": choice.model, "propensity": choice.propensity,
            "mode": choice.mode, "router_version": choice.router_version, "session_turn": turn, "greedy": choice.greedy,
        }  # fmt: skip
        data["metadata"] = metadata
        if record is None:  # cannot happen with valid settings; the request is answered all the same
            gw.metrics.count("unlogged", tier)
            return data
        gw.writer.submit(record)  # logged now (feedback may come before the outcome); the outcome follows
        self._pending[request_id] = _Pending(record, time.monotonic())
        while len(self._pending) > _MAX_PENDING:  # events that never came: the decision is logged already
            self._pending.popitem(last=False)
        gw.metrics.hook_seconds.observe(time.perf_counter() - began)
        return data

    # ---- outcomes ------------------------------------------------------------------------------
    @staticmethod
    def _routing(data: dict | None) -> dict:
        """What the hook attached to a routed request's metadata (request id, tier, model...); {} if none."""
        for metadata in ((data or {}).get("metadata"), ((data or {}).get("litellm_params") or {}).get("metadata")):
            if isinstance(metadata, dict) and isinstance(metadata.get("regret_gateway"), dict):
                return metadata["regret_gateway"]
        return {}

    @classmethod
    def _request_id(cls, data: dict | None) -> str | None:
        """The gateway's id of a routed request."""
        return cls._routing(data).get("request_id")

    async def async_post_call_response_headers_hook(self, data, user_api_key_dict, response, request_headers=None,
                                                    litellm_call_info=None):  # fmt: skip
        """Tell the client its request's id (the id feedback and the audit take), the model that answered (a
        LiteLLM fallback's, where one answered for the router's choice), the router's choice, the tier it
        was routed for, the router version that chose and its greedy choice before exploration (both absent
        where no router chose: a fallback, the cold start)."""
        routing = self._routing(data)
        if not routing.get("request_id"):
            return None
        chosen = str(routing.get("model", ""))
        headers = {REQUEST_ID_HEADER: routing["request_id"], MODEL_HEADER: answered_by(response) or chosen,
                   CHOSEN_HEADER: chosen, TIER_HEADER: str(routing.get("tier", ""))}  # fmt: skip
        if routing.get("router_version"):
            headers[VERSION_HEADER] = str(routing["router_version"])
        if routing.get("greedy"):
            headers[GREEDY_HEADER] = str(routing["greedy"])
        return headers

    async def async_post_call_streaming_iterator_hook(self, user_api_key_dict, response, request_data: dict):
        """A routed stream passes through unchanged; what is noted is how it ended: to its last chunk, or with
        the client gone (Starlette closes the proxy's generator, which closes this one). Its outcome waits
        for both that and LiteLLM's success event (:meth:`_finish`)."""
        request_id = self._request_id(request_data)
        pending = self._pending.get(request_id or "")
        if pending is None:
            async for item in response:
                yield item
            return
        pending.stream = stream = _Stream()
        completed = False
        try:
            async for item in response:
                yield item
            completed = True
        finally:
            stream.ended, stream.left = True, not completed
            self._stream_ended(request_id, stream)

    def _stream_ended(self, request_id, stream: _Stream) -> None:
        if self._pending.get(request_id) is None:
            return  # logged already (a failure mid-stream)
        if stream.success is not None:
            slo, cost, messages, response_obj = stream.success
            self._finish(request_id, "success", slo, response_cost=cost, messages=messages, response_obj=response_obj)
        elif stream.left:  # LiteLLM bills a stream the client left in a success event; past the grace, log it without
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            loop.call_later(STREAM_GRACE_S, self._finish, request_id, "client_left", {})

    def _finish(self, call_id: str | None, status: str, slo: dict, *, response_cost=None, error: str | None = None,
                messages=None, response_obj=None) -> None:  # fmt: skip
        """Log the outcome the client received, once: the decision is submitted again with it. A streamed
        answer's success event may come before the stream has ended: it waits for that end, and a stream the
        client closed before its last chunk is logged as ``client_left`` with what it cost."""
        pending = self._pending.get(call_id) if call_id else None
        if pending is None or call_id is None:
            if status == "failure" and call_id is not None and call_id in self._answered:
                self._failed_after_answer(self._answered.pop(call_id), error)
            return  # not a routed request (or one whose outcome is logged already)
        if pending.stream is not None and status == "success":
            if not pending.stream.ended:
                pending.stream.success = (slo, response_cost, messages, response_obj)
                return
            status = "client_left" if pending.stream.left else status
        del self._pending[call_id]
        answered = status in ("success", "client_left")
        cost = (slo.get("response_cost", response_cost) or 0.0) if answered else 0.0
        start, end = slo.get("startTime"), slo.get("endTime")
        latency_ms = (
            1000.0 * (end - start)
            if answered and isinstance(start, (int, float)) and isinstance(end, (int, float))
            else 1000.0 * (time.monotonic() - pending.started)
        )
        retries = pending.failures if answered else max(0, pending.failures - 1)
        try:
            outcome = OutcomeRecord(
                request_id=call_id,
                cost_usd=float(cost) if np.isfinite(cost) and cost >= 0 else 0.0,
                status=status,
                prompt_tokens=slo.get("prompt_tokens") or None,
                completion_tokens=slo.get("completion_tokens") or None,
                latency_ms=max(0.0, latency_ms),
                error=(error or pending.error) if status == "failure" else None,
                retries=retries,
                answered_model=answered_by(slo) if answered else None,
            )
        except ValueError as exc:
            log.error("regret-gateway: outcome of %s not recorded (%s); the decision is", call_id, exc)
            outcome = None
        gw = self.gateway
        r0 = pending.record
        if retries:
            gw.metrics.count("retried", r0.tier)
        if outcome is not None and not gw.settings.mock_upstream:  # a mock's answers are not spend
            gw.metrics.spent(r0.team, r0.tier, outcome.answered_model or r0.chosen_model, outcome.cost_usd)
        gw.writer.submit(dataclasses.replace(r0, outcome=outcome))
        if outcome is not None and answered:
            self._answered[call_id] = dataclasses.replace(r0, outcome=outcome)
            while len(self._answered) > _MAX_ANSWERED:
                self._answered.popitem(last=False)
        if (
            status == "success"
            and gw.judge is not None
            and outcome is not None
            and outcome.answered_model in (None, r0.chosen_model)
        ):
            r = pending.record
            gw.judge.consider(call_id, r.team, r.tier, routed_text(messages, JUDGE_READS), answer_text(response_obj))

    def _failed_after_answer(self, record: DecisionRecord, error: str | None) -> None:
        """The proxy answered the client with an error after the answer was logged (LiteLLM's own checks after
        LiteLLM's success event): the outcome is corrected to ``failure``, at what the answer cost (the store
        replaces the answer's status, :func:`~regret_gateway.store.writes.record_outcomes`)."""
        assert record.outcome is not None
        log.warning("regret-gateway: request %s failed after its answer was logged (%s); its outcome is now a failure",
                    record.request_id, error)  # fmt: skip
        self.gateway.writer.submit(
            dataclasses.replace(record, outcome=dataclasses.replace(record.outcome, status="failure", error=error))
        )

    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
        self._finish(self._request_id(kwargs), "success", kwargs.get("standard_logging_object") or {},
                     response_cost=kwargs.get("response_cost"), messages=kwargs.get("messages"),
                     response_obj=response_obj)  # fmt: skip

    async def async_log_failure_event(self, kwargs, response_obj, start_time, end_time):
        """One upstream attempt failed. LiteLLM may retry it (and log the retry's success), so the outcome
        waits for the success event or for the proxy's answer to the client (the post-call failure hook)."""
        pending = self._pending.get(self._request_id(kwargs) or "")
        if pending is not None:
            pending.failures += 1
            pending.error = (kwargs.get("standard_logging_object") or {}).get("error_str") or pending.error

    async def async_post_call_failure_hook(self, request_data, original_exception, user_api_key_dict,
                                           traceback_str=None):  # fmt: skip
        """The proxy answers the client with an error: that is the request's outcome."""
        error = f"{type(original_exception).__name__}: {original_exception}"
        self._finish(self._request_id(request_data), "failure", {}, error=error)


async def _route(gw, req, team: str | None, tier: str) -> tuple[Choice, np.ndarray | None, int | None]:
    """(the choice, the request's features, a budgeted team's place on its ladder) for one read request: the
    router's pick on the embedding, or the tier's fallback where routing fails or the gateway is overloaded
    (fail open, always)."""
    s, text, allowed = gw.settings, req.text, req.allowed
    x, position = None, None
    try:
        gw.maybe_reload()
        gw.steerer.maybe_step()
        seen = render(s.embedder.template, text, req.context)
        budget = s.route_timeout_s  # a request predicted to wait longer is not queued: shed at once
        short = s.embedder.overload_max_length  # under overload the router reads less before it sheds
        embedded = time.perf_counter()
        x = gw.features(await gw.batcher.embed(seen, timeout=budget, budget=budget, short_tokens=short), req.context, text)
        gw.metrics.embedding_seconds.observe(time.perf_counter() - embedded)
        position = gw.steerer.position(team, tier)  # a budgeted team's place on the ladder (budgets/)
        choice = gw.router.choose(x, tier, gw.rng, position=position, ladder=gw.steerer.ladder(team), cheapest=gw.steerer.cheapest,
                                  prompt_tokens=req.needs.prompt_tokens, allowed=allowed)  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - fail open, always
        if isinstance(exc, (Overloaded, TimeoutError)):  # load: no log line per request (/regret/stats counts)
            gw.metrics.count("shed" if isinstance(exc, Overloaded) else "timed_out", tier)
        else:
            log.warning("regret-gateway: routing failed (%s: %s); tier %s falls back", type(exc).__name__, exc, tier)
        choice = Choice(fallback_model(s, tier, allowed), 1.0, "fallback", getattr(gw.router.artifact, "version", None))
    return choice, x, position


def _count(gw, tier: str, choice: Choice, turn: str | None) -> None:
    """The routed request's counters: routed, the model chosen and how, and a conversation's kept or re-routed turn."""
    gw.metrics.count("routed", tier)
    gw.metrics.chosen(tier, choice.model, choice.mode)
    if choice.mode in ("fallback", "exploration", "cold_start"):
        gw.metrics.count(choice.mode, tier)
    if turn in ("kept", "rerouted"):
        gw.metrics.count(f"session_{turn}", tier)


litellm_imports.settle()  # the proxy that loads this callback stops retrying a missing import on every request
handler = RegretRouterHook()
start_in_proxy(handler)  # under plain `litellm --config`, imported while the proxy loads its config: start now
