"""``POST /regret/feedback`` (and ``/regret/feedback/batch``), ``GET /regret/decisions/{request_id}``,
``GET /regret/budget`` and ``GET /regret/stats`` on the proxy app.

All authenticate with the caller's LiteLLM key (LiteLLM's own auth dependency); only the team that made
a request may read or score it (the proxy admin may do both). Scores are idempotent per source: posting
again replaces that source's current score. The stats (this worker's counters) are the admin's only.

A request id the store does not hold yet is looked up again, with growing pauses, for up to
``feedback_grace_s``: the replica that answered the request may not have flushed its decision yet
(every replica writes its own decisions, every ``store.flush_interval_s``), and a client never has to know
which replica answered. The waits are on the event loop, not in the store pool's threads.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from litellm.proxy._types import LitellmUserRoles, UserAPIKeyAuth
from litellm.proxy.auth.user_api_key_auth import user_api_key_auth
from pydantic import BaseModel, Field, field_validator
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from regret_gateway.gateway.metrics import CONTENT_TYPE
from regret_gateway.gateway.runtime import Gateway
from regret_gateway.gateway.tiers import team_of
from regret_gateway.store.queries import (
    JUDGE_REPEAT_SOURCE,
    JUDGE_SOURCE,
    DecisionView,
    FeedbackView,
    decision_teams,
    get_decision,
)
from regret_gateway.store.records import FeedbackRecord, StoreInputError, team_key, valid_request_id
from regret_gateway.store.writes import record_feedback

router = APIRouter(prefix="/regret", tags=["regret-gateway"])


class FeedbackIn(BaseModel):
    request_id: str = Field(min_length=1, max_length=128, description="The x-regret-request-id response header of the request.")
    # strict: a JSON number; "0.5" (a string) or true is a client's mistake, not a score (422)
    score: float = Field(ge=0.0, le=1.0, strict=True, description="Quality of the answer in [0, 1], a JSON number.")
    source: str = Field(
        default="user",
        min_length=1,
        max_length=32,
        description="Who scored it; 'judge' and 'judge-repeat' are the gateway's own judge's.",
    )

    @field_validator("source")
    @classmethod
    def _not_the_judge(cls, v: str) -> str:
        if not v.isprintable():
            raise ValueError("source must be printable text (no NUL or other control characters)")
        if v in (JUDGE_SOURCE, JUDGE_REPEAT_SOURCE):
            raise ValueError(f"source {v!r} is reserved for the gateway's LLM judge")
        return v


def current_gateway(request: Request) -> Gateway:
    """The gateway the app serves (mounted by :func:`regret_gateway.gateway.app.mount`), started."""
    gateway = getattr(request.app.state, "regret_gateway", None)
    if gateway is None:
        raise HTTPException(status_code=503, detail="the gateway has not started")
    if not gateway.started:
        gateway.start()
    return gateway


def _lookup(gw: Gateway, request_ids: list[str]) -> dict[str, str | None]:
    with Session(gw.engine) as session:
        return decision_teams(session, request_ids)


FIRST_RETRY_S, MAX_RETRY_S = 0.05, 0.5  # pauses between lookups of a request id not stored yet
MAX_BATCH = 500  # scores per POST /regret/feedback/batch (its body stays under the proxy's 64 KiB)
SHOWN_IDS = 5  # unknown or foreign request ids named in a batch's 404 or 403


async def _authorize(gw: Gateway, request_ids: list[str], auth: UserAPIKeyAuth) -> None:
    """404 where an id is one the store does not hold within ``feedback_grace_s``, 403 where one is another
    team's request (the proxy admin may read and score any)."""
    teams = await gw.run_store(_lookup, gw, request_ids)
    deadline, pause = time.monotonic() + gw.settings.feedback_grace_s, FIRST_RETRY_S
    while (missing := [r for r in request_ids if r not in teams and valid_request_id(r)]) and time.monotonic() < deadline:
        await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(2 * pause, MAX_RETRY_S)
        teams.update(await gw.run_store(_lookup, gw, missing))
    if unknown := [r for r in request_ids if r not in teams]:
        shown = ", ".join(map(repr, unknown[:SHOWN_IDS])) + (
            f" and {len(unknown) - SHOWN_IDS} more" if len(unknown) > SHOWN_IDS else ""
        )
        raise HTTPException(status_code=404, detail=f"unknown request id{'s' if len(unknown) > 1 else ''} {shown}")
    if auth.user_role != LitellmUserRoles.PROXY_ADMIN:
        own = team_key(team_of(gw.settings, auth))
        if foreign := [r for r in request_ids if teams[r] != own]:
            which = "this request was" if len(request_ids) == 1 else f"{len(foreign)} of these requests were"
            raise HTTPException(status_code=403, detail=f"{which} made by another team")


@dataclass(frozen=True)
class FeedbackOut(FeedbackView):
    """``POST /regret/feedback``'s response: the score as stored, with its request."""

    request_id: str


def _post_feedback(gw: Gateway, body: FeedbackIn) -> FeedbackOut:
    with Session(gw.engine) as session, session.begin():
        record_feedback(session, [FeedbackRecord(body.request_id, body.score, source=body.source)])
    stored = _decision(gw, body.request_id).feedback_by_source[body.source]
    return FeedbackOut(**asdict(stored), request_id=body.request_id)


class FeedbackBatchIn(BaseModel):
    scores: list[FeedbackIn] = Field(min_length=1, max_length=MAX_BATCH, description=f"At most {MAX_BATCH} scores.")


@dataclass(frozen=True)
class FeedbackBatchOut:
    """``POST /regret/feedback/batch``'s response: how many scores were stored (all of them, or none)."""

    stored: int


def _post_feedback_batch(gw: Gateway, body: FeedbackBatchIn) -> FeedbackBatchOut:
    with Session(gw.engine) as session, session.begin():
        stored = record_feedback(session, [FeedbackRecord(s.request_id, s.score, source=s.source) for s in body.scores])
    return FeedbackBatchOut(stored)


def _decision(gw: Gateway, request_id: str) -> DecisionView:
    with Session(gw.engine) as session:
        found = get_decision(session, request_id)
    if found is None:  # authorised a moment ago: only a concurrent delete gets here
        raise HTTPException(status_code=404, detail=f"unknown request id {request_id!r}")
    return found


CONFLICTS = ("40P01", "40001")  # PostgreSQL's deadlock detected, serialization failure: another write won


def _store_unavailable(exc: Exception) -> HTTPException:
    """503 where the store is down or slow; 409 (retry) where a concurrent write of the same rows won."""
    if getattr(getattr(exc, "orig", None), "pgcode", None) in CONFLICTS:
        return HTTPException(status_code=409, detail="a concurrent write of the same scores won: retry the request")
    return HTTPException(status_code=503, detail=f"the store is unavailable, try again later ({type(exc).__name__})")


@router.post("/feedback")
async def post_feedback(
    body: FeedbackIn, auth: UserAPIKeyAuth = Depends(user_api_key_auth), gw: Gateway = Depends(current_gateway)
) -> FeedbackOut:
    try:
        await _authorize(gw, [body.request_id], auth)
        return await gw.run_store(_post_feedback, gw, body)
    except StoreInputError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    except (SQLAlchemyError, TimeoutError, asyncio.TimeoutError) as exc:
        raise _store_unavailable(exc) from None


@router.post("/feedback/batch")
async def post_feedback_batch(
    body: FeedbackBatchIn, auth: UserAPIKeyAuth = Depends(user_api_key_auth), gw: Gateway = Depends(current_gateway)
) -> FeedbackBatchOut:
    """Up to MAX_BATCH scores in one transaction, all or none: 404 names unknown request ids (after
    ``feedback_grace_s``), 403 where one is another team's, 422 for an invalid score. The same request
    and source twice in one batch: the last score counts."""
    try:
        await _authorize(gw, [s.request_id for s in body.scores], auth)
        return await gw.run_store(_post_feedback_batch, gw, body)
    except StoreInputError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    except (SQLAlchemyError, TimeoutError, asyncio.TimeoutError) as exc:
        raise _store_unavailable(exc) from None


@router.get("/decisions/{request_id}")
async def read_decision(
    request_id: str, auth: UserAPIKeyAuth = Depends(user_api_key_auth), gw: Gateway = Depends(current_gateway)
) -> DecisionView:
    try:
        await _authorize(gw, [request_id], auth)
        return await gw.run_store(_decision, gw, request_id)
    except (SQLAlchemyError, TimeoutError, asyncio.TimeoutError) as exc:
        raise _store_unavailable(exc) from None


def _budget(gw: Gateway, team: str) -> dict:
    from regret_gateway.budgets.status import budget_status

    with Session(gw.engine) as session:
        return budget_status(session, gw.settings, team, datetime.now(timezone.utc), gw.steerer.ladder(team)).to_dict()


@router.get("/budget")
async def read_budget(
    team: str | None = None, auth: UserAPIKeyAuth = Depends(user_api_key_auth), gw: Gateway = Depends(current_gateway)
) -> dict:
    """The caller's team's budget (the proxy admin: any ``?team=``): the period, the spend so far (its
    requests' outcomes in the store), the projection at the period's end and the lambda its requests use."""
    own = team_key(team_of(gw.settings, auth))
    admin = auth.user_role == LitellmUserRoles.PROXY_ADMIN
    name = team if team is not None else own
    if not admin and team is not None and team != own:
        raise HTTPException(status_code=403, detail="a team may read its own budget only")
    spec = gw.settings.teams.get(name) if name is not None else None
    if spec is None or spec.budget is None:
        raise HTTPException(status_code=404, detail=f"team {name!r} has no budget in the gateway's config")
    try:
        return await gw.run_store(_budget, gw, name)
    except (SQLAlchemyError, TimeoutError, asyncio.TimeoutError) as exc:
        raise _store_unavailable(exc) from None


@router.get("/stats")
async def read_stats(auth: UserAPIKeyAuth = Depends(user_api_key_auth), gw: Gateway = Depends(current_gateway)) -> dict:
    """This worker's counters (the proxy admin's key only): routing modes, the store writer (queued,
    spilled, refused, ...), the embedder (backend, batches, cache hits) and the LLM judge (sampled, scored,
    failed, timeouts, unparsable, dropped, queue depth, spend). In memory, since the worker started."""
    if auth.user_role != LitellmUserRoles.PROXY_ADMIN:
        raise HTTPException(status_code=403, detail="the gateway's counters are for the proxy admin's key")
    return gw.stats().to_dict()


@router.get("/metrics")
async def read_metrics(auth: UserAPIKeyAuth = Depends(user_api_key_auth), gw: Gateway = Depends(current_gateway)) -> Response:
    """This worker's metrics in Prometheus' text format (the proxy admin's key only: Prometheus sends it as
    a bearer token; gateway/metrics.py lists them)."""
    if auth.user_role != LitellmUserRoles.PROXY_ADMIN:
        raise HTTPException(status_code=403, detail="the gateway's metrics are for the proxy admin's key")
    return Response(gw.metrics.exposition(), media_type=CONTENT_TYPE)


REPORT_WAIT_S = 120.0  # a report request's wait (503 past it; the report goes on for the requests that join it)


def _report(gw: Gateway, days: float) -> str:
    from regret_gateway.savings.html import report_html
    from regret_gateway.savings.report import savings_report

    until = datetime.now(timezone.utc)
    with Session(gw.engine) as session:
        return report_html(savings_report(gw.settings, session, until - timedelta(days=days), until), gw.settings)


@router.get("/report")
async def read_report(
    days: float = 30.0, auth: UserAPIKeyAuth = Depends(user_api_key_auth), gw: Gateway = Depends(current_gateway)
) -> Response:
    """What routing saved over the last ``days`` (default 30), as one HTML page (the proxy admin's key only;
    ``regret-gateway report`` prints the same)."""
    if auth.user_role != LitellmUserRoles.PROXY_ADMIN:
        raise HTTPException(status_code=403, detail="the savings report is for the proxy admin's key")
    if not 0 < days <= 366:
        raise HTTPException(status_code=400, detail=f"days must be in (0, 366], got {days}")
    loop = asyncio.get_running_loop()
    try:  # concurrent requests for the same days share one report; reports run one at a time (gateway/single_flight.py)
        page = await gw.reports.run(days, lambda: loop.run_in_executor(gw.store_pool, _report, gw, days), REPORT_WAIT_S)
    except (SQLAlchemyError, TimeoutError, asyncio.TimeoutError) as exc:
        raise _store_unavailable(exc) from None
    return Response(page, media_type="text/html; charset=utf-8")
